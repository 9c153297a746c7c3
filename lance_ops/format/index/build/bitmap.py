"""BITMAP segments as pylance 14 writes them (upstream ``rust/lance-index/src/scalar/bitmap.rs``).

One Lance file, ``bitmap_page_lookup.lance``: ``keys`` (the column's type; one row per distinct
value, null first, NaN last) and ``bitmaps`` (``binary``: the ``RowAddrTreeMap`` of the rows
holding that value -- stable row ids on datasets that have them, else row addresses); schema
metadata ``lance:index_stats`` = ``{"num_bitmaps":<keys>}``.  ``index_version`` 0.
"""

import numpy as np
import pyarrow as pa

from lance_ops.format.index.build.common import (
    BuiltSegment,
    SegmentInput,
    SegmentWriter,
    dictionary_codes,
    encode_row_set,
    index_stats,
)

TYPE_URL = "/lance.table.BitmapIndexDetails"
FILE = "bitmap_page_lookup.lance"


def bitmap_table(values: pa.Array, ids: np.ndarray) -> pa.Table:
    """``keys`` / ``bitmaps``: one row set per distinct value (one encode per key, not per row)."""
    keys, codes = dictionary_codes(values)
    order = np.argsort(codes)  # order within a key is irrelevant: each set is encoded sorted
    sorted_ids = ids[order]
    bounds = np.searchsorted(codes[order], np.arange(len(keys) + 1))
    bitmaps = [encode_row_set(sorted_ids[bounds[k] : bounds[k + 1]]) for k in range(len(keys))]
    return pa.table(
        {"keys": keys, "bitmaps": pa.array(bitmaps, pa.binary())},
        schema=pa.schema([pa.field("keys", keys.type), pa.field("bitmaps", pa.binary())]),
    )


def write_bitmap(w: SegmentWriter, data: SegmentInput) -> BuiltSegment:
    table = bitmap_table(data.values, data.row_ids)
    w.write(FILE, table, metadata={"lance:index_stats": index_stats(table.num_rows)})
    return BuiltSegment(tuple(w.files), TYPE_URL, b"", 0)
