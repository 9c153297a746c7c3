"""Change data feed between two versions (spec 004 "change data feed"; Delta CDF names).

Rows of the feed: every user column plus ``_rowid``, ``_change_type`` in {insert,
update_preimage, update_postimage, delete}, ``_commit_version`` and ``_commit_timestamp``.
Semantics: ``begin`` exclusive, ``end`` inclusive, evaluated on the ``end`` version:

- insert: live at ``end`` with ``begin < _row_created_at_version <= end``;
- update: live at ``end``, created at or before ``begin`` and ``begin < last_updated <= end``;
  the post-image comes from ``end``, the pre-image from ``begin`` (by row id);
- delete: live at ``begin``, gone at ``end``, with the full row from ``begin``.

Compaction and deletion materialisation keep row ids and versions, so they add no rows.

Every row is chosen from manifest metadata before a data file is opened (:mod:`.feed_rows`):
fragments whose version runs miss the range, and begin-version fragments whose rows and
deletion vector are unchanged at ``end``, are never read; of the others only the spans holding
chosen rows are decoded.  The rows are planned as they are read, one fragment at a time
(:mod:`.feed_plan`): planning holds one fragment's changed rows per read in flight, and across
the range only the ids of the rows an update or compaction moved (4-8 bytes each), never a list
of every changed row.
``_commit_version`` is the row's version column for inserts/updates and, for deletes, the
first version in ``(begin, end]`` whose manifest no longer has the row.

Across schema evolution (``on_schema_change="evolve"``, the default) the output has the end
version's columns: pre-images and deleted rows, read from ``begin``, are matched to them by
field id (:mod:`.evolution`): a column added later is null there, a renamed column takes the end
version's name, a dropped column is absent, a cast column is cast.  A schema change updates
rows only when pylance rewrote them (``add_columns``, ``merge`` and casts set every row's
``_row_last_updated_at_version``; renames and drops do not).  ``on_schema_change="fail"``
raises :class:`~lance_ops.format.errors.SchemaChangeError` instead.
"""

from collections import deque
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pyarrow as pa

from lance_ops.format.errors import InvalidArgumentError, UnsupportedFeatureError
from lance_ops.format.file.blob_columns import scan_schema
from lance_ops.format.file.reader import PagePrefetcher
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.ops.change_feed.plan import streamed_plan
from lance_ops.format.ops.change_feed.schema_history import (
    ColumnMap,
    column_map,
    conform,
    refuse_schema_changes,
)
from lance_ops.format.ops.row_id_migration import feed_begin
from lance_ops.format.read.scan import (
    DEFAULT_BATCH_SIZE,
    PREFETCH_BYTES,
    ROW_ID,
    ScanPlan,
    open_fragment_rows,
    plan_scan,
)
from lance_ops.format.table.fragment import FragmentMetadata
from lance_ops.format.table.manifest import Manifest
from lance_ops.format.txn.handlers import CommitHandler, checkout_manifest

OnSchemaChange = Literal["evolve", "fail"]

CHANGE_TYPES = ("insert", "update_preimage", "update_postimage", "delete")
#: the change types read from the begin version
_BEGIN_SIDE = frozenset({"update_preimage", "delete"})


def change_feed_schema(user_schema: pa.Schema) -> pa.Schema:
    """The feed's columns: the user columns as scans return them (blob columns: descriptions),
    then ``_rowid``, ``_change_type``, ``_commit_version``, ``_commit_timestamp``."""
    return pa.schema(
        list(scan_schema(user_schema))
        + [
            pa.field(ROW_ID, pa.uint64()),
            pa.field("_change_type", pa.string()),
            pa.field("_commit_version", pa.uint64()),
            pa.field("_commit_timestamp", pa.timestamp("us", tz="UTC")),
        ]
    )


def change_feed_batches(
    store: ObjectStore,
    handler: CommitHandler,
    begin_version: int,
    end_version: int,
    *,
    on_schema_change: OnSchemaChange = "evolve",
    change_types: Collection[str] | None = None,
) -> Iterator[pa.RecordBatch]:
    """Stream the change feed of ``(begin_version, end_version]`` of the dataset at ``store``.

    ``change_types``: the kinds of rows wanted (of :data:`CHANGE_TYPES`; None: all).  Without
    ``update_preimage`` and ``delete`` the begin version's rows are neither planned nor read
    (``("insert", "update_postimage")`` are the rows pylance's ``delta()`` gives).

    Raises:
        SchemaChangeError: ``on_schema_change="fail"`` and a version in the range changed the schema.
        InvalidArgumentError: a change type not in :data:`CHANGE_TYPES`.
    """
    wanted = _change_types(change_types)
    if begin_version < 0 or end_version < begin_version:
        raise InvalidArgumentError(f"need 0 <= begin_version <= end_version, got ({begin_version}, {end_version}]")
    if on_schema_change not in ("evolve", "fail"):
        raise InvalidArgumentError(f"on_schema_change must be 'evolve' or 'fail', got {on_schema_change!r}")
    end, _ = checkout_manifest(store, end_version, handler)
    if not end.uses_stable_row_ids:
        raise UnsupportedFeatureError(
            f"{store.uri}: the change feed needs stable row ids (create the dataset with enable_stable_row_ids=True)"
        )
    schema = change_feed_schema(end.schema.to_arrow())
    user = schema.names[: len(schema.names) - 4]
    # a migration to stable row ids changes no row: a range starting just before it starts at it
    begin_version = feed_begin(store.uri, begin_version, lambda v: checkout_manifest(store, v, handler)[0])
    if begin_version == end_version:
        return

    # version -> commit time in microseconds (truncated as pylance does), as one lookup table
    lut = np.zeros(end_version + 1, dtype=np.int64)
    in_range: dict[int, Manifest] = {end_version: end}
    for v in handler.list_versions()[1]:
        if begin_version < v < end_version:
            in_range[v] = handler.read_manifest(v).manifest
        if begin_version < v <= end_version:
            lut[v] = in_range[v].timestamp_ns // 1000
    if begin_version > 0:
        in_range[begin_version] = checkout_manifest(store, begin_version, handler)[0]
        if on_schema_change == "fail":
            refuse_schema_changes(store.uri, begin_version, end_version, in_range.__getitem__, sorted(in_range))

    kinds: dict[str, pa.Array] = {}  # each change type repeated, sliced per batch (no copy)
    same: dict[int, tuple[pa.Array, pa.Array]] = {}  # per version: it and its commit time, repeated
    ts_type = pa.timestamp("us", tz="UTC")

    def emit(batch: pa.RecordBatch, kind: str, ids: np.ndarray, versions: np.ndarray) -> pa.RecordBatch:
        n = batch.num_rows
        v = np.asarray(versions, dtype=np.uint64)
        const = kinds.get(kind)
        if const is None or len(const) < n:
            const = kinds[kind] = _repeated(kind, max(n, DEFAULT_BATCH_SIZE))
        if n and v[0] == v[-1] and (v == v[0]).all():  # one commit version (the usual batch)
            vc, tc = same.get(int(v[0]), (None, None))
            if vc is None or len(vc) < n:
                m = max(n, DEFAULT_BATCH_SIZE)
                vc = pa.array(np.full(m, v[0], dtype=np.uint64))
                tc = pa.array(np.full(m, lut[min(int(v[0]), end_version)], dtype=np.int64), type=ts_type)
                same[int(v[0])] = (vc, tc)
            version_col, ts_col = vc.slice(0, n), tc.slice(0, n)
        else:
            version_col = pa.array(v, type=pa.uint64())
            ts_col = pa.array(lut.take(np.minimum(v, end_version).astype(np.intp)), type=ts_type)
        cols = [batch.column(name) for name in user] + [pa.array(ids, type=pa.uint64()), const.slice(0, n),
                                                        version_col, ts_col]
        return pa.RecordBatch.from_arrays(cols, schema=schema)

    prefetch = PagePrefetcher(budget_bytes=PREFETCH_BYTES)
    try:
        yield from _changes(store, in_range, begin_version, end_version, emit, prefetch, wanted)
    finally:
        prefetch.close()


def _change_types(change_types: Collection[str] | None) -> frozenset[str]:
    if change_types is None:
        return frozenset(CHANGE_TYPES)
    if isinstance(change_types, str):
        change_types = [change_types]
    kinds = frozenset(change_types)
    unknown = sorted(k for k in kinds if k not in CHANGE_TYPES)
    if unknown:
        raise InvalidArgumentError(f"change_types: unknown {unknown}, expected some of {list(CHANGE_TYPES)}")
    return kinds


def _repeated(text: str, n: int) -> pa.Array:
    """A string array of ``n`` copies of ``text``, built from two buffers."""
    data = text.encode()
    offsets = np.arange(0, (n + 1) * len(data), len(data), dtype=np.int32)[: n + 1]
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data * n)])


@dataclass(frozen=True)
class _Read:
    """Rows of one fragment to emit: physical ``rows`` (sorted) with their ids and versions."""

    manifest: Manifest
    fragment: FragmentMetadata
    plan: ScanPlan
    rows: np.ndarray
    ids: np.ndarray
    versions: np.ndarray
    kind: str
    conform: bool = False


#: reads opened (pages scheduled on the prefetcher) ahead of the one being emitted, so the
#: begin fragment's pages decode while inserts and post-images are still going out
READ_LOOKAHEAD = 2


def _changes(
    store: ObjectStore,
    in_range: dict[int, Manifest],
    begin_version: int,
    end_version: int,
    emit: Callable[[pa.RecordBatch, str, np.ndarray, np.ndarray], pa.RecordBatch],
    prefetch: PagePrefetcher,
    kinds: frozenset[str] = frozenset(CHANGE_TYPES),
) -> Iterator[pa.RecordBatch]:
    """Inserts, update post-images, update pre-images, then deletes; every fragment and row
    is chosen from metadata (:mod:`.feed_rows`) before a data file is opened, and only the user
    columns of the spans holding chosen rows are decoded (ids and versions come from metadata)."""
    cmap: list[ColumnMap] = []

    def opened(r: _Read) -> Iterator[pa.RecordBatch]:
        return open_fragment_rows(store, r.manifest, r.fragment, r.plan, r.rows, prefetch=prefetch)

    pending: deque[tuple[_Read, Iterator[pa.RecordBatch]]] = deque()
    reads = (r for r in _reads(store, in_range, begin_version, end_version, cmap, kinds) if r.kind in kinds)
    while True:
        while len(pending) <= READ_LOOKAHEAD:
            r = next(reads, None)
            if r is None:
                break
            pending.append((r, opened(r)))
        if not pending:
            return
        r, batches = pending.popleft()
        pos = 0
        for batch in batches:
            n = batch.num_rows
            if r.conform:
                batch = conform(batch, cmap[0])
            yield emit(batch, r.kind, r.ids[pos: pos + n], r.versions[pos: pos + n])
            pos += n


def _reads(
    store: ObjectStore, in_range: dict[int, Manifest], begin_version: int, end_version: int, cmap_out: list[ColumnMap],
    kinds: frozenset[str] = frozenset(CHANGE_TYPES),
) -> Iterator[_Read]:
    """The feed's reads in output order, each planned when the reader reaches it
    (:func:`.feed_plan.streamed_plan`); the begin side only when ``kinds`` needs it."""
    end = in_range[end_version]
    user = [f.name for f in end.schema.top_level()]
    plan = plan_scan(end.schema, user or [ROW_ID], None, False, False)
    start = in_range.get(begin_version) if begin_version > 0 and kinds & _BEGIN_SIDE else None
    begin_plan = None
    if start is not None:
        between = [in_range[v].schema for v in sorted(in_range) if begin_version < v < end_version]
        cmap = column_map(start.schema, end.schema, between)
        cmap_out.append(cmap)
        begin_plan = plan_scan(start.schema, cmap.read_columns or [ROW_ID], None, False, False)
    checks = [in_range[v] for v in sorted(in_range) if begin_version < v < end_version]
    for kind, frag, rows, ids, versions in streamed_plan(store, start, end, begin_version, end_version, checks,
                                                         end_kinds=kinds):
        if kind in ("insert", "update_postimage"):
            yield _Read(end, frag, plan, rows, ids, versions, kind)
        else:
            assert start is not None and begin_plan is not None
            yield _Read(start, frag, begin_plan, rows, ids, versions, kind, True)
