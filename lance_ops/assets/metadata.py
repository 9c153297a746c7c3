"""Metadata Dagster shows for a Lance version, with Dagster's standard keys.

Every materialisation or observation of a dataset (maintained or written by the IO manager)
carries the same small set: ``dagster/uri``, ``dagster/table_name``, ``dagster/row_count``,
``dagster/column_schema`` (a TableSchema), and the version's stats (always present, so their
plots are dense).  Job metrics (seconds, tasks, rows moved, ...) go to the run log and one JSON
entry (``lance_ops/job``), which Dagster does not plot.
"""

import json
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
from dagster import MetadataValue, TableColumn, TableSchema

import lance_ops.format as lf
from lance_ops.assets.indices import index_metadata
from lance_ops.assets.stats import manifest_stats, transaction_of

URI_KEY = "dagster/uri"
TABLE_NAME_KEY = "dagster/table_name"
ROW_COUNT_KEY = "dagster/row_count"
COLUMN_SCHEMA_KEY = "dagster/column_schema"
VERSION_KEY = "lance/version"
JOB_KEY = "lance_ops/job"          # the job's result (JSON, not plotted)
REWRITE_KEY = "lance_ops/rewrite"  # evidence for the compaction check (JSON)
RUN_ID_PROPERTY = "dagster/run_id"


def _type_name(t: pa.DataType) -> str:
    return str(t)


def column_schema(schema: pa.Schema) -> TableSchema:
    """An Arrow schema as Dagster's TableSchema (nullability as a constraint)."""
    from dagster import TableColumnConstraints

    cols = []
    for f in schema:
        constraints = None if f.nullable else TableColumnConstraints(nullable=False)
        cols.append(TableColumn(name=f.name, type=_type_name(f.type), constraints=constraints))
    return TableSchema(columns=cols)


def timestamp(ns: int) -> MetadataValue:
    """A manifest timestamp (ns since the epoch) as a Dagster timestamp (shown as a date, not plotted)."""
    return MetadataValue.timestamp(datetime.fromtimestamp(ns / 1e9, tz=UTC))


def table_metadata(uri: str, table_name: str, ds: lf.LanceDataset) -> dict[str, Any]:
    """The standard keys for version ``ds.version`` of the dataset at ``uri`` (manifest only)."""
    m = ds.manifest
    rows = sum(f.physical_rows - f.num_deleted_rows for f in m.fragments)
    return {
        URI_KEY: MetadataValue.text(uri),
        TABLE_NAME_KEY: MetadataValue.text(table_name),
        ROW_COUNT_KEY: MetadataValue.int(rows),
        COLUMN_SCHEMA_KEY: MetadataValue.table_schema(column_schema(ds.schema)),
        VERSION_KEY: MetadataValue.int(m.version),
        "committed_at": timestamp(m.timestamp_ns),
    }


def version_metadata(uri: str, table_name: str, ds: lf.LanceDataset, store: Any, *,
                     small_fragment_rows: int) -> dict[str, Any]:
    """Standard keys plus the version's fragment stats and who committed it (manifest and transaction only)."""
    m = ds.manifest
    st = manifest_stats(m, small_fragment_rows=small_fragment_rows)
    txn = transaction_of(store, m.version)
    return {
        **table_metadata(uri, table_name, ds),
        "fragments": MetadataValue.int(st["fragments"]),
        "small_fragments": MetadataValue.int(st["small_fragments"]),
        "deleted_rows": MetadataValue.int(st["deleted_rows"]),
        "deleted_ratio": MetadataValue.float(float(st["deleted_ratio"])),
        "size_bytes": MetadataValue.int(st["bytes"]),
        "file_version": MetadataValue.text(m.data_storage_version),
        "last_operation": MetadataValue.text(txn.operation.name if txn else "unknown"),
        "committed_by_run": MetadataValue.text(str(txn.properties.get(RUN_ID_PROPERTY, "")) if txn else ""),
        **index_metadata(ds),
    }


def job_metadata(result: dict[str, Any]) -> dict[str, Any]:
    """A job's result as one JSON entry (not plotted); None values kept as null."""
    clean = json.loads(json.dumps(result, default=str))
    return {JOB_KEY: MetadataValue.json(clean)}
