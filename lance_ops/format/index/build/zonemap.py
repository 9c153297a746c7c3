"""ZONEMAP segments as pylance 14 writes them (upstream ``scalar/zonemap.rs``, ``zoned.rs``).

One Lance file, ``zonemap.lance``, one row per zone: ``min`` / ``max`` (the column's type;
``max`` is NaN when the zone holds a NaN), ``null_count``, ``nan_count`` (``uint32``),
``fragment_id``, ``zone_start``, ``zone_length`` (``uint64``).  A zone is up to
``rows_per_zone`` (8192) consecutive *live* rows of one fragment; ``zone_start`` is the first
one's offset and ``zone_length`` the span of offsets to the last one (deleted rows inside
count).  Schema metadata ``rows_per_zone`` = "8192", ``null_bitmap`` = "1": global buffer 1
is the ``RowAddrTreeMap`` of the addresses of null rows.  Details: ``ZoneMapIndexDetails``
bytes ``08 80 40 10 00 18 01`` (as pylance 14 writes them for the defaults); version 0.
"""

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_ops.format.index.build.common import (
    HIGH_SHIFT,
    LOW_MASK,
    BuiltSegment,
    SegmentInput,
    SegmentWriter,
    encode_row_set,
)

TYPE_URL = "/lance.table.ZoneMapIndexDetails"
FILE = "zonemap.lance"
ROWS_PER_ZONE = 8192
DETAILS = b"\x08\x80\x40\x10\x00\x18\x01"


def _zone_starts(addrs: np.ndarray) -> np.ndarray:
    """Indices (into the rows) where a zone starts: a new fragment, or every 8192 live rows."""
    frags = addrs >> HIGH_SHIFT
    frag_starts = np.flatnonzero(np.concatenate([[True], frags[1:] != frags[:-1]])) if len(addrs) else np.empty(0, int)
    frag_len = np.diff(np.append(frag_starts, len(addrs)))
    per_frag = [s + np.arange(0, n, ROWS_PER_ZONE) for s, n in zip(frag_starts.tolist(), frag_len.tolist(), strict=True)]
    return np.concatenate(per_frag).astype(np.int64) if per_frag else np.empty(0, np.int64)


def _min_max(zone: pa.Array, floating: bool) -> tuple[object, object, int]:
    if floating:
        nan = pc.is_nan(zone).fill_null(False)
        nans = pc.sum(nan).as_py() or 0
        mm = pc.min_max(zone.filter(pc.invert(nan)))
        lo, hi = mm["min"].as_py(), mm["max"].as_py()
        if nans:
            hi = float("nan")
            lo = float("nan") if lo is None else lo
        return lo, hi, nans
    mm = pc.min_max(zone)
    return mm["min"].as_py(), mm["max"].as_py(), 0


def write_zonemap(w: SegmentWriter, data: SegmentInput) -> BuiltSegment:
    """One loop step per zone (8192 rows), statistics by Arrow kernels."""
    addrs = data.row_addrs
    starts = _zone_starts(addrs)
    ends = np.append(starts[1:], len(addrs))
    floating = pa.types.is_floating(data.values.type)
    mins, maxs, nulls, nans = [], [], [], []
    for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
        zone = data.values.slice(s, e - s)
        lo, hi, nan = _min_max(zone, floating)
        mins.append(lo)
        maxs.append(hi)
        nulls.append(zone.null_count)
        nans.append(nan)
    offsets = addrs & LOW_MASK
    t = data.values.type
    table = pa.table(
        {
            "min": pa.array(mins, t),
            "max": pa.array(maxs, t),
            "null_count": pa.array(nulls, pa.uint32()),
            "nan_count": pa.array(nans, pa.uint32()),
            "fragment_id": pa.array(addrs[starts] >> HIGH_SHIFT, pa.uint64()),
            "zone_start": pa.array(offsets[starts], pa.uint64()),
            "zone_length": pa.array(offsets[ends - 1] - offsets[starts] + np.uint64(1), pa.uint64()),
        },
        schema=pa.schema(
            [pa.field("min", t), pa.field("max", t)]
            + [pa.field(n, pa.uint32(), nullable=False) for n in ("null_count", "nan_count")]
            + [pa.field(n, pa.uint64(), nullable=False) for n in ("fragment_id", "zone_start", "zone_length")]
        ),
    )
    null_rows = addrs[data.values.is_null().to_numpy(zero_copy_only=False)]
    w.write(FILE, table, metadata={"rows_per_zone": str(ROWS_PER_ZONE), "null_bitmap": "1"},
            global_buffers=(encode_row_set(null_rows),))
    return BuiltSegment(tuple(w.files), TYPE_URL, DETAILS, 0)
