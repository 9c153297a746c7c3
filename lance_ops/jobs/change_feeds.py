"""The change data feed as Spark DataFrames, and writing it to a sink idempotently.

``change_feed(spark, uri, begin, end)`` has every user column plus ``_rowid``,
``_change_type`` in {insert, update_preimage, update_postimage, delete}, ``_commit_version``
and ``_commit_timestamp`` (Delta CDF names).  ``begin`` is exclusive, ``end`` inclusive, and
rows are evaluated on the ``end`` version (docs/FORMAT.md §13):

- insert: live at end, ``begin < _row_created_at_version <= end`` (version = created);
- update_postimage: live at end, created at or before begin,
  ``begin < _row_last_updated_at_version <= end`` (version = last updated);
- update_preimage: the same row ids read from ``begin``;
- delete: row ids live at begin and gone at end, the row from begin; version = the first
  version in ``(begin, end]`` without the id.

It is read through the ``lance_changes`` data source: the rows are chosen from manifest
metadata when Spark plans the read (version runs, deletion-vector diffs, the row ids of the
fragments written since ``begin``: :mod:`lance_ops.format.ops.change_feed.rows`), one task per
fragment range holding changes, and each task decodes only the user columns of the spans
holding its rows.  Nothing scans whole versions or joins by ``_rowid``, and the planning memory
grows with the changes, not with the dataset.  It equals the in-process
``LanceDataset.change_feed``.
Compaction and deletion materialisation keep row ids and versions: they add no rows.
Across schema evolution the output has the end version's columns; pre-images and deleted rows
read from ``begin`` are mapped onto them by field id (a later-added column is null, a renamed one
takes the end name, a dropped one is absent, a cast one is cast), exactly as the format API's
change feed; ``on_schema_change="fail"`` refuses such a range with ``SchemaChangeError``.
"""

import contextlib
import time
import uuid
from collections.abc import Mapping
from typing import Any, Literal

from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

import lance_ops.format as lf
from lance_ops.format import DEFAULT_MAX_ROWS_PER_FILE, ROW_ID
from lance_ops.format.distributed import (
    Manifest,
    ObjectStore,
    commit_handler_for,
    open_for_write,
    open_manifest,
    range_column_map,
    read_manifest,
    require_writable,
    resolve_uri,
    scan_schema,
)
from lance_ops.format.errors import CommitStateUnknownError, UnsupportedFeatureError
from lance_ops.jobs._common import version_number
from lance_ops.jobs._leases import DEFAULT_READ_LEASE_TTL
from lance_ops.jobs._options import manifest_store_option, source_options
from lance_ops.jobs.mutations import committed_files, plan_deletions, write_fragments_df
from lance_ops.jobs.results import ChangeFeedWriteResult
from lance_ops.jobs.source import sweep_staging
from lance_ops.jobs.streaming import change_feed_spark_schema

COMMIT_VERSION = "_commit_version"
#: ``_rowid`` is reserved in Lance (it is the sink's own row id), so a Lance sink stores the
#: source row id under this name.
SINK_ROW_ID = "_source_rowid"


def change_feed(
    spark: SparkSession,
    uri: str,
    begin_version: int | str,
    end_version: int | str | None = None,
    *,
    storage_options: Mapping[str, Any] | None = None,
    on_schema_change: str = "evolve",
    manifest_store: Any = None,
    lease_ttl: float | None = DEFAULT_READ_LEASE_TTL,
) -> DataFrame:
    """The changes of ``(begin_version, end_version]`` (end: latest by default) as a DataFrame.

    Versions are numbers or tag names (of the branch at ``uri``; a branch is ``<root>/tree/<name>``).
    ``manifest_store``: the dataset's external manifest store (the latest version is its latest).
    ``lease_ttl``: each query of the DataFrame leases versions ``begin..end`` while it reads
    (renewed by its tasks, expiring that many seconds after them); None takes no lease.

    Raises:
        ValueError: not ``0 <= begin <= end``.
        UnsupportedFeatureError: the dataset has no stable row ids.
        SchemaChangeError: ``on_schema_change="fail"`` and the schema changed in the range.
    """
    so = dict(storage_options or {})
    uri = resolve_uri(uri)  # once, on the driver
    store = ObjectStore(uri, so)
    end_m, scheme = open_manifest(store, version_number(uri, end_version, so),
                                  commit_handler_for(store, manifest_store))
    b, e = int(version_number(uri, begin_version, so)), end_m.version  # type: ignore[arg-type]
    if b < 0 or e < b:
        raise ValueError(f"need 0 <= begin_version <= end_version, got ({b}, {e}]")
    if not end_m.uses_stable_row_ids:
        raise UnsupportedFeatureError(
            f"{uri}: the change feed needs stable row ids (create the dataset with enable_stable_row_ids=True)"
        )
    user_arrow = scan_schema(end_m.schema.to_arrow())
    out_schema = change_feed_spark_schema(user_arrow)
    if b == e:
        return spark.createDataFrame([], out_schema)
    manifests: dict[int, Manifest] = {e: end_m}

    def at(v: int) -> Manifest:
        if v not in manifests:
            manifests[v] = read_manifest(store, v, scheme).manifest
        return manifests[v]

    if b > 0:
        at(b)  # a missing begin version is an error now, not in a Spark task
    if on_schema_change not in ("evolve", "fail"):
        raise ValueError(f"on_schema_change must be 'evolve' or 'fail', got {on_schema_change!r}")
    if on_schema_change == "fail" and b > 0:  # raise here, on the driver, before Spark plans anything
        range_column_map(store, scheme, b, e, at, on_schema_change, uri)
    # The lance_changes source plans the rows from metadata (one task per fragment range holding
    # changes) and its tasks decode only the spans holding them.
    opts = source_options(storage_options=so, startingVersion=b + 1, endingVersion=e,
                          on_schema_change=on_schema_change, manifest_store=manifest_store_option(manifest_store),
                          lease=lease_ttl is not None, lease_ttl=lease_ttl)
    return spark.read.format("lance_changes").schema(out_schema).options(**opts).load(uri)


#: The Hive-style partition column of a parquet sink (no leading ``_``: pyarrow, pandas and Spark
#: skip directories whose name starts with ``_`` or ``.`` when they read a sink from its root).
RANGE_COLUMN = "change_range"


def range_location(sink_uri: str, begin_version: int, end_version: int) -> str:
    """Where a parquet sink keeps the changes of ``(begin, end]``: ``<sink>/change_range=<begin>-<end>``."""
    return f"{sink_uri.rstrip('/')}/{RANGE_COLUMN}={begin_version}-{end_version}"


def write_change_feed(
    spark: SparkSession,
    uri: str,
    begin_version: int | str,
    end_version: int | str,
    sink_uri: str,
    *,
    format: Literal["lance", "parquet"] = "lance",
    storage_options: Mapping[str, Any] | None = None,
    sink_storage_options: Mapping[str, Any] | None = None,
    max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
    on_schema_change: str = "evolve",
    manifest_store: Any = None,
    sink_manifest_store: Any = None,
    lease_ttl: float | None = DEFAULT_READ_LEASE_TTL,
) -> ChangeFeedWriteResult:
    """Write the change feed of ``(begin, end]`` to ``sink_uri``; re-running a range never duplicates.

    - ``parquet``: the range goes to its own Hive-style directory ``<sink>/change_range=<begin>-<end>``,
      replaced as a whole (Spark ``mode("overwrite")`` on that directory only).  pyarrow
      (``pq.read_table(sink)``), pandas and Spark read the sink from its root and show
      ``change_range`` as a string partition column.  Ranges written must not overlap.
    - ``lance``: one transaction (an Update) deletes the sink rows whose ``_commit_version`` is
      in ``(begin, end]`` and adds the new ones, so the sink holds each version's changes once
      whatever ranges were run, and a reader never sees a half-replaced range.  The source
      ``_rowid`` is stored as ``_source_rowid`` (``_rowid`` is Lance's own).  The first run
      creates the sink.

    ``manifest_store`` / ``sink_manifest_store``: the external manifest stores the source and
    the lance sink commit through (a sink that has one refuses this job without it).
    ``lease_ttl``: the job holds a lease on versions ``begin..end`` of the source from start to
    end (renewed every third of it, released when the job ends), so a cleanup running meanwhile
    keeps them; None takes none.
    """
    t0 = time.perf_counter()
    begin_version = int(version_number(uri, begin_version, storage_options))  # type: ignore[arg-type]
    end_version = int(version_number(uri, end_version, storage_options))  # type: ignore[arg-type]
    if lease_ttl is None:
        held = contextlib.nullcontext()
    else:
        held = lf.lease(resolve_uri(uri), end_version, first_version=begin_version, ttl=lease_ttl,
                        holder="change feed job", storage_options=storage_options)
    with held:
        return _write_range(spark, uri, begin_version, end_version, sink_uri, format, dict(storage_options or {}),
                            sink_storage_options, max_rows_per_file, on_schema_change, manifest_store,
                            sink_manifest_store, t0)


def _write_range(spark: SparkSession, uri: str, begin_version: int, end_version: int, sink_uri: str, format: str,
                 storage_options: dict[str, Any], sink_storage_options: Mapping[str, Any] | None,
                 max_rows_per_file: int, on_schema_change: str, manifest_store: Any, sink_manifest_store: Any,
                 t0: float) -> ChangeFeedWriteResult:
    """:func:`write_change_feed`'s body, under the lease."""
    df = change_feed(spark, uri, begin_version, end_version, storage_options=storage_options,
                     on_schema_change=on_schema_change, manifest_store=manifest_store, lease_ttl=None)
    sink_given, sink_uri = sink_uri, resolve_uri(sink_uri)  # resolved once, on the driver
    if format == "parquet":
        location = range_location(sink_given, begin_version, end_version)
        counted = Observation("lance_ops_change_feed")
        df.observe(counted, F.count(F.lit(1)).alias("rows")).write.mode("overwrite").parquet(
            range_location(sink_uri, begin_version, end_version))
        rows = int(counted.get["rows"])
        return ChangeFeedWriteResult(uri, sink_given, begin_version, end_version, format, rows, location, None,
                                     time.perf_counter() - t0)
    if format != "lance":
        raise ValueError(f"format must be 'lance' or 'parquet', got {format!r}")
    sink_so = dict(sink_storage_options or {})
    df = df.withColumnRenamed(ROW_ID, SINK_ROW_ID)
    sink = ObjectStore(sink_uri, sink_so)
    handler = commit_handler_for(sink, sink_manifest_store)
    if not handler.latest_version():
        from lance_ops.jobs.writes import append

        res = append(spark, sink_uri, df, max_rows_per_file=max_rows_per_file, storage_options=sink_so,
                     manifest_store=sink_manifest_store)
        return ChangeFeedWriteResult(uri, sink_given, begin_version, end_version, format, res.rows_written,
                                     sink_given, res.version, time.perf_counter() - t0)
    sink_m, _ = open_for_write(sink, handler)  # refuses before anything is written
    where = f"{COMMIT_VERSION} > {int(begin_version)} AND {COMMIT_VERSION} <= {int(end_version)}"
    updated, removed, _ = plan_deletions(spark, sink_uri, sink_m, where, sink_so)
    write_id = uuid.uuid4().hex
    new = write_fragments_df(df, sink_uri, sink_m.schema, sink_so, write_id, max_rows_per_file,
                             version=require_writable(sink_m.data_storage_version, sink_uri))
    rows = sum(f.physical_rows for f in new)
    if not new and not updated and not removed:
        sweep_staging(sink, write_id, set())
        return ChangeFeedWriteResult(uri, sink_given, begin_version, end_version, format, 0, sink_given, None,
                                     time.perf_counter() - t0)
    props = {"lance_ops.writer": "spark", "lance_ops.change_range": f"{begin_version}-{end_version}"}
    try:
        out = lf.commit(sink_uri, lf.Update(removed, updated, new), read_version=sink_m.version,
                        storage_options=sink_so, transaction_properties=props, manifest_store=sink_manifest_store)
    except CommitStateUnknownError:
        raise  # the version may exist and reference these files: remove nothing
    except BaseException:
        sweep_staging(sink, write_id, set())
        raise
    sweep_staging(sink, write_id, committed_files(new))
    return ChangeFeedWriteResult(uri, sink_given, begin_version, end_version, format, rows, sink_given, out.version,
                                 time.perf_counter() - t0)
