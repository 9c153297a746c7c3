"""The Dagster code location: ``defs`` for the datasets in ``lance_ops.yaml``.

Per dataset ``<name>``:

- asset ``<name>``: the dataset; each materialisation is a Lance version (``data_version``),
  reported by the jobs below; writers outside Dagster appear as observations.
- asset ``<name>_change_feed``: partitioned by version (dynamic partitions ``<name>_versions``).
- jobs ``<name>_{append,delete,upsert,materialize_deletions,compact,write_change_feed,
  cleanup_old_versions,observe}`` (op jobs with a typed Config; the op of ``<name>_<operation>``
  is ``<operation>_<name>``), ``<name>_checks`` and ``<name>_change_feed_partitions``.
- sensors ``<name>_compaction_sensor``, ``<name>_new_versions_sensor``,
  ``<name>_checks_after_maintenance`` (run status: checks after each rewrite/delete/upsert); schedules
  ``<name>_append_schedule``, ``<name>_nightly_compaction``, ``<name>_nightly_cleanup``.

Resources: ``lance_<name>`` (LanceDatasetResource) and ``spark`` (SparkResource).  Every job
runs its steps in one process (one Spark session per run).
"""

from dagster import (
    AssetKey,
    AssetSelection,
    AssetSpec,
    Definitions,
    DynamicPartitionsDefinition,
    define_asset_job,
    in_process_executor,
)

from .change_feed import build_change_feed_asset, change_feed_asset_name, partitions_def_name
from .checks import build_checks
from .ops import build_jobs, resource_key
from .resources import LanceDatasetResource, SparkResource
from .schedules import build_schedules
from .sensors import build_sensors
from .settings import DatasetSettings, Settings, load_settings


def dataset_spec(d: DatasetSettings) -> AssetSpec:
    return AssetSpec(
        key=AssetKey([d.name]),
        group_name="lance",
        kinds={"lance"},
        description=d.description or f"Lance dataset at {d.uri}; each materialisation is a version.",
        metadata={"uri": d.uri},
    )


def dataset_resource(d: DatasetSettings) -> LanceDatasetResource:
    return LanceDatasetResource(uri=d.uri, storage_options=d.storage_options,
                                storage_options_env=d.storage_options_env)


def build_definitions(settings: Settings) -> Definitions:
    assets: list = []
    checks: list = []
    jobs: list = []
    sensors: list = []
    schedules: list = []
    resources: dict = {"spark": SparkResource(master=settings.spark.master, conf=settings.spark.merged_conf())}
    for d in settings.datasets:
        versions = DynamicPartitionsDefinition(name=partitions_def_name(d.name))
        change_feed = build_change_feed_asset(d, versions)
        assets += [dataset_spec(d), change_feed]
        checks += build_checks(d)
        op_jobs = build_jobs(d)
        jobs += list(op_jobs.values())
        checks_job = define_asset_job(
            f"{d.name}_checks",
            selection=AssetSelection.checks_for_assets(AssetKey([d.name]), AssetKey([change_feed_asset_name(d.name)])),
            description=f"Run the asset checks of {d.name} and its change feed.",
        )
        jobs += [
            checks_job,
            define_asset_job(
                f"{d.name}_change_feed_partitions",
                selection=AssetSelection.assets(AssetKey([change_feed_asset_name(d.name)])),
                description=f"Materialise change feed partitions of {d.name} (a range runs as one run).",
            ),
        ]
        sensors += build_sensors(d, op_jobs, versions, checks_job)
        schedules += build_schedules(d, op_jobs)
        resources[resource_key(d.name)] = dataset_resource(d)
    return Definitions(
        assets=assets,
        asset_checks=checks,
        jobs=jobs,
        sensors=sensors,
        schedules=schedules,
        resources=resources,
        executor=in_process_executor,
    )


defs = build_definitions(load_settings())
