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
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.ops.write import write_fragment_files
from lance_ops.format.read.scan import CREATED_AT, ROW_ID, UPDATED_AT, plan_scan, scan_fragment
from lance_ops.format.table import rowids
from lance_ops.format.table.fragment import FragmentMetadata
from lance_ops.format.table.manifest import Manifest

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


def _numeric(col: pa.ChunkedArray | pa.Array) -> np.ndarray | None:
    """The column as float64 / int64 NumPy values when it is numeric or temporal (nulls as NaN
    for floats; None for other types)."""
    t = col.type
    if pa.types.is_floating(t):
        return pc.fill_null(col.cast(pa.float64()), float("nan")).to_numpy()
    if pa.types.is_integer(t) or pa.types.is_temporal(t) or pa.types.is_boolean(t):
        if pa.types.is_temporal(t):
            col = col.cast(pa.int64()) if not pa.types.is_date32(t) else col.cast(pa.int32()).cast(pa.int64())
        return pc.fill_null(col.cast(pa.float64()), float("nan")).to_numpy()
    return None


def range_ids(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Order-preserving range ids in ``[0, RANGE_IDS)``: the row's position in the column's
    sort order (nulls and NaN first, then the values) scaled to ``RANGE_IDS``
    equal ranges, so every id holds as many rows (skewed values spread evenly)."""
    n = len(col)
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    values = _numeric(col)
    if values is None:  # strings, binaries, decimals: Arrow's sort (bytes order)
        if pa.types.is_dictionary(col.type):
            col = col.cast(col.type.value_type)
        order = pc.sort_indices(col, sort_keys=[("", "ascending", "at_start")]).to_numpy()
    else:  # nulls and NaN first
        order = np.argsort(np.where(np.isnan(values), -np.inf, values))
    rank = np.empty(n, dtype=np.uint64)
    rank[order] = np.arange(n, dtype=np.uint64)
    if n <= RANGE_IDS:
        return rank
    return (rank * np.uint64(RANGE_IDS)) // np.uint64(n)


def _spread_table(k: int) -> np.ndarray:
    """For each byte value, its 8 bits spread ``k`` apart (bit i -> bit i*k)."""
    b = np.arange(256, dtype=np.uint64)
    out = np.zeros(256, dtype=np.uint64)
    for i in range(8):
        out |= ((b >> np.uint64(i)) & np.uint64(1)) << np.uint64(i * k)
    return out


def zorder_keys(table: pa.Table, columns: Sequence[str]) -> np.ndarray:
    """One ``uint64`` Z-value per row: the columns' range ids, bits interleaved (the first
    column's bit the most significant of each group)."""
    k = len(columns)
    ids = [range_ids(table.column(c)) for c in columns]
    bits = max(1, max(int(v.max()).bit_length() if v.size else 1 for v in ids))
    if bits * k > 64:  # more columns than 64 bits hold at this resolution: keep the high bits
        drop = bits - 64 // k
        ids = [v >> np.uint64(drop) for v in ids]
        bits = 64 // k
    spread = _spread_table(k)
    z = np.zeros(table.num_rows, dtype=np.uint64)
    for j, v in enumerate(ids):
        for byte in range((bits + 7) // 8):
            chunk = spread[((v >> np.uint64(8 * byte)) & np.uint64(255)).astype(np.intp)]
            z |= chunk << np.uint64(8 * byte * k + (k - 1 - j))
    return z


def cluster_order(table: pa.Table, columns: Sequence[str], strategy: str) -> np.ndarray:
    """The permutation that orders ``table``'s rows (``table.take(order)`` is clustered)."""
    if strategy == "sort":
        keys = [(c, "ascending", "at_start") for c in columns]
        return pc.sort_indices(table, sort_keys=keys).to_numpy()
    if strategy == "zorder":
        return np.argsort(zorder_keys(table, columns))
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


def _read_rows(store: ObjectStore, manifest: Manifest, fragments: Sequence[FragmentMetadata], names: list[str],
               stable: bool) -> pa.Table:
    """Every live row of ``fragments`` in fragment order (with ``_rowid`` and the version columns
    when the dataset has stable row ids): the order an address map numbers them in."""
    meta = [ROW_ID, CREATED_AT, UPDATED_AT] if stable else []
    plan = plan_scan(manifest.schema, names + meta, None, False, False)
    batches = [b for frag in fragments for b in scan_fragment(store, manifest, frag, plan)]
    if not batches:
        return manifest.schema.to_arrow().empty_table()
    return pa.Table.from_batches(batches)


def rewrite_clustered(
    store: ObjectStore,
    manifest: Manifest,
    fragments: Sequence[FragmentMetadata],
    *,
    columns: Sequence[str],
    strategy: str,
    file_version: str,
    target_rows_per_fragment: int,
    file_rows: Sequence[int],
) -> tuple[list[FragmentMetadata], np.ndarray]:
    """Write the live rows of ``fragments`` ordered by ``columns`` into new fragments (ids 0
    until commit); returns them and the order (``order[j]`` = position, in fragment order, of
    the row written at position ``j``; the index remap follows rows through it).

    With stable row ids each new fragment carries its rows' ids (one array segment) and both
    version sequences, permuted with the rows.  Memory: the task's rows (one bin of a run).
    """
    stable = manifest.uses_stable_row_ids
    names = [f.name for f in manifest.schema.top_level()]
    table = _read_rows(store, manifest, fragments, names, stable).combine_chunks()  # (take is faster on one chunk)
    order = cluster_order(table, columns, strategy)
    ordered = table.take(order)
    frags = write_fragment_files(store, iter(ordered.select(names).to_batches(max_chunksize=65536)), manifest.schema,
                                 version=file_version, max_rows_per_file=target_rows_per_fragment, file_rows=file_rows)
    if stable:
        ids = ordered.column(ROW_ID).to_numpy()
        created = ordered.column(CREATED_AT).to_numpy()
        updated = ordered.column(UPDATED_AT).to_numpy()
        out, pos = [], 0
        for f in frags:
            sl = slice(pos, pos + f.physical_rows)
            out.append(f.with_changes(row_ids=rowids.encode_row_ids(ids[sl]),
                                      created_at_versions=rowids.encode_versions(created[sl]),
                                      last_updated_at_versions=rowids.encode_versions(updated[sl])))
            pos += f.physical_rows
        frags = out
    return frags, order.astype(np.int64)
