"""The distributed face of :mod:`lance_ops.format`: plan -> ``execute(task)`` -> commit.

What an engine (Spark in :mod:`lance_ops.jobs`, Airflow) spreads over workers, re-exported from
the planners and below; nothing is implemented here.  The layers above import ``format`` through
three modules only: the package (``import lance_ops.format as lf``: the pylance-shaped handle API
and the data types), :mod:`lance_ops.format.errors` and this one (docs/ARCHITECTURE.md, "The
public face"; an import-linter contract in ``pyproject.toml`` keeps it so).

The driver opens a version for writing through the dataset's commit handler
(:func:`open_for_write`, :func:`try_open_latest`; both refuse a dataset whose external manifest
store the handler does not use), hands picklable tasks to executors, and commits once: with
:func:`lance_ops.format.txn.commit_loop` (an operation or a ``Transaction``, as pylance's
``LanceDataset.commit``) or the operation-specific :func:`commit_compaction` /
:func:`commit_merge_insert`.  Every commit goes through the commit loop, which removes the files
of a transaction that can never land.  Names follow pylance's distributed API where it has one:

- compaction: :class:`Compaction` (``plan`` / ``execute`` / ``commit``, as
  ``lance.optimize.Compaction``), or :func:`plan_compaction` / :func:`execute_task` /
  :func:`commit_compaction`;
- fragment writes on executors: :func:`write_fragment_files` into any :class:`ObjectStore`
  (``lance.fragment.write_fragments`` is ``lf.write_fragments``);
- deletion files of a distributed delete: :func:`with_deletions` (one fragment's offsets);
- merge_insert executor tasks :func:`write_matched_rows` / :func:`write_inserted_rows` /
  :func:`write_source_deletions` over a :class:`MergeInsertContext`, the driver's
  :func:`commit_merge_insert`;
- the change feed: :func:`plan_change_feed` -> :class:`ChangeFeedTask` ->
  :func:`execute_change_feed_task`;
- fragment-range scans for a data source: :func:`row_ranges`, :func:`scan_fragment_range`
  (partitions pruned from metadata with :func:`decode_row_ids` / :func:`decode_version_runs`);
- version listing and reading: :func:`checkout_manifest`, :func:`list_versions`,
  :func:`read_manifest`, :func:`load_transaction`, :func:`commit_timestamp_micros`;
- index segments (``create_scalar_index`` / ``optimize_indices`` on workers, as lance-spark's
  ``REFRESH INDEX``): :func:`plan_create_scalar_index` / :func:`plan_optimize_indices` ->
  :class:`IndexTask` -> :func:`execute_index_task` (an uncommitted :class:`IndexMetadata`) ->
  :func:`commit_index_build`; :func:`discard_index_segments` removes built segments left
  uncommitted;
- idempotent writes (``txnAppId`` / ``txnVersion``): :func:`with_idempotency`,
  :func:`find_earlier_commit`.
"""

from lance_ops.format.file.blob_columns import scan_schema
from lance_ops.format.index.build import SEGMENT_KINDS
from lance_ops.format.index.metadata import IndexMetadata
from lance_ops.format.io.object_store import ObjectStore, resolve_uri
from lance_ops.format.ops.change_feed.tasks import (
    DEFAULT_BATCH_SIZE,
    ChangeFeedPlan,
    ChangeFeedTask,
    commit_timestamp_micros,
    execute_change_feed_task,
    light_manifest,
    open_manifest,
    plan_change_feed,
    range_column_map,
    row_ranges,
    scan_fragment_range,
)
from lance_ops.format.ops.compaction.rewrite import (
    CompactionMetrics,
    CompactionPlan,
    CompactionTask,
    RewriteResult,
    bin_bytes,
    bin_value,
    commit_compaction,
    execute_task,
    plan_compaction,
)
from lance_ops.format.ops.delete_update import plan_delete
from lance_ops.format.ops.index_build import (
    IndexBuildPlan,
    IndexTask,
    build_indices,
    commit_index_build,
    discard_index_segments,
    execute_index_task,
    plan_create_scalar_index,
    plan_optimize_indices,
)
from lance_ops.format.ops.merge_insert import (
    MergeInsertContext,
    MergeTaskResult,
    commit_merge_insert,
    merge_insert_operation,
    merge_stats,
    write_inserted_rows,
    write_matched_rows,
    write_source_deletions,
)
from lance_ops.format.ops.write import write_fragment_files
from lance_ops.format.read.zone_pruning import prune_fragments
from lance_ops.format.table.deletion import with_deletions
from lance_ops.format.table.file_versions import normalize_storage_version, require_writable
from lance_ops.format.table.manifest import Manifest, NamingScheme, list_versions, read_manifest
from lance_ops.format.table.rowids import decode_row_ids, decode_version_runs
from lance_ops.format.txn.commit_loop import find_earlier_commit, load_transaction
from lance_ops.format.txn.handlers import (
    CommitHandler,
    checkout_manifest,
    commit_handler_for,
    open_for_write,
    try_open_latest,
)
from lance_ops.format.txn.idempotency import TXN_APP_ID, TXN_VERSION, idempotency_key, with_idempotency


class Compaction:
    """pylance's ``lance.optimize.Compaction`` names over :mod:`.maintenance.compaction`."""

    plan = staticmethod(plan_compaction)
    execute = staticmethod(execute_task)
    commit = staticmethod(commit_compaction)


__all__ = [
    "DEFAULT_BATCH_SIZE",
    "SEGMENT_KINDS",
    "TXN_APP_ID",
    "TXN_VERSION",
    "ChangeFeedPlan",
    "ChangeFeedTask",
    "CommitHandler",
    "Compaction",
    "CompactionMetrics",
    "CompactionPlan",
    "CompactionTask",
    "IndexBuildPlan",
    "IndexMetadata",
    "IndexTask",
    "Manifest",
    "MergeInsertContext",
    "MergeTaskResult",
    "NamingScheme",
    "ObjectStore",
    "RewriteResult",
    "bin_bytes",
    "bin_value",
    "checkout_manifest",
    "commit_compaction",
    "commit_handler_for",
    "build_indices",
    "commit_index_build",
    "commit_merge_insert",
    "commit_timestamp_micros",
    "decode_row_ids",
    "decode_version_runs",
    "discard_index_segments",
    "execute_change_feed_task",
    "execute_index_task",
    "execute_task",
    "find_earlier_commit",
    "idempotency_key",
    "light_manifest",
    "list_versions",
    "load_transaction",
    "merge_insert_operation",
    "merge_stats",
    "normalize_storage_version",
    "open_for_write",
    "open_manifest",
    "plan_change_feed",
    "plan_compaction",
    "plan_create_scalar_index",
    "plan_delete",
    "plan_optimize_indices",
    "prune_fragments",
    "range_column_map",
    "read_manifest",
    "require_writable",
    "resolve_uri",
    "row_ranges",
    "scan_fragment_range",
    "scan_schema",
    "try_open_latest",
    "with_deletions",
    "with_idempotency",
    "write_fragment_files",
    "write_inserted_rows",
    "write_matched_rows",
    "write_source_deletions",
]
