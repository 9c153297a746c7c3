"""Building blocks for engines that spread reads and the change feed over many workers.

Nothing here imports an engine; :mod:`lance_ops.jobs` calls these on Spark executors.

- :func:`scan_fragment_range`: the live rows among physical rows ``[offset, offset+length)`` of
  one fragment, with user and metadata columns, so one large fragment can feed several tasks.
  An optional filter over the metadata columns runs *before* any data page is decoded, so a
  scan for "rows changed after version v" reads only the batches that hold such rows.
- :func:`fragment_rows`: a fragment's row ids, versions and deletion mask from metadata alone
  (manifest sequences and deletion files; no data file is opened).
- Change feed as plan / execute (same semantics and output as
  :func:`lance_ops.format.ops.change_feed.batches.change_feed_batches`, docs/FORMAT.md §13):
  :func:`plan_change_feed` works on metadata only (driver side: the rows are chosen by
  :mod:`.feed_rows`, so only fragments and spans holding changes get tasks, and planning memory
  grows with the changes, not the dataset) and yields picklable :class:`ChangeFeedTask`\\ s;
  :func:`execute_change_feed_task` runs one anywhere, decoding only the spans of its rows.
"""

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import singledispatch
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_ops.format.errors import (
    CorruptFileError,
    InvalidArgumentError,
    SchemaError,
    UnsupportedFeatureError,
)
from lance_ops.format.file.blob_columns import scan_schema
from lance_ops.format.file.reader import DataFileReader, PagePrefetcher
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.ops.change_feed.batches import CHANGE_TYPES, change_feed_schema
from lance_ops.format.ops.change_feed.rows import RowIds, begin_changes, end_changes, first_gone
from lance_ops.format.ops.change_feed.schema_history import (
    ColumnMap,
    column_map,
    conform,
    refuse_schema_changes,
)
from lance_ops.format.ops.row_id_migration import feed_begin
from lance_ops.format.ops.write import DEFAULT_MAX_ROWS_PER_FILE
from lance_ops.format.read.scan import (
    CREATED_AT,
    META_COLUMNS,
    PREFETCH_BYTES,
    ROW_ADDR,
    ROW_ID,
    UPDATED_AT,
    fields_in_file,
    plan_scan,
    scan_fragment_rows,
)
from lance_ops.format.table import rowids
from lance_ops.format.table.bases import data_file_location
from lance_ops.format.table.deletion import read_deletion_file
from lance_ops.format.table.fragment import FragmentMetadata
from lance_ops.format.table.manifest import Manifest, NamingScheme, list_versions, read_manifest
from lance_ops.format.txn.commit_loop import load_transaction
from lance_ops.format.txn.handlers import CommitHandler, checkout_manifest
from lance_ops.format.txn.operations import (
    Append,
    Merge,
    Operation,
    Project,
    ReserveFragments,
    Rewrite,
    Unmodelled,
    Update,
    UpdateConfig,
)

DEFAULT_BATCH_SIZE = 131072
_INDEX = "__lance_ops_row_index"

__all__ = [
    "ChangeFeedPlan",
    "ChangeFeedTask",
    "FragmentRows",
    "commit_timestamp_micros",
    "execute_change_feed_task",
    "fragment_rows",
    "id_removing_versions",
    "light_manifest",
    "open_manifest",
    "plan_change_feed",
    "range_column_map",
    "row_changing_versions",
    "scan_fragment_range",
]


# --------------------------------------------------------------------------- manifests


def open_manifest(
    store: ObjectStore, version: int | None = None, handler: CommitHandler | None = None
) -> tuple[Manifest, NamingScheme]:
    """The manifest of ``version`` (latest if None) and the naming scheme, with one listing
    (through ``handler``: an external manifest store's latest; default conditional put)."""
    return checkout_manifest(store, version, handler)


def light_manifest(manifest: Manifest) -> Manifest:
    """``manifest`` without its fragment list: what a task needs to scan fragments it is given."""
    return manifest.with_changes(fragments=(), index_section=None)


def commit_timestamp_micros(manifest: Manifest) -> int:
    """Commit time in microseconds since the epoch, truncated as pylance does."""
    return manifest.timestamp_ns // 1000


# --------------------------------------------------------------------------- metadata-only rows


@dataclass(frozen=True)
class FragmentRows:
    """Per physical row of one fragment, from metadata only.

    ``ids`` are stable row ids (row addresses without stable ids); ``created``/``updated`` are
    the version columns (1 where the fragment carries no sequence, as pylance); ``live`` is
    False for deleted rows.
    """

    fragment_id: int
    ids: np.ndarray
    created: np.ndarray
    updated: np.ndarray
    live: np.ndarray


def fragment_rows(store: ObjectStore, manifest: Manifest, frag: FragmentMetadata) -> FragmentRows:
    """Row ids, both versions and the live mask of ``frag`` without opening a data file."""
    n = frag.physical_rows
    if manifest.uses_stable_row_ids:
        if frag.row_ids is None:
            raise CorruptFileError(manifest.source or store.uri,
                                   f"fragment {frag.id} has no row ids but the dataset uses stable row ids")
        ids = rowids.fragment_row_ids(frag, manifest.source)
    else:
        ids = (np.uint64(frag.id) << np.uint64(32)) + np.arange(n, dtype=np.uint64)
    ones = np.ones(n, dtype=np.uint64)
    created = (
        rowids.fragment_versions(frag, manifest.source, created=True)
        if frag.created_at_versions is not None
        else ones
    )
    updated = (
        rowids.fragment_versions(frag, manifest.source, created=False)
        if frag.last_updated_at_versions is not None
        else ones
    )
    live = np.ones(n, dtype=bool)
    if frag.deletion_file is not None:
        live[read_deletion_file(store, frag.id, frag.deletion_file.to_proto(), physical_rows=n,
                                bases=manifest.bases)] = False
    return FragmentRows(frag.id, ids, created, updated, live)


# --------------------------------------------------------------------------- range scans


def _data_sources(manifest: Manifest, frag: FragmentMetadata, names: Sequence[str]) -> list[tuple[Any, list[int]]]:
    """(data file, field ids it serves) for the top-level columns ``names``; first file wins."""
    schema = manifest.schema
    wanted = [schema.field(n).id for n in names]
    covered: set[int] = set()
    out = []
    for df in frag.files:
        in_file = fields_in_file(schema, df)
        ids = [fid for fid in wanted if fid in in_file and fid not in covered]
        if ids:
            covered.update(ids)
            out.append((df, ids))
    return out


class _RangeColumns:
    """Decodes rows ``[start, stop)`` of some top-level columns of one fragment, in any order of
    increasing ranges, keeping decoded pages while a scan is still inside them."""

    def __init__(self, store: ObjectStore, manifest: Manifest, frag: FragmentMetadata, names: Sequence[str]) -> None:
        self.names = list(names)
        self.target = scan_schema(manifest.schema.project(self.names).to_arrow()) if self.names else pa.schema([])
        self.by_id: dict[int, Any] = {}
        for df, ids in _data_sources(manifest, frag, self.names):
            fstore, rel = data_file_location(store, manifest.bases, df)
            reader = DataFileReader(fstore, rel, file_size=df.file_size_bytes or None)
            if reader.num_rows != frag.physical_rows:
                raise CorruptFileError(
                    fstore.full_path(rel),
                    f"file has {reader.num_rows} rows but fragment {frag.id} says {frag.physical_rows}",
                )
            # DataFileReader.read() builds fresh column decoders (and drops their page cache) on
            # every call; skipping batches needs long-lived decoders, hence the private helper.
            _, cols = reader._columns(ids)
            for fid, col in zip(ids, cols, strict=True):
                self.by_id[fid] = col
        self.ids = [manifest.schema.field(n).id for n in self.names]

    def read(self, start: int, stop: int) -> list[pa.Array]:
        n = stop - start
        return [
            self.by_id[fid].read(start, stop) if fid in self.by_id else pa.nulls(n, type=self.target.field(i).type)
            for i, fid in enumerate(self.ids)
        ]


def scan_fragment_range(
    store: ObjectStore,
    manifest: Manifest,
    frag: FragmentMetadata,
    columns: Sequence[str],
    *,
    offset: int = 0,
    length: int | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    meta_filter: pc.Expression | None = None,
    rows: FragmentRows | None = None,
) -> Iterator[pa.RecordBatch]:
    """Live rows among physical rows ``[offset, offset+length)`` of ``frag``.

    Args:
        columns: user columns and metadata columns (``_rowid``, ``_rowaddr``,
            ``_row_created_at_version``, ``_row_last_updated_at_version``; uint64) in output order.
        meta_filter: an expression over metadata columns only, evaluated before data pages are
            decoded; batches without a matching row are never read.
        rows: the fragment's :func:`fragment_rows`, if the caller already has them.

    Yields:
        Non-empty batches with exactly ``columns``; the union over a fragment's ranges equals a
        whole-fragment scan (``LanceDataset.to_batches(fragments=[frag])``).
    """
    names = {f.name for f in manifest.schema.top_level()}
    for c in columns:
        if c not in names and c not in META_COLUMNS:
            raise SchemaError(f"column {c!r} is not in the dataset schema {sorted(names)}")
    if batch_size <= 0:
        raise InvalidArgumentError(f"batch_size must be positive, got {batch_size}")
    user = [c for c in columns if c not in META_COLUMNS]
    meta = [c for c in columns if c in META_COLUMNS]
    start = max(0, int(offset))
    stop = frag.physical_rows if length is None else min(frag.physical_rows, start + int(length))
    if start >= stop:
        return
    r = rows if rows is not None else fragment_rows(store, manifest, frag)
    data = _RangeColumns(store, manifest, frag, user) if user else None
    arrow = scan_schema(manifest.schema.to_arrow())
    out_schema = pa.schema(
        [pa.field(c, pa.uint64()) if c in META_COLUMNS else arrow.field(c) for c in columns], metadata=arrow.metadata
    )
    base = np.uint64(frag.id) << np.uint64(32)
    for s in range(start, stop, batch_size):
        e = min(stop, s + batch_size)
        keep = np.flatnonzero(r.live[s:e])
        if keep.size == 0:
            continue
        meta_cols: dict[str, np.ndarray] = {}
        if meta or meta_filter is not None:
            meta_cols = {
                ROW_ID: r.ids[s:e],
                ROW_ADDR: base + np.arange(s, e, dtype=np.uint64),
                CREATED_AT: r.created[s:e],
                UPDATED_AT: r.updated[s:e],
            }
        if meta_filter is not None:
            t = pa.table({k: pa.array(v[keep], type=pa.uint64()) for k, v in meta_cols.items()})
            t = t.append_column(_INDEX, pa.array(keep))
            keep = t.filter(meta_filter).column(_INDEX).to_numpy()
            if keep.size == 0:
                continue
        full = keep.size == e - s
        cols: dict[str, pa.Array] = {}
        if data is not None:
            idx = None if full else pa.array(keep)
            for name, arr in zip(user, data.read(s, e), strict=True):
                cols[name] = arr if idx is None else arr.take(idx)
        for name in meta:
            v = meta_cols[name]
            cols[name] = pa.array(v if full else v[keep], type=pa.uint64())
        yield pa.RecordBatch.from_arrays([cols[c] for c in columns], schema=out_schema)


def row_ranges(frag: FragmentMetadata, rows_per_range: int) -> list[tuple[int, int]]:
    """``(offset, length)`` pieces of at most ``rows_per_range`` physical rows covering ``frag``."""
    if rows_per_range <= 0:
        raise InvalidArgumentError(f"rows_per_range must be positive, got {rows_per_range}")
    n = frag.physical_rows
    if n == 0:
        return []
    pieces = -(-n // rows_per_range)
    size = -(-n // pieces)
    return [(o, min(size, n - o)) for o in range(0, n, size)]


# --------------------------------------------------------------------------- change feed


def _update_keeps_ids(store: ObjectStore, scheme: NamingScheme, version: int, op: Update) -> bool:
    """True if the Update committed as ``version`` re-added every row it deleted under its id.

    Metadata only: the rows it newly deleted (deletion counts of its updated fragments, live
    rows of its removed fragments, against ``version - 1``) must equal the rows of its new
    fragments that carry preserved row ids in the transaction.
    """
    prev = read_manifest(store, version - 1, scheme).manifest
    deleted = 0
    for fid in op.removed_fragment_ids:
        old = prev.fragment(fid)
        deleted += old.num_rows if old is not None else 0
    for f in op.updated_fragments:
        old = prev.fragment(f.id)
        deleted += f.num_deleted_rows - (old.num_deleted_rows if old is not None else 0)
    preserved = sum(rowids.decode_row_ids(f.row_ids).size for f in op.new_fragments if f.row_ids is not None)
    return deleted == preserved


#: operations lance_ops does not model that never change a row's values or versions
_ROWS_UNCHANGED = ("project", "create_index", "clone", "update_bases")
#: ... and those that never remove a row (``merge`` = add_columns / merge / cast: rows updated)
_IDS_KEPT = (*_ROWS_UNCHANGED, "merge")


@singledispatch
def _may_change_rows(op: Operation) -> bool:
    """Whether a committed operation may update or delete rows (by default: assume it may)."""
    return True


@_may_change_rows.register
def _(op: Append | ReserveFragments | UpdateConfig | Rewrite) -> bool:
    return False


@_may_change_rows.register
def _(op: Project) -> bool:
    return False  # metadata only


@_may_change_rows.register
def _(op: Unmodelled) -> bool:
    return op.name not in _ROWS_UNCHANGED


@singledispatch
def _may_remove_ids(op: Operation, store: ObjectStore, scheme: NamingScheme, version: int) -> bool:
    """Whether the operation committed as ``version`` may make a live row id disappear."""
    return True


@_may_remove_ids.register
def _(op: Append | ReserveFragments | UpdateConfig | Rewrite, store: ObjectStore, scheme: NamingScheme,
      version: int) -> bool:
    return False


@_may_remove_ids.register
def _(op: Merge | Project, store: ObjectStore, scheme: NamingScheme, version: int) -> bool:
    return False  # new or cast columns: every row keeps its id (a Merge updates them)


@_may_remove_ids.register
def _(op: Update, store: ObjectStore, scheme: NamingScheme, version: int) -> bool:
    return not _update_keeps_ids(store, scheme, version, op)


@_may_remove_ids.register
def _(op: Unmodelled, store: ObjectStore, scheme: NamingScheme, version: int) -> bool:
    return op.name not in _IDS_KEPT


def row_changing_versions(store: ObjectStore, scheme: NamingScheme, begin: int, end: int) -> list[int]:
    """Versions in ``(begin, end]`` that may update or delete rows: all but appends, fragment
    reservations, config changes and rewrites (compactions)."""
    out = []
    for v in range(begin + 1, end + 1):
        try:
            if not _may_change_rows(load_transaction(store, v, scheme).operation):
                continue
        except Exception:  # no or unreadable transaction: assume the worst
            pass
        out.append(v)
    return out


def id_removing_versions(store: ObjectStore, scheme: NamingScheme, begin: int, end: int) -> list[int]:
    """Versions in ``(begin, end]`` whose transaction may make a live row id disappear.

    Appends, fragment reservations, config changes and schema evolution (Merge, Project) never
    remove a row, and neither does a
    Rewrite (compaction keeps every live row with its id; one rebased over a concurrent delete
    drops only rows that delete's own version already removed), nor an Update that re-adds every
    row it rewrites under the same id (checked from metadata).  Everything else (Delete, other
    Updates, Overwrite, Restore, operations lance_ops does not model, or a version whose
    transaction cannot be read) is a candidate.
    """
    out = []
    for v in range(begin + 1, end + 1):
        try:
            if not _may_remove_ids(load_transaction(store, v, scheme).operation, store, scheme, v):
                continue
        except Exception:  # no or unreadable transaction: assume the worst
            pass
        out.append(v)
    return out


@dataclass(frozen=True)
class ChangeFeedTask:
    """Change rows of one fragment (or one row range of it) to read and emit (picklable).

    ``kind`` "end": inserts and update post-images, read from a fragment of the end version.
    ``kind`` "begin": update pre-images and deletes, read from a fragment of the begin version
    (mapped onto the end version's columns by ``sources``).  The rows are chosen on the driver
    from metadata (:mod:`.feed_rows`): ``rows`` are sorted physical offsets, and ``row_ids``,
    ``versions`` (``_commit_version``) and ``change_types`` (indices into
    :data:`~.change_feed.CHANGE_TYPES`) are aligned with them; only the user columns of the
    spans holding these rows are decoded.
    """

    kind: str
    uri: str
    storage_options: Mapping[str, Any]
    manifest: Manifest  # light (no fragment list): schema and flags of the version scanned
    fragment: FragmentMetadata
    begin: int
    end: int
    user_schema: pa.Schema  # the end version's user columns as scans return them (output columns)
    timestamps: Mapping[int, int]  # version -> commit time (microseconds, UTC)
    rows: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    row_ids: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.uint64))
    versions: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.uint64))
    change_types: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int8))
    #: "begin" tasks: the scanned version's name of each end column (None: it has no such
    #: column); None = the same names (no schema change in the range)
    sources: tuple[str | None, ...] | None = None


@dataclass(frozen=True)
class ChangeFeedPlan:
    begin: int
    end: int
    schema: pa.Schema  # change_feed_schema of the end version
    tasks: tuple[ChangeFeedTask, ...]


_INSERT, _PRE, _POST, _DELETE = (CHANGE_TYPES.index(k) for k in ("insert", "update_preimage", "update_postimage", "delete"))


def _merged(parts: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray, int]]) -> tuple[np.ndarray, ...]:
    """``(rows, ids, versions, types)`` of several row sets of one fragment, sorted by row."""
    rows = np.concatenate([p[0] for p in parts])
    ids = np.concatenate([p[1] for p in parts])
    versions = np.concatenate([p[2] for p in parts]).astype(np.uint64)
    types = np.concatenate([np.full(p[0].size, p[3], dtype=np.int8) for p in parts])
    if len(parts) > 1:
        order = np.argsort(rows, kind="stable")
        rows, ids, versions, types = rows[order], ids[order], versions[order], types[order]
    return rows, ids, versions, types


def plan_change_feed(
    uri: str,
    begin_version: int,
    end_version: int,
    *,
    storage_options: Mapping[str, Any] | None = None,
    rows_per_task: int = DEFAULT_MAX_ROWS_PER_FILE,
    on_schema_change: str = "evolve",
) -> ChangeFeedPlan:
    """Plan the change feed of ``(begin_version, end_version]`` from metadata alone.

    Only fragments holding changed rows get a task, one per ``rows_per_task`` physical rows that
    hold some; the driver's memory grows with the changed rows, not with the dataset
    (:mod:`.feed_rows`).  Across schema changes the rows read from ``begin`` are mapped onto the
    end version's columns by field id (:mod:`.evolution`), or with ``on_schema_change="fail"``
    the plan raises :class:`~lance_ops.format.errors.SchemaChangeError`.

    Raises:
        ValueError: not ``0 <= begin <= end``.
        UnsupportedFeatureError: the end version has no stable row ids.
        DatasetNotFoundError: a version does not exist.
    """
    if on_schema_change not in ("evolve", "fail"):
        raise ValueError(f"on_schema_change must be 'evolve' or 'fail', got {on_schema_change!r}")
    if begin_version < 0 or end_version < begin_version:
        raise InvalidArgumentError(f"need 0 <= begin_version <= end_version, got ({begin_version}, {end_version}]")
    so = dict(storage_options or {})
    store = ObjectStore(uri, so)
    end_m, scheme = open_manifest(store, end_version)
    if not end_m.uses_stable_row_ids:
        raise UnsupportedFeatureError(
            f"{uri}: the change feed needs stable row ids (create the dataset with enable_stable_row_ids=True)"
        )
    # a migration to stable row ids changes no row: a range starting just before it starts at it
    begin_version = feed_begin(uri, begin_version, lambda v: open_manifest(store, v)[0])
    user_schema = scan_schema(end_m.schema.to_arrow())
    schema = change_feed_schema(end_m.schema.to_arrow())
    if begin_version == end_version:
        return ChangeFeedPlan(begin_version, end_version, schema, ())
    manifests = {end_version: end_m}

    def at(v: int) -> Manifest:
        if v not in manifests:
            manifests[v] = read_manifest(store, v, scheme).manifest
        return manifests[v]

    stamps = {v: commit_timestamp_micros(at(v)) for v in range(begin_version + 1, end_version + 1)}
    tasks: list[ChangeFeedTask] = []

    def add(kind: str, m: Manifest, frag: FragmentMetadata, parts: list, sources: Any = None) -> None:
        rows, ids, versions, types = _merged(parts)
        if rows.size == 0:
            return
        light = light_manifest(m)
        bounds = np.searchsorted(rows, [off for off, _ in row_ranges(frag, rows_per_task)][1:])
        for sl in np.split(np.arange(rows.size), bounds):
            if sl.size:
                a, z = int(sl[0]), int(sl[-1]) + 1
                tasks.append(ChangeFeedTask(kind, uri, so, light, frag, begin_version, end_version, user_schema,
                                            stamps, rows[a:z], ids[a:z], versions[a:z], types[a:z], sources))

    ids = RowIds(store)
    changed = end_changes(store, end_m, begin_version, end_version, ids)
    for c in changed:
        add("end", end_m, c.fragment, [(c.inserts, c.insert_ids, c.insert_versions, _INSERT),
                                       (c.posts, c.post_ids, c.post_versions, _POST)])
    if begin_version == 0:
        return ChangeFeedPlan(begin_version, end_version, schema, tuple(tasks))

    begin_m = at(begin_version)
    cmap = range_column_map(store, scheme, begin_version, end_version, at, on_schema_change, uri)
    sources = None if cmap.identity else cmap.sources
    side = begin_changes(store, begin_m, end_m, begin_version, changed, ids)
    dead = side.dead
    candidates = id_removing_versions(store, scheme, begin_version, end_version) if dead.ids.size else []
    gone = first_gone(store, [at(v) for v in candidates[:-1]], begin_version, [f.id for f in begin_m.fragments],
                      dead, candidates[-1] if candidates else end_version, ids)
    dead_at = dead.by_fragment()
    for frag in begin_m.fragments:
        parts = []
        if frag.id in side.pre:
            offs, pre_ids, pre_v = side.pre[frag.id]
            parts.append((offs, pre_ids, pre_v, _PRE))
        if frag.id in dead_at:
            idx = dead_at[frag.id]
            parts.append((dead.offsets[idx], dead.ids[idx], gone[idx], _DELETE))
        if parts:
            add("begin", begin_m, frag, parts, sources)
    return ChangeFeedPlan(begin_version, end_version, schema, tuple(tasks))


def range_column_map(
    store: ObjectStore,
    scheme: NamingScheme,
    begin: int,
    end: int,
    at: Any,
    on_schema_change: str = "evolve",
    uri: str | None = None,
) -> ColumnMap:
    """How rows of ``begin`` map onto ``end``'s columns, following every version in between
    that still exists; raises :class:`SchemaChangeError` for ``on_schema_change="fail"`` when
    the schema changed in ``(begin, end]``."""
    present = [v for v in list_versions(store)[1] if begin <= v <= end] if scheme is not None else [begin, end]
    for v in (begin, end):
        if v not in present:
            present.append(v)
    present.sort()
    if on_schema_change == "fail":
        refuse_schema_changes(uri or store.uri, begin, end, at, present)
    between = [at(v).schema for v in present if begin < v < end]
    return column_map(at(begin).schema, at(end).schema, between)


def execute_change_feed_task(task: ChangeFeedTask, *, batch_size: int = DEFAULT_BATCH_SIZE) -> Iterator[pa.RecordBatch]:
    """Change rows of one task, with :func:`change_feed_schema` of the end version's columns."""
    store = ObjectStore(task.uri, task.storage_options)
    schema = pa.schema(list(task.user_schema) + list(change_feed_schema(pa.schema([]))))  # + the 4 feed columns
    user = task.user_schema.names
    if task.kind == "end":
        columns, cmap = list(user), None
    elif task.kind == "begin":
        cmap = ColumnMap(task.user_schema, task.sources if task.sources is not None else tuple(user))
        have = {f.name for f in task.manifest.schema.top_level()}
        missing = [c for c in cmap.read_columns if c not in have]
        if missing:
            raise SchemaError(
                f"{task.uri}: version {task.manifest.version} has no column(s) {missing} of the end version")
        columns = cmap.read_columns
    else:
        raise InvalidArgumentError(f"unknown change feed task kind {task.kind!r}")
    plan = plan_scan(task.manifest.schema, columns or [ROW_ID], None, False, False)
    versions = sorted(task.timestamps)
    micros = np.array([task.timestamps[v] for v in versions], dtype=np.int64)
    keys = np.array(versions, dtype=np.uint64)
    kinds = pa.array(CHANGE_TYPES, type=pa.string())
    prefetch = PagePrefetcher(budget_bytes=PREFETCH_BYTES)
    try:
        pos = 0
        for batch in scan_fragment_rows(store, task.manifest, task.fragment, plan, task.rows,
                                        batch_size=batch_size, prefetch=prefetch):
            n = batch.num_rows
            sl = slice(pos, pos + n)
            pos += n
            if cmap is not None:
                batch = conform(batch, cmap)
            v = task.versions[sl]
            cols = []
            for f in task.user_schema:
                col = batch.column(f.name)
                cols.append(col if col.type == f.type else col.cast(f.type))
            cols += [
                pa.array(task.row_ids[sl], type=pa.uint64()),
                kinds.take(pa.array(task.change_types[sl])),
                pa.array(v, type=pa.uint64()),
                pa.array(micros[np.searchsorted(keys, v)], type=pa.timestamp("us", tz="UTC")),
            ]
            yield pa.RecordBatch.from_arrays(cols, schema=schema)
    finally:
        prefetch.close()
