"""Manifest statistics and commit facts the orchestrators show (pure metadata: no data scan, no
Spark, no orchestrator): fragment counts, small fragments, deleted rows, bytes; the transaction
of a version.  Whether maintenance is due is the planner's decision alone
(:mod:`lance_ops.orchestration.planner`, through :mod:`lance_ops.orchestration.maintain`).
"""

from typing import Any

from lance_ops.format import Transaction
from lance_ops.format.distributed import Manifest
from lance_ops.orchestration.table import TableRef

# Operations that change files but no row (their change feed is empty).
MAINTENANCE_OPERATIONS = frozenset({"rewrite", "reserve_fragments", "update_config"})


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
