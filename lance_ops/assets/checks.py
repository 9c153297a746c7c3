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

Freshness (severity WARN, evaluated on the policy's ``freshness_cron`` by the automation sensor):

- ``appended_recently``: the newest version that added rows (an append, or the create) is at
  most ``max_hours_between_appends`` old (read from the manifests, so writers outside Dagster
  count too); only when the policy sets it.
- ``change_feed_lag`` (change feed): the newest materialised partition is at most
  ``change_feed_max_lag_versions`` behind the dataset's latest version.
"""

import time
from typing import Any

import numpy as np
from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetChecksDefinition,
    AssetCheckSeverity,
    AssetKey,
    AutomationCondition,
    MetadataValue,
    asset_check,
)

from lance_ops.assets.change_feed import change_feed_asset_name, partition_change_counts, partitions_def_name
from lance_ops.assets.metadata import REWRITE_KEY, timestamp
from lance_ops.assets.operations import OPERATION_TAG, resource_key
from lance_ops.assets.resources import LanceDatasetResource
from lance_ops.assets.settings import DatasetSettings
from lance_ops.assets.stats import (
    MAINTENANCE_OPERATIONS,
    rewrite_fingerprints,
    rewrite_without_deletions,
    transaction_of,
)
from lance_ops.format.errors import DatasetNotFoundError

#: Transactions that add rows (an append, or the overwrite that creates a dataset).
APPENDING_OPERATIONS = ("append", "overwrite")
APPEND_SCAN_LIMIT = 10_000

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
        if mat is not None and (mat.tags or {}).get(OPERATION_TAG) == operation and "lance/version" in mat.metadata:
            out.append(int(mat.metadata["lance/version"].value))
    return out


def freshness_condition(d: DatasetSettings) -> AutomationCondition:
    """Evaluate on every tick of the policy's ``freshness_cron`` (once per tick)."""
    return AutomationCondition.cron_tick_passed(d.policy.freshness_cron, d.policy.timezone).since_last_handled()


def last_append(res: LanceDatasetResource) -> tuple[int, int] | None:
    """(version, commit timestamp ns) of the newest version that added rows; None if none is left."""

    store = res.store()
    versions = res.versions()
    for v in reversed(versions[-APPEND_SCAN_LIMIT:]):
        txn = transaction_of(store, v)
        if txn is not None and txn.operation.name in APPENDING_OPERATIONS:
            return v, res.open(v).manifest.timestamp_ns
    return None


def build_checks(d: DatasetSettings, *, change_feed: bool = True) -> list[AssetChecksDefinition]:
    """The checks of dataset ``d`` (and of its change feed when it has one)."""
    checks = [_row_ids_unique(d), _compaction_preserves_rows(d), _deletions_materialized(d)]
    if d.policy.max_hours_between_appends is not None:
        checks.append(_appended_recently(d, d.policy.max_hours_between_appends))
    if change_feed:
        checks += [_maintenance_versions_empty(d), _change_feed_lag(d)]
    return checks


def _row_ids_unique(d: DatasetSettings) -> AssetChecksDefinition:
    """``row_ids_unique`` of dataset ``d``."""
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

    return row_ids_unique


def _compaction_preserves_rows(d: DatasetSettings) -> AssetChecksDefinition:
    """``compaction_preserves_rows`` of dataset ``d``."""
    rk = resource_key(d.name)
    key = AssetKey([d.name])

    @asset_check(asset=key, name="compaction_preserves_rows", required_resource_keys={rk},
                 description="The latest compaction kept the multiset of (row content, _rowid, row versions).")
    def compaction_preserves_rows(context: AssetCheckExecutionContext) -> AssetCheckResult:
        res: LanceDatasetResource = getattr(context.resources, rk)
        event = _latest_event(context, key, REWRITE_OPERATIONS, REWRITE_KEY)
        if event is None:
            return AssetCheckResult(passed=True, metadata={"verified": False, "reason": "no compaction recorded yet"})
        evidence = event.metadata[REWRITE_KEY].value
        version = int(evidence["version"])
        stored = str(evidence["fingerprint_before"])
        try:
            ds = res.open(version)
        except DatasetNotFoundError:
            return AssetCheckResult(
                passed=True, severity=AssetCheckSeverity.WARN,
                metadata={"verified": False, "version": version, "reason": "version removed by cleanup"},
            )
        fp = rewrite_fingerprints(ds, res.store(), after_only=True)
        rows_now = ds.count_rows()
        rows_before = int(evidence["rows_before"])
        return AssetCheckResult(
            passed=fp.after == stored and rows_now == rows_before,
            metadata={"verified": True, "version": version, "operation": event.tags.get(OPERATION_TAG, ""),
                      "fingerprint_before": stored, "fingerprint_now": fp.after,
                      "rows_moved": fp.rows_after, "rows_before": rows_before, "rows_after": rows_now},
        )

    return compaction_preserves_rows


def _deletions_materialized(d: DatasetSettings) -> AssetChecksDefinition:
    """``deletions_materialized`` of dataset ``d``."""
    rk = resource_key(d.name)
    key = AssetKey([d.name])

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

    return deletions_materialized


def _appended_recently(d: DatasetSettings, max_hours: float) -> AssetChecksDefinition:
    """``appended_recently`` of dataset ``d`` (freshness, WARN)."""
    rk = resource_key(d.name)
    key = AssetKey([d.name])
    p = d.policy

    @asset_check(asset=key, name="appended_recently", required_resource_keys={rk},
                 automation_condition=freshness_condition(d),
                 description=f"Rows were appended within the last {max_hours:g} hours (any writer; read from "
                             f"the manifests). Evaluated on `{p.freshness_cron}`.")
    def appended_recently(context: AssetCheckExecutionContext) -> AssetCheckResult:
        res: LanceDatasetResource = getattr(context.resources, rk)
        found = last_append(res) if res.exists() else None
        if found is None:
            return AssetCheckResult(passed=False, severity=AssetCheckSeverity.WARN,
                                    metadata={"max_hours": max_hours, "reason": f"no append in {res.uri}"})
        version, ts_ns = found
        hours = (time.time() - ts_ns / 1e9) / 3600
        return AssetCheckResult(
            passed=hours <= max_hours, severity=AssetCheckSeverity.WARN,
            description=f"last append {hours:.1f} h ago (version {version}); allowed {max_hours:g} h",
            metadata={"last_append_version": version, "last_append_at": timestamp(ts_ns),
                      "hours_since_append": MetadataValue.float(round(hours, 3)), "max_hours": max_hours},
        )

    return appended_recently


def _maintenance_versions_empty(d: DatasetSettings) -> AssetChecksDefinition:
    """``maintenance_versions_empty`` of the change feed of ``d``."""
    rk = resource_key(d.name)
    cf_key = AssetKey([change_feed_asset_name(d.name)])

    @asset_check(asset=cf_key, name="maintenance_versions_empty",
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

    return maintenance_versions_empty


def _change_feed_lag(d: DatasetSettings) -> AssetChecksDefinition:
    """``change_feed_lag`` of the change feed of ``d`` (freshness, WARN)."""
    rk = resource_key(d.name)
    cf_key = AssetKey([change_feed_asset_name(d.name)])
    p = d.policy
    max_lag = p.change_feed_max_lag_versions

    @asset_check(asset=cf_key, name="change_feed_lag", required_resource_keys={rk},
                 automation_condition=freshness_condition(d),
                 description=f"The change feed is at most {max_lag} versions behind {d.name}. "
                             f"Evaluated on `{p.freshness_cron}`.")
    def change_feed_lag(context: AssetCheckExecutionContext) -> AssetCheckResult:
        res: LanceDatasetResource = getattr(context.resources, rk)
        latest = res.latest_version() if res.exists() else 0
        done = {int(k) for k in context.instance.get_materialized_partitions(cf_key)}
        newest = max(done) if done else 0
        lag = max(0, (latest or 0) - newest)
        return AssetCheckResult(
            passed=lag <= max_lag, severity=AssetCheckSeverity.WARN,
            description=f"{lag} versions behind (dataset at {latest}, change feed at {newest}); allowed {max_lag}",
            metadata={"latest_version": latest or 0, "newest_partition": newest, "versions_behind": lag,
                      "max_lag_versions": max_lag},
        )

    return change_feed_lag
