"""One operator per registry operation (:mod:`lance_ops.orchestration.operations`), each an adapter:
its arguments are the operation's parameters (unset ones filled by the dataset's policy in
``lance_ops.yaml``), its task a :class:`~lance_ops.orchestration.Task` run through the hook (in the
worker, or spark-submit), the same task Dagster's dataset asset runs.

Every operator names its dataset by ``dataset`` (a name in ``lance_ops.yaml``, whose settings give
the defaults) or ``uri``; ``uri``, predicates and version ranges are templated.  The connection's
storage options and manifest store reach the job.  It returns the operation's result as its XCom
(``OperationResult.to_dict()``: the job's metrics, ``operation``, ``version``), declares the dataset
as an outlet ``Asset`` and puts ``version``, ``row_count`` and ``operation`` on the asset event.
Commits of append, delete, upsert and optimize_indices carry
``txnAppId = airflow/<dag_id>/<run_id>/<task_id>/<map_index>/<operation>``
(:func:`lance_ops.orchestration.airflow_stamp`), so a retried or cleared task commits at most once.
Bad configuration, and errors a retry cannot fix (a wrong schema, an unsupported feature), fail the
task without retries (``AirflowFailException``; the typed lance_ops error is the cause).
"""

import time
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any, ClassVar

from airflow.sdk import Asset, BaseOperator, Context
from airflow.sdk.exceptions import AirflowFailException

from lance_ops.airflow.errors import LanceConfigError
from lance_ops.airflow.hooks.lance import LanceHook
from lance_ops.airflow.lineage import OpenLineageMixin
from lance_ops.format.errors import LanceOpsError, SchemaError, UnsupportedFeatureError
from lance_ops.orchestration import (
    DatasetConfigError,
    OperationResult,
    TableRef,
    Task,
    airflow_stamp,
    is_retryable,
    operation,
    resolve_params,
)
from lance_ops.orchestration.maintain import decide_maintenance, maintain
from lance_ops.orchestration.policy import manifest_stats
from lance_ops.orchestration.settings import (
    DatasetSettings,
    PolicySettings,
    Settings,
    SparkSettings,
    load_settings,
)


def asset_uri(uri: str) -> str:
    """The Airflow asset URI of a dataset: local paths as ``file://``, URLs as written."""
    return uri if "://" in uri else f"file://{uri}"


def txn_app_id(context: Context) -> str:
    """``airflow/<dag_id>/<run_id>/<task_id>/<map_index>``: one write of one task instance."""
    return _stamp(context).app_id


def _stamp(context: Context) -> Any:
    ti = context["ti"]
    return airflow_stamp(ti.dag_id, ti.run_id, ti.task_id, getattr(ti, "map_index", -1))


def _config_error(e: DatasetConfigError) -> LanceConfigError:
    err = LanceConfigError(e.dataset, e.field, e.problem, e.fix)
    err.__cause__ = e.__cause__ or e
    return err


class LanceBaseOperator(OpenLineageMixin, BaseOperator):
    """What every Lance operator shares: the dataset, the connection, the task, the asset event.

    ``params_from_arguments()`` maps the operator's arguments to the operation's parameters (None:
    unset, the dataset's policy or the parameter class's default applies).
    """

    operation: ClassVar[str] = ""
    template_fields: Sequence[str] = ("dataset", "uri")
    ui_color = "#e8f4ff"

    def __init__(self, *, dataset: str | None = None, uri: str | None = None,
                 lance_conn_id: str | None = LanceHook.default_conn_name, config_path: str | None = None,
                 **kwargs: Any) -> None:
        if dataset is None and uri is None:
            raise ValueError(f"{type(self).__name__}: give dataset (a name in lance_ops.yaml) or uri")
        if "outlets" not in kwargs:
            declared = self.declared_asset(dataset, uri, config_path, kwargs)
            if declared is not None:
                kwargs["outlets"] = [declared]
        super().__init__(**kwargs)
        self.dataset, self.uri, self.lance_conn_id, self.config_path = dataset, uri, lance_conn_id, config_path

    @classmethod
    def declared_asset(cls, dataset: str | None, uri: str | None, config_path: str | None,
                       kwargs: Mapping[str, Any]) -> Asset | None:
        """The outlet: the dataset's Asset, when its URI is known at parse time (not templated)."""
        return lance_asset(dataset, uri=uri, config_path=config_path)

    # --------------------------------------------------------------- resolution
    def settings(self) -> Settings:
        return load_settings(self.config_path)

    def dataset_settings(self) -> DatasetSettings | None:
        """The dataset's settings (None for a bare ``uri``); an unknown name is a LanceConfigError."""
        if self.dataset is None:
            return None
        try:
            return self.settings().dataset(str(self.dataset))
        except DatasetConfigError as e:
            raise _config_error(e) from e

    @property
    def name(self) -> str:
        return str(self.dataset or self.uri)

    def config_error(self, field: str, problem: str, fix: str) -> LanceConfigError:
        return LanceConfigError(self.name, field, problem, fix)

    def table(self, d: DatasetSettings | None, hook: LanceHook, uri: str) -> TableRef:
        """The dataset with the connection's storage options and manifest store (over lance_ops.yaml's)."""
        if d is None:
            return TableRef(uri, hook.storage_options, {}, hook.manifest_store)
        return TableRef.from_settings(d, storage_options=hook.storage_options,
                                      manifest_store=hook.manifest_store).with_uri(uri)

    def params_from_arguments(self) -> dict[str, Any]:
        """The operator's arguments as the operation's parameter overrides (None: unset)."""
        return {}

    def job_params(self, d: DatasetSettings | None, table: TableRef) -> Any:
        """The operation's parameters: the class's defaults, the dataset's settings, the arguments."""
        try:
            return resolve_params(self.operation, d, self.params_from_arguments())
        except (DatasetConfigError, TypeError, ValueError) as e:
            raise self.config_error(self.operation, str(e), "fix the operator's arguments") from e

    def task(self, context: Context, table: TableRef, params: Any) -> Task:
        spec = operation(self.operation)
        props = _stamp(context).commit_properties(self.operation, idempotent=spec.idempotent)
        return Task(self.operation, table, params, props, self.name)

    # --------------------------------------------------------------- execution
    def execute(self, context: Context) -> dict[str, Any]:
        d = self.dataset_settings()
        uri = str(self.uri or (d.uri if d else ""))
        hook = LanceHook(self.lance_conn_id)
        table = self.table(d, hook, uri)
        t0 = time.perf_counter()
        result = self.run(context, d, hook, table, self.job_params(d, table))
        out = result.to_dict()
        out.setdefault("seconds", round(time.perf_counter() - t0, 3))
        self.record(context, hook, table, d, out)
        return out

    def run(self, context: Context, d: DatasetSettings | None, hook: LanceHook, table: TableRef,
            params: Any) -> OperationResult:
        """Validate and run the operation's task (its stamp: this task instance)."""
        return self.run_task(context, d, hook, self.task(context, table, params))

    def run_lance_task(self, context: Context, d: DatasetSettings | None, hook: LanceHook, task: Task) -> OperationResult:
        try:
            task.validate()
            if not task.spec.spark:
                return task.run()
            spark = hook.spark_settings(self.settings().spark if d else SparkSettings())
            return hook.run_task(task, spark)
        except LanceConfigError:
            raise
        except DatasetConfigError as e:
            raise _config_error(e) from e
        except (SchemaError, UnsupportedFeatureError) as e:
            raise self.config_error(task.spec.error_field, str(e), task.spec.fix) from e
        except LanceOpsError as e:
            if is_retryable(e):
                raise
            raise AirflowFailException(f"{self.name}: {type(e).__name__}: {e}") from e

    def record(self, context: Context, hook: LanceHook, table: TableRef, d: DatasetSettings | None,
               result: dict[str, Any]) -> None:
        """Put ``version``, ``row_count`` and the operation on the outlet asset's event."""
        version = result.get("version")
        ds = table.open(version) if table.exists() else None
        small = d.policy.target_rows_per_fragment if d else PolicySettings().target_rows_per_fragment
        stats = manifest_stats(ds.manifest, small_fragment_rows=small) if ds is not None else {}
        result.setdefault("row_count", stats.get("rows"))
        self.set_extra(context, {"version": ds.version if ds is not None else None, "row_count": stats.get("rows"),
                                 "operation": result.get("operation", self.operation), "committed": version is not None,
                                 "fragments": stats.get("fragments")})

    def set_extra(self, context: Context, extra: dict[str, Any]) -> None:
        for outlet in self.outlets:
            if isinstance(outlet, Asset):
                context["outlet_events"][outlet].extra = extra


def lance_asset(dataset: str | None = None, *, uri: str | None = None, change_feed: bool = False,
                config_path: str | None = None) -> Asset | None:
    """The Airflow ``Asset`` of a dataset (``change_feed=True``: of its change feed sink), or None
    when it cannot be known at parse time (templated, or a name lance_ops.yaml lacks: the task
    reports that when it runs).  Mapped operators take it as ``outlets=[...]`` in ``partial``."""
    if uri is not None:
        return None if "{{" in uri else Asset(asset_uri(uri))
    if dataset is None or "{{" in dataset:
        return None
    try:
        d = load_settings(config_path).dataset(dataset)
    except (DatasetConfigError, OSError, ValueError):
        return None
    return Asset(asset_uri(d.change_feed.sink_uri if change_feed else d.uri))


class _SourceOperator(LanceBaseOperator):
    def __init__(self, *, source: str | None = None, format: str | None = None,
                 options: Mapping[str, str] | None = None, rows: int | None = None, start_id: int | None = None,
                 max_rows_per_file: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.source, self.format, self.options = source, format, dict(options or {}) or None
        self.rows, self.start_id, self.max_rows_per_file = rows, start_id, max_rows_per_file

    def params_from_arguments(self) -> dict[str, Any]:
        return {"path": self.source, "format": self.format, "options": self.options, "rows": self.rows,
                "start_id": self.start_id, "max_rows_per_file": self.max_rows_per_file}

    def job_params(self, d: DatasetSettings | None, table: TableRef) -> Any:
        p = super().job_params(d, table)
        if p.format is None:
            raise self.config_error("format", "no source format", "pass format= (parquet, csv, ..., or 'generate')")
        if p.format != "generate" and not p.path:
            raise self.config_error("source", f"source format {p.format!r} needs a path", "pass source=<path>")
        return p


class LanceAppendOperator(_SourceOperator):
    """Append a source (a Spark-readable ``source`` path and ``format``, or generated rows) with
    ``lance_ops.jobs.append``; the first append creates the dataset (stable row ids on)."""

    operation = "append"
    template_fields: Sequence[str] = ("dataset", "uri", "source")


class LanceUpsertOperator(_SourceOperator):
    """Update the rows matching ``on`` and insert the others (``lance_ops.jobs.upsert``)."""

    operation = "upsert"
    template_fields: Sequence[str] = ("dataset", "uri", "source")

    def __init__(self, *, on: Sequence[str] | None = None, tag: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.on, self.tag = list(on) if on else None, tag

    def params_from_arguments(self) -> dict[str, Any]:
        return {**super().params_from_arguments(), "on": self.on, "tag": self.tag}


class LanceDeleteOperator(LanceBaseOperator):
    """Delete the rows matching the SQL predicate ``where`` (pylance's dialect; ``lance_ops.jobs.delete``)."""

    operation = "delete"
    template_fields: Sequence[str] = ("dataset", "uri", "where")

    def __init__(self, *, where: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.where = where

    def params_from_arguments(self) -> dict[str, Any]:
        return {"where": str(self.where or "")}


class LanceCompactOperator(LanceBaseOperator):
    """Merge small fragments, keeping row ids and row versions (``lance_ops.jobs.compact``);
    unset options come from the dataset's policy."""

    operation = "compact"

    def __init__(self, *, target_rows_per_fragment: int | None = None, max_rows_per_group: int | None = None,
                 materialize_deletions: bool | None = None, materialize_deletions_threshold: float | None = None,
                 max_source_fragments: int | None = None, dry_run: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.target_rows_per_fragment, self.max_rows_per_group = target_rows_per_fragment, max_rows_per_group
        self.materialize_deletions = materialize_deletions
        self.materialize_deletions_threshold = materialize_deletions_threshold
        self.max_source_fragments, self.dry_run = max_source_fragments, dry_run

    def params_from_arguments(self) -> dict[str, Any]:
        return {"target_rows_per_fragment": self.target_rows_per_fragment, "max_rows_per_group": self.max_rows_per_group,
                "materialize_deletions": self.materialize_deletions,
                "materialize_deletions_threshold": self.materialize_deletions_threshold,
                "max_source_fragments": self.max_source_fragments, "dry_run": self.dry_run}


class LanceMaterializeDeletionsOperator(LanceBaseOperator):
    """Rewrite fragments whose deleted fraction is at least ``threshold`` (``lance_ops.jobs.materialize_deletions``)."""

    operation = "materialize_deletions"

    def __init__(self, *, threshold: float | None = None, dry_run: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.threshold, self.dry_run = threshold, dry_run

    def params_from_arguments(self) -> dict[str, Any]:
        return {"threshold": self.threshold, "dry_run": self.dry_run}


class LanceOptimizeIndicesOperator(LanceBaseOperator):
    """Index the rows no index segment covers yet (``lance_ops.jobs.optimize_indices``): per index a
    new segment over the unindexed fragments, or the newest ``num_indices_to_merge`` segments
    merged with them, as pylance's ``optimize_indices``; one Spark task per group of fragments."""

    operation = "optimize_indices"
    template_fields: Sequence[str] = (*LanceBaseOperator.template_fields, "index_names")

    def __init__(self, *, num_indices_to_merge: int | None = None, index_names: Sequence[str] | None = None,
                 rows_per_task: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.num_indices_to_merge, self.index_names, self.rows_per_task = num_indices_to_merge, index_names, rows_per_task

    def params_from_arguments(self) -> dict[str, Any]:
        merge = self.num_indices_to_merge
        if merge is not None and (isinstance(merge, bool) or not isinstance(merge, int) or merge < 0):
            raise self.config_error("num_indices_to_merge", f"{merge!r} is not a non-negative integer",
                                    "pass 0 (a new segment) or the number of newest segments to merge")
        return {"num_indices_to_merge": merge, "index_names": list(self.index_names) if self.index_names else None,
                "rows_per_task": self.rows_per_task}


class LanceCleanupOperator(LanceBaseOperator):
    """Remove versions older than ``older_than`` beyond the newest ``retain_versions``
    (``LanceDataset.cleanup_old_versions``, in the worker: no Spark).  Commits no version."""

    operation = "cleanup_old_versions"

    def __init__(self, *, older_than: timedelta | None = None, retain_versions: int | None = None,
                 delete_unverified: bool = False, dry_run: bool = False, retention_duration_check: bool = True,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.older_than, self.retain_versions = older_than, retain_versions
        self.delete_unverified, self.dry_run = delete_unverified, dry_run
        self.retention_duration_check = retention_duration_check

    def params_from_arguments(self) -> dict[str, Any]:
        days = self.older_than / timedelta(days=1) if self.older_than is not None else None
        return {"older_than_days": days, "retain_versions": self.retain_versions,
                "delete_unverified": self.delete_unverified, "dry_run": self.dry_run,
                "retention_duration_check": self.retention_duration_check}


class LanceChangeFeedOperator(LanceBaseOperator):
    """Write the changes of ``(begin_version, end_version]`` to a parquet or Lance sink
    (``lance_ops.jobs.write_change_feed``; parquet: the Hive-style ``change_range=<b>-<e>`` directory
    of the Dagster change feed asset).  ``end_version`` defaults to the latest version,
    ``begin_version`` to ``end_version - 1``; both are templated (and mappable).  The outlet is the
    sink (``sink_uri``, else the dataset's ``change_feed.sink_uri``)."""

    operation = "write_change_feed"
    template_fields: Sequence[str] = ("dataset", "uri", "begin_version", "end_version", "sink_uri")

    def __init__(self, *, begin_version: int | str | None = None, end_version: int | str | None = None,
                 sink_uri: str | None = None, format: str | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("outlets", [a for a in [_sink_asset(kwargs.get("dataset"), sink_uri,
                                                                kwargs.get("config_path"))] if a is not None])
        if not kwargs["outlets"]:
            kwargs.pop("outlets")
        super().__init__(**kwargs)
        self.begin_version, self.end_version, self.sink_uri, self.format = begin_version, end_version, sink_uri, format

    @classmethod
    def declared_asset(cls, dataset: str | None, uri: str | None, config_path: str | None,
                       kwargs: Mapping[str, Any]) -> Asset | None:
        return None  # the sink's, set in __init__ (it needs sink_uri)

    def _number(self, field: str, value: Any) -> int | None:
        if value is None or (isinstance(value, str) and value.strip() in ("", "None")):
            return None
        try:
            return int(value)
        except (TypeError, ValueError):
            raise self.config_error(field, f"{value!r} is not a version number",
                                    "pass an integer (or a template rendering to one)") from None

    def job_params(self, d: DatasetSettings | None, table: TableRef) -> Any:
        latest = table.latest_version()
        if latest is None:
            raise self.config_error("uri", f"no Lance dataset at {table.uri} to {self.operation}",
                                    "run LanceAppendOperator first (it creates the dataset), or fix the uri")
        end = self._number("end_version", self.end_version)
        end = latest if end is None else end
        begin = self._number("begin_version", self.begin_version)
        begin = end - 1 if begin is None else begin
        try:
            return resolve_params(self.operation, d, {"ranges": ((begin, end),), "sink_uri": self.sink_uri,
                                                      "format": self.format})
        except DatasetConfigError as e:
            raise _config_error(e) from e

    def record(self, context: Context, hook: LanceHook, table: TableRef, d: DatasetSettings | None,
               result: dict[str, Any]) -> None:
        """The sink's asset event: the range's end as ``version``, the rows written as ``row_count``."""
        (begin, end), = self._ranges
        part = (result.get("ranges") or [{}])[0]
        result.update(begin_version=begin, end_version=end, location=part.get("location"), sink_uri=self._sink)
        self.set_extra(context, {"version": end, "row_count": result.get("rows_written"), "operation": self.operation,
                                 "begin_version": begin, "end_version": end, "location": part.get("location"),
                                 "source_uri": table.uri})

    def run(self, context: Context, d: DatasetSettings | None, hook: LanceHook, table: TableRef,
            params: Any) -> OperationResult:
        self._ranges, self._sink = params.ranges, params.sink_uri
        return super().run(context, d, hook, table, params)


def _sink_asset(dataset: str | None, sink_uri: str | None, config_path: str | None) -> Asset | None:
    """The change feed sink's Asset when known at parse time."""
    if sink_uri is not None:
        return None if "{{" in sink_uri else Asset(asset_uri(sink_uri))
    return lance_asset(dataset, change_feed=True, config_path=config_path)


class LanceMaintainOperator(LanceBaseOperator):
    """What the maintenance planner finds the dataset needs under its policy in ``lance_ops.yaml``
    (:func:`lance_ops.orchestration.maintain.maintain`, the same steps Dagster's ``lance_maintain``
    and ``lance-ops run maintain`` run): compaction or deletion materialisation, optimize_indices,
    cleanup, the orphan sweep, or nothing.  The XCom is the last action's result with the plan's
    ``reasons`` and every action's result under ``actions``; with ``uri`` instead of ``dataset``
    the default policy applies."""

    operation = "maintain"

    def execute(self, context: Context) -> dict[str, Any]:
        d = self.dataset_settings()
        uri = str(self.uri or (d.uri if d else ""))
        hook = LanceHook(self.lance_conn_id)
        table = self.table(d, hook, uri)
        if not table.exists():
            raise self.config_error("uri", f"no Lance dataset at {table.uri} to maintain",
                                    "run LanceAppendOperator first (it creates the dataset), or fix the uri")
        settings = d or _default_settings(uri)

        def runner(name: str, params: Any, reasons: tuple[str, ...]) -> OperationResult:
            self.log.info("%s: the planner asks for %s (%s)", self.name, name, "; ".join(reasons))
            props = _stamp(context).commit_properties(name, idempotent=operation(name).idempotent, reasons=reasons)
            task = Task(name, table, params, props, self.name)
            return self.run_task(context, d, hook, task).with_reasons(reasons)

        results = maintain(table, settings, runner)
        if not results:
            self.log.info("%s: the planner finds nothing to do at the latest version", self.name)
            out: dict[str, Any] = {"operation": "maintain", "version": None, "reasons": [], "actions": []}
        else:
            out = {**results[-1].to_dict(), "requested": results[0].operation,
                   "reasons": [r for x in results for r in x.reasons], "actions": [x.to_dict() for x in results]}
        self.record(context, hook, table, d, out)
        return out


def _default_settings(uri: str) -> DatasetSettings:
    """Settings of a dataset given by ``uri`` alone: lance_ops' default policy and source."""
    return DatasetSettings(name="dataset", uri=uri, change_feed={"sink_uri": f"{uri.rstrip('/')}_changes"})


def maintenance_due(table: TableRef, policy: PolicySettings) -> dict[str, Any] | None:
    """The first action the maintenance planner finds due at the latest version as a dict (the
    maintenance trigger's event), or None."""
    actions = decide_maintenance(table, policy)
    if not actions:
        return None
    return {"operation": actions[0].operation, "reasons": list(actions[0].reasons), "version": actions[0].version}


__all__ = [
    "LanceAppendOperator",
    "LanceBaseOperator",
    "LanceChangeFeedOperator",
    "LanceCleanupOperator",
    "LanceCompactOperator",
    "LanceDeleteOperator",
    "LanceMaintainOperator",
    "LanceMaterializeDeletionsOperator",
    "LanceOptimizeIndicesOperator",
    "LanceUpsertOperator",
    "asset_uri",
    "lance_asset",
    "maintenance_due",
    "txn_app_id",
]
