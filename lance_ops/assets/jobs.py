"""The jobs: one per operation, for every dataset (the run's asset selection picks the dataset).

- ``lance_<operation>`` (asset jobs over the dataset assets, tagged ``lance_ops/operation``):
  ``lance_append``, ``lance_delete``, ``lance_upsert``, ``lance_compact``,
  ``lance_materialize_deletions``, ``lance_optimize_indices``, ``lance_cleanup_old_versions``,
  ``lance_remove_orphan_files``, ``lance_restore`` and ``lance_maintain`` (what the maintenance
  planner finds each selected dataset needs now).  Launch one on a dataset from its asset page
  (the job is listed there) or select the dataset in the job's launchpad; the config defaults
  are the dataset's policy.
- ``lance_checks``: the asset checks (a run selects the datasets' checks).
- ``lance_write_change_feed`` and ``lance_observe``: op jobs naming the dataset in their config
  (an ad-hoc change feed range to any sink; record the latest version as an observation).
"""

from collections.abc import Iterator
from typing import Any

from dagster import (
    AssetKey,
    AssetObservation,
    AssetSelection,
    JobDefinition,
    OpExecutionContext,
    Output,
    define_asset_job,
    job,
    op,
)

from lance_ops.assets.configs import ChangeFeedConfig, ObserveConfig, Operation
from lance_ops.assets.metadata import job_metadata, version_metadata
from lance_ops.assets.operations import DATA_VERSION_TAG, OPERATION_TAG, job_name, resource_key, run_spark
from lance_ops.assets.resources import LanceDatasetResource
from lance_ops.assets.versions import pick, resolve_range
from lance_ops.orchestration.errors import DatasetConfigError
from lance_ops.orchestration.operations import ChangeFeedParams
from lance_ops.orchestration.settings import DatasetSettings, Settings

CHECKS_JOB = "lance_checks"
WRITE_CHANGE_FEED_JOB = "lance_write_change_feed"
OBSERVE_JOB = "lance_observe"

DESCRIPTIONS = {
    Operation.maintain: "Do what the maintenance planner finds each selected dataset needs now (its policy): "
                        "compact or materialise deletions, optimize indices, clean up old versions, sweep orphan "
                        "files (or nothing); lance-ops plan shows the plan.",
    Operation.append: "Append rows from each selected dataset's source (the first append creates it with stable "
                      "row ids).",
    Operation.delete: "Delete the rows of the selected dataset matching `delete.where` (a SQL predicate as pylance takes it).",
    Operation.upsert: "Upsert rows from the source into the selected dataset on key columns (`upsert.on`).",
    Operation.compact: "Compact small fragments of each selected dataset (keeps row ids and row versions); "
                       "defaults: the dataset's policy.",
    Operation.materialize_deletions: "Rewrite fragments with many deleted rows, without them.",
    Operation.optimize_indices: "Index the rows no index segment covers yet (new segments built on Spark "
                                "executors, one commit), as pylance's optimize_indices.",
    Operation.cleanup_old_versions: "Remove old versions and the files only they use.",
    Operation.remove_orphan_files: "Remove files no version, branch or tag references (failed writers' files), "
                                   "older than `remove_orphan_files.older_than_hours`; `dry_run` reports them.",
    Operation.restore: "Roll the selected dataset back to `restore.version`, `restore.timestamp` or `restore.tag` "
                       "(the current version is tagged restore-before-... first, so it can be undone).",
}


def _dataset(settings: Settings, name: str) -> DatasetSettings:
    try:
        return settings.dataset(name)
    except DatasetConfigError as e:
        raise DatasetConfigError(name, "dataset", e.problem, e.fix) from None


def build_jobs(settings: Settings, check_selection: AssetSelection) -> dict[str, Any]:
    """Every job of the code location, by name."""
    # the checks run after maintenance (lance_checks_after_maintenance), not in every writing run
    datasets = AssetSelection.assets(*[AssetKey([d.name]) for d in settings.datasets]).without_checks()
    out: dict[str, Any] = {}
    for operation in Operation:
        out[job_name(operation)] = define_asset_job(
            job_name(operation), selection=datasets, tags={OPERATION_TAG: operation.value},
            description=DESCRIPTIONS[operation],
        )
    out[CHECKS_JOB] = define_asset_job(
        CHECKS_JOB, selection=check_selection,
        description="Run the asset checks of the datasets and their change feeds.",
    )
    keys = {resource_key(d.name) for d in settings.datasets}

    @op(name="write_change_feed", required_resource_keys=keys | {"spark"}, tags={"dagster/kind/spark": ""},
        description="Write the changes of a version range of one dataset to a sink.")
    def write_change_feed_op(context: OpExecutionContext, config: ChangeFeedConfig) -> Iterator[Any]:
        d = _dataset(settings, config.dataset)
        res: LanceDatasetResource = getattr(context.resources, resource_key(d.name))
        begin = pick(d.name, "begin", config.begin_version, config.begin_tag)
        end = pick(d.name, "end", config.end_version, config.end_tag)
        rng = resolve_range(d.name, res, begin, end, config.branch)
        # Not the change feed asset's sink: its per-version ranges must not overlap these (nor a branch's main's).
        base = f"{d.change_feed.sink_uri.rstrip('/')}_ranges"
        sink = config.sink_uri or (base if rng.branch is None else f"{base}_{rng.branch.replace('/', '-')}")
        fmt = config.format.value if config.format else d.change_feed.format
        params = ChangeFeedParams(ranges=((rng.begin, rng.end),), sink_uri=sink, format=fmt)
        result = run_spark(context, d, res, context.resources.spark, "write_change_feed", params, uri=rng.uri)
        (written,) = result.metrics["ranges"]
        named = "".join(f" {k}={v!r}" for k, v in (("begin_tag", config.begin_tag), ("end_tag", config.end_tag),
                                                     ("branch", rng.branch)) if v is not None)
        context.log.info(f"change feed of {d.name} ({rng.begin}, {rng.end}]{named} -> {written['location']}: "
                         f"{written['rows_written']} rows")
        yield Output(None, metadata={"location": written["location"], "rows_written": written["rows_written"],
                                     "begin_version": rng.begin, "end_version": rng.end,
                                     **({"branch": rng.branch} if rng.branch is not None else {}),
                                     **job_metadata(written)})

    @op(name="observe", required_resource_keys=keys,
        description="Record the latest version of a dataset (e.g. written outside Dagster) as an observation.")
    def observe_op(context: OpExecutionContext, config: ObserveConfig) -> Iterator[Any]:
        d = _dataset(settings, config.dataset)
        res: LanceDatasetResource = getattr(context.resources, resource_key(d.name))
        latest = res.latest_version()
        if latest is None:
            raise DatasetConfigError(d.name, "dataset", f"no Lance dataset at {res.uri} to observe",
                                     "append to it first, or fix its uri")
        md = version_metadata(res.uri, d.name, res.open(latest), res.table(),
                              small_fragment_rows=d.policy.target_rows_per_fragment)
        yield AssetObservation(asset_key=d.name, metadata=md,
                               tags={DATA_VERSION_TAG: str(latest), OPERATION_TAG: "observe"})
        yield Output(None, metadata={"version": latest})

    out[WRITE_CHANGE_FEED_JOB] = _single_op_job(write_change_feed_op, WRITE_CHANGE_FEED_JOB, "write_change_feed")
    out[OBSERVE_JOB] = _single_op_job(observe_op, OBSERVE_JOB, "observe")
    return out


def _single_op_job(opdef: Any, name: str, operation: str) -> JobDefinition:
    @job(name=name, description=opdef.description, tags={OPERATION_TAG: operation})
    def _job() -> None:
        opdef()

    return _job
