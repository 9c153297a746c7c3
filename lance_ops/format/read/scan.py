"""Scanning fragments: projection, deletion vectors, metadata columns, filter, limit/offset.

Rows come out fragment by fragment, batch by batch (bounded memory).  The metadata columns
(``_rowid``, ``_rowaddr``, the row versions) and the filters over them alone:
:mod:`.metadata_columns`; a filter's checks against the dataset's columns: :mod:`.filters`.

Speed: :func:`scan` reads and decodes pages in background threads with a bounded read-ahead
that crosses fragment boundaries; a filter over metadata columns only (row ids, versions) is
evaluated once per fragment before any data file is opened, so fragments without a match are
skipped; filters run single-threaded in Acero (its pool hand-off costs more than a batch).
"""

import os
import re
import warnings
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_ops.format.errors import (
    ArgumentTypeError,
    CorruptFileError,
    InvalidArgumentError,
    ObjectStoreError,
    SchemaError,
    UnsupportedFeatureError,
)
from lance_ops.format.file.blob_columns import scan_schema
from lance_ops.format.file.field_encoders import concat_batches
from lance_ops.format.file.reader import DataFileReader, PagePrefetcher
from lance_ops.format.file.take import RowTaker
from lance_ops.format.io.io_stats import record_fragment, record_pruned
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.read.btree_pruning import prune_fragments_btree
from lance_ops.format.read.filters import filter_schema, resolve_filter
from lance_ops.format.read.late_materialization import (
    AUTO,
    LateMaterialization,
    late_columns,
    late_materialization_option,
)
from lance_ops.format.read.metadata_columns import (
    CREATED_AT,
    META_COLUMNS,
    ROW_ADDR,
    ROW_ID,
    UPDATED_AT,
    RowSequences,
    add_metadata_columns,
    filter_table,
    metadata_filter,
    row_sequences,
    version_filter,
)
from lance_ops.format.read.zone_pruning import prune_fragments
from lance_ops.format.schema import LanceSchema
from lance_ops.format.sql import sql_conjuncts
from lance_ops.format.table.bases import data_file_location
from lance_ops.format.table.deletion import read_deletion_file
from lance_ops.format.table.fragment import DataFile, FragmentMetadata
from lance_ops.format.table.manifest import Manifest

DEFAULT_BATCH_SIZE = 65536
#: pylance's environment variable for the rows per batch of a scan without ``batch_size``
BATCH_SIZE_ENV = "LANCE_DEFAULT_BATCH_SIZE"


def default_batch_size() -> int:
    """Rows per batch of a scan that names no ``batch_size``: ``LANCE_DEFAULT_BATCH_SIZE`` when it
    is a positive integer (read at each scan, as pylance), else :data:`DEFAULT_BATCH_SIZE` with a
    warning, as pylance logs one."""
    raw = os.environ.get(BATCH_SIZE_ENV)
    if raw is None:
        return DEFAULT_BATCH_SIZE
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value > 0:
        return value
    warnings.warn(f"{BATCH_SIZE_ENV}={raw!r} is not a positive integer; using {DEFAULT_BATCH_SIZE}", stacklevel=3)
    return DEFAULT_BATCH_SIZE


def exact_batches(batches: Iterator[pa.RecordBatch], size: int) -> Iterator[pa.RecordBatch]:
    """pylance's ``strict_batch_size``: the rows of ``batches`` regrouped into batches of exactly
    ``size`` rows across fragment and filter boundaries, the last one holding what is left."""
    pending: list[pa.RecordBatch] = []
    held = 0
    for b in batches:
        if not b.num_rows:
            continue
        pending.append(b)
        held += b.num_rows
        if held < size:
            continue
        merged = pa.concat_batches(pending)
        full = held - held % size
        for start in range(0, full, size):
            yield merged.slice(start, size)
        pending, held = ([merged.slice(full)] if held > full else []), held - full
    if held:
        yield pa.concat_batches(pending)


@dataclass(frozen=True)
class ScanPlan:
    """What to read: user columns, metadata columns, filter, output order."""

    data_columns: tuple[str, ...]  # user columns to read (projection + filter references)
    meta_columns: tuple[str, ...]  # metadata columns to compute
    output: tuple[str, ...]  # final column order
    filter: pc.Expression | None
    out_schema: pa.Schema  # schema of every batch yielded
    filter_columns: tuple[str, ...] = ()  # a superset of the columns the filter references
    #: the filter's top-level AND terms, when known (a SQL filter): applied one after the other,
    #: each on the rows the previous ones kept (measured: 2.4x less filter time than the whole)
    filter_steps: tuple[pc.Expression, ...] = ()
    #: pylance's ``late_materialization`` (which columns are decoded only for passing rows)
    late: LateMaterialization = AUTO
    #: the filter as SQL text, when it was given so (zone maps prune fragments by it)
    filter_text: str | None = None

    @property
    def filter_chain(self) -> tuple[pc.Expression, ...]:
        """What filters the data rows: the AND terms in order, or the whole filter."""
        if self.filter is None:
            return ()
        return self.filter_steps or (self.filter,)

    @property
    def filter_is_metadata_only(self) -> bool:
        """The filter reads only metadata columns: it can run before any data file is opened."""
        return self.filter is not None and all(c in META_COLUMNS for c in self.filter_columns)


def plan_scan(
    schema: LanceSchema,
    columns: Sequence[str] | None,
    filter: pc.Expression | None,
    with_row_id: bool,
    with_row_address: bool,
    late_materialization: object = None,
) -> ScanPlan:
    names = [f.name for f in schema.top_level()]
    late = late_materialization_option(late_materialization, names)
    if columns is None:
        output = list(names)
    else:
        if isinstance(columns, str) or not isinstance(columns, Sequence | set | frozenset | tuple):
            raise ArgumentTypeError(f"columns must be a list of names, got {type(columns).__name__} {columns!r}")
        output = list(columns)
        for c in output:
            if not isinstance(c, str):
                raise ArgumentTypeError(f"column names must be strings, got {type(c).__name__} {c!r} in {output}")
            if c not in names and c not in META_COLUMNS:
                raise SchemaError(f"column {c!r} is not in the dataset schema {names}")
    if with_row_id and ROW_ID not in output:
        output.append(ROW_ID)
    if with_row_address and ROW_ADDR not in output:
        output.append(ROW_ADDR)
    needed = set(output)
    filter_cols: tuple[str, ...] = ()
    steps: tuple[pc.Expression, ...] = ()
    sql_text = filter if isinstance(filter, str) else None
    if isinstance(filter, str):
        text = filter
        filter = resolve_filter(schema, text)
        steps = tuple(sql_conjuncts(text, filter_schema(schema)))
        steps = steps if len(steps) > 1 else ()
    else:
        filter = resolve_filter(schema, filter)
    if filter is not None:
        # A superset of the referenced columns: every name that occurs as a token of the expression.
        text = str(filter)
        tokens = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))
        filter_cols = tuple(n for n in (*names, *META_COLUMNS)
                            if n in tokens or f'"{n}"' in text or (not _PLAIN_NAME.fullmatch(n) and n in text))
        needed |= set(filter_cols)
    data_cols = tuple(n for n in names if n in needed)
    meta_cols = tuple(m for m in META_COLUMNS if m in needed)
    arrow = scan_schema(schema.to_arrow())  # blob columns: their descriptions, as pylance
    out_schema = pa.schema(
        [pa.field(n, pa.uint64()) if n in META_COLUMNS else arrow.field(n) for n in output], metadata=arrow.metadata
    )
    return ScanPlan(data_cols, meta_cols, tuple(output), filter, out_schema, filter_cols, steps, late, sql_text)


_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _rechunk(batches: Iterator[pa.RecordBatch], size: int) -> Iterator[pa.RecordBatch]:
    """Batches of exactly ``size`` rows (the last may be shorter)."""
    pending: list[pa.RecordBatch] = []
    have = 0
    for b in batches:
        pending.append(b)
        have += b.num_rows
        while have >= size:
            t = pa.Table.from_batches(pending)
            yield concat_batches(t.slice(0, size).to_batches(), t.schema)
            rest = t.slice(size)
            pending = [concat_batches(rest.to_batches(), t.schema)] if rest.num_rows else []
            have -= size
    if have:
        yield concat_batches(pending)


def fragment_data(
    store: ObjectStore,
    manifest: Manifest,
    frag: FragmentMetadata,
    names: Sequence[str],
    batch_size: int,
    prefetch: PagePrefetcher | None = None,
    span: tuple[int, int] | None = None,
    first_reader: DataFileReader | None = None,
    row_mask: np.ndarray | None = None,
) -> Iterator[pa.RecordBatch]:
    """Batches of the fragment's physical rows (deleted rows included) with the given columns,
    only rows ``[span[0], span[1])`` when a span is given.

    ``row_mask`` (bool per physical row): the rows the caller keeps; the string values of the
    others may come out empty (:meth:`DataFileReader.kept_rows`).

    Opening (footers, page tables, prefetch scheduling) happens now; reading when iterated.
    ``first_reader``: the already checked reader of ``frag.files[0]`` (opened once, not twice).
    """
    first, stop = span if span is not None else (0, frag.physical_rows)
    schema = manifest.schema
    target, top_ids = _projection(schema, tuple(names))
    sources = []
    covered: dict[int, int] = {}
    for i, df in enumerate(frag.files):
        in_file = fields_in_file(schema, df)
        ids = [fid for fid in top_ids if fid in in_file and fid not in covered]
        if ids:
            for fid in ids:
                covered[fid] = i
            sources.append((df, ids))
    if not names or not sources:
        return _null_batches(stop - first, names, target, batch_size)
    streams = []
    for df, ids in sources:
        with named_fragment(manifest, frag):
            if first_reader is not None and df is frag.files[0]:
                reader = first_reader
            else:
                reader = _checked_reader(store, frag, df, manifest)
        reader.row_mask = row_mask
        gen = reader.read(ids, offset=first, length=stop - first, batch_size=batch_size, prefetch=prefetch)
        streams.append((ids, gen if len(sources) == 1 else _rechunk(gen, batch_size)))
    return _merge_streams(streams, top_ids, target)


#: per schema object: (its identity check, {names: (arrow target schema, top-level ids)}) and
#: {file field ids: ids stored there}; a scan asks for the same projection for every fragment
_PROJECTIONS: dict[int, tuple[LanceSchema, dict[tuple, tuple[pa.Schema, list[int]]], dict[tuple, set[int]]]] = {}


def _schema_memo(schema: LanceSchema) -> tuple[dict, dict]:
    hit = _PROJECTIONS.get(id(schema))
    if hit is None or hit[0] is not schema:
        if len(_PROJECTIONS) >= 64:
            _PROJECTIONS.clear()
        hit = _PROJECTIONS[id(schema)] = (schema, {}, {})
    return hit[1], hit[2]


def _projection(schema: LanceSchema, names: tuple[str, ...]) -> tuple[pa.Schema, list[int]]:
    memo, _ = _schema_memo(schema)
    hit = memo.get(names)
    if hit is None:
        wanted = schema.project(list(names)) if names else None
        target = scan_schema(wanted.to_arrow()) if wanted is not None else pa.schema([])
        hit = memo[names] = (target, [schema.field(n).id for n in names])
    return hit


def _null_batches(rows: int, names: Sequence[str], target: pa.Schema, batch_size: int) -> Iterator[pa.RecordBatch]:
    done = 0
    while done < rows:
        n = min(batch_size, rows - done)
        cols = [pa.nulls(n, type=f.type) for f in target]
        yield pa.RecordBatch.from_arrays(cols, schema=target) if names else pa.RecordBatch.from_pydict(
            {"__n": pa.nulls(n)}
        ).select([])
        done += n


def _merge_streams(
    streams: list[tuple[list[int], Iterator[pa.RecordBatch]]], top_ids: list[int], target: pa.Schema
) -> Iterator[pa.RecordBatch]:
    if len(streams) == 1 and len(top_ids) == len(streams[0][0]):
        # columns in ``top_ids`` order; the caller names them (file schemas may use old names)
        yield from streams[0][1]
        return
    iters = [s[1] for s in streams]
    while True:
        parts = [next(it, None) for it in iters]
        if parts[0] is None:
            return
        by_id: dict[int, pa.Array] = {}
        for (ids, _), b in zip(streams, parts, strict=True):
            assert b is not None
            for fid, col in zip(ids, b.columns, strict=True):
                by_id[fid] = col
        n = parts[0].num_rows
        cols = [by_id[fid] if fid in by_id else pa.nulls(n, type=target.field(j).type) for j, fid in enumerate(top_ids)]
        yield pa.RecordBatch.from_arrays(cols, schema=target)


def scan_fragment(
    store: ObjectStore,
    manifest: Manifest,
    frag: FragmentMetadata,
    plan: ScanPlan,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    prefetch: PagePrefetcher | None = None,
) -> Iterator[pa.RecordBatch]:
    """Live rows of one fragment with ``plan.output`` columns, filter applied.

    With ``prefetch`` the fragment's pages are read and decoded in the background.
    """
    yield from _open_fragment(store, manifest, frag, plan, batch_size, prefetch)


def scan_fragment_rows(
    store: ObjectStore,
    manifest: Manifest,
    frag: FragmentMetadata,
    plan: ScanPlan,
    rows: np.ndarray,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    prefetch: PagePrefetcher | None = None,
) -> Iterator[pa.RecordBatch]:
    """The rows at physical offsets ``rows`` (sorted, unique) of ``frag``, in that order, with
    ``plan.output`` columns; no filter and no deletion vector (the caller chose the rows).

    Only the pages of the spans holding selected rows are read: ``rows`` are cut into spans
    wherever ``batch_size`` or more unselected rows lie between two selected ones.
    """
    yield from open_fragment_rows(store, manifest, frag, plan, rows, batch_size=batch_size, prefetch=prefetch)


def open_fragment_rows(
    store: ObjectStore,
    manifest: Manifest,
    frag: FragmentMetadata,
    plan: ScanPlan,
    rows: np.ndarray,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    prefetch: PagePrefetcher | None = None,
) -> Iterator[pa.RecordBatch]:
    """:func:`scan_fragment_rows` with the opening done now (checks, metadata, and the first
    span's pages scheduled on ``prefetch``), so a caller can open its next read while it still
    consumes this one."""
    if plan.filter is not None:
        raise InvalidArgumentError("scan_fragment_rows takes no filter: the caller selects the rows")
    rows = np.asarray(rows, dtype=np.int64)
    if rows.size == 0:
        return iter(())
    n = frag.physical_rows
    if int(rows[0]) < 0 or int(rows[-1]) >= n:
        raise InvalidArgumentError(f"row offsets must be in [0, {n}) for fragment {frag.id}, got {rows[0]}..{rows[-1]}")
    first_reader = None
    if frag.files:
        with named_fragment(manifest, frag):
            first_reader = _checked_reader(store, frag, frag.files[0], manifest)
    mask = np.zeros(n, dtype=bool)
    mask[rows] = True
    meta = set(plan.meta_columns)
    seqs = row_sequences(store, manifest, frag, meta)
    cuts = np.flatnonzero(np.diff(rows) > batch_size) + 1
    starts = np.concatenate([rows[:1], rows[cuts]])
    stops = np.concatenate([rows[cuts - 1], rows[-1:]]) + 1
    spans = list(zip(starts.tolist(), stops.tolist(), strict=True))
    # only the chosen rows' strings are decompressed (FSST pages): the others are dropped below
    keep = mask if rows.size < n else None

    def data(k: int) -> Iterator[pa.RecordBatch]:
        return fragment_data(store, manifest, frag, plan.data_columns, batch_size, prefetch, span=spans[k],
                              first_reader=first_reader, row_mask=keep)

    first = data(0)

    def batches() -> Iterator[pa.RecordBatch]:
        for k, (s, _) in enumerate(spans):
            yield from _fragment_batches(frag, plan, first if k == 0 else data(k), mask, meta, seqs, first=s)

    return batches()


def fields_in_file(schema: LanceSchema, df: DataFile) -> set[int]:
    """Ids of the fields a data file stores, parents included.

    2.0 files list every field; 2.1+ files list only leaves, so a struct or list is stored
    where any of its descendants is.
    """
    _, memo = _schema_memo(schema)
    key = tuple(df.fields)
    hit = memo.get(key)
    if hit is None:
        listed = set(df.fields)
        hit = set(listed)
        for f in schema.fields:
            if f.id not in hit and any(d.id in listed for d in schema.subtree(f.id)):
                hit.add(f.id)
        if len(memo) < 256:
            memo[key] = hit
    return set(hit)


@contextmanager
def named_fragment(manifest: Manifest, frag: FragmentMetadata) -> Iterator[None]:
    """Add the fragment and the manifest naming the file to errors about the fragment's files."""
    try:
        yield
    except (CorruptFileError, ObjectStoreError, UnsupportedFeatureError) as e:
        where = f" (fragment {frag.id} of {manifest.source or f'version {manifest.version}'})"
        if where in str(e):
            raise
        if isinstance(e, CorruptFileError):
            raise CorruptFileError(e.path, e.problem + where) from e
        raise type(e)(str(e) + where) from e


def _checked_reader(
    store: ObjectStore, frag: FragmentMetadata, df: DataFile, manifest: Manifest | None = None
) -> DataFileReader:
    """The data file's reader, after checking it holds the fragment's ``physical_rows``.

    ``manifest`` resolves a file with a ``base_id`` (one a branch shares with its source).
    """
    store, rel = data_file_location(store, manifest.bases if manifest is not None else None, df)
    reader = DataFileReader(store, rel, file_size=df.file_size_bytes or None)
    live = [f for f in df.fields if f >= 0]  # (-2: a field a later file of the fragment replaced)
    if live and len(live) == len(df.fields) and not reader.schema.has_field_ids(live):
        reader = reader.renumbered(df.fields)  # a standalone file (LanceFileWriter) numbered from 0
    if reader.num_rows != frag.physical_rows:
        raise CorruptFileError(
            store.full_path(rel),
            f"file has {reader.num_rows} rows but fragment {frag.id} says {frag.physical_rows}",
        )
    return reader


def _open_fragment(
    store: ObjectStore,
    manifest: Manifest,
    frag: FragmentMetadata,
    plan: ScanPlan,
    batch_size: int,
    prefetch: PagePrefetcher | None,
    filters: ThreadPoolExecutor | None = None,
) -> Iterator[pa.RecordBatch]:
    """:func:`scan_fragment`, with the opening done eagerly (so a scan can open ahead);
    ``filters``: a pool the filter runs in, a few batches ahead of the consumer."""
    first_reader = None
    if frag.files:
        # Trust physical_rows for per-row allocations only once a data file confirms it
        # (a hostile manifest must not make us allocate gigabytes); the footer is cached.
        with named_fragment(manifest, frag):
            first_reader = _checked_reader(store, frag, frag.files[0], manifest)
    live = None
    if frag.deletion_file is not None:
        with named_fragment(manifest, frag):
            deleted = read_deletion_file(
                store, frag.id, frag.deletion_file.to_proto(), physical_rows=frag.physical_rows, bases=manifest.bases
            )
        if len(deleted):
            live = np.ones(frag.physical_rows, dtype=bool)
            live[deleted] = False
    meta = set(plan.meta_columns)
    if plan.filter_is_metadata_only and set(plan.filter_columns) <= {CREATED_AT, UPDATED_AT}:
        # a version-range filter: evaluated once per run of equal versions, before anything
        # is expanded per row or read, so fragments without a match cost almost nothing
        live = version_filter(frag, plan.filter_columns, plan.filter, live, manifest.source)
        if live is None:
            return iter(())
        plan = replace(plan, filter=None)
    seqs = row_sequences(store, manifest, frag, meta)
    if plan.filter is not None and plan.filter_is_metadata_only:
        # Evaluate the filter once for the whole fragment, before any data is read: fragments
        # without a match are never opened.
        live = metadata_filter(frag, plan.filter_columns, plan.filter, live, seqs)
        if live is None:
            return iter(())
        plan = replace(plan, filter=None)
    # a filter in the pool reads bigger batches (fewer, larger filter calls; what passes is cut
    # back to ``batch_size``); small fragments filter inline (a hand-off per tiny batch costs more)
    pooled = plan.filter is not None and frag.physical_rows >= FILTER_BATCH_ROWS // 4
    read_size = max(batch_size, FILTER_BATCH_ROWS) if pooled else batch_size
    late = _late_names(plan, store)
    if late:
        # late materialisation: the filter's (and the early) columns for every row, the late
        # ones taken afterwards at the offsets of the rows that passed
        early = _early_plan(plan, late)
        data = fragment_data(store, manifest, frag, early.data_columns, read_size, prefetch, first_reader=first_reader)
        take = _late_taker(store, manifest, frag, late, first_reader)
        # completed in the filter thread (one thread: batches in row order, as the taker needs)
        return _fragment_batches(frag, early, data, live, set(early.meta_columns), seqs,
                                 filters=filters if pooled and FILTER_THREADS == 1 else None,
                                 batch_size=batch_size, finish=lambda b: _completed(b, take, plan, late))
    data = fragment_data(store, manifest, frag, plan.data_columns, read_size, prefetch, first_reader=first_reader)
    return _fragment_batches(frag, plan, data, live, meta, seqs,
                             filters=filters if pooled else None, batch_size=batch_size)


def _late_names(plan: ScanPlan, store: ObjectStore) -> tuple[str, ...]:
    """The projected columns this scan takes after its filter (none without a data filter)."""
    if plan.filter is None or plan.filter_is_metadata_only or plan.late.mode == "none":
        return ()
    data = set(plan.data_columns)
    projected = [plan.out_schema.field(n) for n in plan.output if n in data]
    return late_columns(plan.late, projected, plan.filter_columns, cloud=store.protocol not in ("file", "memory"))


def _early_plan(plan: ScanPlan, late: tuple[str, ...]) -> ScanPlan:
    """``plan`` without the late columns and with ``_rowaddr`` (the passing rows' offsets)."""
    drop = set(late)
    output = tuple(n for n in plan.output if n not in drop)
    if ROW_ADDR not in output:
        output += (ROW_ADDR,)
    fields = [plan.out_schema.field(n) if n in plan.output else pa.field(ROW_ADDR, pa.uint64()) for n in output]
    return replace(
        plan,
        data_columns=tuple(c for c in plan.data_columns if c not in drop),
        meta_columns=tuple(m for m in META_COLUMNS if m in plan.meta_columns or m == ROW_ADDR),
        output=output,
        out_schema=pa.schema(fields, metadata=plan.out_schema.metadata),
    )


def _late_taker(
    store: ObjectStore,
    manifest: Manifest,
    frag: FragmentMetadata,
    names: tuple[str, ...],
    first_reader: DataFileReader | None,
) -> Callable[[np.ndarray], list[pa.Array]]:
    """A function of ascending physical offsets giving the ``names`` columns at them (from
    whichever data file holds each; nulls for a column no file holds)."""
    schema = manifest.schema
    target, top_ids = _projection(schema, names)
    takers: list[tuple[list[int], RowTaker]] = []
    covered: set[int] = set()
    for df in frag.files:
        in_file = fields_in_file(schema, df)
        ids = [fid for fid in top_ids if fid in in_file and fid not in covered]
        if not ids:
            continue
        covered.update(ids)
        with named_fragment(manifest, frag):
            if first_reader is not None and df is frag.files[0]:
                reader = first_reader
            else:
                reader = _checked_reader(store, frag, df, manifest)
            takers.append((ids, RowTaker(reader, ids)))

    def take(rows: np.ndarray) -> list[pa.Array]:
        by_id: dict[int, pa.Array] = {}
        for ids, taker in takers:
            with named_fragment(manifest, frag):
                by_id.update(zip(ids, taker.take(rows), strict=True))
        return [by_id[fid] if fid in by_id else pa.nulls(rows.size, type=target.field(j).type)
                for j, fid in enumerate(top_ids)]

    return take


def _completed(
    b: pa.RecordBatch, take: Callable[[np.ndarray], list[pa.Array]], plan: ScanPlan, late: tuple[str, ...]
) -> pa.RecordBatch:
    """A filtered early batch completed with the late columns, in ``plan.output`` order."""
    rows = (b.column(ROW_ADDR).to_numpy() & np.uint64(0xFFFFFFFF)).astype(np.int64)
    got = dict(zip(late, take(rows), strict=True))
    cols = [got[n] if n in got else b.column(n) for n in plan.output]
    return pa.RecordBatch.from_arrays(cols, schema=plan.out_schema)


def _filter_batch(batch: pa.RecordBatch, expr: pc.Expression | tuple[pc.Expression, ...]) -> pa.RecordBatch:
    out = filter_table(pa.Table.from_batches([batch]), expr)
    parts = out.to_batches()
    if len(parts) == 1:
        return parts[0]
    return out.combine_chunks().to_batches()[0] if out.num_rows else batch.slice(0, 0)


def _fragment_batches(
    frag: FragmentMetadata,
    plan: ScanPlan,
    data: Iterator[pa.RecordBatch],
    live: np.ndarray | None,
    meta: set[str],
    seqs: RowSequences,
    first: int = 0,
    filters: ThreadPoolExecutor | None = None,
    batch_size: int | None = None,
    finish: Callable[[pa.RecordBatch], pa.RecordBatch] | None = None,
) -> Iterator[pa.RecordBatch]:
    """``finish``: applied to every filtered batch (in the filter thread when there is one),
    in row order."""
    out_names = list(plan.output)
    ahead: deque[Future[pa.RecordBatch | None]] = deque()  # batches being filtered in ``filters``
    data_names = list(plan.data_columns)
    passthrough = out_names == data_names and not meta
    start = first  # physical row of the first row of ``data``
    for batch in data:
        n = batch.num_rows
        stop = start + n
        if passthrough and live is None and plan.filter is None:
            start = stop
            if n:  # by position: a data file may still carry a column's old name (a rename)
                yield pa.RecordBatch.from_arrays(batch.columns, schema=plan.out_schema) if out_names else batch.select([])
            continue
        if meta or batch.schema.names != data_names:
            # columns by position: a data file may still carry a column's old name
            cols = dict(zip(data_names, batch.columns, strict=True))
            if meta:
                add_metadata_columns(cols, meta, frag.id, start, stop, seqs)
            out = pa.RecordBatch.from_pydict(cols) if cols else batch
        else:
            out = batch
        if live is not None:
            out = _kept(out, live[start:stop])
        start = stop
        if plan.filter is not None and filters is not None:
            if out.num_rows:
                ahead.append(filters.submit(_filtered_shaped, out, plan, out_names, finish))
            while len(ahead) > FILTER_AHEAD or (ahead and ahead[0].done()):
                yield from _cut(ahead.popleft().result(), batch_size)
            continue
        if plan.filter is not None:
            if out.num_rows:
                yield from _cut(_filtered_shaped(out, plan, out_names, finish), batch_size)
            continue
        if out.num_rows:
            yield _shaped(out, out_names, plan.out_schema)
    while ahead:
        yield from _cut(ahead.popleft().result(), batch_size)


#: a row mask keeping at most this share of a batch's rows is applied by ``take`` of its set
#: positions (10% kept: ~0.19 ms against ``filter``'s ~0.35 ms for 64K rows of int, float and
#: string; a denser mask, e.g. a deletion vector, filters)
TAKE_SHARE = 0.25


def _kept(batch: pa.RecordBatch, mask: np.ndarray) -> pa.RecordBatch:
    """The rows of ``batch`` where ``mask`` is set, in order."""
    kept = int(np.count_nonzero(mask))
    if kept == mask.size:
        return batch
    if kept <= TAKE_SHARE * mask.size:
        return batch.take(np.flatnonzero(mask))
    return batch.filter(pa.array(mask))


def _cut(batch: pa.RecordBatch | None, size: int | None) -> Iterator[pa.RecordBatch]:
    """``batch`` in slices of at most ``size`` rows (nothing for None)."""
    if batch is not None:
        step = size or max(batch.num_rows, 1)
        yield from (batch.slice(a, step) for a in range(0, batch.num_rows, step))


def _filtered_shaped(
    batch: pa.RecordBatch,
    plan: ScanPlan,
    names: list[str],
    finish: Callable[[pa.RecordBatch], pa.RecordBatch] | None = None,
) -> pa.RecordBatch | None:
    """The rows of ``batch`` that pass the filter, shaped as the scan's output (None: no row),
    then ``finish``-ed."""
    out = _filter_batch(batch, plan.filter_chain)
    if not out.num_rows:
        return None
    shaped = _shaped(out, names, plan.out_schema)
    return finish(shaped) if finish is not None else shaped


def _shaped(batch: pa.RecordBatch, names: list[str], schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` with the output columns, in order, under the scan's schema.

    A scan that projects no columns (``count_rows(filter)``, ``to_table(columns=[])``) yields
    zero-column batches that still carry their row count (``from_arrays([])`` would make it 0).
    """
    if not names:
        return batch.select([])
    if batch.schema.names == names:
        return pa.RecordBatch.from_arrays(batch.columns, schema=schema)
    return pa.RecordBatch.from_arrays([batch.column(n) for n in names], schema=schema)


#: bytes of pages a scan reads and decodes ahead of the consumer (see PagePrefetcher)
PREFETCH_BYTES = 64 * 1024 * 1024
#: fragments a scan opens ahead of the one being consumed, so reads continue across files
FRAGMENT_LOOKAHEAD = 1
#: threads a filtered scan evaluates its filter in (one measured ~10% less CPU than two, as
#: quick), and batches each fragment keeps in them
FILTER_THREADS = 1
FILTER_AHEAD = 2
#: rows a filtered scan reads and filters at a time (its output is cut to ``batch_size``)
FILTER_BATCH_ROWS = 262_144


def scan(
    store: ObjectStore,
    manifest: Manifest,
    plan: ScanPlan,
    *,
    fragments: Sequence[FragmentMetadata] | None = None,
    limit: int | None = None,
    offset: int | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    prefetch_bytes: int | None = PREFETCH_BYTES,
    use_scalar_index: bool = True,
) -> Iterator[pa.RecordBatch]:
    """Stream the dataset (or the given fragments) with limit/offset over the filtered rows.

    With ``use_scalar_index`` a SQL filter first prunes fragments by the dataset's ZONEMAP and
    BTREE indices (:mod:`.zone_pruning`, :mod:`.btree_pruning`); the rows read are filtered
    exactly either way.

    Batches come out in fragment order.  Pages are read and decoded by background threads
    (:class:`~lance_ops.format.file.reader.PagePrefetcher`) up to ``prefetch_bytes`` ahead of
    the consumer, across fragment boundaries (the next fragment is opened while the current one
    is consumed); ``prefetch_bytes=None`` reads inline.  Memory stays bounded by the prefetch
    budget plus the pages and batch being consumed, whatever the dataset size.
    """
    skip = offset or 0
    remaining = limit
    if remaining is not None and remaining <= 0:
        return
    todo = []
    candidates = fragments if fragments is not None else manifest.fragments
    if use_scalar_index and plan.filter_text is not None and manifest.index_section:
        before = len(candidates)
        candidates = prune_fragments(store, manifest, plan.filter_text, candidates)  # ZONEMAP indices
        candidates = prune_fragments_btree(store, manifest, plan.filter_text, candidates)  # BTREE indices
        record_pruned(before - len(candidates))
    for frag in candidates:
        # (a fragment without live rows is still opened: its data file must confirm physical_rows)
        # only leading fragments are skipped whole: once one is kept, the rest follow it
        if plan.filter is None and not todo and skip > 0 and skip >= frag.num_rows:
            skip -= frag.num_rows
            continue
        todo.append(frag)
    if remaining is not None and plan.filter is None:
        # without a filter the fragments needed are known up front: no wasted read-ahead
        need, cut = remaining + skip, 0
        while cut < len(todo) and need > 0:
            need -= todo[cut].num_rows
            cut += 1
        todo = todo[:cut]
    prefetch = PagePrefetcher(budget_bytes=prefetch_bytes) if prefetch_bytes and todo else None
    # a filter on data columns runs in its own thread, a few batches ahead of the consumer,
    # while the prefetch threads decode the next pages (Arrow's kernels release the GIL)
    filters = None
    if FILTER_THREADS and prefetch is not None and plan.filter is not None and not plan.filter_is_metadata_only:
        filters = ThreadPoolExecutor(FILTER_THREADS, thread_name_prefix="lance_ops-filter")
    opened: deque[Iterator[pa.RecordBatch]] = deque()
    nxt = 0
    try:
        while opened or nxt < len(todo):
            while nxt < len(todo) and len(opened) <= (FRAGMENT_LOOKAHEAD if prefetch else 0):
                record_fragment(todo[nxt].num_rows)
                opened.append(_open_fragment(store, manifest, todo[nxt], plan, batch_size, prefetch, filters))
                nxt += 1
            for b in opened.popleft():
                if skip:
                    if skip >= b.num_rows:
                        skip -= b.num_rows
                        continue
                    b = b.slice(skip)
                    skip = 0
                if remaining is not None:
                    if b.num_rows >= remaining:
                        yield b.slice(0, remaining)
                        return
                    remaining -= b.num_rows
                yield b
    finally:
        if prefetch is not None:
            prefetch.close()
        if filters is not None:
            filters.shutdown(wait=False, cancel_futures=True)
