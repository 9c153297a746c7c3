"""What the dataset asset does when it is materialised: one operation, chosen by the job.

The job ``lance_<operation>`` tags its runs ``lance_ops/operation=<operation>``; the asset reads
that operation's config group (defaults: the dataset's policy) and runs it through the Spark
resource (in the run worker, or spark-submit through Pipes) or, for cleanup, in process.
Every version the run commits is a materialisation with ``data_version`` = the Lance version
(found by the run id stamped on the commits); a run that commits nothing records an
observation.  Bad configuration fails before anything is written, with a DatasetConfigError
naming the dataset, the field and the fix.
"""

import json
import time
from collections.abc import Iterator
from typing import Any

from dagster import (
    AssetExecutionContext,
    AssetMaterialization,
    AssetObservation,
    DagsterInstance,
    DataVersion,
    MaterializeResult,
)

from lance_ops.assets.configs import Operation
from lance_ops.assets.metadata import JOB_KEY, REWRITE_KEY, job_metadata, version_metadata
from lance_ops.assets.resources import LanceDatasetResource
from lance_ops.assets.stats import rewrite_fingerprints, transaction_of, versions_by
from lance_ops.format.errors import SchemaError, UnsupportedFeatureError
from lance_ops.orchestration import (
    DatasetConfigError,
    OperationResult,
    Task,
    dagster_stamp,
    operation,
    resolve_params,
)
from lance_ops.orchestration.maintain import PlannedStep, decide_maintenance, planned_steps
from lance_ops.orchestration.operations import params_to_json
from lance_ops.orchestration.settings import DatasetSettings
from lance_ops.orchestration.stamps import RUN_ID_PROPERTY

DATA_VERSION_TAG = "dagster/data_version"
OPERATION_TAG = "lance_ops/operation"
DATASET_TAG = "lance_ops/dataset"
REASON_TAG = "lance_ops/reason"

__all__ = ["JOB_KEY", "RUN_ID_PROPERTY", "run_dataset_operation"]


def resource_key(name: str) -> str:
    return f"lance_{name}"


def pool_name(name: str) -> str:
    """The Dagster pool of the runs that write dataset ``name``."""
    return f"lance-{name}"


def job_name(operation: Operation | str) -> str:
    return f"lance_{Operation(operation).value}"


def ensure_pool_limit(instance: DagsterInstance, pool: str, limit: int) -> bool:
    """Set ``pool``'s limit on the instance to ``limit`` (the policy is the source of truth for the
    ``lance-*`` pools, so no dagster.yaml setting is needed); True when it changed."""
    storage = instance.event_log_storage
    if not storage.supports_global_concurrency_limits:
        return False
    current = {p.name: p.limit for p in storage.get_pool_limits()}
    if current.get(pool) == limit:
        return False
    storage.set_concurrency_slots(pool, limit)
    return True


def maintenance_due(d: DatasetSettings, res: LanceDatasetResource) -> tuple[Operation, list[str], dict[str, Any]] | None:
    """The first action the planner finds due now (``lance_ops.orchestration.maintain``): its
    operation, reasons, and the run config of the dataset's asset that runs it with the plan's
    parameters; or None."""
    actions = decide_maintenance(res.table(), d.policy)
    if not actions:
        return None
    a = actions[0]
    params = params_to_json(resolve_params(a.operation, d, dict(a.parameters)))
    return Operation(a.operation), list(a.reasons), {"ops": {d.name: {"config": {a.operation: params}}}}


def resolve_operation(context: AssetExecutionContext, d: DatasetSettings, config: Any) -> Operation:
    """The job's operation (run tag), unless the config names one; they must agree."""
    tag = context.run.tags.get(OPERATION_TAG)
    chosen: Operation | None = config.operation
    from_job = Operation(tag) if tag else None
    if chosen is not None and from_job is not None and from_job is not Operation.maintain and chosen is not from_job:
        raise DatasetConfigError(
            d.name, "operation", f"job {context.job_name} runs {from_job.value}, the config asks for {chosen.value}",
            f"leave `operation` empty in {context.job_name}, or launch {job_name(chosen)}",
        )
    return chosen or from_job or Operation.maintain


def task_for(context: Any, d: DatasetSettings, res: LanceDatasetResource, name: str, params: Any,
             uri: str | None = None, reasons: tuple[str, ...] = ()) -> Task:
    """The run's task: the dataset (or ``uri``, one of its branches), the parameters and the
    run's stamp (``txnAppId`` ``dagster/<root run id>/<dataset>/<operation>`` for a single-commit
    operation, so a retried step or a re-executed run commits at most once)."""
    root = getattr(context.run, "root_run_id", None) or context.run_id
    stamp = dagster_stamp(context.run_id, context.job_name, d.name, root)
    table = res.table() if uri is None else res.table().with_uri(uri)
    props = stamp.commit_properties(name, idempotent=operation(name).idempotent, reasons=reasons)
    return Task(name, table, params, props, d.name)


def run_spark(context: Any, d: DatasetSettings, res: LanceDatasetResource, spark: Any, name: str,
              params: Any, uri: str | None = None, reasons: tuple[str, ...] = ()) -> OperationResult:
    """Run a Spark operation through ``spark`` (either Spark resource) on ``res`` (or ``uri``);
    ``params`` is the registry's parameter object or a mapping of overrides over the dataset's
    settings.  A SchemaError or UnsupportedFeatureError of the job becomes a DatasetConfigError
    naming the operation's field (the typed cause chained)."""
    if not hasattr(params, "__dataclass_fields__"):
        params = resolve_params(name, d, params)
    return run_spark_task(context, d, res, spark, task_for(context, d, res, name, params, uri, reasons))


def run_spark_task(context: Any, d: DatasetSettings, res: LanceDatasetResource, spark: Any,
                   task: Task) -> OperationResult:
    """Run ``task`` (built by :func:`task_for`) through ``spark``; see :func:`run_spark`."""
    try:
        return lineage_run(context, res, task, lambda: spark.run_task(context, task))
    except (SchemaError, UnsupportedFeatureError) as e:
        spec = task.spec
        raise DatasetConfigError(d.name, spec.error_field, str(e), spec.fix) from e


def lineage_run(context: Any, res: LanceDatasetResource, task: Task, run: Any) -> OperationResult:
    """``run()`` with OpenLineage events when the dataset's settings turn them on (job
    ``<Dagster job>.<dataset>.<operation>``; ``lance_ops.orchestration.lineage``)."""
    settings = res.lineage()
    if settings is None:
        return run()  # type: ignore[no-any-return]
    from lance_ops.orchestration.lineage import run_with_lineage

    return run_with_lineage(settings, task, f"{context.job_name}.{task.dataset}.{task.operation}", run)


def _committed(res: LanceDatasetResource, run_id: str, before: int | None, result_version: int | None) -> list[int]:
    table = res.table()
    versions = versions_by(table, run_id, before or 0)
    if versions or result_version is None or result_version <= (before or 0):
        return versions
    # The job could not stamp its commits: its result version, and the ReserveFragments a
    # compaction commits just before its Rewrite.
    out = [result_version]
    prev = transaction_of(table, result_version - 1) if result_version - 1 > (before or 0) else None
    rewrite = transaction_of(table, result_version)
    if prev is not None and rewrite is not None and rewrite.operation.name == "rewrite" \
            and prev.operation.name == "reserve_fragments":
        out.insert(0, result_version - 1)
    return out


def rewrite_evidence(res: LanceDatasetResource, version: int | None) -> dict[str, Any]:
    """Fingerprints of the rows a Rewrite moved, before (its old fragments at R-1) and after (its
    new fragments at R), for the ``compaction_preserves_rows`` check (one JSON entry)."""
    if version is None:
        return {}
    table = res.table()
    txn = transaction_of(table, version)
    if txn is None or txn.operation.name != "rewrite":
        return {}
    fp = rewrite_fingerprints(res.open(version), table)
    return {REWRITE_KEY: {"version": version, "fingerprint_before": fp.before, "fingerprint_after": fp.after,
                          "rows_moved": fp.rows_before, "rows_before": res.open(version - 1).count_rows()}}


def version_events(context: AssetExecutionContext, d: DatasetSettings, res: LanceDatasetResource,
                   versions: list[int], operation: str, extra: dict[str, Any], *, final: bool = True) -> Iterator[Any]:
    """One materialisation per committed version; the last is the step's MaterializeResult with
    ``extra`` (``final=False``: an AssetMaterialization too, with ``extra``)."""
    table = res.table()
    for v in versions[:-1]:
        md = version_metadata(res.uri, d.name, res.open(v), table, small_fragment_rows=d.policy.target_rows_per_fragment)
        yield AssetMaterialization(asset_key=d.name, metadata=md,
                                   tags={DATA_VERSION_TAG: str(v), OPERATION_TAG: operation})
    last = versions[-1]
    md = version_metadata(res.uri, d.name, res.open(last), table, small_fragment_rows=d.policy.target_rows_per_fragment)
    if not final:
        yield AssetMaterialization(asset_key=d.name, metadata={**md, **extra},
                                   tags={DATA_VERSION_TAG: str(last), OPERATION_TAG: operation})
        return
    yield MaterializeResult(metadata={**md, **extra}, data_version=DataVersion(str(last)),
                            tags={OPERATION_TAG: operation})


def observation(d: DatasetSettings, res: LanceDatasetResource, operation: str, extra: dict[str, Any]) -> AssetObservation:
    """The latest version as an observation (a run that committed nothing, a dry run, a cleanup)."""
    latest = res.latest_version()
    assert latest is not None
    md = version_metadata(res.uri, d.name, res.open(latest), res.table(),
                          small_fragment_rows=d.policy.target_rows_per_fragment)
    return AssetObservation(asset_key=d.name, metadata={**md, **extra},
                            tags={DATA_VERSION_TAG: str(latest), OPERATION_TAG: operation})


def run_dataset_operation(context: AssetExecutionContext, d: DatasetSettings, res: LanceDatasetResource,
                          spark: Any, config: Any) -> Iterator[Any]:
    """The body of the dataset asset (see the module docstring)."""
    op = resolve_operation(context, d, config)
    ensure_pool_limit(context.instance, pool_name(d.name), d.policy.max_concurrent_writes)
    if op is Operation.maintain:
        yield from _maintain(context, d, res, spark)
    else:
        params = resolve_params(op.value, d, getattr(config, op.value).model_dump(mode="json"))
        yield from _run_operation(context, d, res, spark, op.value, params, ())


def _maintain(context: AssetExecutionContext, d: DatasetSettings, res: LanceDatasetResource,
              spark: Any) -> Iterator[Any]:
    """What the planner finds the dataset needs (``lance_ops.orchestration.maintain.planned_steps``):
    each step with the plan's parameters, planned again after the previous one ran; every version
    a materialisation."""
    step: PlannedStep | None = None
    for step in planned_steps(res.table(), d):
        context.log.info(f"{d.name}: the planner asks for {step.operation} ({'; '.join(step.reasons)})")
        yield from _run_operation(context, d, res, spark, step.operation, step.params, step.reasons, final=False)
    if step is None:
        latest = res.latest_version()
        context.log.info(f"{d.name}: version {latest} needs nothing (the planner's plan is empty)")
        if latest is not None:
            yield observation(d, res, "maintain", job_metadata({"operation": "maintain", "version": None}))


def _run_operation(context: AssetExecutionContext, d: DatasetSettings, res: LanceDatasetResource, spark: Any,
                   name: str, params: Any, reasons: tuple[str, ...], *, final: bool = True) -> Iterator[Any]:
    """One operation; ``final=False``: every version it commits as an AssetMaterialization (another
    operation of the same step follows and ends it)."""
    task = task_for(context, d, res, name, params, reasons=reasons)
    task.validate()
    before = res.latest_version()
    t0 = time.perf_counter()
    if not task.spec.spark:  # in process: cleanup and the orphan sweep commit nothing, a restore one version
        result = lineage_run(context, res, task, task.run).with_reasons(reasons).to_dict()
        context.log.info(f"{name} {d.name}: {json.dumps(result, default=str)}")
        if result.get("version") is None:
            yield observation(d, res, name, job_metadata(result))
            return
    else:
        result = run_spark_task(context, d, res, spark, task).with_reasons(reasons).to_dict()
        context.log.info(f"{name} {d.name} ({spark.describe()}): {json.dumps(result, default=str)}")
    result.setdefault("seconds", round(time.perf_counter() - t0, 3))
    if getattr(params, "dry_run", False):
        assert before is not None
        yield observation(d, res, f"{name}.dry_run", job_metadata(result))
        return
    versions = _committed(res, context.run_id, before, result.get("version"))
    if not versions:
        if before is not None:
            yield observation(d, res, name, job_metadata(result))
        return
    reported = result.get("pipes_data_version")
    if reported is not None and str(reported) != str(versions[-1]):
        raise RuntimeError(f"{d.name}: the spark-submit driver reported version {reported}, "
                           f"the dataset's newest version by this run is {versions[-1]}")
    extra = {**job_metadata(result)}
    if name in ("compact", "materialize_deletions"):
        extra.update(rewrite_evidence(res, result.get("version")))
    yield from version_events(context, d, res, versions, name, extra, final=final)
