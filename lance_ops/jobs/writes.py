"""``append``: write a DataFrame (or files of any Spark format) into a Lance dataset."""

import json
import time
import uuid
from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from lance_ops.format import DEFAULT_MAX_ROWS_PER_FILE, Append, CommitOptions, Overwrite
from lance_ops.format.distributed import ObjectStore, find_earlier_commit, resolve_uri, try_open_latest
from lance_ops.format.errors import SchemaError
from lance_ops.jobs._common import as_dataframe, commit_options, find_commit, lance_errors
from lance_ops.jobs._compat import check_store_assignment
from lance_ops.jobs._options import manifest_store_option, source_options
from lance_ops.jobs._types import META_COLUMNS
from lance_ops.jobs.results import AppendResult
from lance_ops.jobs.source import WRITE_ID_PROPERTY


def append(
    spark: SparkSession,
    uri: str,
    source: DataFrame | str,
    *,
    format: str | None = None,
    options: Mapping[str, Any] | None = None,
    max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
    enable_stable_row_ids: bool = False,
    data_storage_version: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    transaction_properties: Mapping[str, str] | None = None,
    manifest_store: Any = None,
    commit: CommitOptions | None = None,
) -> AppendResult:
    """Append ``source`` to the dataset at ``uri`` in one commit (creating it if absent).

    Args:
        source: a DataFrame, or a path read with ``format`` (``parquet``, ``json``, ``csv``,
            ``lance``, ...) and reader ``options``.
        max_rows_per_file: rows per fragment file (each Spark task writes its own fragments).
        enable_stable_row_ids: used only when the dataset is created by this append.
        data_storage_version: file format of a dataset this append creates (``"2.0"``, ``"2.1"``,
            ``"2.2"``, ``"stable"``; default 2.2); an existing dataset keeps its own.
        storage_options: for the dataset (gcsfs ``token``, ``endpoint_url``, ...).
        transaction_properties: stored in the commit's transaction (e.g. the Dagster run id);
            with ``txnAppId``/``txnVersion`` the append is idempotent (a retry commits once).
        manifest_store: the external manifest store the dataset commits through (SQLite path,
            ``sqlite:///`` URL or SQLiteManifestStore); the driver commits through it.
        commit: commit options (:class:`lance_ops.format.CommitOptions`); the keywords win.

    Returns:
        The version committed, rows and fragments written, and the wall time.

    Raises:
        SchemaError: the data's columns are not the dataset's, or a type would change a value
            (only safe widening is allowed: ``_compat``), or nulls reach a non-nullable column;
            raised before anything is written, except the nulls, which the writing task finds
            (nothing is committed then either).
        InvalidURIError: ``uri`` has a scheme lance_ops does not read.
        ManifestStoreRequiredError: the dataset commits through a manifest store and none was
            given; raised before anything is written.
    """
    where = uri
    uri = resolve_uri(uri)  # once, here on the driver: executors may run in other directories
    df = as_dataframe(spark, source, format, options)
    copts = commit_options(transaction_properties, manifest_store, commit)
    store = ObjectStore(uri, storage_options)
    handler = copts.handler(store)
    existing = try_open_latest(store, handler)  # refuses before anything is written
    reserved = [n for n in df.columns if n in META_COLUMNS]
    if reserved:
        raise SchemaError(f"{where}: column(s) {reserved} are reserved Lance metadata columns; rename or drop them")
    if existing is not None:
        check_store_assignment(df.schema, existing.schema.to_arrow(), where)
    before = existing.version if existing is not None else 0
    write_id = uuid.uuid4().hex
    opts = source_options(
        storage_options=storage_options,
        max_rows_per_file=max_rows_per_file,
        enable_stable_row_ids=enable_stable_row_ids,
        data_storage_version=data_storage_version,
        write_id=write_id,
        transaction_properties=json.dumps(copts.properties()) if copts.properties() else None,
        manifest_store=manifest_store_option(copts.manifest_store),
        max_retries=copts.max_retries,
    )
    t0 = time.perf_counter()
    with lance_errors():
        df.write.format("lance").mode("append").options(**opts).save(uri)
    seconds = time.perf_counter() - t0
    found = find_commit(store, before, WRITE_ID_PROPERTY, write_id)
    if found is None:
        # a retry of a write already committed (txnAppId/txnVersion): its version, no new rows
        earlier = find_earlier_commit(store, copts.properties(), handler=handler)
        return AppendResult(where, earlier.version if earlier is not None else None, 0, 0, seconds)
    version, txn = found
    op = txn.operation
    frags = op.fragments if isinstance(op, Append | Overwrite) else ()
    return AppendResult(where, version, sum(f.physical_rows for f in frags), len(frags), seconds)
