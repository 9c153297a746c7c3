"""``LanceIOManager``: users' own assets read and write Lance datasets (as dagster-deltalake does for Delta).

    defs = Definitions(
        assets=[raw_events, daily_totals],
        resources={"io_manager": LanceIOManager(root_uri="gs://bucket/lake",
                                                storage=LanceStorage(storage_options_env={"token": "GCS_TOKEN"}))},
    )

- Outputs: ``pyarrow.Table``, ``pyarrow.RecordBatchReader`` (streamed), ``pandas.DataFrame`` and,
  when installed, ``polars.DataFrame``.  The asset ``["sales", "daily"]`` is the dataset
  ``{root_uri}/sales/daily.lance``; datasets it creates have stable row ids (change feeds work).
- Write modes (``mode``, or the asset's definition/output metadata ``"mode"``): ``overwrite``
  (default), ``append``, ``merge`` on key columns (``merge_on``, or metadata ``"merge_on"``).
- Schema evolution (``schema_mode="merge"``, dagster-deltalake's name, or the metadata
  ``"schema_mode"``): columns of the output the dataset lacks are added first (nullable, a
  metadata-only ``add_columns``), then the rows are written in the asset's mode.  Without it an
  append or merge must have the dataset's columns.
- Partitioned assets (time windows, static, dynamic, multi): the asset's metadata
  ``"partition_expr"`` names the partition column (a dict per dimension for multi partitions).
  A run replaces the partition's rows (``overwrite``, one atomic commit; rows outside the
  partition are refused) or upserts them (``merge``) or appends them (``append``).
- Inputs: the whole table, or the partitions the input maps to; ``"columns"`` in the input
  metadata selects columns; ``"version"`` pins a version (a number, a tag name or
  ``[branch, version]``, as pylance's ``version=``) and ``"branch"`` reads a branch.  Loaded as
  the input's annotation (Table, RecordBatchReader, pandas or polars DataFrame; default: pyarrow Table).
- Output metadata: ``dagster/uri``, ``dagster/table_name``, ``dagster/row_count``,
  ``dagster/column_schema`` (TableSchema), ``lance/version`` and the rows written; the Lance
  version is the materialisation's data version.
"""

import hashlib
from datetime import datetime
from enum import Enum
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from dagster import (
    ConfigurableIOManager,
    ConfigurableResource,
    DataVersion,
    InputContext,
    MetadataValue,
    MultiPartitionKey,
    OutputContext,
    ResourceDependency,
    TimeWindowPartitionsDefinition,
)
from pydantic import Field

import lance_ops.format as lf
from lance_ops.assets.metadata import RUN_ID_PROPERTY, table_metadata
from lance_ops.assets.stats import JOB_PROPERTY
from lance_ops.assets.table_writes import merge, replace_where, rows_outside
from lance_ops.format import COMMIT_DEFAULTS, DEFAULT_MAX_ROWS_PER_FILE
from lance_ops.format.distributed import with_idempotency
from lance_ops.format.errors import DatasetNotFoundError, SchemaError


class WriteMode(Enum):
    overwrite = "overwrite"
    append = "append"
    merge = "merge"


class SchemaMode(Enum):
    """dagster-deltalake's ``schema_mode``: ``merge`` evolves the dataset on write."""

    merge = "merge"


class LanceStorage(ConfigurableResource):  # type: ignore[misc]
    """How to reach the datasets: fsspec storage options; secrets come from environment variables
    (``storage_options_env``: option -> variable), read when a dataset is opened, never logged."""

    storage_options: dict[str, str] = {}
    storage_options_env: dict[str, str] = {}

    def resolved(self) -> dict[str, str]:
        import os

        opts = dict(self.storage_options)
        for key, var in self.storage_options_env.items():
            if var not in os.environ:
                raise RuntimeError(f"storage option {key!r} comes from ${var}, which is not set")
            opts[key] = os.environ[var]
        return opts


class LanceIOManager(ConfigurableIOManager):  # type: ignore[misc]
    """Store asset outputs as Lance datasets under ``root_uri`` and load them as inputs."""

    root_uri: str = Field(description="local path, file://, memory:// or gs://bucket/prefix")
    storage: ResourceDependency[LanceStorage] = Field(default_factory=LanceStorage)  # type: ignore[assignment]
    mode: WriteMode = WriteMode.overwrite
    merge_on: list[str] = Field(default_factory=list, description="key columns of mode=merge")
    schema_mode: SchemaMode | None = Field(
        default=None, description='"merge": add the output\'s new columns (nullable) before writing')
    enable_stable_row_ids: bool = True
    max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE
    manifest_store: str | None = Field(
        default=COMMIT_DEFAULTS.manifest_store,
        description="external manifest store every dataset under root_uri commits through "
        "(SQLite path or sqlite:/// URL; for object stores without conditional put)",
    )

    # ------------------------------------------------------------------ naming
    def uri_for(self, path: list[str]) -> str:
        return "/".join([self.root_uri.rstrip("/"), *path[:-1], f"{path[-1]}.lance"])

    def _options(self) -> dict[str, str]:
        return self.storage.resolved()

    # ------------------------------------------------------------------ output
    def handle_output(self, context: OutputContext, obj: Any) -> None:
        if obj is None:
            return
        path = list(context.asset_key.path)
        uri = self.uri_for(path)
        md = {**(context.definition_metadata or {}), **(context.output_metadata or {})}
        mode = WriteMode(md.get("mode", self.mode))
        on = list(md.get("merge_on") or self.merge_on)
        table = _to_arrow(obj)
        so = self._options()
        ms = self.manifest_store
        props = with_idempotency(
            {RUN_ID_PROPERTY: context.run_id, JOB_PROPERTY: context.job_name, "lance_ops/io_manager": mode.value},
            _write_key(context, path), 0,
        )
        where = partition_filter(context, md, table.schema) if context.has_asset_partitions else None
        if where is not None and mode is not WriteMode.append:
            outside = rows_outside(table, where)
            if outside:
                raise SchemaError(f"{uri}: {outside} of {table.num_rows} rows are outside partition(s) "
                                  f"{context.asset_partition_keys} (column {md.get('partition_expr')!r})")
        exists = _exists(uri, so, ms)
        extra: dict[str, Any] = {"rows_written": table.num_rows, "write_mode": mode.value}
        schema_mode = md.get("schema_mode", self.schema_mode)
        if exists and schema_mode is not None and SchemaMode(getattr(schema_mode, "value", schema_mode)) is SchemaMode.merge:
            added = add_new_columns(uri, table.schema, storage_options=so, manifest_store=ms)
            if added:
                extra["columns_added"] = ", ".join(added)
        if not exists:
            ds = lf.write_dataset(table, uri, mode="create", enable_stable_row_ids=self.enable_stable_row_ids,
                                  max_rows_per_file=self.max_rows_per_file, storage_options=so,
                                  transaction_properties=props, manifest_store=ms)
        elif mode is WriteMode.append:
            ds = lf.write_dataset(table, uri, mode="append", max_rows_per_file=self.max_rows_per_file,
                                  storage_options=so, transaction_properties=props, manifest_store=ms)
        elif mode is WriteMode.merge:
            ds, n_upd, n_ins = merge(uri, table, on, where=where, storage_options=so,
                                     max_rows_per_file=self.max_rows_per_file, properties=props,
                                     manifest_store=ms)
            extra.update(num_updated_rows=n_upd, num_inserted_rows=n_ins)
        elif where is not None:
            ds, deleted = replace_where(uri, table, where, storage_options=so,
                                        max_rows_per_file=self.max_rows_per_file, properties=props,
                                        manifest_store=ms)
            extra["rows_replaced"] = deleted
        else:
            ds = lf.write_dataset(table, uri, mode="overwrite", max_rows_per_file=self.max_rows_per_file,
                                  storage_options=so, transaction_properties=props, manifest_store=ms)
        context.add_output_metadata({**table_metadata(uri, ".".join(path), ds),
                                     **{k: MetadataValue.int(v) if isinstance(v, int) else v for k, v in extra.items()}})
        _set_data_version(context, ds.version)
        context.log.info(f"{'.'.join(path)}: version {ds.version} of {uri} ({mode.value}, {table.num_rows} rows)")

    # ------------------------------------------------------------------- input
    def load_input(self, context: InputContext) -> Any:
        key = context.asset_key
        uri = self.uri_for(list(key.path))
        md = context.definition_metadata or {}
        so = self._options()
        # a number, a tag name or (branch, version), as pylance's ``version=``; ``branch``: a branch's latest
        ds = lf.dataset(uri, version=md.get("version"), branch=md.get("branch"), storage_options=so,
                        manifest_store=self.manifest_store)
        where = None
        if context.has_asset_partitions:
            upstream = context.upstream_output
            up_md = dict(upstream.definition_metadata or {}) if upstream is not None else {}
            where = partition_filter(context, up_md, ds.schema)
        columns = md.get("columns")
        want = _wanted_type(context)
        if want == "reader":
            return ds.scanner(columns=columns, filter=where).to_reader()
        table = ds.to_table(columns=columns, filter=where)
        if want == "pandas":
            return table.to_pandas()
        if want == "polars":
            import polars as pl

            return pl.from_arrow(table)
        return table


# ------------------------------------------------------------------------ helpers
def add_new_columns(
    uri: str, incoming: pa.Schema, *, storage_options: dict[str, str], manifest_store: str | None
) -> list[str]:
    """Add the columns of ``incoming`` the dataset lacks, nullable and all null (metadata only,
    as pylance's ``add_columns`` of fields); returns their names."""
    ds = lf.dataset(uri, storage_options=storage_options, manifest_store=manifest_store)
    new = [f.with_nullable(True) for f in incoming if f.name not in ds.schema.names]
    if new:
        ds.add_columns(pa.schema(new))
    return [f.name for f in new]


def _exists(uri: str, so: dict[str, str], manifest_store: str | None = None) -> bool:
    try:
        lf.dataset(uri, storage_options=so, manifest_store=manifest_store)
        return True
    except (DatasetNotFoundError, FileNotFoundError):
        return False


def _to_arrow(obj: Any) -> pa.Table:
    if isinstance(obj, pa.Table):
        return obj
    if isinstance(obj, pa.RecordBatchReader):
        return obj.read_all()  # one partition's output; a commit needs every batch anyway
    mod = type(obj).__module__.split(".")[0]
    if mod == "pandas":
        return pa.Table.from_pandas(obj, preserve_index=False)
    if mod == "polars":
        return obj.to_arrow()  # type: ignore[no-any-return]
    raise TypeError(f"LanceIOManager stores pyarrow Tables/RecordBatchReaders and pandas/polars DataFrames, "
                    f"got {type(obj).__name__}")


def _wanted_type(context: InputContext) -> str:
    typ = getattr(context.dagster_type, "typing_type", None)
    name = f"{getattr(typ, '__module__', '')}.{getattr(typ, '__name__', '')}"
    if name.startswith("pandas") and name.endswith("DataFrame"):
        return "pandas"
    if name.startswith("polars") and name.endswith("DataFrame"):
        return "polars"
    if typ is pa.RecordBatchReader:
        return "reader"
    return "arrow"


def _set_data_version(context: OutputContext, version: int) -> None:
    """The Lance version becomes the materialisation's data version.

    An IO manager has no public way to set it; the step context's data version is what Dagster
    reads when it builds the materialisation right after ``handle_output`` (dagster 1.13).
    """
    step = context.step_context
    step.set_data_version(context.asset_key, DataVersion(str(version)))


def _scalar(value: Any, typ: pa.DataType) -> pa.Scalar:
    if pa.types.is_date(typ) and isinstance(value, datetime):
        value = value.date()
    return pa.scalar(value).cast(typ) if not isinstance(value, datetime) else pa.scalar(value, type=typ)


def partition_filter(context: Any, md: dict[str, Any], schema: pa.Schema) -> pc.Expression:
    """The rows of the partitions ``context`` covers, from the asset's ``partition_expr`` metadata."""
    expr = md.get("partition_expr")
    if not expr:
        raise SchemaError(f"{context.asset_key.to_user_string()}: a partitioned asset stored by LanceIOManager needs "
                          "metadata {'partition_expr': '<column>'} (a dict per dimension for multi partitions)")
    pdef = context.asset_partitions_def
    keys = list(context.asset_partition_keys)

    def col_type(name: str) -> pa.DataType:
        if name not in schema.names:
            raise SchemaError(f"{context.asset_key.to_user_string()}: partition column {name!r} is not in {schema.names}")
        return schema.field(name).type

    def one(dim_def: Any, column: str, dim_keys: list[str]) -> pc.Expression:
        typ = col_type(column)
        if isinstance(dim_def, TimeWindowPartitionsDefinition):
            windows = [dim_def.time_window_for_partition_key(k) for k in dim_keys]
            start, end = min(w.start for w in windows), max(w.end for w in windows)
            return (pc.field(column) >= _scalar(start, typ)) & (pc.field(column) < _scalar(end, typ))
        return pc.field(column).isin(pa.array(dim_keys).cast(typ))

    if isinstance(expr, dict):
        parts = [[k.keys_by_dimension for k in keys if isinstance(k, MultiPartitionKey)]]
        by_dim: dict[str, list[str]] = {}
        for k in parts[0]:
            for dim, v in k.items():
                by_dim.setdefault(dim, []).append(v)
        out = None
        for dim, column in expr.items():
            e = one(pdef.get_partitions_def_for_dimension(dim), column, sorted(set(by_dim[dim])))
            out = e if out is None else out & e
        assert out is not None
        return out
    return one(pdef, str(expr), keys)


def _write_key(context: OutputContext, path: list[str]) -> str:
    """Delta's ``txnAppId`` of one output write: ``dagster/<root run id>/<asset>[/<partitions>]``;
    a retried step or a re-executed run writes the output at most once."""
    try:
        root = context.step_context.dagster_run.root_run_id or context.run_id
    except Exception:  # noqa: BLE001 - no step context (direct invocation): the run id alone
        root = context.run_id
    part = ""
    if context.has_asset_partitions:
        keys = ",".join(sorted(context.asset_partition_keys))
        part = "/" + (keys if len(keys) <= 64 else hashlib.sha1(keys.encode()).hexdigest()[:16])
    return f"dagster/{root}/{'.'.join(path)}{part}"
