"""Rows at chosen offsets of a data file's columns, decoding only the pages that hold them.

What a scan's late materialisation reads after its filter (``scan.py``): the filter's columns
were decoded for every row, the rest are taken here for the rows that passed.  Offsets come in
ascending order across calls (a scan moves forward through a fragment), so a decoded page is
kept while later rows may still fall in it and dropped once the rows have left it.
"""

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from lance_ops.format.file.columns import Column, LeafColumn, PagedColumn, concat_chunks
from lance_ops.format.file.parts import chunked, take_chunks

__all__ = ["RowTaker", "take_column", "SPAN_GAP"]

#: a column that is not a plain leaf (lists, structs, nested 2.1 trees, blobs) is read in spans
#: of its rows; a span ends where this many unselected rows lie before the next selected one
SPAN_GAP = 4096


def take_column(col: Column, rows: np.ndarray) -> pa.Array:
    """Rows ``rows`` (ascending int64 offsets, not empty) of ``col`` as one array."""
    if type(col) is LeafColumn:
        return _take_leaf(col, rows)
    return _take_spans(col, rows)


def _take_leaf(col: LeafColumn, rows: np.ndarray) -> pa.Array:
    """One ``take`` per decoded page (or page part) holding selected rows."""
    col._check_range(int(rows[0]), int(rows[-1]) + 1)
    starts = np.asarray(col.starts, dtype=np.int64)
    which = np.searchsorted(starts, rows, side="right") - 1
    bounds = [0, *(np.flatnonzero(np.diff(which)) + 1).tolist(), rows.size]
    out = []
    for a, b in zip(bounds[:-1], bounds[1:], strict=False):
        i = int(which[a])
        local = rows[a:b] - starts[i]
        got = _from_chunks(col, i, local) if i not in col._cache else None
        if got is not None:
            out.append(got)
            continue
        arr = col._decoded(i)
        if local.size == len(arr):  # every row of the page (offsets ascend and are unique)
            out.append(arr)
        else:
            out.append(arr.take(pa.array(local)))
    last = int(which[-1])
    _keep_only(col, last)
    return concat_chunks(out, col.dtype)


def _from_chunks(col: LeafColumn, i: int, local: np.ndarray) -> pa.Array | None:
    """Rows ``local`` of page ``i`` decoded from only the mini-block chunks holding them (2.1+
    files); None where the page has no such chunks or the rows need most of them."""
    if not hasattr(col.reader, "read_buffers"):
        return None
    memo = col.__dict__.setdefault("_chunk_parts", {})
    if i not in memo:
        memo[i] = chunked(col.pages[i], col.dtype)
    part = memo[i]
    if part is None:
        return None
    return take_chunks(col.reader, col.column, part, col.dtype, local + part.lo)


def _keep_only(col: PagedColumn, i: int) -> None:
    """Drop decoded pages before page ``i`` (later rows come after the current ones)."""
    hit = col._cache.get(i)
    col._cache = {i: hit} if hit is not None else {}


def _take_spans(col: Column, rows: np.ndarray) -> pa.Array:
    """Read the spans holding selected rows (sequentially: the columns cache the page a read
    ends in) and take the rows from them."""
    cuts = np.flatnonzero(np.diff(rows) > SPAN_GAP) + 1
    bounds = [0, *cuts.tolist(), rows.size]
    out = []
    for a, b in zip(bounds[:-1], bounds[1:], strict=False):
        lo, hi = int(rows[a]), int(rows[b - 1]) + 1
        arr = col.read(lo, hi)
        local = rows[a:b] - lo
        out.append(arr if local.size == hi - lo else arr.take(pa.array(local)))
    return concat_chunks(out, col.dtype)


class RowTaker:
    """Some top-level fields of one data file, taken at ascending row offsets.

    Args:
        reader: an open :class:`~.reader.DataFileReader`.
        field_ids: the top-level field ids to take, in output order.
    """

    def __init__(self, reader: object, field_ids: Sequence[int]) -> None:
        self.schema, self._cols = reader._columns(list(field_ids))  # type: ignore[attr-defined]
        self._last = -1

    def take(self, rows: np.ndarray) -> list[pa.Array]:
        """The fields' values at ``rows`` (ascending, and after every row of earlier calls)."""
        if rows.size == 0:
            return [pa.array([], type=f.type) for f in self.schema]
        if int(rows[0]) <= self._last:
            raise ValueError(f"row offsets must ascend across calls: {int(rows[0])} after {self._last}")
        self._last = int(rows[-1])
        return [take_column(c, rows) for c in self._cols]
