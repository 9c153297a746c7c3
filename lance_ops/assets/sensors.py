"""Sensors: one of each for every dataset together, with a per-dataset cursor.

- ``lance_compaction_sensor``: per dataset with a new version, the first action the maintenance
  planner finds due (``lance_ops.orchestration.maintain.decide_maintenance``: compaction or
  deletion materialisation, ``optimize_indices``, cleanup, the orphan sweep) as a run of its job
  (``lance_compact``, ``lance_optimize_indices``, ...) on that dataset's asset, with the plan's
  parameters as run config (run key ``<name>:<op>:v<version>``).  Where several are due the
  compaction goes first; the version it commits is a new version, on which the next tick
  requests the next action (compaction keeps coverage, so an index run is still due).
- ``lance_new_versions_sensor``: a change-feed partition per new version (datasets with a change
  feed) and an observation of versions written outside Dagster.
- ``lance_checks_after_maintenance`` (run status): the dataset's checks after each successful
  rewrite, delete or upsert.
- ``lance_pool_limits`` (running by default): sets each ``lance-<name>`` pool's limit to the
  policy's ``max_concurrent_writes``, so the limits hold with a stock dagster.yaml.

Cursors are JSON objects ``{dataset: last version seen}``; each tick reads manifest metadata only
(a listing of ``_versions/`` and a few manifests).  A dataset that cannot be read is skipped (and
logged) without holding the others back.  The sensors evaluate the datasets whose policy sets
``sensors_enabled``; their default status is RUNNING when at least one does, and when none does
and an operator starts one in the UI, it evaluates every dataset.
"""

import json
from typing import Any

from dagster import (
    AssetCheckKey,
    AssetKey,
    AssetObservation,
    AssetSelection,
    AutomationConditionSensorDefinition,
    DagsterRunStatus,
    DefaultSensorStatus,
    DynamicPartitionsDefinition,
    RunRequest,
    RunStatusSensorContext,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    run_status_sensor,
    sensor,
)

from lance_ops.assets.change_feed import change_feed_asset_name
from lance_ops.assets.configs import Operation
from lance_ops.assets.datasets import GROUP
from lance_ops.assets.metadata import version_metadata
from lance_ops.assets.operations import (
    DATA_VERSION_TAG,
    DATASET_TAG,
    OPERATION_TAG,
    REASON_TAG,
    ensure_pool_limit,
    job_name,
    maintenance_due,
    pool_name,
    resource_key,
)
from lance_ops.assets.resources import LanceDatasetResource
from lance_ops.assets.stats import RUN_ID_PROPERTY, transaction_of
from lance_ops.orchestration.settings import DatasetSettings, Settings

DATASET_CHECKS = ("row_ids_unique", "compaction_preserves_rows", "deletions_materialized", "index_coverage")


def load_cursor(raw: str | None) -> dict[str, int]:
    """A sensor cursor: ``{dataset: version}`` (an old integer cursor means nothing seen)."""
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return {str(k): int(v) for k, v in value.items()} if isinstance(value, dict) else {}


def dump_cursor(cursor: dict[str, int]) -> str:
    return json.dumps(dict(sorted(cursor.items())), separators=(",", ":"))


def watched(settings: Settings) -> list[DatasetSettings]:
    """The datasets the sensors evaluate: those with ``sensors_enabled``, else all."""
    on = [d for d in settings.datasets if d.policy.sensors_enabled]
    return on or list(settings.datasets)


def default_status(settings: Settings) -> DefaultSensorStatus:
    return DefaultSensorStatus.RUNNING if any(d.policy.sensors_enabled for d in settings.datasets) \
        else DefaultSensorStatus.STOPPED


# ``**_resources``: a direct call (``sensor(context)``, as in tests) passes the required
# resources as keyword arguments; the daemon does not.  Both read ``context.resources``.


def build_sensors(settings: Settings, jobs: dict[str, Any], checks_job: Any,
                  versions: dict[str, DynamicPartitionsDefinition]) -> list[SensorDefinition]:
    """The sensors of the code location (their number does not depend on the number of datasets)."""
    status = default_status(settings)
    interval = min(d.policy.sensor_interval_seconds for d in settings.datasets)
    return [
        _compaction_sensor(settings, jobs, status, interval),
        _new_versions_sensor(settings, versions, status, interval),
        _checks_after_maintenance(settings, jobs, checks_job, set(versions), status),
        _pool_limits(settings),
        _automation_sensor(status, interval),
    ]


def _res_of(context: Any, d: DatasetSettings) -> LanceDatasetResource:
    return getattr(context.resources, resource_key(d.name))  # type: ignore[no-any-return]


def _resource_keys(settings: Settings) -> set[str]:
    return {resource_key(d.name) for d in settings.datasets}


def _compaction_sensor(settings: Settings, jobs: dict[str, Any], status: DefaultSensorStatus,
                       interval: int) -> SensorDefinition:
    """``lance_compaction_sensor``: a maintenance run per dataset whose new version crosses its policy."""
    keys = _resource_keys(settings)

    @sensor(
        name="lance_compaction_sensor",
        jobs=[jobs[job_name(o)] for o in (Operation.compact, Operation.materialize_deletions,
                                          Operation.optimize_indices, Operation.cleanup_old_versions,
                                          Operation.remove_orphan_files)],
        required_resource_keys=keys,
        minimum_interval_seconds=interval,
        default_status=status,
        description="Per dataset with a new version: the first action the maintenance planner finds due "
                    "under its policy (compaction or deletion materialisation, index optimisation, cleanup, "
                    "orphan sweep), run with the plan's parameters.",
    )
    def compaction_sensor(context: SensorEvaluationContext, **_resources: Any) -> Any:
        cursor = load_cursor(context.cursor)
        requests, notes = [], []
        for d in watched(settings):
            res = _res_of(context, d)
            try:
                latest = res.latest_version() if res.exists() else None
                if latest is None or latest <= cursor.get(d.name, 0):
                    continue
                wanted = maintenance_due(d, res)
            except Exception as e:  # one unreadable dataset must not stop the others
                context.log.warning(f"{d.name}: skipped ({type(e).__name__}: {e})")
                continue
            cursor[d.name] = latest
            if wanted is None:
                notes.append(f"{d.name} v{latest} within the policy")
                continue
            operation, reasons, run_config = wanted
            requests.append(RunRequest(
                run_key=f"{d.name}:{operation.value}:v{latest}",
                job_name=job_name(operation),
                run_config=run_config,
                asset_selection=[AssetKey([d.name])],
                tags={DATASET_TAG: d.name, "lance_ops/version": str(latest), REASON_TAG: "; ".join(reasons)[:200]},
            ))
        if not requests:
            return SensorResult(skip_reason=SkipReason("; ".join(notes) or "no new version"),
                                cursor=dump_cursor(cursor))
        return SensorResult(run_requests=requests, cursor=dump_cursor(cursor))

    return compaction_sensor


def _new_versions_sensor(settings: Settings, versions: dict[str, DynamicPartitionsDefinition],
                         status: DefaultSensorStatus, interval: int) -> SensorDefinition:
    """``lance_new_versions_sensor``: change-feed partitions and observations of outside writes."""
    keys = _resource_keys(settings)

    @sensor(
        name="lance_new_versions_sensor",
        required_resource_keys=keys,
        minimum_interval_seconds=max(5, min(30, interval // 10)),
        default_status=status,
        description="Per dataset: a change-feed partition per new Lance version, and an observation of versions "
                    "written outside Dagster.",
    )
    def new_versions_sensor(context: SensorEvaluationContext, **_resources: Any) -> Any:
        cursor = load_cursor(context.cursor)
        adds, events = [], []
        for d in watched(settings):
            res = _res_of(context, d)
            try:
                present = res.versions() if res.exists() else []
                new = [v for v in present if v > cursor.get(d.name, 0)]
                if not new:
                    continue
                latest = new[-1]
                table = res.table()
                txn = transaction_of(table, latest)
                event = None
                if txn is None or not txn.properties.get(RUN_ID_PROPERTY):
                    # Written outside Dagster: record what is there now as an observation.
                    md = version_metadata(res.uri, d.name, res.open(latest), table,
                                          small_fragment_rows=d.policy.target_rows_per_fragment)
                    event = AssetObservation(asset_key=d.name, metadata=md,
                                             tags={DATA_VERSION_TAG: str(latest), OPERATION_TAG: "observe"})
                add = None
                if d.name in versions:
                    pdef = versions[d.name]
                    known = set(context.instance.get_dynamic_partitions(pdef.name))
                    to_add = [str(v) for v in new if str(v) not in known]
                    add = pdef.build_add_request(to_add) if to_add else None
            except Exception as e:  # one unreadable dataset must not stop the others
                context.log.warning(f"{d.name}: skipped ({type(e).__name__}: {e})")
                continue
            adds += [add] if add is not None else []
            events += [event] if event is not None else []
            cursor[d.name] = latest
        if not adds and not events:
            return SensorResult(skip_reason=SkipReason("no new version"), cursor=dump_cursor(cursor))
        return SensorResult(dynamic_partitions_requests=adds, asset_events=events, cursor=dump_cursor(cursor))

    return new_versions_sensor


def _checks_after_maintenance(settings: Settings, jobs: dict[str, Any], checks_job: Any, with_feed: set[str],
                              status: DefaultSensorStatus) -> SensorDefinition:
    """``lance_checks_after_maintenance``: the checks of the datasets a successful rewrite touched."""
    monitored = [jobs[job_name(o)] for o in (Operation.compact, Operation.materialize_deletions, Operation.delete,
                                             Operation.upsert, Operation.optimize_indices, Operation.maintain)]

    @run_status_sensor(
        name="lance_checks_after_maintenance",
        run_status=DagsterRunStatus.SUCCESS,
        monitored_jobs=monitored,
        request_job=checks_job,
        default_status=status,
        description="Runs the asset checks of the datasets a successful rewrite, delete or upsert touched.",
    )
    def checks_after_maintenance(context: RunStatusSensorContext) -> RunRequest:
        touched = context.dagster_run.asset_selection
        names = [d.name for d in settings.datasets if touched is None or AssetKey([d.name]) in touched]
        return RunRequest(run_key=f"checks-after-{context.dagster_run.run_id}",
                          asset_check_keys=check_keys(names, with_feed),
                          tags={"lance_ops/after_run": context.dagster_run.run_id})

    return checks_after_maintenance


def _pool_limits(settings: Settings) -> SensorDefinition:
    """``lance_pool_limits``: each dataset's pool limit set to its policy's ``max_concurrent_writes``."""

    @sensor(
        name="lance_pool_limits",
        required_resource_keys=set(),
        minimum_interval_seconds=60,
        default_status=DefaultSensorStatus.RUNNING,
        description="Sets the limit of each dataset's pool (lance-<name>) to its policy's max_concurrent_writes, "
                    "so concurrent writers are limited with a stock dagster.yaml.",
    )
    def pool_limits(context: SensorEvaluationContext) -> SkipReason:
        changed = [f"{pool_name(d.name)}={d.policy.max_concurrent_writes}" for d in settings.datasets
                   if ensure_pool_limit(context.instance, pool_name(d.name), d.policy.max_concurrent_writes)]
        return SkipReason(f"set pool limits: {', '.join(changed)}" if changed else "pool limits as declared")

    return pool_limits


def _automation_sensor(status: DefaultSensorStatus, interval: int) -> SensorDefinition:
    """``lance_automation_sensor``: the automation conditions of the lance assets."""
    return AutomationConditionSensorDefinition(
        "lance_automation_sensor",
        target=AssetSelection.groups(GROUP),
        default_status=status,
        minimum_interval_seconds=max(5, min(30, interval // 10)),
        description="Materialises new change-feed partitions and evaluates the freshness checks "
                    "(the automation conditions of the lance assets).",
    )


def check_keys(names: list[str], with_feed: set[str]) -> list[AssetCheckKey]:
    """The maintenance checks of datasets ``names`` (and of their change feeds)."""
    out = [AssetCheckKey(AssetKey([n]), c) for n in names for c in DATASET_CHECKS]
    out += [AssetCheckKey(AssetKey([change_feed_asset_name(n)]), "maintenance_versions_empty")
            for n in names if n in with_feed]
    return out
