"""pylance's ``lance.optimize.Compaction`` over a dataset handle: ``plan(dataset, options)``,
``task.execute(dataset)`` (on any worker) and ``commit(dataset, results)``, which moves the handle
to the version it commits, as pylance's.  The manifest-based form for Spark and other drivers is
:class:`lance_ops.format.distributed.Compaction`."""

from collections.abc import Iterable, Mapping
from typing import Any

from lance_ops.format.api.arguments import pop_ignored
from lance_ops.format.api.dataset_core import DatasetCore
from lance_ops.format.ops.compaction.planning import (
    COMPACTION_DEFAULTS,
    CompactionOptions,
    CompactionPlan,
    CompactionTask,
    plan_compaction,
)
from lance_ops.format.ops.compaction.rewrite import (
    CompactionMetrics,
    RewriteResult,
    commit_compaction,
    execute_task,
)

__all__ = ["Compaction"]

#: pylance's tuning option lance_ops accepts and ignores
_IGNORED = ("num_threads",)


class Compaction:
    """pylance's distributed compaction API on a dataset handle."""

    @staticmethod
    def plan(dataset: DatasetCore, options: Mapping[str, Any] | None = None) -> CompactionPlan:
        """The tasks of a compaction of ``dataset`` (options as ``compact_files``'s)."""
        opts = dict(options or {})
        pop_ignored(opts, _IGNORED)
        resolved = CompactionOptions.resolve(dataset.manifest.config, **opts)
        return plan_compaction(dataset.manifest, dataset.uri, resolved, storage_options=dataset._storage_options,
                               manifest_store=dataset._handler.manifest_store)

    @staticmethod
    def execute(task: CompactionTask, dataset: DatasetCore | None = None) -> RewriteResult:
        """Rewrite one task's fragments (commits nothing)."""
        return execute_task(task)

    @staticmethod
    def commit(dataset: DatasetCore, rewrites: Iterable[RewriteResult]) -> CompactionMetrics:
        """Commit finished tasks (reserve fragment ids, then one Rewrite, as pylance: two versions);
        ``dataset`` moves to the committed version."""
        done = list(rewrites)
        read_version = done[0].read_version if done else dataset.version
        plan = CompactionPlan(dataset.uri, read_version, tuple(r.task for r in done), COMPACTION_DEFAULTS,
                              dataset._handler.manifest_store)
        metrics = commit_compaction(plan, done)
        if metrics.version is not None:
            dataset._advance(dataset._handler.read_manifest(metrics.version).manifest)
        return metrics
