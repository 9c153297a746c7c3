"""LABEL_LIST segments as pylance 14 writes them (upstream ``scalar/label_list.rs``).

A BITMAP over the list elements (:mod:`.bitmap`: one bitmap per distinct label, a null label
being a key too) in ``bitmap_page_lookup.lance``, plus the rows whose list is null as a
``RowAddrTreeMap`` in global buffer 1, named by the schema metadata
``lance:label_list_nulls`` = ``"1"``.  Empty lists appear nowhere.  ``index_version`` 1.
"""

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_ops.format.errors import UnsupportedFeatureError
from lance_ops.format.index.build.bitmap import FILE, bitmap_table
from lance_ops.format.index.build.common import (
    BuiltSegment,
    SegmentInput,
    SegmentWriter,
    encode_row_set,
    index_stats,
)

TYPE_URL = "/lance.table.LabelListIndexDetails"


def write_label_list(w: SegmentWriter, data: SegmentInput, *, column: str) -> BuiltSegment:
    lists = data.values
    if not (pa.types.is_list(lists.type) or pa.types.is_large_list(lists.type)):
        raise UnsupportedFeatureError(f"LABEL_LIST index on column {column!r} of type {lists.type}: needs a list column")
    nulls = lists.is_null().to_numpy(zero_copy_only=False)
    flat = pc.list_flatten(lists)
    parents = pc.list_parent_indices(lists).to_numpy(zero_copy_only=False).astype(np.int64)
    table = bitmap_table(flat, data.row_ids[parents])
    w.write(
        FILE,
        table,
        metadata={"lance:index_stats": index_stats(table.num_rows), "lance:label_list_nulls": "1"},
        global_buffers=(encode_row_set(data.row_ids[nulls]),),
    )
    return BuiltSegment(tuple(w.files), TYPE_URL, b"", 1)
