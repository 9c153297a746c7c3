"""Compaction and deletion materialisation: plan on the driver, one Spark task per group, commit once.

Rows keep ``_rowid`` and both version columns (the format's ``execute_task`` writes the row id
and version sequences).  Partial progress: groups that finished are committed even when
others failed; failures come back in ``CompactResult.failed_tasks``.  The commit is planned
against the read version and rebased by the format's commit loop, so appends (or deletes of
other rows, with stable row ids) committed meanwhile do not make it fail.
"""

import time
import traceback
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from pyspark.sql import SparkSession

from lance_ops.format import COMMIT_DEFAULTS, COMPACTION_DEFAULTS, CommitOptions, CompactionOptions
from lance_ops.format.distributed import (
    CompactionTask,
    ObjectStore,
    RewriteResult,
    commit_compaction,
    execute_task,
    open_manifest,
    plan_compaction,
    resolve_uri,
)
from lance_ops.jobs._common import commit_options
from lance_ops.jobs.errors import InjectedTaskFailure
from lance_ops.jobs.results import CompactResult

TaskOutcome = tuple[int, RewriteResult | None, str | None]


def execute_task_safely(payload: tuple[int, CompactionTask, bool]) -> TaskOutcome:
    """Executor side: ``(index, result, None)`` or ``(index, None, error)``; never raises.

    A failing task leaves no files behind (``write_fragment_files`` removes what it wrote).
    """
    index, task, fail = payload
    ids = [f.id for f in task.fragments]
    try:
        if fail:
            raise InjectedTaskFailure(f"injected failure in compaction task {index}")
        return index, execute_task(task), None
    except Exception as e:  # reported to the driver, which commits the other groups
        last = traceback.format_exception_only(type(e), e)[-1].strip()
        return index, None, f"task {index} (fragments {ids}): {last}"


def _compact(
    spark: SparkSession,
    uri: str,
    overrides: Mapping[str, Any],
    *,
    dry_run: bool,
    storage_options: Mapping[str, Any] | None,
    read_version: int | None,
    inject_task_failures: Collection[int],
    transaction_properties: Mapping[str, str] | None = None,
    commit: CommitOptions = COMMIT_DEFAULTS,
) -> CompactResult:
    t0 = time.perf_counter()
    so = dict(storage_options or {})
    given, uri = uri, resolve_uri(uri)  # once, on the driver: tasks run in other directories
    store = ObjectStore(uri, so)
    handler = commit.handler(store)
    if not dry_run:
        handler.check_writable()  # before any task writes a file
    manifest, _ = open_manifest(store, read_version, handler)
    opts = CompactionOptions.resolve(manifest.config, **overrides)
    plan = plan_compaction(manifest, uri, opts, storage_options=so, manifest_store=commit.manifest_store)
    n = len(plan.tasks)

    def result(**kw: Any) -> CompactResult:
        base: dict[str, Any] = dict(
            uri=given, read_version=manifest.version, version=None, tasks_planned=n, tasks_succeeded=0,
            fragments_removed=0, fragments_added=0, files_removed=0, files_added=0, rows_rewritten=0,
            failed_tasks=(), dry_run=dry_run,
        )
        base.update(kw)
        return CompactResult(**base, seconds=time.perf_counter() - t0)

    if dry_run or n == 0:
        return result(fragments_removed=plan.source_fragments if dry_run else 0, fragments_skipped=plan.skipped,
                      index_coverage_dropped=plan.coverage_dropped if dry_run else ())
    inject = set(inject_task_failures)
    payloads = [(i, t, i in inject) for i, t in enumerate(plan.tasks)]
    outcomes = spark.sparkContext.parallelize(payloads, n).map(execute_task_safely).collect()
    outcomes.sort(key=lambda o: o[0])
    done = [r for _, r, _ in outcomes if r is not None]
    failed = tuple(err for _, _, err in outcomes if err is not None)
    if not done:
        return result(failed_tasks=failed, fragments_skipped=plan.skipped)
    metrics = commit_compaction(plan, done, failed=failed, transaction_properties={**commit.properties(transaction_properties), "lance_ops.writer": "spark"},
                                 max_retries=commit.max_retries)
    return result(
        version=metrics.version, tasks_succeeded=len(done), fragments_removed=metrics.fragments_removed,
        fragments_added=metrics.fragments_added, files_removed=metrics.files_removed,
        files_added=metrics.files_added, rows_rewritten=metrics.rows_rewritten, failed_tasks=failed,
        indices_remapped=metrics.indices_remapped, index_coverage_dropped=metrics.index_coverage_dropped,
        fragments_skipped=metrics.fragments_skipped,
    )


def compact(
    spark: SparkSession,
    uri: str,
    *,
    target_rows_per_fragment: int | None = None,
    max_rows_per_group: int | None = None,
    materialize_deletions: bool | None = None,
    materialize_deletions_threshold: float | None = None,
    max_source_fragments: int | None = None,
    max_source_rows: int | None = None,
    max_source_bytes: int | None = None,
    bin_order: str | None = None,
    ignore_remap: bool | None = None,
    data_storage_version: str | None = None,
    cluster_by: Sequence[str] | str | None = None,
    strategy: str | None = None,
    dry_run: bool = False,
    storage_options: Mapping[str, Any] | None = None,
    read_version: int | None = None,
    inject_task_failures: Collection[int] = (),
    transaction_properties: Mapping[str, str] | None = None,
    manifest_store: Any = None,
    commit: CommitOptions | None = None,
) -> CompactResult:
    """Compact small fragments (and materialise deletions) of the dataset at ``uri``.

    Indices keep their coverage (remapped on the driver before the commit, see
    :mod:`lance_ops.format.ops.compaction.index_remap`); fragments of an index lance_ops cannot
    carry stay out unless ``ignore_remap=True`` (``fragments_skipped`` / ``index_coverage_dropped``).

    Options left at None take the table config ``lance.compaction.<name>`` if set, else the
    defaults of :class:`lance_ops.format.CompactionOptions` (pylance's: 1M rows per fragment,
    1024 rows per group, deletions materialised at 10 %, no limit on source fragments).

    Args:
        dry_run: plan only; ``fragments_removed`` says how many fragments would be rewritten.
        read_version: plan against this version instead of the latest (the commit still lands
            on top of whatever was committed since, as a concurrent compaction would).
        inject_task_failures: indices of tasks that raise on their executor (fault tests).
        manifest_store: the external manifest store the dataset commits through.
        commit: commit options (:class:`lance_ops.format.CommitOptions`); the keywords win.
        data_storage_version: file version of the rewritten fragments (pylance's option; the
            table then mixes versions, docs/FORMAT.md §17); resumable with ``max_source_fragments``.
        max_source_fragments, max_source_rows, max_source_bytes: the run's budget (pylance's
            names); ``bin_order="value"`` takes the most valuable bins first (the planner's order).
        cluster_by, strategy: clustered compaction (``"sort"`` or ``"zorder"``) of the fragments
            not yet clustered by these columns (docs/FORMAT.md §18).
    """
    overrides = dict(
        target_rows_per_fragment=target_rows_per_fragment,
        max_rows_per_group=max_rows_per_group,
        materialize_deletions=materialize_deletions,
        materialize_deletions_threshold=materialize_deletions_threshold,
        max_source_fragments=max_source_fragments,
        max_source_rows=max_source_rows,
        max_source_bytes=max_source_bytes,
        bin_order=bin_order,
        ignore_remap=ignore_remap,
        data_storage_version=data_storage_version,
        cluster_by=cluster_by,
        strategy=strategy,
    )
    return _compact(spark, uri, overrides, dry_run=dry_run, storage_options=storage_options,
                    read_version=read_version, inject_task_failures=inject_task_failures,
                    transaction_properties=transaction_properties,
                    commit=commit_options(None, manifest_store, commit))


def materialize_deletions(
    spark: SparkSession,
    uri: str,
    threshold: float = COMPACTION_DEFAULTS.materialize_deletions_threshold,
    *,
    max_source_fragments: int | None = None,
    max_source_rows: int | None = None,
    max_source_bytes: int | None = None,
    bin_order: str | None = None,
    ignore_remap: bool | None = None,
    dry_run: bool = False,
    storage_options: Mapping[str, Any] | None = None,
    read_version: int | None = None,
    inject_task_failures: Collection[int] = (),
    transaction_properties: Mapping[str, str] | None = None,
    manifest_store: Any = None,
    commit: CommitOptions | None = None,
) -> CompactResult:
    """Rewrite (each on its own) the fragments whose deleted fraction is at least ``threshold``.

    Deleted rows are dropped; live rows keep ``_rowid`` and both version columns.
    ``manifest_store`` / ``commit`` as for :func:`compact`.
    """
    overrides = dict(only_deletions=True, materialize_deletions=True, materialize_deletions_threshold=threshold,
                     max_source_fragments=max_source_fragments, max_source_rows=max_source_rows,
                     max_source_bytes=max_source_bytes, bin_order=bin_order, ignore_remap=ignore_remap)
    return _compact(spark, uri, overrides, dry_run=dry_run, storage_options=storage_options,
                    read_version=read_version, inject_task_failures=inject_task_failures,
                    transaction_properties=transaction_properties,
                    commit=commit_options(None, manifest_store, commit))
