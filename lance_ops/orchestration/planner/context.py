"""One table as the planner reads it: the latest manifest, the commit handler, the policy.

Everything here is metadata (manifests, transactions, index metadata, listings); nothing reads a
data page.  Listings and the version list are read once per plan, when an action asks for them.
"""

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Protocol

import lance_ops.format as lf
from lance_ops.format.distributed import CommitHandler, Manifest, ObjectStore, commit_handler_for
from lance_ops.orchestration.planner.model import TableRef

#: transaction property naming the lance_ops operation of a commit (shared with lance_ops.orchestration.policy)
OPERATION_PROPERTY = "lance_ops/operation"
#: operations that change files but no row
_MAINTENANCE_OPERATIONS = frozenset({"rewrite", "reserve_fragments", "update_config", "create_index"})


class Policy(Protocol):
    """The thresholds the planner reads (:class:`lance_ops.orchestration.settings.PolicySettings` has them)."""

    target_rows_per_fragment: int
    max_rows_per_group: int
    min_small_fragments: int
    deleted_ratio_threshold: float
    max_versions_since_compaction: int
    cleanup_older_than_days: float
    cleanup_retain_versions: int
    min_index_coverage: float
    min_unindexed_rows: int
    num_indices_to_merge: int
    max_index_segments: int
    cleanup_min_versions: int
    cleanup_retention_duration_check: bool
    orphan_min_files: int
    orphan_min_age_hours: float
    max_source_fragments: int | None
    max_source_rows: int | None
    max_source_bytes: int | None


@dataclass
class TableContext:
    """The table at its latest version, with what the proposers share."""

    ref: TableRef
    policy: Policy
    ds: lf.LanceDataset
    #: the byte budget left for this table's rewrites (None: the policy's limits only)
    max_bytes: int | None = None

    @classmethod
    def open(cls, ref: TableRef, policy: Policy, max_bytes: int | None = None) -> "TableContext":
        ds = lf.dataset(ref.uri, storage_options=ref.resolved_storage_options(), manifest_store=ref.manifest_store)
        return cls(ref, policy, ds, max_bytes)

    @property
    def manifest(self) -> Manifest:
        return self.ds.manifest

    @property
    def version(self) -> int:
        return self.ds.version

    @cached_property
    def store(self) -> ObjectStore:
        return ObjectStore(self.ds.uri, self.ref.resolved_storage_options())

    @cached_property
    def handler(self) -> CommitHandler:
        return commit_handler_for(self.store, self.ref.manifest_store)

    @cached_property
    def versions(self) -> list[int]:
        return self.handler.list_versions()[1]

    @cached_property
    def fragment_stats(self) -> dict[str, Any]:
        frags = self.manifest.fragments
        physical = sum(f.physical_rows for f in frags)
        deleted = sum(f.num_deleted_rows for f in frags)
        return {
            "version": self.version,
            "fragments": len(frags),
            "rows": physical - deleted,
            "physical_rows": physical,
            "deleted_rows": deleted,
            "deleted_ratio": round(deleted / physical, 6) if physical else 0.0,
            "small_fragments": sum(1 for f in frags if f.physical_rows < self.policy.target_rows_per_fragment),
            "bytes": sum(df.file_size_bytes or 0 for f in frags for df in f.files),
        }

    def versions_since_compaction(self, limit: int) -> int:
        """Data-changing versions committed after the latest compaction (counting at most
        ``limit``), read backwards from the transactions; a deletion materialisation stamped so
        by lance_ops is not a compaction."""
        count = 0
        for v in range(self.version, 0, -1):
            try:
                txn = self.ds.read_transaction(v)
            except (lf.LanceOpsError, FileNotFoundError):
                return count  # removed by cleanup: nothing older counts
            name = txn.operation.name if txn is not None else None
            if name == "rewrite" and txn is not None:
                if txn.properties.get(OPERATION_PROPERTY, "compact") != "materialize_deletions":
                    return count
            elif name not in _MAINTENANCE_OPERATIONS:
                count += 1
            if count >= limit:
                return count
        return count
