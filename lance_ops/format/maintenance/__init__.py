"""Plan / execute / commit for distributed maintenance: compaction, deletion materialisation, change feed.

Every operation has a picklable plan of tasks, a pure ``execute(task) -> result`` that runs on
any worker, and a driver-side ``commit(results)``.  ``lance_ops.jobs`` only spreads the tasks
over Spark executors; the in-process versions here run them in a loop.
"""

from .change_feed import CHANGE_TYPES, change_feed_batches, change_feed_schema
from .compaction import (
    CompactionMetrics,
    CompactionOptions,
    CompactionPlan,
    CompactionTask,
    RewriteResult,
    commit_compaction,
    compact_files,
    execute_task,
    plan_compaction,
)

__all__ = [
    "CHANGE_TYPES",
    "CompactionMetrics",
    "CompactionOptions",
    "CompactionPlan",
    "CompactionTask",
    "RewriteResult",
    "change_feed_batches",
    "change_feed_schema",
    "commit_compaction",
    "compact_files",
    "execute_task",
    "plan_compaction",
]
