"""Index segments on Spark: plan on the driver, one task per group of fragments, commit once.

``optimize_indices`` and ``create_scalar_index`` as pylance names them, distributed as
lance-spark's ``REFRESH INDEX`` does: the driver plans (``lf.plan_optimize_indices`` /
``lf.plan_create_scalar_index``: one :class:`IndexTask` per segment), each executor runs
``execute_index_task`` (writes ``_indices/<uuid>/``, commits nothing) and the driver commits every
segment as one ``CreateIndex`` through the dataset's commit handler.

Failures: an index is committed whole or not at all.  When a task of an index fails, the
segments its sibling tasks built are removed and the index stays as it was; the other indices'
segments are committed (partial progress, as compaction).  A failed commit removes every
segment itself (the commit loop's orphan cleanup).
"""

import time
import traceback
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from dataclasses import replace as with_changes
from typing import Any

from pyspark.sql import SparkSession

from lance_ops.format import OPTIMIZE_INDICES_DEFAULTS, CommitOptions
from lance_ops.format.distributed import (
    IndexBuildPlan,
    IndexMetadata,
    IndexTask,
    Manifest,
    ObjectStore,
    commit_index_build,
    discard_index_segments,
    execute_index_task,
    open_manifest,
    plan_create_scalar_index,
    plan_optimize_indices,
    resolve_uri,
)
from lance_ops.jobs._common import commit_options
from lance_ops.jobs.errors import InjectedTaskFailure
from lance_ops.jobs.results import IndexBuildResult


@dataclass(frozen=True)
class IndexTaskPayload:
    """What one executor needs: the task, the dataset, and the read version cut to its fragments."""

    index: int
    task: IndexTask
    uri: str
    storage_options: Mapping[str, Any]
    manifest: Manifest  # the read version with only this task's fragments (and the index section)
    fail: bool = False


IndexOutcome = tuple[int, IndexMetadata | None, str | None]


def execute_index_task_safely(payload: IndexTaskPayload) -> IndexOutcome:
    """Executor side: ``(index, segment, None)`` or ``(index, None, error)``; never raises.

    A failing task leaves no files behind (``execute_index_task`` removes what it wrote).
    """
    t = payload.task
    try:
        if payload.fail:
            raise InjectedTaskFailure(f"injected failure in index task {payload.index}")
        store = ObjectStore(payload.uri, payload.storage_options)
        return payload.index, execute_index_task(store, payload.manifest, t), None
    except Exception as e:  # reported to the driver, which commits the other indices
        last = traceback.format_exception_only(type(e), e)[-1].strip()
        return payload.index, None, f"task {payload.index} ({t.name}, fragments {list(t.fragment_ids)}): {last}"


def _payloads(plan: IndexBuildPlan, manifest: Manifest, uri: str, so: Mapping[str, Any],
              inject: Collection[int]) -> list[IndexTaskPayload]:
    out = []
    for i, task in enumerate(plan.tasks):
        wanted = set(task.fragment_ids)
        cut = manifest.with_changes(fragments=tuple(f for f in manifest.fragments if f.id in wanted))
        out.append(IndexTaskPayload(i, task, uri, dict(so), cut, i in set(inject)))
    return out


def _live_rows(manifest: Manifest, fragment_ids: Sequence[int]) -> int:
    wanted = set(fragment_ids)
    return sum(f.physical_rows - f.num_deleted_rows for f in manifest.fragments if f.id in wanted)


def _build(
    spark: SparkSession,
    given: str,
    resolved: str,
    store: ObjectStore,
    manifest: Manifest,
    plan: IndexBuildPlan,
    *,
    storage_options: Mapping[str, Any],
    inject_task_failures: Collection[int],
    commit: CommitOptions,
    transaction_properties: Mapping[str, str] | None,
    t0: float,
) -> IndexBuildResult:
    """Run ``plan``'s tasks on executors and commit the indices whose tasks all finished."""
    n = len(plan.tasks)

    def result(**kw: Any) -> IndexBuildResult:
        base: dict[str, Any] = dict(uri=given, read_version=manifest.version, version=None, tasks_planned=n,
                                    tasks_succeeded=0, indices=(), segments_added=0, segments_removed=0,
                                    rows_indexed=0, failed_tasks=())
        base.update(kw)
        return IndexBuildResult(**base, seconds=time.perf_counter() - t0)

    if n == 0:
        return result()
    payloads = _payloads(plan, manifest, resolved, storage_options, inject_task_failures)
    outcomes = sorted(spark.sparkContext.parallelize(payloads, n).map(execute_index_task_safely).collect(),
                      key=lambda o: o[0])
    failed = tuple(err for _, _, err in outcomes if err is not None)
    broken = {plan.tasks[i].name for i, seg, _ in outcomes if seg is None}
    keep = [(plan.tasks[i], seg) for i, seg, _ in outcomes if seg is not None and plan.tasks[i].name not in broken]
    discard_index_segments(store, [seg for i, seg, _ in outcomes if seg is not None and plan.tasks[i].name in broken])
    if not keep:
        return result(failed_tasks=failed)
    committed = with_changes(plan, tasks=tuple(t for t, _ in keep),
                        removed=tuple(r for r in plan.removed if r.name not in broken))
    props = {**commit.properties(transaction_properties), "lance_ops.writer": "spark"}
    new = commit_index_build(store, committed, [s for _, s in keep], handler=commit.handler(store), known=manifest,
                             properties=props, max_retries=commit.max_retries)
    return result(
        version=new.version, tasks_succeeded=len(keep), indices=tuple(sorted({t.name for t, _ in keep})),
        segments_added=len(keep), segments_removed=len(committed.removed),
        rows_indexed=sum(_live_rows(manifest, t.fragment_ids) for t, _ in keep), failed_tasks=failed,
    )


def _open(uri: str, storage_options: Mapping[str, Any] | None,
          commit: CommitOptions) -> tuple[str, ObjectStore, Manifest]:
    uri = resolve_uri(uri)  # once, on the driver: tasks run in other directories
    store = ObjectStore(uri, dict(storage_options or {}))
    handler = commit.handler(store)
    handler.check_writable()  # before any task writes a file
    manifest, _ = open_manifest(store, None, handler)
    return uri, store, manifest


def optimize_indices(
    spark: SparkSession,
    uri: str,
    *,
    num_indices_to_merge: int = OPTIMIZE_INDICES_DEFAULTS.num_indices_to_merge,
    index_names: Sequence[str] | None = None,
    rows_per_task: int | None = OPTIMIZE_INDICES_DEFAULTS.rows_per_task,
    storage_options: Mapping[str, Any] | None = None,
    inject_task_failures: Collection[int] = (),
    transaction_properties: Mapping[str, str] | None = None,
    manifest_store: Any = None,
    commit: CommitOptions | None = None,
) -> IndexBuildResult:
    """Index the fragments no segment of an index covers (pylance's ``optimize_indices``), on
    executors: one task (one new segment) per group of about ``rows_per_task`` new rows with
    ``num_indices_to_merge=0``; a merge of the newest ``N`` segments is one task per index.

    Args:
        num_indices_to_merge: pylance's: 0 adds segments, ``N`` rebuilds the newest ``N`` with
            the new fragments as one segment.
        index_names: only these indices (default: every index of a kind lance_ops extends).
        rows_per_task: rows of new fragments per task and segment (None: one per index).
        inject_task_failures: indices of tasks that raise on their executor (fault tests).
        manifest_store: the external manifest store the dataset commits through.
        commit: commit options (:class:`lance_ops.format.CommitOptions`); the keywords win.

    Returns:
        version None when nothing was committed (every index covers every fragment, or every
        task failed: ``failed_tasks``).
    """
    t0 = time.perf_counter()
    opts = commit_options(None, manifest_store, commit)
    resolved, store, manifest = _open(uri, storage_options, opts)
    plan = plan_optimize_indices(manifest, num_indices_to_merge=num_indices_to_merge, index_names=index_names,
                                 rows_per_task=rows_per_task)
    return _build(spark, uri, resolved, store, manifest, plan, storage_options=dict(storage_options or {}),
                  inject_task_failures=inject_task_failures, commit=opts,
                  transaction_properties=transaction_properties, t0=t0)


def create_scalar_index(
    spark: SparkSession,
    uri: str,
    column: str,
    index_type: str = "BTREE",
    name: str | None = None,
    *,
    replace: bool = True,
    rows_per_task: int | None = OPTIMIZE_INDICES_DEFAULTS.rows_per_task,
    storage_options: Mapping[str, Any] | None = None,
    inject_task_failures: Collection[int] = (),
    transaction_properties: Mapping[str, str] | None = None,
    manifest_store: Any = None,
    commit: CommitOptions | None = None,
) -> IndexBuildResult:
    """Build a BTREE, BITMAP, LABEL_LIST, ZONEMAP, NGRAM or INVERTED index of ``column`` (pylance's
    ``create_scalar_index``; default name ``<column>_idx``) on executors: one segment per group
    of about ``rows_per_task`` rows, committed as one index (replacing one of that name when
    ``replace``).  Other arguments as :func:`optimize_indices`; any failed task fails the index
    (nothing committed, no files left).

    Raises:
        UnsupportedFeatureError: an index type lance_ops does not build.
        SchemaError: no such column.
        InvalidArgumentError: ``replace=False`` and an index of that name exists.
    """
    t0 = time.perf_counter()
    opts = commit_options(None, manifest_store, commit)
    resolved, store, manifest = _open(uri, storage_options, opts)
    plan = plan_create_scalar_index(manifest, column, index_type, name=name, replace=replace,
                                    rows_per_task=rows_per_task)
    return _build(spark, uri, resolved, store, manifest, plan, storage_options=dict(storage_options or {}),
                  inject_task_failures=inject_task_failures, commit=opts,
                  transaction_properties=transaction_properties, t0=t0)
