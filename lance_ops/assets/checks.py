"""Asset checks on a dataset and its change feed.

- ``row_ids_unique``: no stable row id appears twice in the latest version.
- ``compaction_preserves_rows``: the rows the latest compaction (or deletion materialisation)
  moved are the same multiset of (content, ``_rowid``, row versions) after it as before it:
  the fingerprint stored in that materialisation's metadata is compared with one recomputed
  from the version it made.
- ``deletions_materialized``: every Rewrite made by deletion materialisation left its new
  fragments without deletion files.
- ``maintenance_versions_empty`` (change feed): the partitions of versions made by maintenance
  only hold no change.
"""

from typing import Any

import numpy as np
from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetChecksDefinition,
    AssetCheckSeverity,
    AssetKey,
    asset_check,
)

from lance_ops.format.errors import DatasetNotFoundError

from .change_feed import change_feed_asset_name, partition_change_counts, partitions_def_name
from .ops import OPERATION_TAG, resource_key
from .resources import LanceDatasetResource
from .settings import DatasetSettings
from .stats import MAINTENANCE_OPERATIONS, rewrite_fingerprints, rewrite_without_deletions, transaction_of

REWRITE_OPERATIONS = ("compact", "materialize_deletions")
EVENTS_SCANNED = 200


def _latest_event(context: AssetCheckExecutionContext, key: AssetKey, operations: tuple[str, ...],
                  required: str) -> Any:
    """The newest materialisation of ``key`` made by one of ``operations`` that has ``required`` metadata."""
    records = context.instance.fetch_materializations(key, limit=EVENTS_SCANNED).records
    for record in records:
        mat = record.asset_materialization
        if mat is None:
            continue
        if (mat.tags or {}).get(OPERATION_TAG) in operations and required in mat.metadata:
            return mat
    return None


def _events_versions(context: AssetCheckExecutionContext, key: AssetKey, operation: str) -> list[int]:
    records = context.instance.fetch_materializations(key, limit=EVENTS_SCANNED).records
    out = []
    for record in records:
        mat = record.asset_materialization
        if mat is not None and (mat.tags or {}).get(OPERATION_TAG) == operation and "version" in mat.metadata:
            out.append(int(mat.metadata["version"].value))
    return out


def build_checks(d: DatasetSettings) -> list[AssetChecksDefinition]:
    rk = resource_key(d.name)
    key = AssetKey([d.name])

    @asset_check(asset=key, name="row_ids_unique", required_resource_keys={rk},
                 description="No stable row id appears twice in the latest version (scans _rowid).")
    def row_ids_unique(context: AssetCheckExecutionContext) -> AssetCheckResult:
        res: LanceDatasetResource = getattr(context.resources, rk)
        ds = res.open()
        ids = ds.to_table(columns=["_rowid"])["_rowid"].to_numpy()
        uniq, counts = np.unique(ids, return_counts=True)
        dup = uniq[counts > 1]
        return AssetCheckResult(
            passed=bool(len(dup) == 0),
            metadata={"version": ds.version, "rows": int(len(ids)), "duplicate_row_ids": int(len(dup)),
                      "examples": [int(x) for x in dup[:10]]},
        )

    @asset_check(asset=key, name="compaction_preserves_rows", required_resource_keys={rk},
                 description="The latest compaction kept the multiset of (row content, _rowid, row versions).")
    def compaction_preserves_rows(context: AssetCheckExecutionContext) -> AssetCheckResult:
        res: LanceDatasetResource = getattr(context.resources, rk)
        event = _latest_event(context, key, REWRITE_OPERATIONS, "fingerprint_before")
        if event is None:
            return AssetCheckResult(passed=True, metadata={"verified": False, "reason": "no compaction recorded yet"})
        version = int(event.metadata["rewrite_version"].value)
        stored = str(event.metadata["fingerprint_before"].value)
        try:
            ds = res.open(version)
        except DatasetNotFoundError:
            return AssetCheckResult(
                passed=True, severity=AssetCheckSeverity.WARN,
                metadata={"verified": False, "version": version, "reason": "version removed by cleanup"},
            )
        fp = rewrite_fingerprints(ds, res.store(), after_only=True)
        rows_now = ds.count_rows()
        rows_before = int(event.metadata["rows_before"].value)
        return AssetCheckResult(
            passed=fp.after == stored and rows_now == rows_before,
            metadata={"verified": True, "version": version, "operation": event.tags.get(OPERATION_TAG, ""),
                      "fingerprint_before": stored, "fingerprint_now": fp.after,
                      "rows_moved": fp.rows_after, "rows_before": rows_before, "rows_after": rows_now},
        )

    @asset_check(asset=key, name="deletions_materialized", required_resource_keys={rk},
                 description="Fragments rewritten by deletion materialisation carry no deletion file.")
    def deletions_materialized(context: AssetCheckExecutionContext) -> AssetCheckResult:
        res: LanceDatasetResource = getattr(context.resources, rk)
        ds = res.open()
        recorded = _events_versions(context, key, "materialize_deletions")
        checked, problems = rewrite_without_deletions(res.store(), ds, extra_versions=recorded)
        return AssetCheckResult(
            passed=not problems,
            metadata={"versions_checked": checked, "problems": problems[:20], "latest_version": ds.version},
        )

    @asset_check(asset=AssetKey([change_feed_asset_name(d.name)]), name="maintenance_versions_empty",
                 required_resource_keys={rk},
                 description="Partitions of versions made by maintenance only (compaction, deletion "
                             "materialisation) hold no change.")
    def maintenance_versions_empty(context: AssetCheckExecutionContext) -> AssetCheckResult:
        res: LanceDatasetResource = getattr(context.resources, rk)
        store = res.store()
        keys = context.instance.get_dynamic_partitions(partitions_def_name(d.name))
        checked: dict[str, int] = {}
        for k in sorted(keys, key=int):
            txn = transaction_of(store, int(k))
            if txn is None or txn.operation.name not in MAINTENANCE_OPERATIONS:
                continue
            counts = partition_change_counts(d, k, res.resolved_storage_options())
            if counts is not None:
                checked[k] = sum(counts.values())
        nonempty = {k: n for k, n in checked.items() if n}
        return AssetCheckResult(
            passed=not nonempty,
            metadata={"maintenance_partitions_checked": len(checked), "versions": list(checked),
                      "non_empty": nonempty},
        )

    return [row_ids_unique, compaction_preserves_rows, deletions_materialized, maintenance_versions_empty]
