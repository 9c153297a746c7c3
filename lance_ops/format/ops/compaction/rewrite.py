"""Compaction that keeps stable row ids and row versions (pylance ``optimize.compact_files``).

Plan (:mod:`.planning`, re-exported here): adjacent fragments (manifest order) that are small or
carry enough deletions are binned and split into tasks as pylance plans (docs/FORMAT.md §16).
Execute: read the live rows of a task's fragments and write them into new fragments; with
stable row ids each new fragment carries the rows' ids (one segment per old fragment) and both
version sequences.  Commit: reserve fragment ids (ReserveFragments), then one Rewrite of every
finished task.
"""

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from lance_ops.format.file.field_encoders import concat_batches
from lance_ops.format.file.v21.fsst_reuse import reuse_tables
from lance_ops.format.index.metadata import decode_index_section, user_indices
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.ops.compaction.clustered_rewrite import rewrite_clustered
from lance_ops.format.ops.compaction.clustering import marker
from lance_ops.format.ops.compaction.index_remap import (
    IndexRemap,
    remap_indices,
)
from lance_ops.format.ops.compaction.planning import (
    COMPACTION_DEFAULTS,
    CONFIG_PREFIX,
    TASK_EXECUTOR,
    CompactionOptions,
    CompactionPlan,
    CompactionTask,
    bin_bytes,
    bin_value,
    output_file_rows,
    plan_compaction,
    select_bins,
    target_file_version,
)
from lance_ops.format.ops.compaction.small_fragments import (
    GROUP_BYTES,
    GROUP_ROWS,
    open_small_fragment,
    ranged_meta,
    read_small_group,
)
from lance_ops.format.ops.index_build import build_indices, plan_optimize_indices
from lance_ops.format.ops.write import rechunked, write_fragment_files
from lance_ops.format.read.blob_payloads import has_blob_columns, with_payloads
from lance_ops.format.read.scan import CREATED_AT, ROW_ID, UPDATED_AT, plan_scan, scan_fragment
from lance_ops.format.table import rowids
from lance_ops.format.table.file_versions import require_writable
from lance_ops.format.table.fragment import FragmentMetadata
from lance_ops.format.table.manifest import Manifest
from lance_ops.format.txn.commit_loop import DEFAULT_MAX_RETRIES, commit_transaction
from lance_ops.format.txn.handlers import CommitHandler, checkout_manifest, commit_handler_for
from lance_ops.format.txn.operations import ReserveFragments, Rewrite, RewriteGroup, UpdateConfig
from lance_ops.format.txn.orphans import remove_fragment_files
from lance_ops.format.txn.transaction import Transaction

# planning, re-exported: callers import the compaction API from this module
__all__ = ["COMPACTION_DEFAULTS", "CONFIG_PREFIX", "CompactionMetrics", "CompactionOptions", "CompactionPlan",
           "CompactionTask", "RewriteResult", "bin_bytes", "bin_value", "commit_compaction", "compact_files",
           "execute_task", "output_file_rows", "plan_compaction", "select_bins", "target_file_version"]


@dataclass(frozen=True)
class RewriteResult:
    """What a task wrote (its new fragments have placeholder id 0 until commit)."""

    task: CompactionTask
    new_fragments: tuple[FragmentMetadata, ...]
    rows: int
    #: a clustered rewrite's row order (``row_order[j]``: the old position, in fragment order,
    #: of the row now at position ``j``); None when the rows kept their order
    row_order: Any = None

    @property
    def read_version(self) -> int:
        return self.task.read_version

    @property
    def old_fragments(self) -> list[FragmentMetadata]:
        return list(self.task.fragments)

    @property
    def metrics(self) -> "CompactionMetrics":
        """What this task rewrote (pylance's ``RewriteResult.metrics``)."""
        return CompactionMetrics(
            fragments_removed=len(self.task.fragments), fragments_added=len(self.new_fragments),
            files_removed=sum(len(f.files) for f in self.task.fragments),
            files_added=sum(len(f.files) for f in self.new_fragments), rows_rewritten=self.rows,
        )

    def __repr__(self) -> str:  # pylance's
        return (f"RewriteResult(read_version={self.read_version}, new_fragments={list(self.new_fragments)}, "
                f"old_fragments={self.old_fragments})")


@dataclass(frozen=True)
class CompactionMetrics:
    fragments_removed: int = 0
    fragments_added: int = 0
    files_removed: int = 0
    files_added: int = 0
    rows_rewritten: int = 0
    version: int | None = None
    failed_tasks: tuple[str, ...] = ()
    dry_run: bool = False
    indices_remapped: tuple[str, ...] = ()  # names of the indices rewritten for the new row addresses
    index_coverage_dropped: tuple[str, ...] = ()  # coverage the rewrite dropped, and why
    fragments_skipped: tuple[str, ...] = ()  # fragments kept out of the plan, and why
    zone_maps_refreshed: tuple[str, ...] = ()  # ZONEMAP indices extended over a clustered rewrite


class _PieceIds:
    """Row ids of one old fragment's rows in one output file: a range while they are consecutive
    (no memory per row), else the id arrays of this piece only."""

    def __init__(self) -> None:
        self.lo: int | None = None
        self.hi = 0  # exclusive end of the range so far
        self.arrays: list[np.ndarray] | None = None

    def add(self, ids: np.ndarray) -> None:
        n = int(ids.size)
        if not n:
            return
        if self.arrays is None:
            first, last = int(ids[0]), int(ids[-1])
            consecutive = last - first + 1 == n and (n == 1 or bool((np.diff(ids) == 1).all()))
            if consecutive and (self.lo is None or first == self.hi):
                self.lo = first if self.lo is None else self.lo
                self.hi = last + 1
                return
            self.arrays = [] if self.lo is None else [np.arange(self.lo, self.hi, dtype=np.uint64)]
        self.arrays.append(np.array(ids, dtype=np.uint64))

    def add_range(self, first: int, n: int) -> None:
        """Ids ``first .. first + n - 1``, without an array while they extend the range."""
        if n <= 0:
            return
        if self.arrays is None and (self.lo is None or first == self.hi):
            self.lo = first if self.lo is None else self.lo
            self.hi = first + n
            return
        self.add(np.arange(first, first + n, dtype=np.uint64))

    def segment(self) -> Any:
        if self.arrays is None:
            return None if self.lo is None else rowids.range_segment(self.lo, self.hi)
        return rowids.encode_segment(np.concatenate(self.arrays))


class _RowMetaStream:
    """``_rowid`` and both version sequences of the output files, built batch by batch.

    Output file ``k`` holds the next ``rows_per_file[k]`` rows of the stream (the last entry
    repeating; ``write_fragment_files`` fills each file to its count before it opens the next), so
    the metadata of every batch is cut at the same places.  Per file it keeps one row-id segment per old fragment (encoded when
    that fragment's rows in the file end) and the version runs: memory is bounded by one old
    fragment's rows, never by ``target_rows_per_fragment``.
    """

    def __init__(self, rows_per_file: int | Sequence[int]) -> None:
        self.sizes = [rows_per_file] if isinstance(rows_per_file, int) else list(rows_per_file)
        self.files: list[tuple[bytes, bytes, bytes]] = []  # (row ids, created, updated) per output file
        self._new_file()

    def _new_file(self) -> None:
        self.limit = self.sizes[min(len(self.files), len(self.sizes) - 1)]
        self.rows = 0
        self.segments: list[Any] = []
        self.piece_key: int | None = None
        self.piece = _PieceIds()
        self.runs: dict[str, tuple[list[np.ndarray], list[np.ndarray]]] = {"c": ([], []), "u": ([], [])}

    def _end_piece(self) -> None:
        seg = self.piece.segment()
        if seg is not None:
            self.segments.append(seg)
        self.piece = _PieceIds()

    def _add_runs(self, which: str, v: np.ndarray) -> None:
        values, lens = self.runs[which]
        if v.size and v[0] == v[-1] and (v == v[0]).all():  # one version (the usual case)
            values.append(v[:1].astype(np.uint64))
            lens.append(np.array([v.size], dtype=np.int64))
            return
        cuts = np.flatnonzero(v[1:] != v[:-1]) + 1
        starts = np.concatenate(([0], cuts))
        lengths = np.diff(np.concatenate((starts, [v.size])))
        values.append(v[starts].astype(np.uint64))
        lens.append(lengths.astype(np.int64))

    def add(self, key: int, ids: np.ndarray, created: np.ndarray, updated: np.ndarray) -> None:
        """Rows of old fragment ``key`` (in stream order)."""
        pos, n = 0, int(ids.size)
        while pos < n:
            take = min(n - pos, self.limit - self.rows)
            if key != self.piece_key:
                self._end_piece()
                self.piece_key = key
            sl = slice(pos, pos + take)
            self.piece.add(ids[sl])
            self._add_runs("c", created[sl])
            self._add_runs("u", updated[sl])
            self.rows += take
            pos += take
            if self.rows == self.limit:
                self._close_file()

    def add_range(self, key: int, first: int, n: int, created: int, updated: int) -> None:
        """Rows of old fragment ``key`` with ids ``first .. first + n - 1`` and one created and
        one updated version (a fragment without deletions whose sequences are ranges and single
        runs): no per-row arrays."""
        pos = 0
        while pos < n:
            take = min(n - pos, self.limit - self.rows)
            if key != self.piece_key:
                self._end_piece()
                self.piece_key = key
            self.piece.add_range(first + pos, take)
            for which, v in (("c", created), ("u", updated)):
                values, lens = self.runs[which]
                values.append(np.array([v], dtype=np.uint64))
                lens.append(np.array([take], dtype=np.int64))
            self.rows += take
            pos += take
            if self.rows == self.limit:
                self._close_file()

    def _close_file(self) -> None:
        self._end_piece()

        def versions(which: str) -> bytes:
            values, lens = self.runs[which]
            return rowids.encode_version_runs(np.concatenate(values), np.concatenate(lens))

        self.files.append((rowids.encode_segments(self.segments), versions("c"), versions("u")))
        self._new_file()

    def finish(self) -> list[tuple[bytes, bytes, bytes]]:
        if self.rows:
            self._close_file()
        return self.files


#: batches smaller than this are gathered (up to ``_COALESCE_MAX_ROWS``) before the writer
#: sees them: small fragments give 100-row batches, and the writer's per-batch work costs
#: ~10x a copy of 100 rows; bigger batches pass through uncopied
_COALESCE_BELOW_ROWS = 4096
_COALESCE_MAX_ROWS = 65536
_COALESCE_MAX_BYTES = 8 << 20


def _coalesced(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The same rows in the same order, small batches joined (memory: one joined batch)."""
    pending: list[pa.RecordBatch] = []
    have = size = 0

    def joined() -> pa.RecordBatch:
        return concat_batches(pending)

    for b in batches:
        if b.num_rows >= _COALESCE_BELOW_ROWS or not b.num_columns:
            if pending:
                yield joined()
                pending, have, size = [], 0, 0
            yield b
            continue
        if not b.num_rows:
            continue
        pending.append(b)
        have += b.num_rows
        size += b.nbytes
        if have >= _COALESCE_MAX_ROWS or size >= _COALESCE_MAX_BYTES:
            yield joined()
            pending, have, size = [], 0, 0
    if pending:
        yield joined()


def execute_task(task: CompactionTask, *, manifest: Manifest | None = None) -> RewriteResult:
    """Rewrite one task's fragments; runs on any worker.  Writes files, commits nothing.

    Rows stream batch by batch from the old fragments into the output files, and their row ids
    and versions into per-file sequences (:class:`_RowMetaStream`), so a task's memory does not
    grow with ``target_rows_per_fragment``.
    """
    store = ObjectStore(task.uri, task.storage_options)
    if manifest is None:
        manifest, _ = checkout_manifest(store, task.read_version)
    file_version = task.file_version or require_writable(manifest.data_storage_version, task.uri)
    stable = manifest.uses_stable_row_ids
    names = [f.name for f in manifest.schema.top_level()]
    meta = [ROW_ID, CREATED_AT, UPDATED_AT] if stable else []
    plan = plan_scan(manifest.schema, names + meta, None, False, False)
    sizes = output_file_rows(sum(f.num_rows for f in task.fragments), task.target_rows_per_fragment)
    if task.cluster_by:
        new, order = rewrite_clustered(store, manifest, task.fragments, columns=task.cluster_by, strategy=task.strategy,
                                       file_version=file_version, target_rows_per_fragment=task.target_rows_per_fragment,
                                       file_rows=sizes)
        return RewriteResult(task, tuple(new), sum(f.physical_rows for f in new), order)
    stream = _RowMetaStream(sizes) if stable else None

    blobs = has_blob_columns(manifest)
    data_plan = plan_scan(manifest.schema, names, None, False, False) if stable and not blobs else None

    top_ids = [f.id for f in manifest.schema.top_level()]
    small_ok = not blobs and (not stable or data_plan is not None)

    def rows() -> Any:
        group: list[tuple[int, FragmentMetadata, Any, Any]] = []  # (k, fragment, small file, ranged meta)
        group_rows = group_bytes = 0

        def flush() -> Any:
            batch = read_small_group([g[2] for g in group], top_ids, names) if group else None
            for k, frag, _, ranged in group:
                if batch is None:
                    yield from one(k, frag, ranged)
                elif stream is not None:
                    stream.add_range(k, ranged[0], frag.physical_rows, ranged[1], ranged[2])
            if batch is not None:
                yield batch
            group.clear()

        for k, frag in enumerate(task.fragments):
            ranged = ranged_meta(frag, manifest.source) if data_plan is not None else None
            small = None
            if small_ok and (ranged is not None or not stable):
                small = open_small_fragment(store, manifest, frag, top_ids)
            if small is None:
                yield from flush()
                group_rows = group_bytes = 0
                yield from one(k, frag, ranged)
                continue
            group.append((k, frag, small, ranged))
            group_rows += frag.physical_rows
            group_bytes += len(small.data)
            if group_rows >= GROUP_ROWS or group_bytes >= GROUP_BYTES:
                yield from flush()
                group_rows = group_bytes = 0
        yield from flush()

    def one(k: int, frag: FragmentMetadata, ranged: Any) -> Any:
        if ranged is not None:  # ids and versions from the sequences, not per-row columns
            assert stream is not None and data_plan is not None
            first, created, updated = ranged
            for b in scan_fragment(store, manifest, frag, data_plan):
                stream.add_range(k, first, b.num_rows, created, updated)
                first += b.num_rows
                yield pa.RecordBatch.from_arrays(b.columns, names=names)
            return
        for b in scan_fragment(store, manifest, frag, plan):
            if blobs:  # blob descriptions -> the payloads they point at, written anew
                b = with_payloads(store, manifest, frag, b)
            if stream is not None:
                stream.add(k, b.column(ROW_ID).to_numpy(), b.column(CREATED_AT).to_numpy(),
                           b.column(UPDATED_AT).to_numpy())
            yield pa.RecordBatch.from_arrays(b.columns[: len(names)], names=names)

    # (blob payloads are laid out per batch as pylance lays them out: their batches pass as they are)
    batches = rows() if blobs else _coalesced(rows())
    if task.max_bytes_per_file is not None and task.batch_size:  # (refused with stable row ids by the plan)
        batches = rechunked(batches, task.batch_size)
    frags = write_fragment_files(store, batches, manifest.schema, version=file_version,
                                 max_rows_per_file=task.target_rows_per_fragment, file_rows=sizes,
                                 max_bytes_per_file=task.max_bytes_per_file, flushed_pages=True)
    total = sum(f.physical_rows for f in frags)
    if stream is not None and frags:
        metas = stream.finish()
        if len(metas) != len(frags):  # pragma: no cover - write_fragment_files fills files in order
            for f in frags:
                store.delete(f"data/{f.files[0].path}")
            raise RuntimeError(f"compaction wrote {len(frags)} files but cut the row ids into {len(metas)}")
        frags = [
            f.with_changes(row_ids=ids, created_at_versions=c, last_updated_at_versions=u)
            for f, (ids, c, u) in zip(frags, metas, strict=True)
        ]
    return RewriteResult(task, tuple(frags), total)


def commit_compaction(
    plan: CompactionPlan,
    results: Sequence[RewriteResult],
    *,
    failed: Sequence[str] = (),
    transaction_properties: Mapping[str, str] | None = None,
    max_retries: int = DEFAULT_MAX_RETRIES,
) -> CompactionMetrics:
    """Reserve fragment ids, then commit one Rewrite of every finished task (each commit retries
    up to ``max_retries`` lost races)."""
    done = [r for r in results if r.task.fragments]
    if not done:
        return CompactionMetrics(failed_tasks=tuple(failed), fragments_skipped=plan.skipped)
    store = ObjectStore(plan.uri, plan.tasks[0].storage_options if plan.tasks else None)
    handler = commit_handler_for(store, plan.manifest_store)
    n_new = sum(len(r.new_fragments) for r in done)
    props = dict(transaction_properties or {})
    try:
        groups, remap = _reserve_and_remap(store, handler, plan, done, props, max_retries)
    except BaseException:
        # no transaction references the new files yet (a failed reservation leaves them to
        # nobody, whatever its outcome); the Rewrite's own commit removes them if it fails
        remove_fragment_files(store, [f for r in done for f in r.new_fragments])
        raise
    manifest = commit_transaction(
        store, Transaction(plan.read_version, Rewrite(groups, remap.rewritten), properties=props), handler=handler,
        max_retries=max_retries,
    )
    refreshed: tuple[str, ...] = ()
    if plan.options.cluster_by:
        manifest, refreshed = _after_clustering(store, handler, manifest, plan.options, groups, props, max_retries)
    rewritten = {f.id for r in done for f in r.task.fragments}
    return CompactionMetrics(
        fragments_removed=sum(len(r.task.fragments) for r in done),
        fragments_added=n_new,
        # as pylance counts them: the data files and the deletion file of each rewritten fragment
        files_removed=sum(len(f.files) + (f.deletion_file is not None) for r in done for f in r.task.fragments),
        files_added=sum(len(f.files) for r in done for f in r.new_fragments),
        rows_rewritten=sum(r.rows for r in done),
        version=manifest.version,
        failed_tasks=tuple(failed),
        indices_remapped=remap.names,
        index_coverage_dropped=tuple(
            line for line in plan.coverage_dropped if _mentions(line, rewritten)
        ),
        fragments_skipped=plan.skipped,
        zone_maps_refreshed=refreshed,
    )


def _after_clustering(
    store: ObjectStore, handler: CommitHandler, manifest: Manifest, opts: CompactionOptions,
    groups: Sequence[RewriteGroup], props: dict[str, str], max_retries: int,
) -> tuple[Manifest, tuple[str, ...]]:
    """Record the new fragments as clustered (an UpdateConfig commit), then extend the ZONEMAP
    indices over them (a CreateIndex commit, lance_ops' optimize_indices); returns the latest
    manifest and the zone maps extended.  If either commit fails after the Rewrite landed, the
    data stays correct: the next run clusters those fragments again, optimize_indices extends
    the zone maps."""
    new_ids = [f.id for g in groups for f in g.new_fragments]
    config = marker(manifest.config, (f.id for f in manifest.fragments), new_ids, opts.cluster_by, opts.strategy)
    manifest = commit_transaction(
        store, Transaction(manifest.version, UpdateConfig(upsert_values=config), properties=props), handler=handler,
        max_retries=max_retries,
    )
    zone_maps = tuple(sorted({i.name for i in user_indices(decode_index_section(manifest.index_section, store.uri))
                              if i.kind == "ZONEMAP"}))
    if zone_maps:
        built = build_indices(store, manifest, plan_optimize_indices(manifest, index_names=list(zone_maps)),
                              handler=handler)
        manifest = built if built is not None else manifest
    return manifest, zone_maps


def _reserve_and_remap(
    store: ObjectStore, handler: CommitHandler, plan: CompactionPlan, done: Sequence[RewriteResult], props: dict[str, str],
    max_retries: int,
) -> tuple[list[RewriteGroup], IndexRemap]:
    """Reserve ids for the new fragments (one ReserveFragments commit), give them out, and write
    the remapped indices of the rewrite."""
    n_new = sum(len(r.new_fragments) for r in done)
    reserved = commit_transaction(
        store, Transaction(plan.read_version, ReserveFragments(n_new), properties=props), handler=handler,
        max_retries=max_retries,
    )
    assert reserved.max_fragment_id is not None
    next_id = reserved.max_fragment_id - n_new + 1
    groups = []
    for r in done:
        new_frags = []
        for f in r.new_fragments:
            new_frags.append(f.with_changes(id=next_id))
            next_id += 1
        groups.append(RewriteGroup(r.task.fragments, new_frags))
    read = handler.read_manifest(plan.read_version).manifest
    remap = remap_indices(store, read, [(g.old_fragments, g.new_fragments) for g in groups],
                          [r.row_order for r in done])
    return groups, remap


def _mentions(line: str, fragment_ids: set[int]) -> bool:
    """A ``summarize`` line ("fragments [1, 2]: ...") naming one of ``fragment_ids``."""
    head = line.split("]", 1)[0].removeprefix("fragments [")
    return any(int(x) in fragment_ids for x in head.split(",") if x.strip())


def compact_files(
    manifest: Manifest,
    uri: str,
    *,
    storage_options: Mapping[str, Any] | None = None,
    manifest_store: Any = None,
    target_rows_per_fragment: int | None = None,
    max_rows_per_group: int | None = None,
    materialize_deletions: bool | None = None,
    materialize_deletions_threshold: float | None = None,
    max_source_fragments: int | None = None,
    max_source_rows: int | None = None,
    max_source_bytes: int | None = None,
    bin_order: str | None = None,
    only_deletions: bool | None = None,
    ignore_remap: bool | None = None,
    data_storage_version: str | None = None,
    cluster_by: Sequence[str] | str | None = None,
    strategy: str | None = None,
    max_bytes_per_file: int | None = None,
    batch_size: int | None = None,
    dry_run: bool = False,
    transaction_properties: Mapping[str, str] | None = None,
) -> CompactionMetrics:
    """In-process compaction of the dataset at ``uri`` checked out at ``manifest`` (plan, execute
    every task, commit); ``manifest_store`` as for :func:`~lance_ops.format.txn.handlers.commit_handler_for`."""
    require_writable(manifest.data_storage_version, uri)  # (the default; a 2.x target is checked by the plan)
    if not dry_run:  # a dataset committing through a manifest store refuses before any file is written
        commit_handler_for(ObjectStore(uri, storage_options), manifest_store).check_writable()
    opts = CompactionOptions.resolve(
        manifest.config,
        target_rows_per_fragment=target_rows_per_fragment,
        max_rows_per_group=max_rows_per_group,
        materialize_deletions=materialize_deletions,
        materialize_deletions_threshold=materialize_deletions_threshold,
        max_source_fragments=max_source_fragments,
        max_source_rows=max_source_rows,
        max_source_bytes=max_source_bytes,
        bin_order=bin_order,
        only_deletions=only_deletions,
        ignore_remap=ignore_remap,
        data_storage_version=data_storage_version,
        cluster_by=cluster_by,
        max_bytes_per_file=max_bytes_per_file,
        batch_size=batch_size,
        strategy=strategy,
    )
    plan = plan_compaction(manifest, uri, opts, storage_options=storage_options, manifest_store=manifest_store)
    if dry_run or not plan.tasks:
        return CompactionMetrics(
            fragments_removed=plan.source_fragments, dry_run=dry_run, fragments_skipped=plan.skipped,
            index_coverage_dropped=plan.coverage_dropped if dry_run else (),
        )
    results, failed = [], []
    # the tasks run in plan order and their files share their columns' FSST tables (a table is
    # trained once per column, not once per file: file/v21/fsst_reuse.py); same plan, same bytes
    with reuse_tables():
        for task in plan.tasks:
            try:
                results.append(execute_task(task, manifest=manifest))
            except Exception as e:  # partial progress: one failed group must not lose the others
                failed.append(f"fragments {[f.id for f in task.fragments]}: {e}")
    return commit_compaction(plan, results, failed=failed, transaction_properties=transaction_properties)


TASK_EXECUTOR.append(execute_task)  # pylance's ``task.execute(dataset)``
