"""The operation registry: every dataset operation an orchestrator runs, defined once.

``OPERATIONS[name]`` is an :class:`OperationSpec`: its typed, frozen parameter class (defaults from
``lance_ops.format``'s options objects; each field's ``help`` is what Dagster's launchpad, Airflow's
operator docs and ``lance-ops run --help`` show), whether its one commit carries an idempotency
key, its validation (against the dataset's manifest, before Spark starts) and how it runs
(``run(spark, task)``: a Spark job of :mod:`lance_ops.jobs`, or in process for cleanup).

Dagster config classes, Airflow operator arguments and CLI options are derived from the parameter
classes; :func:`resolve_params` fills unset fields from the dataset's policy (``lance_ops.yaml``).
"""

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import lance_ops.format as lf
from lance_ops.format import COMPACTION_DEFAULTS, DEFAULT_MAX_ROWS_PER_FILE, OPTIMIZE_INDICES_DEFAULTS
from lance_ops.format.distributed import SEGMENT_KINDS
from lance_ops.format.errors import SQLParseError
from lance_ops.orchestration.errors import DatasetConfigError
from lance_ops.orchestration.table import TableRef

if TYPE_CHECKING:
    from lance_ops.orchestration.tasks import Task

#: pylance's ``cleanup_old_versions`` defaults (older_than 14 days, retain 1 version)
CLEANUP_OLDER_THAN_DAYS = 14.0
CLEANUP_RETAIN_VERSIONS = 1
INDEX_KINDS = ", ".join(SEGMENT_KINDS)  # the kinds format adds segments to


def _f(default: Any = dataclasses.MISSING, help: str = "", *, factory: Any = dataclasses.MISSING,
       policy: str | None = None, required: bool = False, **bounds: Any) -> Any:
    """A parameter field: ``help`` text, numeric ``bounds`` (gt/ge/le), whether a run must set it,
    and the settings key that fills it when unset (``upsert_on`` is ``policy.upsert_on``,
    ``source.path`` the dataset's ``source.path``)."""
    if policy and "default:" not in help:
        where = policy if "." in policy else f"policy.{policy}"
        help = f"{help} (default: the dataset's {where})"
    meta = {"help": help, "bounds": bounds, "policy": policy, "required": required}
    if factory is not dataclasses.MISSING:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class SourceParams:
    """Where rows come from; unset fields fall back to the dataset's ``source`` settings."""

    path: str | None = _f(None, "Spark-readable path (default: the dataset's source.path)", policy="source.path")
    format: str | None = _f(None, "'generate' or a Spark reader format: parquet, csv, json, lance, ... "
                            "(default: the dataset's source.format)", policy="source.format")
    rows: int | None = _f(None, "generated sources: how many rows (default: the dataset's source.rows)",
                          policy="source.rows", ge=0)
    start_id: int | None = _f(None, "generated sources: first id (default: the dataset's next row id, so ids "
                              "stay unique)")
    max_rows_per_file: int = _f(DEFAULT_MAX_ROWS_PER_FILE, "rows per data file (new fragment)", gt=0)
    options: Mapping[str, str] = _f(help="Spark reader options (default: the dataset's source.options)",
                                    factory=dict, policy="source.options")


@dataclass(frozen=True)
class AppendParams(SourceParams):
    """Append rows; the first append creates the dataset (stable row ids on)."""


@dataclass(frozen=True)
class UpsertParams(SourceParams):
    """Update rows matching on the key columns, insert the others."""

    on: tuple[str, ...] = _f(("id",), "key columns (default: the dataset's policy.upsert_on)", policy="upsert_on")
    tag: str = _f("upserted", "generated sources: value of the 'kind' column")


@dataclass(frozen=True)
class DeleteParams:
    """Delete the rows matching a SQL predicate (pylance's dialect, validated before Spark runs)."""

    where: str = _f("", "SQL predicate as pylance takes it, e.g. \"id < 100\"", required=True)


@dataclass(frozen=True)
class CompactParams:
    """Merge small fragments (and materialise deletions), keeping row ids and row versions."""

    target_rows_per_fragment: int = _f(COMPACTION_DEFAULTS.target_rows_per_fragment,
                                       "rows a compacted fragment aims for", policy="target_rows_per_fragment", gt=0)
    max_rows_per_group: int = _f(COMPACTION_DEFAULTS.max_rows_per_group, "rows per page group in written files",
                                 policy="max_rows_per_group", gt=0)
    materialize_deletions: bool = _f(COMPACTION_DEFAULTS.materialize_deletions,
                                     "also rewrite fragments with many deleted rows")
    materialize_deletions_threshold: float = _f(COMPACTION_DEFAULTS.materialize_deletions_threshold,
                                                "deleted fraction at which a fragment is rewritten",
                                                policy="deleted_ratio_threshold", ge=0, le=1)
    max_source_fragments: int | None = _f(COMPACTION_DEFAULTS.max_source_fragments,
                                          "at most this many fragments per compaction (default: all)")
    max_source_rows: int | None = _f(None, "at most this many rows read per compaction (default: all)", gt=0)
    max_source_bytes: int | None = _f(None, "at most this many bytes read per compaction (default: all)", gt=0)
    bin_order: str = _f("manifest", "which bins a limited run takes: \"manifest\" (pylance: oldest first) or "
                        "\"value\" (the most valuable first, as the planner)")
    data_storage_version: str | None = _f(COMPACTION_DEFAULTS.data_storage_version,
                                          "file version of the rewritten fragments, e.g. \"2.2\" (upgrade; "
                                          "default: the dataset's)")
    cluster_by: tuple[str, ...] = _f((), "cluster the rewritten rows by these columns (default: plain compaction)")
    strategy: str = _f(COMPACTION_DEFAULTS.strategy, "clustering: \"sort\" or \"zorder\"")
    dry_run: bool = _f(False, "plan only: report what would be rewritten, commit nothing")


@dataclass(frozen=True)
class MaterializeDeletionsParams:
    """Rewrite fragments whose deleted fraction is at least ``threshold`` without their deleted rows."""

    threshold: float = _f(COMPACTION_DEFAULTS.materialize_deletions_threshold,
                          "deleted fraction at which a fragment is rewritten", policy="deleted_ratio_threshold",
                          ge=0, le=1)
    max_source_fragments: int | None = _f(None, "at most this many fragments per run (default: all)", gt=0)
    max_source_rows: int | None = _f(None, "at most this many rows read per run (default: all)", gt=0)
    max_source_bytes: int | None = _f(None, "at most this many bytes read per run (default: all)", gt=0)
    bin_order: str = _f("manifest", "which fragments a limited run takes: \"manifest\" or \"value\"")
    dry_run: bool = _f(False, "plan only: report what would be rewritten, commit nothing")


@dataclass(frozen=True)
class OptimizeIndicesParams:
    """Index the rows no index segment covers yet (pylance's optimize_indices), on Spark executors."""

    num_indices_to_merge: int = _f(OPTIMIZE_INDICES_DEFAULTS.num_indices_to_merge,
                                   "0: add a segment per group of new fragments; N: rebuild the newest N segments "
                                   "with them", ge=0)
    index_names: tuple[str, ...] | None = _f(None, f"only these indices (default: every {INDEX_KINDS} index)")
    rows_per_task: int | None = _f(OPTIMIZE_INDICES_DEFAULTS.rows_per_task,
                                   "rows of new fragments per Spark task and segment (None: one per index)", gt=0)


@dataclass(frozen=True)
class CleanupParams:
    """Remove versions older than ``older_than_days`` beyond the newest ``retain_versions`` (pylance semantics)."""

    older_than_days: float = _f(CLEANUP_OLDER_THAN_DAYS, "remove versions older than this many days",
                                policy="cleanup_older_than_days", ge=0)
    retain_versions: int = _f(CLEANUP_RETAIN_VERSIONS, "always keep this many newest versions",
                              policy="cleanup_retain_versions", ge=1)
    delete_unverified: bool = _f(False, "also remove files of unfinished writes younger than 7 days")
    dry_run: bool = _f(False, "report what would be removed, remove nothing")
    mode: str = _f("full", "\"full\" lists data/ as pylance does; \"lite\" derives the files from the removed "
                   "versions' manifests (routine: time independent of the table's file count)")
    retention_duration_check: bool = _f(True, "refuse older_than_days below one hour (Delta's VACUUM check); "
                                        "turn off only when nothing else reads or writes the dataset")


@dataclass(frozen=True)
class ChangeFeedParams:
    """Write the changes of ``(begin, end]`` ranges to a sink (Delta CDF columns)."""

    ranges: tuple[tuple[int, int], ...] = _f((), "(begin, end] version ranges, each written to its own place")
    sink_uri: str = _f("", "where the changes go (default: the dataset's change_feed.sink_uri)",
                       policy="change_feed.sink_uri")
    format: str = _f("parquet", "sink format: parquet or lance (default: the dataset's change_feed.format)",
                     policy="change_feed.format")


@dataclass(frozen=True)
class RestoreParams:
    """Roll the dataset back to a version, a time or a tag (guarded: the current version is tagged first)."""

    version: int | None = _f(None, "restore this version number (or set timestamp or tag)", ge=1)
    timestamp: str | None = _f(None, "restore the version current at this time: ISO 8601, UTC when naive "
                               "(or set version or tag)")
    tag: str | None = _f(None, "restore the version this tag names (or set version or timestamp)")
    tag_current: bool = _f(True, "tag the current version restore-before-<version>-<time> first (undo: restore "
                           "that tag)")


@dataclass(frozen=True)
class RemoveOrphanFilesParams:
    """Remove files no version, branch or tag references (files of failed writers), older than a grace period."""

    older_than_hours: float = _f(168.0, "only files older than this many hours (younger ones may belong to a "
                                 "commit in flight)", policy="orphan_min_age_hours", ge=0)
    dry_run: bool = _f(False, "report the files and bytes, remove nothing")
    retention_duration_check: bool = _f(True, "refuse older_than_hours below one hour; turn off only when "
                                        "nothing else writes the dataset")


@dataclass(frozen=True)
class MaintainParams:
    """What the maintenance planner finds the dataset needs now (its policy in lance_ops.yaml): compaction or
    deletion materialisation, optimize_indices, cleanup, the orphan sweep, in that order."""


@dataclass(frozen=True)
class OperationSpec:
    """One operation: its parameters, idempotency, validation and runner.

    Attributes:
        name: the operation's name (Dagster job ``lance_<name>``, ``lance-ops run <name>``).
        params: the frozen parameter dataclass.
        idempotent: its single commit carries ``txnAppId``/``txnVersion`` (a retry commits at most once).
        spark: runs on Spark (else in process).
        needs_dataset: refused when the dataset does not exist yet.
        error_field: the parameter a SchemaError of the job points at; ``fix``: what to change.
        run: ``run(spark, task) -> dict`` (the job's result).
        validate: ``validate(table, params, name)``, raises DatasetConfigError before Spark starts.
        local: ``local(task) -> dict``: a Spark operation run in this process through
            ``lance_ops.format`` instead (no SparkSession given: the planner's ``maintain``, the
            Dagster autopilot); None: the operation needs Spark.
    """

    name: str
    params: type
    idempotent: bool
    spark: bool
    needs_dataset: bool
    error_field: str
    fix: str
    run: Callable[[Any, "Task"], dict[str, Any]]
    validate: Callable[[TableRef, Any, str], None]
    local: Callable[["Task"], dict[str, Any]] | None = None

    @property
    def description(self) -> str:
        return (self.params.__doc__ or "").strip().splitlines()[0]


# ----------------------------------------------------------------------------- validation
def _none(table: TableRef, params: Any, name: str) -> None:
    return None


def check_predicate(table: TableRef, name: str, field_name: str, where: str) -> None:
    """Validate a SQL predicate as the format API does (``lf.resolve_filter``, pylance's dialect)
    before Spark starts: a bad one is a DatasetConfigError naming the field (the typed SQL error chained)."""
    try:
        lf.resolve_filter(table.open().lance_schema, where, f"{field_name} predicate")
    except SQLParseError as e:
        raise DatasetConfigError(name, field_name, str(e), "write the predicate with the dataset's columns "
                                 "in pylance's SQL (e.g. \"id < 100 AND name LIKE 'a%'\")") from e


def _validate_delete(table: TableRef, params: DeleteParams, name: str) -> None:
    if not params.where.strip():
        raise DatasetConfigError(name, "delete.where", "a delete needs a predicate",
                                 f"set the predicate, e.g. \"id < 100\" (columns: {table.open().schema.names})")
    check_predicate(table, name, "delete.where", params.where)


def _validate_upsert(table: TableRef, params: UpsertParams, name: str) -> None:
    columns = table.open().schema.names
    missing = [k for k in params.on if k not in columns]
    if missing or not params.on:
        raise DatasetConfigError(name, "upsert.on", f"key column(s) {missing or '[]'} are not columns of the dataset",
                                 f"use key columns from {columns}")


def _validate_optimize_indices(table: TableRef, params: OptimizeIndicesParams, name: str) -> None:
    if not params.index_names:
        return
    known = sorted(lf.optimizable_index_names(table.open().manifest))
    unknown = [n for n in params.index_names if n not in known]
    if unknown:
        raise DatasetConfigError(name, "optimize_indices.index_names", f"no index {unknown} that lance_ops extends",
                                 f"name indices from {known} ({INDEX_KINDS}), or leave it empty")


def restore_target(params: RestoreParams) -> "int | str | datetime":
    """The one target a restore names: a version number, a tag, or a time."""
    if params.version is not None:
        return params.version
    if params.tag is not None:
        return params.tag
    assert params.timestamp is not None
    return datetime.fromisoformat(params.timestamp)


def _validate_restore(table: TableRef, params: RestoreParams, name: str) -> None:
    given = [k for k in ("version", "timestamp", "tag") if getattr(params, k) is not None]
    if len(given) != 1:
        raise DatasetConfigError(name, "restore.version/timestamp/tag",
                                 f"a restore names exactly one target, got {given or 'none'}",
                                 "set one of version (e.g. 12), timestamp (e.g. 2026-01-31T08:00:00) or tag")
    if params.timestamp is not None:
        try:
            datetime.fromisoformat(params.timestamp)
        except ValueError as e:
            raise DatasetConfigError(name, "restore.timestamp", f"{params.timestamp!r} is not an ISO 8601 time",
                                     "write it as 2026-01-31T08:00:00 (UTC) or with an offset") from e


def _validate_change_feed(table: TableRef, params: ChangeFeedParams, name: str) -> None:
    latest = table.latest_version() or 0
    for begin, end in params.ranges:
        if not 0 <= begin < end <= latest:
            raise DatasetConfigError(name, "begin_version/end_version", f"the range ({begin}, {end}] is not within "
                                     f"(0, {latest}] with begin < end", f"pick versions between 0 and {latest}")
    if not params.sink_uri:
        raise DatasetConfigError(name, "sink_uri", "no sink", "set sink_uri (or change_feed.sink_uri in lance_ops.yaml)")
    if params.format not in ("parquet", "lance"):
        raise DatasetConfigError(name, "format", f"{params.format!r} is not a sink format", "use 'parquet' or 'lance'")


# ----------------------------------------------------------------------------- runners
def _run_append(spark: Any, task: "Task") -> dict[str, Any]:
    from lance_ops import jobs
    from lance_ops.orchestration.spark_sources import check_source_schema, source_frame

    p, t = task.params, task.table
    source, fmt, options = source_frame(spark, task)
    check_source_schema(spark, task, source, fmt, options)
    return jobs.append(spark, t.uri, source, format=fmt, options=options, max_rows_per_file=p.max_rows_per_file,
                       enable_stable_row_ids=True, **task.job_kwargs()).to_dict()


def _run_upsert(spark: Any, task: "Task") -> dict[str, Any]:
    from lance_ops import jobs
    from lance_ops.orchestration.spark_sources import check_source_schema, source_frame

    p, t = task.params, task.table
    source, fmt, options = source_frame(spark, task)
    check_source_schema(spark, task, source, fmt, options)
    return jobs.upsert(spark, t.uri, source, list(p.on), format=fmt, options=options,
                       max_rows_per_file=p.max_rows_per_file, **task.job_kwargs()).to_dict()


def _run_delete(spark: Any, task: "Task") -> dict[str, Any]:
    from lance_ops import jobs

    return jobs.delete(spark, task.table.uri, task.params.where, **task.job_kwargs()).to_dict()


def _run_compact(spark: Any, task: "Task") -> dict[str, Any]:
    from lance_ops import jobs

    p = task.params
    return jobs.compact(spark, task.table.uri, target_rows_per_fragment=p.target_rows_per_fragment,
                        max_rows_per_group=p.max_rows_per_group, materialize_deletions=p.materialize_deletions,
                        materialize_deletions_threshold=p.materialize_deletions_threshold,
                        max_source_fragments=p.max_source_fragments, max_source_rows=p.max_source_rows,
                        max_source_bytes=p.max_source_bytes, bin_order=p.bin_order,
                        data_storage_version=p.data_storage_version, cluster_by=list(p.cluster_by) or None,
                        strategy=p.strategy, dry_run=p.dry_run, **task.job_kwargs()).to_dict()


def _run_materialize_deletions(spark: Any, task: "Task") -> dict[str, Any]:
    from lance_ops import jobs

    p = task.params
    return jobs.materialize_deletions(spark, task.table.uri, p.threshold, max_source_fragments=p.max_source_fragments,
                                      max_source_rows=p.max_source_rows, max_source_bytes=p.max_source_bytes,
                                      bin_order=p.bin_order, dry_run=p.dry_run, **task.job_kwargs()).to_dict()


def _run_optimize_indices(spark: Any, task: "Task") -> dict[str, Any]:
    from lance_ops import jobs

    p = task.params
    return jobs.optimize_indices(spark, task.table.uri, num_indices_to_merge=p.num_indices_to_merge,
                                 index_names=list(p.index_names) if p.index_names else None,
                                 rows_per_task=p.rows_per_task, **task.job_kwargs()).to_dict()


def _run_change_feed(spark: Any, task: "Task") -> dict[str, Any]:
    from lance_ops import jobs

    p, t = task.params, task.table
    so = t.resolved_storage_options()
    parts = [jobs.write_change_feed(spark, t.uri, int(b), int(e), p.sink_uri, format=p.format, storage_options=so,
                                    sink_storage_options=so, manifest_store=t.manifest_store).to_dict()
             for b, e in p.ranges]
    return {"ranges": parts, "rows_written": sum(int(r["rows_written"]) for r in parts), "version": None}


def _run_cleanup(spark: Any, task: "Task") -> dict[str, Any]:
    p = task.params
    try:
        stats = task.table.open().cleanup_old_versions(
            older_than=timedelta(days=p.older_than_days), retain_versions=p.retain_versions, dry_run=p.dry_run,
            delete_unverified=p.delete_unverified, retention_duration_check=p.retention_duration_check, mode=p.mode)
    except lf.InvalidArgumentError as e:  # refused before anything is removed
        raise DatasetConfigError(task.dataset, "older_than_days", str(e),
                                 "keep at least an hour (policy.cleanup_older_than_days), or turn off "
                                 "retention_duration_check when nothing else uses the dataset") from e
    out = _metrics(stats)
    out.update(dry_run=p.dry_run, version=None)
    return out


def _run_remove_orphan_files(spark: Any, task: "Task") -> dict[str, Any]:
    from lance_ops import jobs

    p, t = task.params, task.table
    try:
        res = jobs.remove_orphan_files(None, t.uri, older_than=timedelta(hours=p.older_than_hours), dry_run=p.dry_run,
                                       retention_duration_check=p.retention_duration_check,
                                       storage_options=t.resolved_storage_options(), manifest_store=t.manifest_store)
    except lf.InvalidArgumentError as e:  # refused before anything is removed
        raise DatasetConfigError(task.dataset, "older_than_hours", str(e),
                                 "keep at least an hour (policy.orphan_min_age_hours), or turn off "
                                 "retention_duration_check when nothing else writes the dataset") from e
    out = {k: v for k, v in res.to_dict().items() if k != "removed_paths"}
    out.update(version=None, paths=[x for x in res.removed_paths][:100])
    return out


def _run_restore(spark: Any, task: "Task") -> dict[str, Any]:
    from lance_ops import jobs

    p = task.params
    return jobs.restore(None, task.table.uri, restore_target(p), tag_current=p.tag_current,
                        **task.job_kwargs()).to_dict()


# ----------------------------------------------------------------------------- in-process runners
def _metrics(obj: Any) -> dict[str, Any]:
    out = dataclasses.asdict(obj)
    out.pop("removed_paths", None)
    return out


def _local_compact(task: "Task") -> dict[str, Any]:
    p = task.params
    return _metrics(task.table.open().compact_files(
        target_rows_per_fragment=p.target_rows_per_fragment, max_rows_per_group=p.max_rows_per_group,
        materialize_deletions=p.materialize_deletions, materialize_deletions_threshold=p.materialize_deletions_threshold,
        max_source_fragments=p.max_source_fragments, max_source_rows=p.max_source_rows,
        max_source_bytes=p.max_source_bytes, bin_order=p.bin_order, data_storage_version=p.data_storage_version,
        cluster_by=list(p.cluster_by) or None, strategy=p.strategy, dry_run=p.dry_run,
        transaction_properties=dict(task.transaction_properties)))


def _local_materialize_deletions(task: "Task") -> dict[str, Any]:
    p = task.params
    return _metrics(task.table.open().materialize_deletions(
        p.threshold, max_source_fragments=p.max_source_fragments, max_source_rows=p.max_source_rows,
        max_source_bytes=p.max_source_bytes, bin_order=p.bin_order, dry_run=p.dry_run,
        transaction_properties=dict(task.transaction_properties)))


def _local_optimize_indices(task: "Task") -> dict[str, Any]:
    from lance_ops.format.distributed import ObjectStore, build_indices, commit_handler_for

    p, t = task.params, task.table
    ds = t.open()
    store = ObjectStore(ds.uri, t.resolved_storage_options())
    plan = lf.plan_optimize_indices(ds.manifest, num_indices_to_merge=p.num_indices_to_merge,
                                    index_names=list(p.index_names) if p.index_names else None)
    m = build_indices(store, ds.manifest, plan, handler=commit_handler_for(store, t.manifest_store),
                      properties=dict(task.transaction_properties))
    if m is None:
        return {"segments_added": 0, "version": None}
    return {"segments_added": len(plan.tasks), "segments_removed": len(plan.removed),
            "rows_indexed": sum(len(x.fragment_ids) for x in plan.tasks), "version": m.version}


def _run_maintain(spark: Any, task: "Task") -> dict[str, Any]:
    raise DatasetConfigError(task.dataset, "operation", "maintain is a decision, not one Spark job",
                             "run it with lance_ops.orchestration.maintain.maintain (every orchestrator does)")


_SOURCE_FIX = "point the source (path/format, or source: in lance_ops.yaml) at data with the dataset's columns"

OPERATIONS: dict[str, OperationSpec] = {spec.name: spec for spec in (
    OperationSpec("append", AppendParams, True, True, False, "append.path", _SOURCE_FIX, _run_append, _none),
    OperationSpec("upsert", UpsertParams, True, True, True, "upsert.path", _SOURCE_FIX + " (and `on` at its keys)",
                  _run_upsert, _validate_upsert),
    OperationSpec("delete", DeleteParams, True, True, True, "delete.where",
                  "write the predicate with the dataset's columns", _run_delete, _validate_delete),
    OperationSpec("compact", CompactParams, False, True, True, "compact", "fix the run config", _run_compact, _none,
                  _local_compact),
    OperationSpec("materialize_deletions", MaterializeDeletionsParams, False, True, True, "materialize_deletions",
                  "fix the run config", _run_materialize_deletions, _none, _local_materialize_deletions),
    OperationSpec("optimize_indices", OptimizeIndicesParams, True, True, True, "optimize_indices.index_names",
                  f"name indices of a kind lance_ops extends ({INDEX_KINDS}), or leave index_names empty",
                  _run_optimize_indices, _validate_optimize_indices, _local_optimize_indices),
    OperationSpec("write_change_feed", ChangeFeedParams, False, True, True, "change_feed",
                  "recreate the dataset with enable_stable_row_ids=True, or set change_feed.enabled: false",
                  _run_change_feed, _validate_change_feed),
    OperationSpec("cleanup_old_versions", CleanupParams, False, False, True, "cleanup_old_versions.older_than_days",
                  "keep at least an hour", _run_cleanup, _none),
    OperationSpec("remove_orphan_files", RemoveOrphanFilesParams, False, False, True,
                  "remove_orphan_files.older_than_hours", "keep at least an hour", _run_remove_orphan_files, _none),
    OperationSpec("restore", RestoreParams, False, False, True, "restore.version/timestamp/tag",
                  "name a version, time or tag cleanup kept (lance-ops inspect lists them)", _run_restore,
                  _validate_restore),
    OperationSpec("maintain", MaintainParams, False, True, True, "maintain", "fix the dataset's policy",
                  _run_maintain, _none),
)}

#: operations that run one Spark job (``lance_ops.jobs``)
SPARK_OPERATIONS = tuple(n for n, s in OPERATIONS.items() if s.spark and n != "maintain")


def operation(name: str) -> OperationSpec:
    """The spec of ``name``; an unknown name is a DatasetConfigError listing the known ones."""
    try:
        return OPERATIONS[name]
    except KeyError:
        raise DatasetConfigError("-", "operation", f"no operation {name!r}",
                                 f"use one of {sorted(OPERATIONS)}") from None


# ----------------------------------------------------------------------------- parameters
def _policy_value(d: Any, key: str) -> Any:
    """The value of a policy key (``upsert_on``, ``source.path``, ``change_feed.format``) in a
    ``DatasetSettings``: ``policy.<key>`` unless the key names another section."""
    head, _, rest = key.partition(".")
    obj = getattr(d, head) if rest else d.policy
    return getattr(obj, rest or head)


def policy_defaults(name: str, d: Any | None) -> dict[str, Any]:
    """The parameters of ``name`` the dataset's settings fill (its source, policy, change feed)."""
    if d is None:
        return {}
    out = {}
    for f in dataclasses.fields(operation(name).params):
        key = f.metadata.get("policy")
        if key:
            value = _policy_value(d, key)
            out[f.name] = tuple(value) if isinstance(value, list | tuple) else value
    return out


def _coerce(f: dataclasses.Field, value: Any) -> Any:
    if isinstance(value, list) and "tuple" in str(f.type):
        return tuple(tuple(v) if isinstance(v, list) else v for v in value)
    if isinstance(value, Mapping):
        return dict(value)
    return value


def resolve_params(name: str, d: Any | None = None, overrides: Mapping[str, Any] | None = None) -> Any:
    """The parameters of ``name``: the class's defaults, then the dataset's settings, then
    ``overrides`` (None values are unset).  Unknown override names are a DatasetConfigError."""
    cls = operation(name).params
    fields = {f.name: f for f in dataclasses.fields(cls)}
    values = policy_defaults(name, d)
    for key, value in (overrides or {}).items():
        if key not in fields:
            raise DatasetConfigError(getattr(d, "name", "-"), f"{name}.{key}", f"{name} has no parameter {key!r}",
                                     f"use one of {sorted(fields)}")
        if value is not None:
            values[key] = value
    return cls(**{k: _coerce(fields[k], v) for k, v in values.items() if v is not None})


def params_to_json(params: Any) -> dict[str, Any]:
    """A parameter object as JSON values (tuples as lists)."""
    def plain(v: Any) -> Any:
        if isinstance(v, tuple | list):
            return [plain(x) for x in v]
        if isinstance(v, Mapping):
            return {str(k): plain(x) for k, x in v.items()}
        return v

    return {f.name: plain(getattr(params, f.name)) for f in dataclasses.fields(params)}


def params_from_json(name: str, data: Mapping[str, Any]) -> Any:
    cls = operation(name).params
    fields = {f.name: f for f in dataclasses.fields(cls)}
    return cls(**{k: _coerce(fields[k], v) for k, v in data.items() if k in fields})
