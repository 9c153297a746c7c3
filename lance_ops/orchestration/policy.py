"""A dataset's maintenance policy evaluated on its manifests: is compaction or deletion
materialisation due?  Pure metadata (no data scan, no Spark, no orchestrator), so Dagster's
compaction sensor, Airflow's maintenance trigger and ``lance-ops inspect`` agree on the thresholds.

The thresholds are :class:`lance_ops.orchestration.settings.PolicySettings` (``lance_ops.yaml``): a fragment is
*small* when it has fewer live rows than ``target_rows_per_fragment``; compaction is due when at
least ``min_small_fragments`` fragments are small or ``max_versions_since_compaction`` versions
were committed since the last compaction; deletion materialisation when only the deleted-row
ratio reaches ``deleted_ratio_threshold``.
"""

from dataclasses import dataclass
from typing import Any, Literal, Protocol

from lance_ops.format import Transaction
from lance_ops.format.distributed import Manifest
from lance_ops.orchestration.stamps import OPERATION_PROPERTY
from lance_ops.orchestration.table import TableRef

# Operations that change files but no row (their change feed is empty).
MAINTENANCE_OPERATIONS = frozenset({"rewrite", "reserve_fragments", "update_config"})


class Policy(Protocol):
    """The thresholds read here (``PolicySettings`` has them)."""

    target_rows_per_fragment: int
    min_small_fragments: int
    deleted_ratio_threshold: float
    max_versions_since_compaction: int


@dataclass(frozen=True)
class MaintenanceRequest:
    """What the policy asks for at one version, and why."""

    operation: Literal["compact", "materialize_deletions"]
    reasons: tuple[str, ...]
    version: int


def transaction_of(table: TableRef, version: int) -> Transaction | None:
    """The transaction that produced ``version``, or None when it has none (or cannot be read);
    read through the dataset's commit handler (:meth:`TableRef.transaction`)."""
    return table.transaction(version)


def manifest_stats(manifest: Manifest, *, small_fragment_rows: int) -> dict[str, Any]:
    """Fragment statistics of one manifest: pure metadata."""
    frags = manifest.fragments
    physical = sum(f.physical_rows for f in frags)
    deleted = sum(f.num_deleted_rows for f in frags)
    return {
        "rows": physical - deleted,
        "fragments": len(frags),
        "small_fragments": sum(1 for f in frags if f.num_rows < small_fragment_rows),
        "deleted_rows": deleted,
        "deleted_ratio": round(deleted / physical, 6) if physical else 0.0,
        "bytes": sum(df.file_size_bytes for f in frags for df in f.files),
    }


def versions_since_compaction(table: TableRef, latest: int, *, limit: int) -> int:
    """Versions committed after the latest compaction (a Rewrite), counting at most ``limit``.

    Reads transactions backwards from ``latest`` (manifest metadata only).  A Rewrite made by
    deletion materialisation does not count as a compaction when lance_ops stamped it so.
    """
    count = 0
    for v in range(latest, 0, -1):
        txn = table.transaction(v)
        if txn is not None and txn.operation.name == "rewrite":
            if txn.properties.get(OPERATION_PROPERTY, "compact") != "materialize_deletions":
                return count
        elif txn is None or txn.operation.name not in MAINTENANCE_OPERATIONS:
            count += 1
        if count >= limit:
            return count
    return count


def maintenance_request(manifest: Manifest, table: TableRef, policy: Policy) -> MaintenanceRequest | None:
    """What ``policy`` asks for at ``manifest``'s version: compaction (with any deletion reasons),
    deletion materialisation, or None when the version is within the policy."""
    stats = manifest_stats(manifest, small_fragment_rows=policy.target_rows_per_fragment)
    since = versions_since_compaction(table, manifest.version, limit=policy.max_versions_since_compaction)
    compact: list[str] = []
    if stats["small_fragments"] >= policy.min_small_fragments:
        compact.append(f"{stats['small_fragments']} small fragments >= {policy.min_small_fragments}")
    if since >= policy.max_versions_since_compaction:
        compact.append(f"{since} versions since the last compaction >= {policy.max_versions_since_compaction}")
    deletions = []
    if stats["deleted_rows"] and stats["deleted_ratio"] >= policy.deleted_ratio_threshold:
        deletions.append(f"deleted ratio {stats['deleted_ratio']:.3f} >= {policy.deleted_ratio_threshold}")
    if compact:
        return MaintenanceRequest("compact", tuple(compact + deletions), manifest.version)
    if deletions:
        return MaintenanceRequest("materialize_deletions", tuple(deletions), manifest.version)
    return None


def evaluate(table: TableRef, policy: Policy, *, version: int | None = None) -> MaintenanceRequest | None:
    """:func:`maintenance_request` for ``table`` (its latest version, or ``version``).

    Raises:
        DatasetNotFoundError: no dataset at ``table.uri``.
    """
    return maintenance_request(table.open(version).manifest, table, policy)
