"""pylance's ``nearest=`` scan keyword: an exact (flat) k-nearest-neighbour search.

The vector column is scanned (with the filter first when ``prefilter=True``), distances are
computed on whole NumPy matrices, the ``k`` nearest rows (distance, then row id, ascending; null
and NaN distances left out, as pylance) are taken by row id, and a filter without ``prefilter``
is applied to those ``k`` rows afterwards (pylance's post-filter, so fewer than ``k`` may come
back).  An index on the column is not read: its metric is the default one, and ``nprobes``,
``refine_factor``, ``ef`` and ``use_index`` are accepted and ignored (the answer is the exact one
an index approximates); without ``use_index=False`` the metric defaults to the index's.  Output: the projection, then ``_distance`` (float32) unless projected
elsewhere, then ``_rowid`` / ``_rowaddr`` asked for with ``with_row_id`` / ``with_row_address``.
"""

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from lance_ops.format.errors import ArgumentTypeError, InvalidArgumentError
from lance_ops.format.read.filters import resolve_filter
from lance_ops.format.read.metadata_columns import ROW_ADDR, ROW_ID, filter_table
from lance_ops.format.read.take import take_row_ids
from lance_ops.format.schema import LanceSchema

__all__ = ["DISTANCE", "NearestQuery", "nearest_table", "parse_nearest"]

DISTANCE = "_distance"

#: pylance's ``nearest`` keys; those of an index search are accepted and not used
_KEYS = frozenset({"column", "q", "k", "metric", "nprobes", "minimum_nprobes", "maximum_nprobes",
                   "refine_factor", "use_index", "ef", "distance_range"})


def _l2(m: np.ndarray, q: np.ndarray) -> np.ndarray:
    diff = m - q
    return np.einsum("ij,ij->i", diff, diff)


def _cosine(m: np.ndarray, q: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return 1.0 - (m @ q) / (np.linalg.norm(m, axis=1) * np.linalg.norm(q))


def _dot(m: np.ndarray, q: np.ndarray) -> np.ndarray:
    return 1.0 - m @ q


def _hamming(m: np.ndarray, q: np.ndarray) -> np.ndarray:
    bits = np.bitwise_xor(m.astype(np.uint8), q.astype(np.uint8))
    return np.unpackbits(bits, axis=1).sum(axis=1).astype(np.float64)


_METRICS: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "l2": _l2, "euclidean": _l2, "cosine": _cosine, "dot": _dot, "hamming": _hamming,
}


@dataclasses.dataclass(frozen=True)
class NearestQuery:
    """A parsed ``nearest`` dict: the column, the query vector, ``k``, the metric (lower case)
    and pylance's ``distance_range`` (``lo <= d < hi``, either end None)."""

    column: str
    q: np.ndarray
    k: int
    metric: str
    distance_range: tuple[float | None, float | None] | None = None


class _Searchable(Protocol):
    @property
    def lance_schema(self) -> LanceSchema: ...
    @property
    def schema(self) -> pa.Schema: ...
    @property
    def manifest(self) -> Any: ...
    @property
    def has_stable_row_ids(self) -> bool: ...
    def to_table(self, columns: Any = None, filter: Any = None, **kwargs: Any) -> pa.Table: ...
    def list_indices(self) -> list[dict[str, Any]]: ...
    def index_statistics(self, name: str) -> dict[str, Any]: ...


def _query_vector(q: Any) -> np.ndarray:
    if isinstance(q, pa.ExtensionScalar):
        q = q.value
    if isinstance(q, pa.Scalar):
        q = q.values if hasattr(q, "values") else q.as_py()
    if isinstance(q, pa.ChunkedArray):
        q = q.combine_chunks()
    if isinstance(q, pa.Array):
        q = q.to_numpy(zero_copy_only=False)
    arr = np.asarray(q)
    if arr.ndim != 1 or arr.size == 0:
        raise InvalidArgumentError(f"nearest: q must be one non-empty vector, got shape {arr.shape}")
    return arr


def _index_metric(ds: _Searchable, column: str) -> str:
    """The metric of a vector index on ``column`` (pylance searches with it when it uses the
    index, by default), else l2."""
    for idx in ds.list_indices():
        if list(idx.get("fields", ())) == [column] and str(idx.get("type", "")).startswith("IVF"):
            segments = ds.index_statistics(idx["name"]).get("indices") or [{}]
            return str(segments[0].get("metric_type", "l2")).lower()
    return "l2"


def parse_nearest(ds: _Searchable, spec: Mapping[str, Any], limit: int | None = None) -> NearestQuery:
    """``spec`` checked against the dataset, with pylance's errors; without a ``k`` the scan's
    ``limit`` is ``k`` (else 10), as pylance's.

    Raises:
        ArgumentTypeError: an unknown key, or a column that is not a vector (a ``TypeError``).
        InvalidArgumentError: an unknown column or metric, ``k <= 0``, a query of the wrong size.
    """
    unknown = sorted(set(spec) - _KEYS)
    if unknown:
        raise ArgumentTypeError(f"nearest() got an unexpected keyword argument {unknown[0]!r}")
    column = spec.get("column")
    if column not in ds.schema.names:
        raise InvalidArgumentError(f"Embedding column {column} is not in the dataset")
    vtype = ds.schema.field(column).type
    storage = vtype.storage_type if isinstance(vtype, pa.BaseExtensionType) else vtype
    if not pa.types.is_fixed_size_list(storage):
        raise ArgumentTypeError(f"Query column {column} must be a vector. Got {vtype}.")
    k = int(next(v for v in (spec.get("k"), limit, 10) if v is not None))
    if k <= 0:
        raise InvalidArgumentError(f"Nearest-K must be > 0 but got {k}")
    use_index = spec.get("use_index", True) is not False
    metric = str(spec.get("metric") or (_index_metric(ds, column) if use_index else "l2")).lower()
    if metric not in _METRICS:
        raise InvalidArgumentError(f"Invalid argument error: Metric type '{spec.get('metric')}' is not supported")
    q = _query_vector(spec.get("q"))
    if q.size != storage.list_size:
        raise InvalidArgumentError(f"Query vector size {q.size} does not match index column size {storage.list_size}")
    rng = spec.get("distance_range")
    return NearestQuery(column, q, k, metric, tuple(rng) if rng is not None else None)  # type: ignore[arg-type]


def _matrix(col: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """The vectors as an (n, dim) matrix and the mask of rows holding one."""
    arr = col.combine_chunks()
    if isinstance(arr, pa.ExtensionArray):
        arr = arr.storage
    dim = arr.type.list_size
    flat = arr.values.slice(arr.offset * dim, len(arr) * dim).to_numpy(zero_copy_only=False)
    valid = arr.is_valid().to_numpy(zero_copy_only=False) if arr.null_count else np.ones(len(arr), bool)
    return np.asarray(flat).reshape(len(arr), dim), valid


def _distances(query: NearestQuery, col: pa.ChunkedArray) -> np.ndarray:
    m, valid = _matrix(col)
    kind = np.float64 if query.metric != "hamming" else np.uint8
    d = _METRICS[query.metric](m.astype(kind), query.q.astype(kind)).astype(np.float64)
    d[~valid] = np.nan
    if query.distance_range is not None:
        lo, hi = query.distance_range
        with np.errstate(invalid="ignore"):
            d[(d < lo) if lo is not None else np.zeros(len(d), bool)] = np.nan
            d[(d >= hi) if hi is not None else np.zeros(len(d), bool)] = np.nan
    return d


def _top_k(query: NearestQuery, batches: Iterable[pa.RecordBatch]) -> tuple[np.ndarray, np.ndarray]:
    """Row ids and distances of the ``k`` nearest rows of a stream of ``(vector, _rowid)``
    batches, nearest first (ties by row id); a running top ``k`` keeps memory at ``k`` rows plus
    one batch."""
    ids, dist = np.empty(0, np.uint64), np.empty(0, np.float64)
    for batch in batches:
        d = _distances(query, pa.chunked_array([batch.column(0)]))
        keep = ~np.isnan(d)
        ids = np.concatenate([ids, batch.column(1).to_numpy()[keep]])
        dist = np.concatenate([dist, d[keep]])
        if len(dist) > 2 * query.k:  # trim to the k nearest (all rows tied with the k-th kept)
            cut = np.partition(dist, query.k - 1)[query.k - 1]
            ids, dist = ids[dist <= cut], dist[dist <= cut]
    order = np.lexsort((ids, dist))[: query.k]
    return ids[order], dist[order]


def _out_names(ds: _Searchable, columns: Sequence[str] | None, opts: Any) -> list[str]:
    names = list(ds.schema.names) if columns is None else list(columns)
    with_row_id, with_addr = opts.with_row_id, opts.with_row_address
    if DISTANCE not in names and (columns is None or not opts.disable_scoring_autoprojection):
        names.append(DISTANCE)
    names += [n for n, on in ((ROW_ID, with_row_id), (ROW_ADDR, with_addr)) if on and n not in names]
    return names


def nearest_table(ds: _Searchable, columns: Sequence[str] | None, filter: Any, opts: Any) -> pa.Table:
    """The ``k`` nearest rows of a scan with ``opts.nearest`` (see the module's docstring)."""
    query = parse_nearest(ds, opts.nearest, opts.limit)
    if opts.include_deleted_rows:
        raise InvalidArgumentError("Invalid user input: Cannot include deleted rows in a nearest neighbor search")
    if opts.fragments is not None and not opts.prefilter:
        raise InvalidArgumentError("Not supported: This operation is not supported for fragment scan "
                                   "(a nearest search over chosen fragments needs prefilter=True)")
    pre = filter if opts.prefilter else None
    fragments = opts.fragments if not opts.fast_search else _indexed_fragments(ds, query.column, opts.fragments)
    batches = ds.to_batches(columns=[query.column, ROW_ID], filter=pre, fragments=fragments)
    top_ids, top_d = _top_k(query, batches)
    post = None if opts.prefilter or filter is None else resolve_filter(ds.lance_schema, filter)
    if isinstance(columns, Mapping):  # SQL expressions: the post-filter first, on the dataset's columns
        if post is not None:
            kept = filter_table(take_row_ids(ds, top_ids, [*ds.schema.names, ROW_ID]), post)
            top_ids, top_d = _kept(kept, top_ids, top_d)
        rows = take_row_ids(ds, top_ids, {**columns, ROW_ID: ROW_ID})
        names = [*columns, *_out_names(ds, [], opts)]
    else:
        names = _out_names(ds, columns, opts)
        wanted = [n for n in names if n not in (DISTANCE, ROW_ID)]
        if post is not None:
            wanted = list(dict.fromkeys([*wanted, *ds.schema.names]))
        rows = take_row_ids(ds, top_ids, [*wanted, ROW_ID])
    rows = rows.append_column(DISTANCE, pa.array(top_d[_positions(rows, top_ids)], pa.float32()))
    if post is not None and not isinstance(columns, Mapping):
        rows = filter_table(rows, post)
    out = rows.select(names)
    start = opts.offset or 0
    return out.slice(start, opts.limit) if opts.limit is not None else out.slice(start)


def _positions(rows: pa.Table, ids: np.ndarray) -> np.ndarray:
    """Where each taken row's id stands among ``ids`` (the take keeps their order)."""
    got = rows.column(ROW_ID).to_numpy()
    order = np.argsort(ids, kind="stable")
    return order[np.searchsorted(ids[order], got)]


def _kept(rows: pa.Table, ids: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    at = _positions(rows, ids)
    return ids[at], d[at]


def _indexed_fragments(ds: _Searchable, column: str, fragments: Sequence[Any] | None) -> list[Any]:
    """``fast_search``: the fragments a vector index on ``column`` covers (of ``fragments``)."""
    covered: set[int] = set()
    for idx in ds.list_indices():
        if list(idx.get("fields", ())) == [column] and str(idx.get("type", "")).startswith("IVF"):
            covered |= set(idx.get("fragment_ids") or ())
    frags = fragments if fragments is not None else ds.manifest.fragments
    return [f for f in frags if getattr(f, "id", getattr(f, "fragment_id", None)) in covered]
