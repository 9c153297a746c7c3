"""The dataset jobs: one op per ``lance_ops.jobs`` operation, each a job with a typed Config.

Every version a run commits is reported as a materialisation of the dataset asset with
``data_version`` = the Lance version and the version's stats as metadata.  Commits are stamped
with the Dagster run id (transaction properties ``dagster/run_id``, ``dagster/job``,
``lance_ops/operation``) through the jobs' ``transaction_properties``.
Ops that rewrite or delete share the concurrency pool ``lance-<name>`` of their dataset, so a
compaction never races another maintenance run on the same table (appends, which never
conflict with a rewrite, stay outside it).
"""

import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

from dagster import (
    AssetMaterialization,
    AssetObservation,
    JobDefinition,
    OpExecutionContext,
    Output,
    job,
    op,
)

import lance_ops.format as lf
from lance_ops import jobs as lance_jobs

from .configs import (
    AppendConfig,
    ChangeFeedConfig,
    CleanupConfig,
    CompactConfig,
    DeleteConfig,
    MaterializeDeletionsConfig,
    SourceOverride,
    UpsertConfig,
)
from .resources import LanceDatasetResource
from .settings import DatasetSettings
from .stats import (
    JOB_PROPERTY,
    OPERATION_PROPERTY,
    RUN_ID_PROPERTY,
    rewrite_fingerprints,
    transaction_of,
    version_stats,
    versions_by,
)

DATA_VERSION_TAG = "dagster/data_version"  # what Dagster reads as an event's data version
OPERATION_TAG = "lance_ops/operation"


def resource_key(name: str) -> str:
    return f"lance_{name}"


def op_name(dataset: str, operation: str) -> str:
    """The op of job ``<dataset>_<operation>`` (launchpad: ``ops: {<operation>_<dataset>: {config: ...}}``)."""
    return f"{operation}_{dataset}"


def pool_name(name: str) -> str:
    return f"lance-{name}"


def commit_properties(context: OpExecutionContext, operation: str) -> dict[str, str]:
    return {RUN_ID_PROPERTY: context.run_id, JOB_PROPERTY: context.job_name, OPERATION_PROPERTY: operation}


def version_event(
    d: DatasetSettings,
    res: LanceDatasetResource,
    version: int,
    *,
    run_id: str,
    operation: str,
    extra: dict[str, Any] | None = None,
    observation: bool = False,
) -> AssetMaterialization | AssetObservation:
    """The materialisation (or observation) of one Lance version, with its stats as metadata."""
    ds = res.open(version)
    stats = version_stats(ds, res.store(), small_fragment_rows=d.policy.target_rows_per_fragment)
    metadata: dict[str, Any] = {**stats.as_metadata(), "dagster_run_id": run_id, "uri": res.uri}
    metadata.update(extra or {})
    tags = {DATA_VERSION_TAG: str(version), OPERATION_TAG: operation}
    if observation:
        return AssetObservation(asset_key=d.name, metadata=metadata, tags=tags)
    return AssetMaterialization(asset_key=d.name, metadata=metadata, tags=tags)


def report_versions(
    context: OpExecutionContext,
    d: DatasetSettings,
    res: LanceDatasetResource,
    before: int | None,
    operation: str,
    *,
    result_version: int | None,
    extra: dict[str, Any] | None = None,
) -> Iterator[AssetMaterialization]:
    """One materialisation per version this run committed (found by the run id stamped on them)."""
    store = res.store()
    versions = versions_by(store, context.run_id, before or 0)
    if not versions and result_version is not None and result_version > (before or 0):
        # The job could not stamp its commits: report its result version, and the
        # ReserveFragments a compaction commits just before its Rewrite.
        versions = [result_version]
        prev = transaction_of(store, result_version - 1) if result_version - 1 > (before or 0) else None
        rewrite = transaction_of(store, result_version)
        if prev is not None and rewrite is not None and rewrite.operation.name == "rewrite" \
                and prev.operation.name == "reserve_fragments":
            versions.insert(0, result_version - 1)
    for i, v in enumerate(versions):
        last = i == len(versions) - 1
        yield version_event(d, res, v, run_id=context.run_id, operation=operation, extra=extra if last else None)  # type: ignore[misc]


def metrics_metadata(result: Any) -> dict[str, Any]:
    """The scalar fields of a jobs result dataclass, as metadata."""
    out: dict[str, Any] = {}
    fields = getattr(result, "__dataclass_fields__", None)
    items = ((k, getattr(result, k)) for k in fields) if fields else vars(result).items() if result is not None else ()
    for key, value in items:
        if isinstance(value, bool | int | float | str) or value is None:
            out[key] = value if value is not None else "None"
        elif isinstance(value, list | tuple | dict):
            out[key] = list(value) if not isinstance(value, dict) else dict(value)
    return out


def source_args(spark: Any, d: DatasetSettings, cfg: SourceOverride, res: LanceDatasetResource,
                *, tag: str | None = None) -> tuple[Any, str | None, dict[str, str]]:
    """``(source, format, options)`` for ``jobs.append``/``jobs.upsert``: the dataset's source
    with the run's overrides.

    Generated rows (``format: generate``) are a DataFrame of ``id``, ``kind``, ``amount``
    (``kind`` = ``tag`` when given); ids start at the dataset's next row id unless
    ``start_id`` is given, so appends never repeat an id.  Other formats are a path.
    """
    fmt = cfg.format or d.source.format
    if fmt == "generate":
        rows = cfg.rows if cfg.rows is not None else d.source.rows
        start = cfg.start_id
        if start is None:
            start = res.open().manifest.next_row_id if res.exists() else 0
        kind = f"'{tag}'" if tag else "element_at(array('click', 'view', 'buy'), cast(id % 3 AS int) + 1)"
        df = spark.range(start, start + rows, numPartitions=2).selectExpr(
            "id", f"{kind} AS kind", "cast(id % 97 AS double) * 1.25 AS amount"
        )
        return df, None, {}
    path = cfg.path or d.source.path
    if not path:
        raise ValueError(f"dataset {d.name}: source format {fmt!r} needs a path")
    return path, fmt, dict(d.source.options)


def rewrite_evidence(res: LanceDatasetResource, rewrite_version: int | None) -> dict[str, Any]:
    """What the compaction check needs about a Rewrite: fingerprints of the rows it moved before
    (its old fragments at version R-1) and after (its new fragments at R), and the row count
    before.  The check recomputes 'after' later and compares it with 'before'."""
    if rewrite_version is None:
        return {}
    store = res.store()
    txn = transaction_of(store, rewrite_version)
    if txn is None or txn.operation.name != "rewrite":
        return {}
    fp = rewrite_fingerprints(res.open(rewrite_version), store)
    return {
        "rewrite_version": rewrite_version,
        "fingerprint_before": fp.before,
        "fingerprint_after": fp.after,
        "rows_moved": fp.rows_before,
        "rows_before": res.open(rewrite_version - 1).count_rows(),
    }


def report_rewrite(context: OpExecutionContext, d: DatasetSettings, res: LanceDatasetResource,
                   before: int | None, operation: str, result: Any, dry_run: bool) -> Iterator[Any]:
    """Events of a compaction or deletion materialisation (an observation for a dry run)."""
    metrics = metrics_metadata(result)
    if dry_run:
        assert before is not None
        yield version_event(d, res, before, run_id=context.run_id, operation=f"{operation}.dry_run",
                            extra=metrics, observation=True)
    else:
        version = getattr(result, "version", None)
        yield from report_versions(context, d, res, before, operation, result_version=version,
                                   extra={**metrics, **rewrite_evidence(res, version)})
    yield Output(None, metadata=metrics)


def build_jobs(d: DatasetSettings) -> dict[str, JobDefinition]:
    """The launchable jobs of one dataset, by name (``<dataset>_<operation>``)."""
    name, rk, pool = d.name, resource_key(d.name), pool_name(d.name)
    writer_tags = {"dagster/kind/spark": "", "dagster/kind/lance": ""}

    def _res(context: OpExecutionContext) -> LanceDatasetResource:
        return getattr(context.resources, rk)  # type: ignore[no-any-return]

    @op(name=op_name(name, "append"), required_resource_keys={rk, "spark"}, tags=writer_tags,
        description=f"Append rows from the source to {d.uri} (creates it with stable row ids).")
    def append_op(context: OpExecutionContext, config: AppendConfig) -> Iterator[Any]:
        res = _res(context)
        spark = context.resources.spark.get_session()
        before = res.latest_version()
        source, fmt, options = source_args(spark, d, config, res)
        result = lance_jobs.append(spark, res.uri, source,
            transaction_properties=commit_properties(context, "append"),
            format=fmt, options=options, max_rows_per_file=config.max_rows_per_file,
            enable_stable_row_ids=True, storage_options=res.resolved_storage_options(),
        )
        metrics = metrics_metadata(result)
        yield from report_versions(context, d, res, before, "append", result_version=getattr(result, "version", None),
                                   extra=metrics)
        yield Output(None, metadata=metrics)

    @op(name=op_name(name, "delete"), required_resource_keys={rk, "spark"}, pool=pool, tags=writer_tags,
        description=f"Delete rows of {d.uri} matching a predicate.")
    def delete_op(context: OpExecutionContext, config: DeleteConfig) -> Iterator[Any]:
        res = _res(context)
        spark = context.resources.spark.get_session()
        before = res.latest_version()
        result = lance_jobs.delete(spark, res.uri, config.where,
            transaction_properties=commit_properties(context, "delete"),
            storage_options=res.resolved_storage_options(),
        )
        metrics = metrics_metadata(result)
        yield from report_versions(context, d, res, before, "delete", result_version=getattr(result, "version", None),
                                   extra={**metrics, "where": config.where})
        yield Output(None, metadata=metrics)

    @op(name=op_name(name, "upsert"), required_resource_keys={rk, "spark"}, pool=pool, tags=writer_tags,
        description=f"Upsert rows from the source into {d.uri} on key columns.")
    def upsert_op(context: OpExecutionContext, config: UpsertConfig) -> Iterator[Any]:
        res = _res(context)
        spark = context.resources.spark.get_session()
        before = res.latest_version()
        source, fmt, options = source_args(spark, d, config, res, tag=config.tag)
        result = lance_jobs.upsert(spark, res.uri, source, list(config.on),
            transaction_properties=commit_properties(context, "upsert"),
            format=fmt, options=options, max_rows_per_file=config.max_rows_per_file,
            storage_options=res.resolved_storage_options(),
        )
        metrics = metrics_metadata(result)
        yield from report_versions(context, d, res, before, "upsert", result_version=getattr(result, "version", None),
                                   extra=metrics)
        yield Output(None, metadata=metrics)

    @op(name=op_name(name, "materialize_deletions"), required_resource_keys={rk, "spark"}, pool=pool, tags=writer_tags,
        description=f"Rewrite fragments of {d.uri} with many deleted rows, without them.")
    def materialize_op(context: OpExecutionContext, config: MaterializeDeletionsConfig) -> Iterator[Any]:
        res = _res(context)
        spark = context.resources.spark.get_session()
        before = res.latest_version()
        result = lance_jobs.materialize_deletions(spark, res.uri, config.threshold,
            transaction_properties=commit_properties(context, "materialize_deletions"),
            dry_run=config.dry_run, storage_options=res.resolved_storage_options(),
        )
        yield from report_rewrite(context, d, res, before, "materialize_deletions", result, config.dry_run)

    @op(name=op_name(name, "compact"), required_resource_keys={rk, "spark"}, pool=pool, tags=writer_tags,
        description=f"Compact small fragments of {d.uri} (keeps row ids and versions).")
    def compact_op(context: OpExecutionContext, config: CompactConfig) -> Iterator[Any]:
        res = _res(context)
        spark = context.resources.spark.get_session()
        before = res.latest_version()
        result = lance_jobs.compact(spark, res.uri,
            transaction_properties=commit_properties(context, "compact"),
            target_rows_per_fragment=config.target_rows_per_fragment,
            max_rows_per_group=config.max_rows_per_group,
            materialize_deletions=config.materialize_deletions,
            materialize_deletions_threshold=config.materialize_deletions_threshold,
            max_source_fragments=config.max_source_fragments,
            dry_run=config.dry_run,
            storage_options=res.resolved_storage_options(),
        )
        yield from report_rewrite(context, d, res, before, "compact", result, config.dry_run)

    @op(name=op_name(name, "write_change_feed"), required_resource_keys={rk, "spark"}, tags=writer_tags,
        description=f"Write the change feed of a version range of {d.uri} to a sink.")
    def change_feed_op(context: OpExecutionContext, config: ChangeFeedConfig) -> Iterator[Any]:
        res = _res(context)
        spark = context.resources.spark.get_session()
        end = config.end_version if config.end_version is not None else res.latest_version()
        assert end is not None
        # Not the change feed asset's sink: its per-version ranges must not overlap these.
        sink = config.sink_uri or f"{d.change_feed.sink_uri.rstrip('/')}_ranges"
        so = res.resolved_storage_options()
        result = lance_jobs.write_change_feed(
            spark, res.uri, config.begin_version, end, sink, format=config.format.value if config.format else d.change_feed.format,
            storage_options=so, sink_storage_options=so,
        )
        yield Output(None, metadata=metrics_metadata(result))

    @op(name=op_name(name, "cleanup_old_versions"), required_resource_keys={rk}, pool=pool,
        tags={"dagster/kind/lance": ""},
        description=f"Remove old versions of {d.uri} and the files only they use.")
    def cleanup_op(context: OpExecutionContext, config: CleanupConfig) -> Iterator[Any]:
        res = _res(context)
        latest = res.latest_version()
        t0 = time.perf_counter()
        stats = res.open().cleanup_old_versions(
            older_than=timedelta(days=config.older_than_days),
            retain_versions=config.retain_versions,
            dry_run=config.dry_run,
            delete_unverified=config.delete_unverified,
        )
        metrics = {k: v for k, v in metrics_metadata(stats).items() if k != "removed_paths"}
        metrics["seconds"] = round(time.perf_counter() - t0, 3)
        assert latest is not None
        # Cleanup makes no version: it is an observation of the latest one.
        yield version_event(d, res, latest, run_id=context.run_id, operation="cleanup_old_versions",
                            extra={**metrics, "dry_run": config.dry_run}, observation=True)
        yield Output(None, metadata=metrics)

    @op(name=op_name(name, "observe"), required_resource_keys={rk}, tags={"dagster/kind/lance": ""},
        description=f"Record the latest version of {d.uri} (seen from writers outside Dagster).")
    def observe_op(context: OpExecutionContext) -> Iterator[Any]:
        res = _res(context)
        latest = res.latest_version()
        if latest is None:
            raise lf.DatasetNotFoundError(f"{res.uri}: no dataset to observe")
        yield version_event(d, res, latest, run_id=context.run_id, operation="observe", observation=True)
        yield Output(None, metadata={"version": latest})

    out: dict[str, JobDefinition] = {}
    for opdef, operation in (
        (append_op, "append"), (delete_op, "delete"), (upsert_op, "upsert"),
        (materialize_op, "materialize_deletions"), (compact_op, "compact"),
        (change_feed_op, "write_change_feed"), (cleanup_op, "cleanup_old_versions"), (observe_op, "observe"),
    ):
        out[f"{name}_{operation}"] = _single_op_job(opdef, f"{name}_{operation}", name, operation)
    return out


def _single_op_job(opdef: Any, job_name: str, dataset: str, operation: str) -> JobDefinition:
    @job(name=job_name, description=opdef.description,
         tags={"lance_ops/dataset": dataset, "lance_ops/operation": operation})
    def _job() -> None:
        opdef()

    return _job
