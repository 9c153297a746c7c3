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
from datetime import timedelta
from typing import Any

from dagster import (
    AssetExecutionContext,
    AssetMaterialization,
    AssetObservation,
    DagsterInstance,
    DataVersion,
    MaterializeResult,
)

import lance_ops.format as lf
from lance_ops.assets.configs import Operation
from lance_ops.assets.errors import DatasetConfigError
from lance_ops.assets.metadata import JOB_KEY, REWRITE_KEY, job_metadata, version_metadata
from lance_ops.assets.resources import LanceDatasetResource
from lance_ops.assets.settings import DatasetSettings
from lance_ops.assets.stats import (
    JOB_PROPERTY,
    OPERATION_PROPERTY,
    RUN_ID_PROPERTY,
    rewrite_fingerprints,
    transaction_of,
    versions_by,
)
from lance_ops.format.distributed import with_idempotency
from lance_ops.format.errors import SchemaError, SQLParseError, UnsupportedFeatureError
from lance_ops.policy import maintenance_request as policy_request

DATA_VERSION_TAG = "dagster/data_version"
OPERATION_TAG = "lance_ops/operation"
DATASET_TAG = "lance_ops/dataset"
REASON_TAG = "lance_ops/reason"


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


def maintenance_request(d: DatasetSettings, res: LanceDatasetResource, version: int) -> tuple[Operation, list[str]] | None:
    """What the policy asks for at ``version``: (compact or materialize_deletions, reasons), or None."""
    wanted = policy_request(res.open(version).manifest, res.store(), d.policy)
    return None if wanted is None else (Operation(wanted.operation), list(wanted.reasons))


def index_request(d: DatasetSettings, res: LanceDatasetResource, version: int) -> tuple[Operation, list[str]] | None:
    """``optimize_indices`` when an index lance_ops extends covers less than
    ``policy.min_index_coverage`` of the live rows at ``version`` (0 turns it off), with the reasons."""
    threshold = d.policy.min_index_coverage
    if threshold <= 0:
        return None
    ds = res.open(version)
    extendable = set(lf.optimizable_index_names(ds.manifest))
    if not extendable:
        return None
    low = [x for x in ds.describe_indices() if x.name in extendable and x.coverage < threshold]
    if not low:
        return None
    return Operation.optimize_indices, [f"index {x.name} covers {x.coverage:.1%} < {threshold:.0%} "
                                        f"({x.num_rows_unindexed} rows unindexed)" for x in low]


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


def _params(config: Any, operation: Operation) -> dict[str, Any]:
    group = getattr(config, operation.value)
    out = group.model_dump(mode="json")
    return out


def _task(context: AssetExecutionContext, d: DatasetSettings, res: LanceDatasetResource, operation: str,
          params: dict[str, Any], uri: str | None = None) -> dict[str, Any]:
    return {
        "operation": operation,
        "uri": uri or res.uri,
        "storage_options": dict(res.storage_options),
        "storage_options_env": dict(res.storage_options_env),
        "manifest_store": res.manifest_store,
        "params": params,
        "transaction_properties": _commit_properties(context, d, operation),
    }


#: operations that commit once: their commits carry an idempotency key
IDEMPOTENT_OPERATIONS = ("append", "delete", "upsert", "optimize_indices")


def _commit_properties(context: AssetExecutionContext, d: DatasetSettings, operation: str) -> dict[str, str]:
    """The run's commit stamp; for a single-commit operation also Delta's ``txnAppId``
    (``dagster/<root run id>/<dataset>/<operation>``), so a retry of the step or a re-execution
    of the run after an ambiguous failure commits at most once."""
    props = {RUN_ID_PROPERTY: context.run_id, JOB_PROPERTY: context.job_name, OPERATION_PROPERTY: operation}
    if operation not in IDEMPOTENT_OPERATIONS:
        return props
    root = getattr(context.run, "root_run_id", None) or context.run_id
    return with_idempotency(props, f"dagster/{root}/{d.name}/{operation}", 0)


def _source_params(d: DatasetSettings, params: dict[str, Any]) -> dict[str, Any]:
    out = dict(params)
    out["format"] = params.get("format") or d.source.format
    out["path"] = params.get("path") or d.source.path
    out["rows"] = params.get("rows") if params.get("rows") is not None else d.source.rows
    out["options"] = dict(d.source.options)
    return out


def check_config(d: DatasetSettings, res: LanceDatasetResource, operation: Operation, params: dict[str, Any]) -> None:
    """Fail before any work with a DatasetConfigError for what can be seen from the config and the manifest."""
    if operation is Operation.append:
        return  # the first append creates the dataset; the source schema is checked by the Spark task
    if not res.exists():
        raise DatasetConfigError(
            d.name, "uri", f"no Lance dataset at {res.uri} to {operation.value}",
            "run lance_append first (it creates the dataset), or fix `uri` in lance_ops.yaml",
        )
    if operation is Operation.delete and not (params.get("where") or "").strip():
        raise DatasetConfigError(
            d.name, "delete.where", "lance_delete needs a predicate",
            f"set ops.{d.name}.config.delete.where, e.g. \"id < 100\" (columns: {res.open().schema.names})",
        )
    if operation is Operation.delete:
        check_predicate(d, res, "delete.where", str(params["where"]))
    if operation is Operation.optimize_indices and params.get("index_names"):
        known = sorted(lf.optimizable_index_names(res.open().manifest))
        unknown = [n for n in params["index_names"] if n not in known]
        if unknown:
            raise DatasetConfigError(
                d.name, "optimize_indices.index_names", f"no index {unknown} that lance_ops extends",
                f"name indices from {known} (BTREE, BITMAP, LABEL_LIST, ZONEMAP, IVF_FLAT, IVF_PQ, INVERTED), "
                "or leave it empty",
            )
    if operation is Operation.upsert:
        columns = res.open().schema.names
        missing = [k for k in params.get("on") or [] if k not in columns]
        if missing or not params.get("on"):
            raise DatasetConfigError(
                d.name, "upsert.on", f"key column(s) {missing or '[]'} are not columns of the dataset",
                f"use key columns from {columns}",
            )


def check_predicate(d: DatasetSettings, res: LanceDatasetResource, field: str, where: str) -> None:
    """Validate a config's SQL predicate as the format API does (``lance_ops.format.resolve_filter``,
    pylance's dialect), before Spark starts: a bad one is a DatasetConfigError naming the field,
    with the typed SQL error (position, unknown column) chained."""
    try:
        lf.resolve_filter(res.open().lance_schema, where, f"{field} predicate")
    except SQLParseError as e:
        raise DatasetConfigError(d.name, field, str(e), "write the predicate with the dataset's columns "
                                 "in pylance's SQL (e.g. \"id < 100 AND name LIKE 'a%'\")") from e


_FIELDS = {"append": "append.path", "upsert": "upsert.path", "delete": "delete.where",
           "optimize_indices": "optimize_indices.index_names", "write_change_feed": "change_feed"}
_FIXES = {
    "append": "point append.path/append.format (or source: in lance_ops.yaml) at data with the dataset's columns",
    "upsert": "point upsert.path/upsert.format at data with the dataset's columns",
    "delete": "write the predicate with the dataset's columns",
    "optimize_indices": "name indices of a kind lance_ops extends (BTREE, BITMAP, LABEL_LIST, ZONEMAP, IVF_FLAT, "
                        "IVF_PQ, INVERTED), or leave index_names empty",
    "write_change_feed": "recreate the dataset with enable_stable_row_ids=True, or set change_feed.enabled: false",
}


def run_spark(context: AssetExecutionContext, d: DatasetSettings, res: LanceDatasetResource, spark: Any,
              operation: str, params: dict[str, Any], uri: str | None = None) -> dict[str, Any]:
    """Run a Spark operation through ``spark`` (either Spark resource) on ``res`` (or ``uri``, one of
    its branches); lance_ops config errors become DatasetConfigError (the typed cause is chained)."""
    task = _task(context, d, res, operation, params, uri)
    try:
        return spark.run_task(context, task)  # type: ignore[no-any-return]
    except (SchemaError, UnsupportedFeatureError) as e:
        field = _FIELDS.get(operation, operation)
        if isinstance(e, SchemaError) and "key column" in str(e):
            field = "upsert.on"
        raise DatasetConfigError(d.name, field, str(e), _FIXES.get(operation, "fix the run config")) from e


def _committed(store: Any, run_id: str, before: int | None, result_version: int | None) -> list[int]:
    versions = versions_by(store, run_id, before or 0)
    if versions or result_version is None or result_version <= (before or 0):
        return versions
    # The job could not stamp its commits: its result version, and the ReserveFragments a
    # compaction commits just before its Rewrite.
    out = [result_version]
    prev = transaction_of(store, result_version - 1) if result_version - 1 > (before or 0) else None
    rewrite = transaction_of(store, result_version)
    if prev is not None and rewrite is not None and rewrite.operation.name == "rewrite" \
            and prev.operation.name == "reserve_fragments":
        out.insert(0, result_version - 1)
    return out


def rewrite_evidence(res: LanceDatasetResource, version: int | None) -> dict[str, Any]:
    """Fingerprints of the rows a Rewrite moved, before (its old fragments at R-1) and after (its
    new fragments at R), for the ``compaction_preserves_rows`` check (one JSON entry)."""
    if version is None:
        return {}
    store = res.store()
    txn = transaction_of(store, version)
    if txn is None or txn.operation.name != "rewrite":
        return {}
    fp = rewrite_fingerprints(res.open(version), store)
    return {REWRITE_KEY: {"version": version, "fingerprint_before": fp.before, "fingerprint_after": fp.after,
                          "rows_moved": fp.rows_before, "rows_before": res.open(version - 1).count_rows()}}


def version_events(context: AssetExecutionContext, d: DatasetSettings, res: LanceDatasetResource,
                   versions: list[int], operation: str, extra: dict[str, Any], *, final: bool = True) -> Iterator[Any]:
    """One materialisation per committed version; the last is the step's MaterializeResult with
    ``extra`` (``final=False``: an AssetMaterialization too, with ``extra``)."""
    store = res.store()
    for v in versions[:-1]:
        md = version_metadata(res.uri, d.name, res.open(v), store, small_fragment_rows=d.policy.target_rows_per_fragment)
        yield AssetMaterialization(asset_key=d.name, metadata=md,
                                   tags={DATA_VERSION_TAG: str(v), OPERATION_TAG: operation})
    last = versions[-1]
    md = version_metadata(res.uri, d.name, res.open(last), store, small_fragment_rows=d.policy.target_rows_per_fragment)
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
    md = version_metadata(res.uri, d.name, res.open(latest), res.store(),
                          small_fragment_rows=d.policy.target_rows_per_fragment)
    return AssetObservation(asset_key=d.name, metadata={**md, **extra},
                            tags={DATA_VERSION_TAG: str(latest), OPERATION_TAG: operation})


def run_dataset_operation(context: AssetExecutionContext, d: DatasetSettings, res: LanceDatasetResource,
                          spark: Any, config: Any) -> Iterator[Any]:
    """The body of the dataset asset (see the module docstring)."""
    operation = resolve_operation(context, d, config)
    ensure_pool_limit(context.instance, pool_name(d.name), d.policy.max_concurrent_writes)
    if operation is Operation.maintain:
        yield from _maintain(context, d, res, spark, config)
    else:
        yield from _run_operation(context, d, res, spark, config, operation, [])


def _maintain(context: AssetExecutionContext, d: DatasetSettings, res: LanceDatasetResource, spark: Any,
              config: Any) -> Iterator[Any]:
    """What the policy asks for now: a compaction or deletion materialisation, then (on the
    version it made) ``optimize_indices`` when an index's coverage is below the policy."""
    latest = res.latest_version()
    wanted = maintenance_request(d, res, latest) if latest is not None else None
    if wanted is not None:
        operation, reasons = wanted
        context.log.info(f"{d.name}: the policy asks for {operation.value} ({'; '.join(reasons)})")
        yield from _run_operation(context, d, res, spark, config, operation, reasons, final=False)
        latest = res.latest_version()
    indices = index_request(d, res, latest) if latest is not None else None
    if indices is not None:
        operation, reasons = indices
        context.log.info(f"{d.name}: the policy asks for {operation.value} ({'; '.join(reasons)})")
        yield from _run_operation(context, d, res, spark, config, operation, reasons)
    elif wanted is None:
        context.log.info(f"{d.name}: version {latest} is within the policy; nothing to do")
        if latest is not None:
            yield observation(d, res, "maintain", job_metadata({"operation": "maintain", "version": None}))


def _run_operation(context: AssetExecutionContext, d: DatasetSettings, res: LanceDatasetResource, spark: Any,
                   config: Any, operation: Operation, reasons: list[str], *, final: bool = True) -> Iterator[Any]:
    """One operation; ``final=False``: every version it commits as an AssetMaterialization (another
    operation of the same step follows and ends it)."""
    params = _params(config, operation)
    check_config(d, res, operation, params)
    before = res.latest_version()
    t0 = time.perf_counter()
    if operation is Operation.cleanup_old_versions:
        yield from _cleanup(context, d, res, params)
        return
    if operation in (Operation.append, Operation.upsert):
        params = _source_params(d, params)
    result = run_spark(context, d, res, spark, operation.value, params)
    result.setdefault("seconds", round(time.perf_counter() - t0, 3))
    if reasons:
        result["reasons"] = reasons
    context.log.info(f"{operation.value} {d.name} ({spark.describe()}): {json.dumps(result, default=str)}")
    if params.get("dry_run"):
        assert before is not None
        yield observation(d, res, f"{operation.value}.dry_run", job_metadata(result))
        return
    versions = _committed(res.store(), context.run_id, before, result.get("version"))
    if not versions:
        if before is not None:
            yield observation(d, res, operation.value, job_metadata(result))
        return
    reported = result.get("pipes_data_version")
    if reported is not None and str(reported) != str(versions[-1]):
        raise RuntimeError(f"{d.name}: the spark-submit driver reported version {reported}, "
                           f"the dataset's newest version by this run is {versions[-1]}")
    extra = {**job_metadata(result)}
    if operation in (Operation.compact, Operation.materialize_deletions):
        extra.update(rewrite_evidence(res, result.get("version")))
    yield from version_events(context, d, res, versions, operation.value, extra, final=final)


def _cleanup(context: AssetExecutionContext, d: DatasetSettings, res: LanceDatasetResource,
             params: dict[str, Any]) -> Iterator[Any]:
    t0 = time.perf_counter()
    stats = res.open().cleanup_old_versions(
        older_than=timedelta(days=float(params["older_than_days"])),
        retain_versions=int(params["retain_versions"]),
        dry_run=bool(params["dry_run"]),
        delete_unverified=bool(params["delete_unverified"]),
        retention_duration_check=bool(params.get("retention_duration_check", True)),
    )
    fields = getattr(stats, "__dataclass_fields__", None) or vars(stats)
    result: dict[str, Any] = {k: getattr(stats, k) for k in fields if k != "removed_paths"}
    result.update(operation="cleanup_old_versions", dry_run=bool(params["dry_run"]),
                  seconds=round(time.perf_counter() - t0, 3))
    context.log.info(f"cleanup_old_versions {d.name}: {json.dumps(result, default=str)}")
    # Cleanup makes no version: an observation of the latest one.
    yield observation(d, res, "cleanup_old_versions", job_metadata(result))


__all__ = ["JOB_KEY", "run_dataset_operation"]
