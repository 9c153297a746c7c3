"""Clustered compaction: the row order of a rewrite, and which fragments are clustered already.

Order (docs/FORMAT.md §18):

- ``"sort"``: lexicographic by the ``cluster_by`` columns, ascending, nulls first, then NaN,
  then the numbers (Arrow's sort with nulls at the start; strings by their UTF-8 bytes).
- ``"zorder"``: each column is replaced by a range id (Delta's Z-order works on range ids
  too): the row's position in the column's sort order (nulls and NaN first, then
  values; strings by bytes) scaled to 4,096 equal ranges.  The ids'
  bits are interleaved, most significant first, the first column's bit leading.  Ranges make
  every type comparable and spread skewed values evenly.

Which fragments are clustered is table config written after the Rewrite commits:
``lance_ops.clustering.columns`` (comma-separated), ``lance_ops.clustering.strategy`` and
``lance_ops.clustering.fragments`` (fragment ids as ranges, ``"4-9,12"``).  Fragment ids are
never reused, so an id names the same rows for as long as it exists; fragments another writer
rewrites get new ids and are clustered again by the next run.
"""

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_ops.format.errors import InvalidArgumentError, SchemaError

COLUMNS_KEY = "lance_ops.clustering.columns"
STRATEGY_KEY = "lance_ops.clustering.strategy"
FRAGMENTS_KEY = "lance_ops.clustering.fragments"
STRATEGIES = ("sort", "zorder")


def check_cluster_columns(schema: pa.Schema, columns: Sequence[str], where: str) -> None:
    """Refuse unknown columns and types without an order (lists, structs, maps)."""
    if not columns:
        return
    if len(set(columns)) != len(columns):
        raise InvalidArgumentError(f"{where}: cluster_by names a column twice: {list(columns)}")
    for c in columns:
        if c not in schema.names:
            raise SchemaError(f"{where}: cluster_by column {c!r} is not in the dataset (columns: {schema.names})")
        t = schema.field(c).type
        if pa.types.is_nested(t) or (pa.types.is_dictionary(t) and pa.types.is_nested(t.value_type)):
            raise SchemaError(f"{where}: cluster_by column {c!r} has type {t}, which has no order")


#: range ids per column for Z-order (Delta's ``rangeId.max`` idea): enough to tell apart far
#: more fragments than a compaction writes, few enough bits to interleave cheaply
RANGE_IDS = 4096

_SIGN = np.uint64(1 << 63)


def _numeric_keys(col: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, np.ndarray | None] | None:
    """Order-preserving ``uint64`` keys of a numeric, temporal or boolean column and the mask of
    its nulls and NaN (None when there are none); None for other types.  ``-0.0`` keys as ``0.0``."""
    t = col.type
    nulls = col.is_null().to_numpy(zero_copy_only=False) if col.null_count else None
    if pa.types.is_floating(t):
        f = pc.fill_null(col, 0).cast(pa.float64()).to_numpy() + 0.0  # a copy; -0.0 + 0.0 is 0.0
        nan = np.isnan(f)
        if nan.any():
            nulls = nan if nulls is None else nulls | nan
        bits = f.view(np.uint64)
        return np.where(bits >= _SIGN, ~bits, bits | _SIGN), nulls
    if pa.types.is_boolean(t):
        return pc.fill_null(col, False).cast(pa.uint8()).to_numpy().astype(np.uint64), nulls
    if pa.types.is_unsigned_integer(t):
        return pc.fill_null(col, 0).cast(pa.uint64()).to_numpy(), nulls
    if pa.types.is_integer(t) or pa.types.is_temporal(t):
        if pa.types.is_temporal(t):
            col = col.cast(pa.int32()) if pa.types.is_date32(t) or pa.types.is_time32(t) else col.cast(pa.int64())
        v = pc.fill_null(col, 0).cast(pa.int64()).to_numpy()
        return v.view(np.uint64) ^ _SIGN, nulls
    return None


def stable_order(keys: np.ndarray) -> np.ndarray:
    """``np.argsort(keys, kind="stable")`` of unsigned keys as ``int64``, faster: one ``np.sort``
    of ``(key - min) << b | position`` when that fits in 64 bits (a plain sort is several times
    faster than an argsort), else NumPy's default argsort with ties put back in row order."""
    n = int(keys.size)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    keys = keys.astype(np.uint64, copy=False)
    lo = keys.min()
    pos_bits = max(1, (n - 1).bit_length())
    if int(keys.max() - lo).bit_length() + pos_bits > 64:
        order = np.argsort(keys)
        ranked = keys[order]
        step = ranked[1:] != ranked[:-1]
        if step.all():
            return order.astype(np.int64, copy=False)
        dense = np.empty(n, dtype=np.uint64)  # equal keys, equal dense rank (< n: fits beside the position)
        dense[order] = np.concatenate(([0], np.cumsum(step, dtype=np.uint64)))
        return stable_order(dense)
    packed = keys - lo
    packed <<= np.uint64(pos_bits)
    packed |= np.arange(n, dtype=np.uint64)
    packed.sort()
    packed &= np.uint64((1 << pos_bits) - 1)
    return packed.view(np.int64)


def column_order(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """The stable ascending order of a column: nulls and NaN first (in row order), then the
    values (strings and binaries by their bytes)."""
    keys = _numeric_keys(col)
    if keys is None:  # strings, binaries, decimals: Arrow's (stable) sort
        if pa.types.is_dictionary(col.type):
            col = col.cast(col.type.value_type)
        return pc.sort_indices(col, sort_keys=[("", "ascending", "at_start")]).to_numpy().astype(np.int64, copy=False)
    values, bad = keys
    if bad is None:
        return stable_order(values)
    first, rest = np.flatnonzero(bad), np.flatnonzero(~bad)
    return np.concatenate([first, rest[stable_order(values[rest])]])


def _scaled_positions(n: int) -> np.ndarray:
    """``p * RANGE_IDS // n`` for ``p`` in ``0..n-1`` (``p`` itself when ``n <= RANGE_IDS``), as ``uint16``."""
    if n <= RANGE_IDS:
        return np.arange(n, dtype=np.uint16)
    starts = -((-np.arange(RANGE_IDS + 1, dtype=np.int64) * n) // RANGE_IDS)  # first p of each id
    return np.repeat(np.arange(RANGE_IDS, dtype=np.uint16), np.diff(starts))


def range_ids(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Order-preserving range ids in ``[0, RANGE_IDS)``: the row's position in the column's
    stable sort order (:func:`column_order`) scaled to ``RANGE_IDS`` equal ranges, so every id
    holds as many rows (skewed values spread evenly)."""
    n = len(col)
    scaled = _scaled_positions(n)
    ids = np.empty(n, dtype=scaled.dtype)
    ids[column_order(col)] = scaled
    return ids


def _spread_table(bits: int, k: int) -> np.ndarray:
    """For every ``bits``-bit value, its bits spread ``k`` apart (bit i -> bit i*k)."""
    v = np.arange(1 << bits, dtype=np.uint64)
    out = np.zeros(1 << bits, dtype=np.uint64)
    for i in range(bits):
        out |= ((v >> np.uint64(i)) & np.uint64(1)) << np.uint64(i * k)
    return out


def zorder_keys(table: pa.Table, columns: Sequence[str]) -> np.ndarray:
    """One ``uint64`` Z-value per row: the columns' range ids, bits interleaved (the first
    column's bit the most significant of each group); one lookup per column in a table of the
    ids' spread bits."""
    k = len(columns)
    bits = max(1, (min(table.num_rows, RANGE_IDS) - 1).bit_length())
    keep = min(bits, 64 // k)  # more columns than 64 bits hold at this resolution: the high bits
    spread = _spread_table(keep, k)
    z = np.zeros(table.num_rows, dtype=np.uint64)
    for j, c in enumerate(columns):
        v = range_ids(table.column(c))
        part = spread[v >> (bits - keep) if keep < bits else v]
        part <<= np.uint64(k - 1 - j)
        z |= part
    return z


def cluster_order(table: pa.Table, columns: Sequence[str], strategy: str) -> np.ndarray:
    """The permutation that orders ``table``'s rows (``table.take(order)`` is clustered); rows
    with equal keys keep their order (both strategies sort stably)."""
    if strategy == "sort":
        keys = [(c, "ascending", "at_start") for c in columns]
        return pc.sort_indices(table, sort_keys=keys).to_numpy().astype(np.int64, copy=False)
    if strategy == "zorder":
        return stable_order(zorder_keys(table, columns))
    raise InvalidArgumentError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")


def encode_ids(ids: Iterable[int]) -> str:
    """Sorted fragment ids as ranges: ``[1, 2, 3, 7]`` -> ``"1-3,7"``."""
    out: list[str] = []
    run: list[int] = []
    for i in sorted(set(ids)):
        if run and i == run[-1] + 1:
            run.append(i)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [i]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)


def decode_ids(text: str) -> set[int]:
    out: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        try:
            out.update(range(int(lo), int(hi or lo) + 1))
        except ValueError:
            raise InvalidArgumentError(f"table config {FRAGMENTS_KEY}={text!r} is not a list of fragment ids") from None
    return out


def clustered_fragments(config: Mapping[str, str], columns: Sequence[str], strategy: str) -> set[int]:
    """Fragments recorded as clustered by exactly ``columns`` and ``strategy`` (else none)."""
    if config.get(COLUMNS_KEY) != ",".join(columns) or config.get(STRATEGY_KEY, "sort") != strategy:
        return set()
    return decode_ids(config.get(FRAGMENTS_KEY, ""))


def marker(config: Mapping[str, str], live: Iterable[int], new_ids: Iterable[int], columns: Sequence[str],
           strategy: str) -> dict[str, str]:
    """The config entries after a clustering rewrite: the clustered fragments still live plus the new ones."""
    keep = clustered_fragments(config, columns, strategy) & set(live)
    return {
        COLUMNS_KEY: ",".join(columns),
        STRATEGY_KEY: strategy,
        FRAGMENTS_KEY: encode_ids(keep | set(new_ids)),
    }

