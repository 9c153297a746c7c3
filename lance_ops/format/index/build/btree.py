"""BTREE segments as pylance 14 writes them (upstream ``rust/lance-index/src/scalar/btree.rs``).

Two Lance files:

- ``page_data.lance``: columns ``values`` (the column's type) and ``ids`` (``uint64`` not
  null, row *addresses*, also with stable row ids), every row sorted by value (nulls first,
  NaN last, equal values in no particular order, as pylance's).  Page ``i`` is rows ``[i*batch_size, (i+1)*batch_size)``.
- ``page_lookup.lance``: one row per page, ``min`` / ``max`` (the page's first and last value,
  so a page starting with nulls has a null ``min``), ``null_count`` and ``page_idx``
  (``uint32`` not null); metadata ``batch_size`` ("4096") and ``range_partitioned`` ("false").

``IndexMetadata.index_version`` is 1 on datasets with stable row ids and 0 without (pylance
14.0.2; lancedb 0.40 writes 0 with stable row ids and stores row ids).
"""

import numpy as np
import pyarrow as pa

from lance_ops.format.index.build.common import BuiltSegment, SegmentInput, SegmentWriter, sort_order

TYPE_URL = "/lance.table.BTreeIndexDetails"
DATA_FILE = "page_data.lance"
LOOKUP_FILE = "page_lookup.lance"
BATCH_SIZE = 4096


def write_btree(w: SegmentWriter, data: SegmentInput, *, stable_row_ids: bool) -> BuiltSegment:
    """Sort the rows by value and write the pages and their lookup table."""
    order = sort_order(data.values)
    values = data.values.take(pa.array(order))
    ids = pa.array(data.row_addrs[order], pa.uint64())
    del order
    w.write(DATA_FILE, pa.table({"values": values, "ids": ids}, schema=_data_schema(values.type)))
    del ids
    n = len(values)
    starts = np.arange(0, n, BATCH_SIZE, dtype=np.int64)
    ends = np.minimum(starts + BATCH_SIZE, n)
    nulls = values.null_count  # sorted first
    lookup = pa.table(
        {
            "min": values.take(pa.array(starts)),
            "max": values.take(pa.array(ends - 1)),
            "null_count": pa.array(np.clip(nulls - starts, 0, ends - starts), pa.uint32()),
            "page_idx": pa.array(np.arange(len(starts)), pa.uint32()),
        },
        schema=_lookup_schema(values.type),
    )
    w.write(LOOKUP_FILE, lookup, metadata={"batch_size": str(BATCH_SIZE), "range_partitioned": "false"})
    return BuiltSegment(tuple(w.files), TYPE_URL, b"", 1 if stable_row_ids else 0)


def _data_schema(t: pa.DataType) -> pa.Schema:
    return pa.schema([pa.field("values", t), pa.field("ids", pa.uint64(), nullable=False)])


def _lookup_schema(t: pa.DataType) -> pa.Schema:
    return pa.schema(
        [
            pa.field("min", t),
            pa.field("max", t),
            pa.field("null_count", pa.uint32(), nullable=False),
            pa.field("page_idx", pa.uint32(), nullable=False),
        ]
    )
