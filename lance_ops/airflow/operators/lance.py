"""One operator per lance_ops job, each a thin shell over :func:`lance_ops.jobs.tasks.run_task`
(the same call Dagster's dataset asset makes) or, for cleanup, ``LanceDataset.cleanup_old_versions``.

Every operator names its dataset by ``dataset`` (a name in ``lance_ops.yaml``, whose settings give
the defaults) or ``uri``; ``uri``, predicates and version ranges are templated.  It returns the
job's metrics as its XCom (with the committed ``version``), declares the dataset as an outlet
``Asset`` and puts ``version``, ``row_count`` and ``operation`` on the asset event.  Commits of
append, delete and upsert carry ``txnAppId = airflow/<dag_id>/<run_id>/<task_id>/<map_index>``, so
a retried or cleared task commits at most once.
"""

import time
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any, ClassVar

from airflow.sdk import Asset, BaseOperator, Context

from lance_ops.airflow.errors import LanceConfigError
from lance_ops.airflow.hooks.lance import LanceHook
from lance_ops.format import OPTIMIZE_INDICES_DEFAULTS
from lance_ops.format.errors import InvalidArgumentError, SchemaError, UnsupportedFeatureError
from lance_ops.policy import OPERATION_PROPERTY, manifest_stats
from lance_ops.settings import DatasetConfigError, DatasetSettings, Settings, SparkSettings, load_settings

#: Operations whose single commit carries an idempotency key (compaction commits twice).
IDEMPOTENT_OPERATIONS = ("append", "delete", "upsert")
RUN_PROPERTY = "airflow/run_id"
DAG_PROPERTY = "airflow/dag_id"
TXN_APP_ID, TXN_VERSION = "txnAppId", "txnVersion"  # lance_ops.format.txn.idempotency's keys


#: operation -> (argument at fault, fix) when its job refuses the input before writing
_FIELDS = {
    "append": ("source", "point source/format at data with the dataset's columns"),
    "upsert": ("source", "point source/format at data with the dataset's columns (and `on` at its keys)"),
    "delete": ("where", "write the predicate with the dataset's columns"),
    "write_change_feed": ("dataset", "the change feed needs stable row ids: recreate the dataset with them"),
}


def asset_uri(uri: str) -> str:
    """The Airflow asset URI of a dataset: local paths as ``file://``, URLs as written."""
    return uri if "://" in uri else f"file://{uri}"


def txn_app_id(context: Context) -> str:
    """``airflow/<dag_id>/<run_id>/<task_id>/<map_index>``: one write of one task instance."""
    ti = context["ti"]
    return f"airflow/{ti.dag_id}/{ti.run_id}/{ti.task_id}/{getattr(ti, 'map_index', -1)}"


class LanceBaseOperator(BaseOperator):
    """What every Lance operator shares: the dataset, the connection, the task, the asset event."""

    operation: ClassVar[str] = ""
    template_fields: Sequence[str] = ("dataset", "uri")
    ui_color = "#e8f4ff"

    def __init__(self, *, dataset: str | None = None, uri: str | None = None,
                 lance_conn_id: str | None = LanceHook.default_conn_name, config_path: str | None = None,
                 **kwargs: Any) -> None:
        if dataset is None and uri is None:
            raise ValueError(f"{type(self).__name__}: give dataset (a name in lance_ops.yaml) or uri")
        if "outlets" not in kwargs:
            declared = self.declared_asset(dataset, uri, config_path)
            if declared is not None:
                kwargs["outlets"] = [declared]
        super().__init__(**kwargs)
        self.dataset, self.uri, self.lance_conn_id, self.config_path = dataset, uri, lance_conn_id, config_path

    @classmethod
    def declared_asset(cls, dataset: str | None, uri: str | None, config_path: str | None) -> Asset | None:
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
            raise LanceConfigError(e.dataset, e.field, e.problem, e.fix) from e

    @property
    def name(self) -> str:
        return str(self.dataset or self.uri)

    def config_error(self, field: str, problem: str, fix: str) -> LanceConfigError:
        return LanceConfigError(self.name, field, problem, fix)

    def job_params(self, d: DatasetSettings | None, hook: LanceHook, uri: str) -> dict[str, Any]:
        """The job's arguments (the task's ``params``); checks them before anything runs."""
        raise NotImplementedError

    # --------------------------------------------------------------- execution
    def execute(self, context: Context) -> dict[str, Any]:
        d = self.dataset_settings()
        uri = str(self.uri or (d.uri if d else ""))
        hook = LanceHook(self.lance_conn_id)
        params = self.job_params(d, hook, uri)
        t0 = time.perf_counter()
        result = self.run(context, d, hook, uri, params)
        result.setdefault("seconds", round(time.perf_counter() - t0, 3))
        self.record(context, hook, uri, d, result)
        return result

    def run(self, context: Context, d: DatasetSettings | None, hook: LanceHook, uri: str,
            params: dict[str, Any]) -> dict[str, Any]:
        task = {
            "operation": self.operation, "uri": uri,
            "storage_options": {**(d.storage_options if d else {}), **hook.storage_options},
            "storage_options_env": dict(d.storage_options_env) if d else {},
            "params": params, "transaction_properties": self.commit_properties(context),
        }
        spark = hook.spark_settings(self.settings().spark if d else SparkSettings())
        try:
            return hook.run_task(task, spark)
        except (SchemaError, UnsupportedFeatureError) as e:
            field, fix = _FIELDS.get(self.operation, (self.operation, "fix the operator's arguments"))
            raise self.config_error(field, str(e), fix) from e

    def commit_properties(self, context: Context) -> dict[str, str]:
        """The commit's stamp; for single-commit operations also the idempotency key."""
        ti = context["ti"]
        props = {RUN_PROPERTY: str(ti.run_id), DAG_PROPERTY: str(ti.dag_id), OPERATION_PROPERTY: self.operation}
        if self.operation in IDEMPOTENT_OPERATIONS:
            props.update({TXN_APP_ID: txn_app_id(context), TXN_VERSION: "1"})
        return props

    def record(self, context: Context, hook: LanceHook, uri: str, d: DatasetSettings | None,
               result: dict[str, Any]) -> None:
        """Put ``version``, ``row_count`` and the operation on the outlet asset's event."""
        version = result.get("version")
        ds = hook.open_dataset(uri, version=version, storage_options=d.storage_options if d else None) \
            if hook.latest_version(uri) is not None else None
        small = d.policy.target_rows_per_fragment if d else 1_048_576
        stats = manifest_stats(ds.manifest, small_fragment_rows=small) if ds is not None else {}
        result.setdefault("row_count", stats.get("rows"))
        extra = {"version": ds.version if ds is not None else None, "row_count": stats.get("rows"),
                 "operation": result.get("operation", self.operation), "committed": version is not None,
                 "fragments": stats.get("fragments")}
        for outlet in self.outlets:
            if isinstance(outlet, Asset):
                context["outlet_events"][outlet].extra = extra

    def require_dataset(self, hook: LanceHook, uri: str) -> None:
        if hook.latest_version(uri) is None:
            raise self.config_error("uri", f"no Lance dataset at {uri} to {self.operation}",
                                    "run LanceAppendOperator first (it creates the dataset), or fix the uri")


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
                 max_rows_per_file: int = 1_048_576, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.source, self.format, self.options = source, format, dict(options or {})
        self.rows, self.start_id, self.max_rows_per_file = rows, start_id, max_rows_per_file

    def source_params(self, d: DatasetSettings | None) -> dict[str, Any]:
        src = d.source if d else None
        fmt = self.format or (src.format if src else None)
        if fmt is None:
            raise self.config_error("format", "no source format", "pass format= (parquet, csv, ..., or 'generate')")
        path = self.source or (src.path if src else None)
        if fmt != "generate" and not path:
            raise self.config_error("source", f"source format {fmt!r} needs a path", "pass source=<path>")
        rows = self.rows if self.rows is not None else (src.rows if src else 0)
        return {"format": fmt, "path": path, "rows": rows, "start_id": self.start_id,
                "options": self.options or (dict(src.options) if src else {}),
                "max_rows_per_file": int(self.max_rows_per_file)}


class LanceAppendOperator(_SourceOperator):
    """Append a source (a Spark-readable ``source`` path and ``format``, or generated rows) with
    ``lance_ops.jobs.append``; the first append creates the dataset (stable row ids on)."""

    operation = "append"
    template_fields: Sequence[str] = ("dataset", "uri", "source")

    def job_params(self, d: DatasetSettings | None, hook: LanceHook, uri: str) -> dict[str, Any]:
        return self.source_params(d)


class LanceUpsertOperator(_SourceOperator):
    """Update the rows matching ``on`` and insert the others (``lance_ops.jobs.upsert``)."""

    operation = "upsert"
    template_fields: Sequence[str] = ("dataset", "uri", "source")

    def __init__(self, *, on: Sequence[str] | None = None, tag: str = "upserted", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.on, self.tag = list(on) if on else None, tag

    def job_params(self, d: DatasetSettings | None, hook: LanceHook, uri: str) -> dict[str, Any]:
        self.require_dataset(hook, uri)
        on = self.on or (list(d.policy.upsert_on) if d else ["id"])
        columns = hook.open_dataset(uri).schema.names
        missing = [k for k in on if k not in columns]
        if missing:
            raise self.config_error("on", f"key column(s) {missing} are not columns of the dataset",
                                    f"use key columns from {columns}")
        return {**self.source_params(d), "on": on, "tag": self.tag}


class LanceDeleteOperator(LanceBaseOperator):
    """Delete the rows matching the Spark SQL predicate ``where`` (``lance_ops.jobs.delete``)."""

    operation = "delete"
    template_fields: Sequence[str] = ("dataset", "uri", "where")

    def __init__(self, *, where: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.where = where

    def job_params(self, d: DatasetSettings | None, hook: LanceHook, uri: str) -> dict[str, Any]:
        self.require_dataset(hook, uri)
        if not str(self.where or "").strip():
            raise self.config_error("where", "a delete needs a predicate", "pass where=, e.g. \"id < 100\"")
        return {"where": str(self.where)}


class LanceCompactOperator(LanceBaseOperator):
    """Merge small fragments, keeping row ids and row versions (``lance_ops.jobs.compact``);
    unset options come from the dataset's policy."""

    operation = "compact"

    def __init__(self, *, target_rows_per_fragment: int | None = None, max_rows_per_group: int | None = None,
                 materialize_deletions: bool = True, materialize_deletions_threshold: float | None = None,
                 max_source_fragments: int | None = None, dry_run: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.target_rows_per_fragment, self.max_rows_per_group = target_rows_per_fragment, max_rows_per_group
        self.materialize_deletions = materialize_deletions
        self.materialize_deletions_threshold = materialize_deletions_threshold
        self.max_source_fragments, self.dry_run = max_source_fragments, dry_run

    def job_params(self, d: DatasetSettings | None, hook: LanceHook, uri: str) -> dict[str, Any]:
        self.require_dataset(hook, uri)
        p = d.policy if d else None
        return {
            "target_rows_per_fragment": self.target_rows_per_fragment or (p.target_rows_per_fragment if p else 1_048_576),
            "max_rows_per_group": self.max_rows_per_group or (p.max_rows_per_group if p else 1024),
            "materialize_deletions": self.materialize_deletions,
            "materialize_deletions_threshold": self.materialize_deletions_threshold
            if self.materialize_deletions_threshold is not None else (p.deleted_ratio_threshold if p else 0.1),
            "max_source_fragments": self.max_source_fragments, "dry_run": self.dry_run,
        }


class LanceMaterializeDeletionsOperator(LanceBaseOperator):
    """Rewrite fragments whose deleted fraction is at least ``threshold`` (``lance_ops.jobs.materialize_deletions``)."""

    operation = "materialize_deletions"

    def __init__(self, *, threshold: float | None = None, dry_run: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.threshold, self.dry_run = threshold, dry_run

    def job_params(self, d: DatasetSettings | None, hook: LanceHook, uri: str) -> dict[str, Any]:
        self.require_dataset(hook, uri)
        default = d.policy.deleted_ratio_threshold if d else 0.1
        return {"threshold": self.threshold if self.threshold is not None else default, "dry_run": self.dry_run}


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

    def job_params(self, d: DatasetSettings | None, hook: LanceHook, uri: str) -> dict[str, Any]:
        self.require_dataset(hook, uri)
        merge = self.num_indices_to_merge
        if merge is not None and (isinstance(merge, bool) or not isinstance(merge, int) or merge < 0):
            raise self.config_error("num_indices_to_merge", f"{merge!r} is not a non-negative integer",
                                    "pass 0 (a new segment) or the number of newest segments to merge")
        return {
            "num_indices_to_merge": OPTIMIZE_INDICES_DEFAULTS.num_indices_to_merge if merge is None else merge,
            "index_names": list(self.index_names) if self.index_names else None,
            "rows_per_task": self.rows_per_task or OPTIMIZE_INDICES_DEFAULTS.rows_per_task,
        }


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

    def job_params(self, d: DatasetSettings | None, hook: LanceHook, uri: str) -> dict[str, Any]:
        self.require_dataset(hook, uri)
        p = d.policy if d else None
        older = self.older_than if self.older_than is not None else timedelta(days=p.cleanup_older_than_days if p else 14)
        return {"older_than": older, "retain_versions": self.retain_versions or (p.cleanup_retain_versions if p else 1)}

    def run(self, context: Context, d: DatasetSettings | None, hook: LanceHook, uri: str,
            params: dict[str, Any]) -> dict[str, Any]:
        ds = hook.open_dataset(uri, storage_options=d.storage_options if d else None)
        try:
            stats = ds.cleanup_old_versions(
                older_than=params["older_than"], retain_versions=int(params["retain_versions"]), dry_run=self.dry_run,
                delete_unverified=self.delete_unverified, retention_duration_check=self.retention_duration_check,
            )
        except InvalidArgumentError as e:  # refused before anything is removed
            raise self.config_error("older_than", str(e), "keep at least an hour (policy.cleanup_older_than_days), "
                                    "or pass retention_duration_check=False when nothing else uses the dataset") from e
        fields = getattr(stats, "__dataclass_fields__", None) or vars(stats)
        out: dict[str, Any] = {k: getattr(stats, k) for k in fields if k != "removed_paths"}
        out.update(operation=self.operation, dry_run=self.dry_run, version=None)
        return out


class LanceChangeFeedOperator(LanceBaseOperator):
    """Write the changes of ``(begin_version, end_version]`` to a parquet or Lance sink
    (``lance_ops.jobs.write_change_feed``; parquet: the Hive-style ``change_range=<b>-<e>`` directory
    of the Dagster change feed asset).  ``end_version`` defaults to the latest version,
    ``begin_version`` to ``end_version - 1``; both are templated (and mappable)."""

    operation = "write_change_feed"
    template_fields: Sequence[str] = ("dataset", "uri", "begin_version", "end_version", "sink_uri")

    def __init__(self, *, begin_version: int | str | None = None, end_version: int | str | None = None,
                 sink_uri: str | None = None, format: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.begin_version, self.end_version, self.sink_uri, self.format = begin_version, end_version, sink_uri, format

    @classmethod
    def declared_asset(cls, dataset: str | None, uri: str | None, config_path: str | None) -> Asset | None:
        """The outlet is the sink (what this operator writes); given ``sink_uri``, pass ``outlets=``."""
        return lance_asset(dataset, change_feed=True, config_path=config_path) if uri is None else None

    def _number(self, field: str, value: Any) -> int | None:
        if value is None or (isinstance(value, str) and value.strip() in ("", "None")):
            return None
        try:
            return int(value)
        except (TypeError, ValueError):
            raise self.config_error(field, f"{value!r} is not a version number",
                                    "pass an integer (or a template rendering to one)") from None

    def job_params(self, d: DatasetSettings | None, hook: LanceHook, uri: str) -> dict[str, Any]:
        self.require_dataset(hook, uri)
        latest = hook.latest_version(uri)
        assert latest is not None
        end = self._number("end_version", self.end_version)
        end = latest if end is None else end
        begin = self._number("begin_version", self.begin_version)
        begin = end - 1 if begin is None else begin
        if not 0 <= begin < end <= latest:
            raise self.config_error("begin_version/end_version", f"the range ({begin}, {end}] is not within "
                                    f"(0, {latest}] with begin < end", f"pick versions between 0 and {latest}")
        sink = self.sink_uri or (d.change_feed.sink_uri if d else None)
        fmt = self.format or (d.change_feed.format if d else "parquet")
        if not sink:
            raise self.config_error("sink_uri", "no sink", "pass sink_uri= (or set change_feed.sink_uri in lance_ops.yaml)")
        if fmt not in ("parquet", "lance"):
            raise self.config_error("format", f"{fmt!r} is not a sink format", "use 'parquet' or 'lance'")
        return {"begin_version": begin, "end_version": end, "sink_uri": sink, "format": fmt}

    def run(self, context: Context, d: DatasetSettings | None, hook: LanceHook, uri: str,
            params: dict[str, Any]) -> dict[str, Any]:
        out = super().run(context, d, hook, uri, params)
        part = (out.get("ranges") or [{}])[0]
        out.update(begin_version=params["begin_version"], end_version=params["end_version"],
                   location=part.get("location"), sink_uri=params["sink_uri"])
        return out

    def record(self, context: Context, hook: LanceHook, uri: str, d: DatasetSettings | None,
               result: dict[str, Any]) -> None:
        """The sink's asset event: the range's end as ``version``, the rows written as ``row_count``."""
        extra = {"version": result["end_version"], "row_count": result.get("rows_written"),
                 "operation": self.operation, "begin_version": result["begin_version"],
                 "end_version": result["end_version"], "location": result.get("location"), "source_uri": uri}
        for outlet in self.outlets:
            if isinstance(outlet, Asset):
                context["outlet_events"][outlet].extra = extra


class LanceMaintainOperator(LanceBaseOperator):
    """What the dataset's policy in ``lance_ops.yaml`` asks for now: a compaction, a deletion
    materialisation, or nothing (the XCom says which, with the policy's reasons)."""

    operation = "maintain"

    def job_params(self, d: DatasetSettings | None, hook: LanceHook, uri: str) -> dict[str, Any]:
        if d is None:
            raise self.config_error("dataset", "the maintenance policy lives in lance_ops.yaml",
                                    "pass dataset=<name in lance_ops.yaml>")
        self.require_dataset(hook, uri)
        return {}

    def run(self, context: Context, d: DatasetSettings | None, hook: LanceHook, uri: str,
            params: dict[str, Any]) -> dict[str, Any]:
        from lance_ops.policy import evaluate

        assert d is not None
        so = {**d.storage_options, **hook.storage_options}
        wanted = evaluate(uri, d.policy, storage_options=so)
        if wanted is None:
            self.log.info("%s: the latest version is within the policy; nothing to do", self.name)
            return {"operation": "maintain", "version": None, "reasons": []}
        self.log.info("%s: the policy asks for %s (%s)", self.name, wanted.operation, "; ".join(wanted.reasons))
        p = d.policy
        params = ({"target_rows_per_fragment": p.target_rows_per_fragment, "max_rows_per_group": p.max_rows_per_group,
                   "materialize_deletions": True, "materialize_deletions_threshold": p.deleted_ratio_threshold,
                   "max_source_fragments": None, "dry_run": False}
                  if wanted.operation == "compact" else {"threshold": p.deleted_ratio_threshold, "dry_run": False})
        self.operation = wanted.operation  # type: ignore[misc]  (this run's commit stamp and task)
        try:
            out = super().run(context, d, hook, uri, params)
        finally:
            self.operation = "maintain"  # type: ignore[misc]
        out.update(reasons=list(wanted.reasons), requested=wanted.operation, operation=wanted.operation)
        return out


def maintenance_due(uri: str, d: DatasetSettings, storage_options: Mapping[str, Any]) -> dict[str, Any] | None:
    """The policy's request at the latest version as a dict (the maintenance trigger's event), or None."""
    from lance_ops.policy import evaluate

    wanted = evaluate(uri, d.policy, storage_options=storage_options)
    if wanted is None:
        return None
    return {"operation": wanted.operation, "reasons": list(wanted.reasons), "version": wanted.version}


__all__ = [
    "LanceAppendOperator",
    "LanceBaseOperator",
    "LanceChangeFeedOperator",
    "LanceCleanupOperator",
    "LanceCompactOperator",
    "LanceDeleteOperator",
    "LanceMaintainOperator",
    "LanceMaterializeDeletionsOperator",
    "LanceUpsertOperator",
    "asset_uri",
    "lance_asset",
    "maintenance_due",
    "txn_app_id",
]
