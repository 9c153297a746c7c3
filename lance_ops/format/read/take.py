"""Random access by position or row id, as pylance's ``take`` and ``_take_rows``.

Both read only the fragments holding a requested row (each such fragment is scanned for the
requested columns, then rows are picked with one Arrow ``take``), and return rows in the order
asked, repeats included.
"""

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_ops.format.errors import InvalidArgumentError
from lance_ops.format.table.manifest import Manifest

__all__ = ["take_offsets", "take_row_ids"]

_KEY = "_rowid"


class _Readable(Protocol):
    @property
    def manifest(self) -> Manifest: ...
    @property
    def has_stable_row_ids(self) -> bool: ...
    def to_table(self, columns: Any = None, filter: Any = None, **kwargs: Any) -> pa.Table: ...


def _ints(values: Any, what: str) -> np.ndarray:
    arr = np.asarray(values.to_numpy(zero_copy_only=False) if isinstance(values, pa.Array | pa.ChunkedArray)
                     else list(values), dtype=np.int64)
    if arr.ndim != 1:
        raise InvalidArgumentError(f"{what} must be a flat list of integers")
    return arr


def _names(ds: _Readable, columns: Any) -> Any:
    """The projection: a list of names, or a dict of name -> SQL expression kept as given."""
    if isinstance(columns, Mapping):
        return dict(columns)
    return list(columns) if columns is not None else list(ds.schema.names)


def take_offsets(ds: _Readable, indices: Any, columns: Sequence[str] | None = None) -> pa.Table:
    """Rows at ``indices`` (0-based positions among the version's live rows, scan order).

    Raises:
        InvalidArgumentError: a negative index or one past the last row.
    """
    idx = _ints(indices, "take indices")
    frags = list(ds.manifest.fragments)
    ends = np.cumsum([f.num_rows for f in frags], dtype=np.int64)
    total = int(ends[-1]) if len(ends) else 0
    if len(idx) and (idx.min() < 0 or idx.max() >= total):
        bad = int(idx[(idx < 0) | (idx >= total)][0])
        raise InvalidArgumentError(f"take: index {bad} is out of bounds for a dataset of {total} rows")
    which = np.searchsorted(ends, idx, side="right")
    cols = _names(ds, columns)
    parts, order = [], []
    for i in np.unique(which):
        sel = np.nonzero(which == i)[0]
        start = int(ends[i]) - frags[i].num_rows
        t = ds.to_table(columns=cols, fragments=[frags[i]])
        parts.append(t.take(pa.array(idx[sel] - start)))
        order.append(sel)
    return _in_order(ds, cols, parts, order)


def _in_order(ds: _Readable, cols: list[str], parts: list[pa.Table], order: list[np.ndarray]) -> pa.Table:
    if not parts:
        return ds.to_table(columns=cols, limit=0)
    t = pa.concat_tables(parts)
    pos = np.empty(t.num_rows, dtype=np.int64)
    pos[np.concatenate(order)] = np.arange(t.num_rows)
    return t.take(pa.array(pos))


def take_row_ids(ds: _Readable, row_ids: Any, columns: Sequence[str] | None = None) -> pa.Table:
    """Rows by row id (stable row ids) or row address (``fragment_id << 32 | offset``), in the
    order asked; ids of deleted or unknown rows are left out, as pylance's ``_take_rows``."""
    ids = _ints(row_ids, "row ids").astype(np.uint64)
    cols = _names(ds, columns)
    key = _KEY if ds.has_stable_row_ids else "_rowaddr"
    frags = list(ds.manifest.fragments)
    if not ds.has_stable_row_ids:
        wanted = set(np.unique(ids >> np.uint64(32)).tolist())
        frags = [f for f in frags if f.id in wanted]
    if not frags or not len(ids):
        return ds.to_table(columns=cols, limit=0)
    with_key = {**cols, key: key} if isinstance(cols, dict) else [*cols, key]
    found = ds.to_table(columns=with_key if key not in cols else cols, fragments=frags,
                        filter=pc.field(key).isin(pa.array(np.unique(ids), pa.uint64())))
    at = pc.index_in(pa.array(ids, pa.uint64()), value_set=found.column(key).combine_chunks())
    out = found.take(at.drop_null())
    return out if key in cols else out.drop_columns([key])
