"""Run a dataset job in this process, as the launchpad would (``lance-ops run``, ``make demo``, tests).

``execute(defs, "events", "compact", CompactConfig(...), instance=...)`` runs ``lance_compact``
with the asset selection ``events`` and, when given, the parameters of the compact group
(unset groups keep the dataset's policy defaults).
"""

from typing import Any

from dagster import AssetKey, Config, DagsterInstance, Definitions, ExecuteInProcessResult, RunConfig

from lance_ops.assets.configs import Operation
from lance_ops.assets.jobs import CHECKS_JOB, OBSERVE_JOB, WRITE_CHANGE_FEED_JOB
from lance_ops.assets.operations import job_name
from lance_ops.assets.sensors import check_keys

OP_JOBS = {"write_change_feed": (WRITE_CHANGE_FEED_JOB, "write_change_feed"), "observe": (OBSERVE_JOB, "observe")}


def _as_dict(params: Any) -> dict[str, Any]:
    """The fields set explicitly (the others keep the dataset's policy defaults)."""
    if params is None:
        return {}
    if isinstance(params, Config):
        return params.model_dump(mode="json", exclude_unset=True)
    return dict(params)


def run_config_for(dataset: str, operation: str, params: Any = None) -> dict[str, Any]:
    """The run config of ``operation`` on ``dataset`` with ``params`` (a Config of the operation, or a dict)."""
    if operation in OP_JOBS:
        _, op = OP_JOBS[operation]
        return {"ops": {op: {"config": {**_as_dict(params), "dataset": dataset}}}}
    op = Operation(operation)
    values = _as_dict(params)
    if not values:
        return {}
    return {"ops": {dataset: {"config": {op.value: values}}}}


def execute(defs: Definitions, dataset: str, operation: str, params: Any = None, *,
            instance: DagsterInstance, run_config: Any = None, tags: dict[str, str] | None = None,
            log_level: str = "WARNING", partition_key: str | None = None) -> ExecuteInProcessResult:
    """Run ``operation`` (``append``, ``compact``, ..., ``checks``, ``write_change_feed``, ``observe``,
    ``change_feed`` = materialise change-feed partitions) on ``dataset`` in this process."""
    if run_config is not None:
        rc = run_config.to_config_dict() if isinstance(run_config, RunConfig) else dict(run_config)
    else:
        rc = run_config_for(dataset, operation, params) if operation not in ("checks", "change_feed") else {}
    rc["loggers"] = {"console": {"config": {"log_level": log_level}}}
    if operation == "checks":
        from lance_ops.assets.change_feed import change_feed_asset_name

        names = {k.to_user_string() for k in defs.get_repository_def().asset_graph.get_all_asset_keys()}
        with_feed = {dataset} if change_feed_asset_name(dataset) in names else set()
        job = defs.resolve_job_def(CHECKS_JOB).get_subset(asset_check_selection=set(check_keys([dataset], with_feed)))
        return job.execute_in_process(run_config=rc, instance=instance, tags=tags, raise_on_error=False)
    if operation == "change_feed":
        from lance_ops.assets.change_feed import change_feed_asset_name

        key = AssetKey([change_feed_asset_name(dataset)])
        job = defs.resolve_implicit_job_def_def_for_assets([key])
        assert job is not None, f"{dataset} has no change feed asset"
        own_checks = {k for k in defs.get_repository_def().asset_graph.asset_check_keys if k.asset_key == key}
        job = job.get_subset(asset_selection={key}, asset_check_selection=own_checks)
        return job.execute_in_process(run_config=rc, instance=instance, tags=tags, raise_on_error=False,
                                      partition_key=partition_key)
    if operation in OP_JOBS:
        job = defs.resolve_job_def(OP_JOBS[operation][0])
        return job.execute_in_process(run_config=rc, instance=instance, tags=tags, raise_on_error=False)
    job = defs.resolve_job_def(job_name(operation))
    return job.execute_in_process(run_config=rc, instance=instance, tags=tags, raise_on_error=False,
                                  asset_selection=[AssetKey([dataset])])
