"""The Dagster code location: ``defs`` for the datasets in ``lance_ops.yaml``.

Per dataset ``<name>`` (the only things that grow with the number of datasets):

- asset ``<name>``: the dataset, materialisable; each materialisation is a Lance version
  (``data_version``), made by one operation (``operations.py``); pool ``lance-<name>``.
- asset ``<name>_change_feed``: partitioned by version (dynamic partitions ``<name>_versions``),
  materialised automatically for new versions; only for datasets with stable row ids.
- asset checks on both; resource ``lance_<name>`` (LanceDatasetResource).

For all datasets together (a fixed number):

- jobs ``lance_<operation>`` (``jobs.py``), ``lance_checks``, ``lance_write_change_feed``, ``lance_observe``;
- sensors ``lance_compaction_sensor``, ``lance_new_versions_sensor``,
  ``lance_checks_after_maintenance``, ``lance_pool_limits``, ``lance_automation_sensor``, and the
  autopilot (``lance_autopilot_sensor``, STOPPED until turned on, and its job ``lance_autopilot``:
  the planner over the datasets and ``roots:``, one run per action);
- schedules ``lance_append_schedule``, ``lance_nightly_compaction``, ``lance_nightly_cleanup``
  (one more per distinct cron);
- resource ``spark``: SparkResource (in the run worker, the default) or, with
  ``spark.submit`` in lance_ops.yaml, PipesSparkSubmitResource (spark-submit through Pipes).

Every job runs its steps in one process (one Spark session per run).
"""

from typing import Any

from dagster import (
    AssetKey,
    AssetSelection,
    Definitions,
    DynamicPartitionsDefinition,
    in_process_executor,
)

from lance_ops.assets.autopilot import build_autopilot
from lance_ops.assets.change_feed import build_change_feed_asset, change_feed_asset_name, partitions_def_name
from lance_ops.assets.checks import build_checks
from lance_ops.assets.datasets import ChangeFeedPlan, build_dataset_asset, change_feed_plan
from lance_ops.assets.indices import build_index_checks
from lance_ops.assets.jobs import build_jobs
from lance_ops.assets.operations import resource_key
from lance_ops.assets.resources import LanceDatasetResource, PipesSparkSubmitResource, SparkResource
from lance_ops.assets.schedules import build_schedules
from lance_ops.assets.sensors import build_sensors
from lance_ops.orchestration.settings import DatasetSettings, Settings, load_settings


def dataset_resource(d: DatasetSettings, settings: Settings | None = None) -> LanceDatasetResource:
    lineage = settings.openlineage if settings is not None and settings.openlineage.enabled else None
    return LanceDatasetResource(uri=d.uri, storage_options=d.storage_options,
                                storage_options_env=d.storage_options_env, manifest_store=d.manifest_store,
                                openlineage=lineage.model_dump_json() if lineage is not None else "")


def spark_resource(settings: Settings) -> Any:
    """In the run worker (default), or spark-submit through Dagster Pipes when ``spark.submit`` is set."""
    sub = settings.spark.submit
    if sub is None:
        return SparkResource(master=settings.spark.master, conf=settings.spark.merged_conf())
    return PipesSparkSubmitResource(spark_submit=sub.spark_submit, master=sub.master,
                                    conf={**settings.spark.merged_conf(), **sub.conf}, env=dict(sub.env),
                                    python=sub.python)


def _resolvable_options(res: LanceDatasetResource) -> dict[str, str] | None:
    try:
        return res.resolved_storage_options()
    except RuntimeError:
        return None  # a secret is not in this process's environment: decide at run time


PROBE_SECONDS = 10.0


def change_feed_plans(settings: Settings) -> dict[str, ChangeFeedPlan]:
    """Which datasets get a change feed: every dataset's latest manifest is read in parallel, within
    ``PROBE_SECONDS`` in all, so an unreachable store cannot stall loading the code location (a dataset
    not read in time keeps its change feed; a run then checks again and fails typed if needed)."""
    from concurrent.futures import ThreadPoolExecutor, wait

    pool = ThreadPoolExecutor(max_workers=min(16, len(settings.datasets)), thread_name_prefix="lance_probe")
    futures = {d.name: pool.submit(change_feed_plan, d, _resolvable_options(dataset_resource(d)))
               for d in settings.datasets}
    wait(futures.values(), timeout=PROBE_SECONDS)
    pool.shutdown(wait=False, cancel_futures=True)
    out = {}
    for name, f in futures.items():
        out[name] = f.result() if f.done() and f.exception() is None else ChangeFeedPlan(True)
    return out


def build_definitions(settings: Settings) -> Definitions:
    assets: list[Any] = []
    checks: list[Any] = []
    versions: dict[str, DynamicPartitionsDefinition] = {}
    resources: dict[str, Any] = {"spark": spark_resource(settings)}
    check_targets = []
    plans = change_feed_plans(settings)
    for d in settings.datasets:
        res = dataset_resource(d, settings)
        resources[resource_key(d.name)] = res
        plan = plans[d.name]
        assets.append(build_dataset_asset(d, plan))
        check_targets.append(AssetKey([d.name]))
        if plan.enabled:
            versions[d.name] = DynamicPartitionsDefinition(name=partitions_def_name(d.name))
            assets.append(build_change_feed_asset(d, versions[d.name], resource_key(d.name)))
            check_targets.append(AssetKey([change_feed_asset_name(d.name)]))
        checks += build_checks(d, change_feed=plan.enabled) + build_index_checks(d, resource_key(d.name))
    jobs = build_jobs(settings, AssetSelection.checks_for_assets(*check_targets))
    sensors = build_sensors(settings, jobs, jobs["lance_checks"], versions)
    schedules = build_schedules(settings, jobs)
    autopilot_job, autopilot_sensor = build_autopilot(settings)  # STOPPED: nothing runs until it is turned on
    return Definitions(
        assets=assets,
        asset_checks=checks,
        jobs=[*jobs.values(), autopilot_job],
        sensors=[*sensors, autopilot_sensor],
        schedules=schedules,
        resources=resources,
        executor=in_process_executor,
    )


defs = build_definitions(load_settings())
