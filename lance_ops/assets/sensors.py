"""Sensors: maintenance on demand, and one change-feed partition per new Lance version.

Both keep the last Lance version they looked at as their cursor, so a tick that finds no new
version does nothing.  Both read manifest metadata only (a listing of ``_versions/`` and a few
manifests), never data files.
"""

from typing import Any

from dagster import (
    AssetObservation,
    DagsterRunStatus,
    DefaultSensorStatus,
    DynamicPartitionsDefinition,
    JobDefinition,
    RunConfig,
    RunRequest,
    RunStatusSensorContext,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    run_status_sensor,
    sensor,
)

from .change_feed import partitions_def_name
from .configs import CompactConfig, MaterializeDeletionsConfig
from .ops import DATA_VERSION_TAG, OPERATION_TAG, op_name, resource_key
from .resources import LanceDatasetResource
from .settings import DatasetSettings
from .stats import RUN_ID_PROPERTY, manifest_stats, transaction_of, version_stats, versions_since_compaction


def maintenance_request(d: DatasetSettings, res: LanceDatasetResource, version: int) -> tuple[str, list[str]] | None:
    """What the policy asks for at ``version``: (``"compact"`` or ``"materialize_deletions"``, reasons), or None."""
    p = d.policy
    ds = res.open(version)
    stats = manifest_stats(ds.manifest, small_fragment_rows=p.target_rows_per_fragment)
    since = versions_since_compaction(res.store(), version, limit=p.max_versions_since_compaction)
    compact: list[str] = []
    if stats["small_fragments"] >= p.min_small_fragments:
        compact.append(f"{stats['small_fragments']} small fragments >= {p.min_small_fragments}")
    if since >= p.max_versions_since_compaction:
        compact.append(f"{since} versions since the last compaction >= {p.max_versions_since_compaction}")
    deletions = []
    if stats["deleted_rows"] and stats["deleted_ratio"] >= p.deleted_ratio_threshold:
        deletions.append(f"deleted ratio {stats['deleted_ratio']:.3f} >= {p.deleted_ratio_threshold}")
    if compact:
        return "compact", compact + deletions
    if deletions:
        return "materialize_deletions", deletions
    return None


# ``**_resources``: a direct call (``sensor(context)``, as in tests) passes the required
# resources as keyword arguments; the daemon does not.  Both read ``context.resources``.


def build_sensors(
    d: DatasetSettings, jobs: dict[str, JobDefinition], versions: DynamicPartitionsDefinition, checks_job: Any
) -> list[SensorDefinition]:
    rk = resource_key(d.name)
    p = d.policy
    status = DefaultSensorStatus.RUNNING if p.sensors_enabled else DefaultSensorStatus.STOPPED
    compact_job, deletions_job = jobs[f"{d.name}_compact"], jobs[f"{d.name}_materialize_deletions"]

    @sensor(
        name=f"{d.name}_compaction_sensor",
        jobs=[compact_job, deletions_job],
        required_resource_keys={rk},
        minimum_interval_seconds=p.sensor_interval_seconds,
        default_status=status,
        description=f"Requests a compaction or deletion materialisation of {d.name} when small fragments, "
                    "the deleted-row ratio or versions since the last compaction cross the policy.",
    )
    def compaction_sensor(context: SensorEvaluationContext, **_resources: Any) -> Any:
        res: LanceDatasetResource = getattr(context.resources, rk)
        latest = res.latest_version()
        if latest is None:
            return SkipReason(f"no dataset at {res.uri} yet")
        seen = int(context.cursor) if context.cursor else 0
        if latest <= seen:
            return SkipReason(f"no new version since {seen}")
        wanted = maintenance_request(d, res, latest)
        if wanted is None:
            return SensorResult(skip_reason=SkipReason(f"version {latest} is within the policy"), cursor=str(latest))
        operation, reasons = wanted
        if operation == "compact":
            op_config: Any = CompactConfig(
                target_rows_per_fragment=p.target_rows_per_fragment,
                max_rows_per_group=p.max_rows_per_group,
                materialize_deletions_threshold=p.deleted_ratio_threshold,
            )
        else:
            op_config = MaterializeDeletionsConfig(threshold=p.deleted_ratio_threshold)
        job_name = f"{d.name}_{operation}"
        request = RunRequest(
            run_key=f"{job_name}-v{latest}",
            job_name=job_name,
            run_config=RunConfig(ops={op_name(d.name, operation): op_config}),
            tags={"lance_ops/version": str(latest), "lance_ops/reason": "; ".join(reasons)[:200]},
        )
        return SensorResult(run_requests=[request], cursor=str(latest))

    @sensor(
        name=f"{d.name}_new_versions_sensor",
        required_resource_keys={rk},
        minimum_interval_seconds=max(30, p.sensor_interval_seconds // 10),
        default_status=status,
        description=f"Adds a {versions.name} partition per new Lance version of {d.name} and observes versions "
                    "written outside Dagster.",
    )
    def new_versions_sensor(context: SensorEvaluationContext, **_resources: Any) -> Any:
        res: LanceDatasetResource = getattr(context.resources, rk)
        present = res.versions() if res.exists() else []
        seen = int(context.cursor) if context.cursor else 0
        new = [v for v in present if v > seen]
        if not new:
            return SkipReason(f"no new version since {seen}")
        known = set(context.instance.get_dynamic_partitions(partitions_def_name(d.name)))
        to_add = [str(v) for v in new if str(v) not in known]
        events = []
        store = res.store()
        latest = new[-1]
        txn = transaction_of(store, latest)
        if txn is None or not txn.properties.get(RUN_ID_PROPERTY):
            # Written outside Dagster: record what is there now as an observation.
            stats = version_stats(res.open(latest), store, small_fragment_rows=p.target_rows_per_fragment)
            events.append(AssetObservation(
                asset_key=d.name, metadata={**stats.as_metadata(), "uri": res.uri},
                tags={DATA_VERSION_TAG: str(latest), OPERATION_TAG: "observe"},
            ))
        return SensorResult(
            dynamic_partitions_requests=[versions.build_add_request(to_add)] if to_add else [],
            asset_events=events,
            cursor=str(latest),
        )

    @run_status_sensor(
        name=f"{d.name}_checks_after_maintenance",
        run_status=DagsterRunStatus.SUCCESS,
        monitored_jobs=[jobs[f"{d.name}_{op}"] for op in ("compact", "materialize_deletions", "delete", "upsert")],
        request_job=checks_job,
        default_status=status,
        description=f"Runs the asset checks of {d.name} after every successful rewrite, delete or upsert.",
    )
    def checks_after_maintenance(context: RunStatusSensorContext) -> RunRequest:
        return RunRequest(run_key=f"checks-after-{context.dagster_run.run_id}",
                          tags={"lance_ops/after_run": context.dagster_run.run_id})

    return [compaction_sensor, new_versions_sensor, checks_after_maintenance]
