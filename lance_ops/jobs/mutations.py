"""Row mutations as Spark jobs: ``delete`` (SQL predicate) and ``upsert`` (merge by key).

Both read one pinned version through the lance data source, do the row work on executors
grouped by fragment (deletion files with ``mutate.with_deletions``, new rows with
``write_fragments``) and commit one transaction on the driver.  Concurrent commits are
rebased by the format's commit loop (deletions of different rows merge) or fail with a
typed conflict.  If the commit fails, the files the tasks wrote are deleted; a failing task
deletes its own.
"""

import pickle
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import lance_ops.format as lf
from lance_ops.format import DEFAULT_MAX_ROWS_PER_FILE, ROW_ADDR, CommitOptions, FragmentMetadata, LanceSchema
from lance_ops.format.distributed import (
    Manifest,
    MergeInsertContext,
    ObjectStore,
    commit_merge_insert,
    merge_insert_operation,
    merge_stats,
    resolve_uri,
    with_deletions,
    write_fragment_files,
    write_inserted_rows,
    write_matched_rows,
)
from lance_ops.format.errors import CommitStateUnknownError, SchemaError
from lance_ops.jobs._common import (
    as_dataframe,
    commit_options,
    lance_errors,
    latest,
    read_version,
    referenced_columns,
)
from lance_ops.jobs._compat import check_store_assignment
from lance_ops.jobs._error_transport import carried
from lance_ops.jobs._types import META_COLUMNS, cast_batch, spark_schema
from lance_ops.jobs.results import DeleteJobResult, UpsertResult
from lance_ops.jobs.source import StagingStore, sweep_staging

LOCAL_MASK = 0xFFFFFFFF
_PROPS = {"lance_ops.writer": "spark"}


def _props(extra: Mapping[str, str] | None) -> dict[str, str]:
    """Transaction properties of a Spark commit, plus the caller's (e.g. the Dagster run id)."""
    return {**dict(extra or {}), **_PROPS}


def write_fragments_df(
    df: DataFrame,
    uri: str,
    schema: LanceSchema,
    storage_options: Mapping[str, Any],
    write_id: str,
    max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
    *,
    version: str,
) -> list[FragmentMetadata]:
    """Write ``df`` as uncommitted fragments (files of format ``version``) of the dataset at
    ``uri`` (one or more per partition).

    Files are staged under ``write_id`` (see :class:`StagingStore`): if this fails, everything
    the tasks wrote is deleted; after a commit, call ``sweep_staging(store, write_id, committed)``.
    """
    target = schema.to_arrow()

    @carried
    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        store = StagingStore(uri, storage_options, write_id)
        frags = write_fragment_files(store, (cast_batch(b, target) for b in batches), schema,
                                     version=version, max_rows_per_file=max_rows_per_file)
        yield pa.record_batch({"payload": pa.array([pickle.dumps(list(frags))], pa.binary())})

    try:
        rows = df.mapInArrow(write, "payload binary").collect()
    except BaseException:
        sweep_staging(ObjectStore(uri, storage_options), write_id, set())
        raise
    return [f for r in rows for f in pickle.loads(r["payload"])]


def committed_files(frags: Sequence[FragmentMetadata]) -> set[str]:
    return {df.path for f in frags for df in f.files}


# --------------------------------------------------------------------------- delete


def _deletion_writer(
    uri: str, storage_options: Mapping[str, Any], version: int, frags: Mapping[int, FragmentMetadata],
    bases: Mapping[int, Any] | None = None,
) -> Callable[[pa.Table], pa.Table]:
    """Executor side: one fragment's matching offsets -> its new deletion file."""

    @carried
    def write(table: pa.Table) -> pa.Table:
        fid = int(table.column("fragment_id")[0].as_py())
        offsets = np.unique(table.column("offset").to_numpy()).astype(np.uint32)
        new = with_deletions(ObjectStore(uri, storage_options), frags[fid], offsets, version, bases=bases)
        return pa.table(
            {"fragment_id": pa.array([fid], pa.int64()), "deleted": pa.array([offsets.size], pa.int64()),
             "fragment": pa.array([pickle.dumps(new)], pa.binary())}
        )

    return write


def check_predicate(spark: SparkSession, uri: str, manifest: Manifest, where: str) -> None:
    """Raise SchemaError unless ``where`` resolves against the columns of ``manifest``.

    Spark analyses the predicate on an empty DataFrame with every user and metadata column, so
    an unknown column is reported with the dataset's real columns (the scan itself only reads
    the columns the predicate names).
    """
    from pyspark.errors import AnalysisException

    schema = spark_schema(manifest.schema.to_arrow(), META_COLUMNS)
    try:
        spark.createDataFrame([], schema).where(where).schema  # noqa: B018 (analysis only)
    except AnalysisException as e:
        user = [f.name for f in manifest.schema.top_level()]
        reason = str(e).strip().splitlines()[0][:300]
        raise SchemaError(
            f"{uri}: the predicate {where!r} does not resolve against version {manifest.version}; "
            f"its columns are {user} (and metadata columns {list(META_COLUMNS)}). Spark said: {reason}"
        ) from None


def plan_deletions(
    spark: SparkSession, uri: str, manifest: Manifest, where: str, storage_options: Mapping[str, Any]
) -> tuple[list[FragmentMetadata], list[int], int]:
    """Write, on executors, the deletion files for the rows of ``manifest`` matching ``where``.

    Returns:
        (updated fragments, ids of fragments now empty, rows deleted); nothing is committed.
    """
    names = [f.name for f in manifest.schema.top_level()]
    check_predicate(spark, uri, manifest, where)
    cols = referenced_columns(where, names + [c for c in META_COLUMNS if c != ROW_ADDR]) + [ROW_ADDR]
    df = read_version(spark, uri, manifest, cols, storage_options=storage_options)
    matched = df.where(where).select(
        F.shiftright(ROW_ADDR, 32).alias("fragment_id"), F.col(ROW_ADDR).bitwiseAND(F.lit(LOCAL_MASK)).alias("offset")
    )
    fn = _deletion_writer(uri, storage_options, manifest.version, {f.id: f for f in manifest.fragments},
                          manifest.bases)
    rows = matched.groupBy("fragment_id").applyInArrow(fn, "fragment_id long, deleted long, fragment binary").collect()
    updated, removed, total = [], [], 0
    for r in sorted(rows, key=lambda r: r["fragment_id"]):
        total += r["deleted"]
        new = pickle.loads(r["fragment"])
        if new is None:
            removed.append(int(r["fragment_id"]))
        else:
            updated.append(new)
    return updated, removed, total


def delete(
    spark: SparkSession,
    uri: str,
    where: str,
    *,
    storage_options: Mapping[str, Any] | None = None,
    transaction_properties: Mapping[str, str] | None = None,
    manifest_store: Any = None,
    commit: CommitOptions | None = None,
) -> DeleteJobResult:
    """Delete the rows matching the SQL predicate ``where``, in one Delete commit.

    The predicate is the format API's (pylance's dialect): it is validated on the driver by
    ``lance_ops.format.resolve_filter`` (the same strings are accepted and the same typed
    errors raised as by ``LanceDataset.delete``), then rewritten in Spark SQL
    (``lf.transpile_sql``) and evaluated on executors, fragment by fragment.  It may use the
    metadata columns (``_rowid``, ``_rowaddr``, ``_row_created_at_version``, ...).  Nothing is
    committed when no row matches (``result.version`` is None).  ``manifest_store`` / ``commit``: how
    the job commits (:class:`lance_ops.format.CommitOptions`; the keyword wins).

    Raises:
        SQLParseError: the predicate does not parse (a ``ValueError``; names the position).
        SQLUnknownColumnError, SQLTypeError: unknown column, or operands that do not fit.
    """
    t0 = time.perf_counter()
    so = dict(storage_options or {})
    given, uri = uri, resolve_uri(uri)  # resolved once, on the driver
    opts = commit_options(transaction_properties, manifest_store, commit)
    _, _, m = latest(uri, so, opts)
    lf.resolve_filter(m.schema, where, f"{uri}: delete predicate")
    spark_where = lf.transpile_sql(where, "spark")
    with lance_errors():
        updated, removed, total = plan_deletions(spark, uri, m, spark_where, so)
    if total == 0:
        return DeleteJobResult(given, m.version, None, 0, 0, 0, time.perf_counter() - t0)
    out = lf.commit(uri, lf.Delete(updated, removed, where), read_version=m.version, storage_options=so,
                    transaction_properties=_props(opts.properties()), manifest_store=opts.manifest_store,
                    max_retries=opts.max_retries)
    return DeleteJobResult(given, m.version, out.version, total, len(updated), len(removed), time.perf_counter() - t0)


# --------------------------------------------------------------------------- upsert


def _upsert_task(
    uri: str, storage_options: Mapping[str, Any], ctx: MergeInsertContext, frags: Mapping[int, FragmentMetadata],
    write_id: str,
) -> Callable[[tuple[pa.Scalar, ...], pa.Table], pa.Table]:
    """Executor side: one group of joined rows -> ``format.ops.merge_insert``'s task for it.

    Group ``g >= 0``: source rows that matched rows of fragment ``g``
    (:func:`write_matched_rows`); group ``g < 0``: unmatched source rows
    (:func:`write_inserted_rows`).  Spark only joined and grouped; the rows are cast back to the
    dataset's Arrow types here.
    """
    user = ctx.schema.to_arrow()
    meta = pa.schema([pa.field(c, pa.uint64()) for c in ctx.meta_columns])

    @carried
    def write(key: tuple[pa.Scalar, ...], table: pa.Table) -> pa.Table:
        group = int(key[0].as_py())
        store = StagingStore(uri, storage_options, write_id)
        rows = pa.Table.from_batches([cast_batch(b, user) for b in table.to_batches()], schema=user)
        if group >= 0:
            for f in meta:
                rows = rows.append_column(f.name, table.column(f.name).cast(f.type))
            result = write_matched_rows(store, ctx, frags[group], rows)
        else:
            result = write_inserted_rows(store, ctx, rows)
        return pa.table({"fragment_id": pa.array([group], pa.int64()),
                         "payload": pa.array([pickle.dumps(result)], pa.binary())})

    return write


def upsert(
    spark: SparkSession,
    uri: str,
    source: DataFrame | str,
    on: Sequence[str],
    *,
    format: str | None = None,
    options: Mapping[str, Any] | None = None,
    max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
    storage_options: Mapping[str, Any] | None = None,
    transaction_properties: Mapping[str, str] | None = None,
    manifest_store: Any = None,
    commit: CommitOptions | None = None,
) -> UpsertResult:
    """Merge ``source`` into the dataset by the key columns ``on``, in one Update commit.

    Rows whose key matches a row of the dataset replace it and keep its ``_rowid`` and
    ``_row_created_at_version`` (their ``_row_last_updated_at_version`` becomes the new
    version); other rows are inserted with new row ids.  Keys are compared with SQL ``=`` (a
    null key never matches).  The source must have exactly the dataset's columns; a target row
    matched by several source rows is an error.  ``manifest_store`` / ``commit`` as for :func:`delete`.
    """
    t0 = time.perf_counter()
    so = dict(storage_options or {})
    given, uri = uri, resolve_uri(uri)  # resolved once, on the driver
    opts = commit_options(transaction_properties, manifest_store, commit)
    store, handler, m = latest(uri, so, opts)
    ctx = MergeInsertContext.for_manifest(uri, m, [on] if isinstance(on, str) else list(on),
                                          max_rows_per_file=max_rows_per_file)
    on = list(ctx.on)
    user_arrow = m.schema.to_arrow()
    user = list(user_arrow.names)
    src = as_dataframe(spark, source, format, options)
    check_store_assignment(src.schema, user_arrow, given)  # strict, as appends: only safe widening
    types = {f.name: f.dataType for f in spark_schema(user_arrow).fields}
    src = src.select([F.col(c).cast(types[c]).alias(c) for c in user])
    meta = ctx.meta_columns
    target = read_version(spark, uri, m, on + meta, storage_options=so)
    joined = src.join(target, on=on, how="left")  # SQL `=`: a null key never matches
    inserts = max(1, spark.sparkContext.defaultParallelism)
    group = F.when(F.col(ROW_ADDR).isNull(), F.lit(-1) - F.pmod(F.hash(*[F.col(k) for k in on]), F.lit(inserts))).otherwise(
        F.shiftright(ROW_ADDR, 32)
    )
    write_id = uuid.uuid4().hex
    fn = _upsert_task(uri, so, ctx, {f.id: f for f in m.fragments}, write_id)
    try:
        with lance_errors():
            rows = (
                joined.select(*user, *meta, group.cast("long").alias("_group"))
                .groupBy("_group")
                .applyInArrow(fn, "fragment_id long, payload binary")
                .collect()
            )
    except BaseException:
        sweep_staging(store, write_id, set())
        raise
    results = [pickle.loads(r["payload"]) for r in rows]
    op = merge_insert_operation(m.schema, results)
    stats = merge_stats(results)
    if not op.new_fragments:
        sweep_staging(store, write_id, set())
        return UpsertResult(given, m.version, None, 0, 0, 0, 0, 0, time.perf_counter() - t0)
    try:
        out = commit_merge_insert(store, m, results, handler=handler, properties=_props(opts.properties()))
    except CommitStateUnknownError:
        raise  # the version may exist and reference these files: remove nothing
    except BaseException:
        sweep_staging(store, write_id, set())
        raise
    sweep_staging(store, write_id, committed_files(op.new_fragments))
    return UpsertResult(
        given, m.version, out.version, stats["num_updated_rows"], stats["num_inserted_rows"], len(op.new_fragments),
        len(op.updated_fragments), len(op.removed_fragment_ids), time.perf_counter() - t0,
    )
