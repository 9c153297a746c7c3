"""lance_ops.jobs: the Lance connector for Spark 4.3 (Python Data Source API) and maintenance jobs.

Executors read and write Lance files through :mod:`lance_ops.format`; the driver plans and
commits once.  Works on local masters and on clusters (``gs://`` through gcsfs; the workers
need lance_ops installed and the same ``storage_options``)::

    from lance_ops import jobs
    spark = jobs.spark_session("local[2]")          # env for workers, UI off, sources registered
    spark.read.format("lance").load(uri)            # options: versionAsOf, timestampAsOf, columns, ...
    df.write.format("lance").mode("append").save(uri)
    jobs.append(spark, uri, "/data/in.parquet", format="parquet")
    jobs.delete(spark, uri, "id < 100")
    jobs.upsert(spark, uri, updates_df, on=["id"])
    jobs.compact(spark, uri)
    jobs.materialize_deletions(spark, uri, threshold=0.1)
    jobs.optimize_indices(spark, uri, num_indices_to_merge=0)   # new rows into every index
    jobs.create_scalar_index(spark, uri, "id", "BTREE")
    jobs.change_feed(spark, uri, 3, 7)              # DataFrame (Delta CDF columns)
    jobs.write_change_feed(spark, uri, 3, 7, sink_uri, format="lance")
    jobs.cleanup_old_versions(spark, uri, older_than=timedelta(days=7), mode="lite")  # routine; leases kept
    jobs.remove_orphan_files(spark, uri, dry_run=True)     # the thorough sweep: files and bytes
    jobs.restore(spark, uri, "gold")                # a version, tag or time; tags the current one first
    spark.readStream.format("lance_changes").option("startingVersion", 1).load(uri)

Also a CLI: ``python -m lance_ops.jobs <job> ...`` (``--help``), which runs under spark-submit.
Options lance_ops does not know are an :class:`InvalidOptionError`; URIs follow
:func:`lance_ops.format.distributed.resolve_uri` and are resolved once, on the driver.
"""

from lance_ops.jobs import _requires  # noqa: F401  (first: names the extra when pyspark is missing)
from lance_ops.jobs._types import spark_schema
from lance_ops.jobs.change_feeds import SINK_ROW_ID, change_feed, range_location, write_change_feed
from lance_ops.jobs.compaction import compact, materialize_deletions
from lance_ops.jobs.errors import InjectedTaskFailure, InvalidOptionError, JobAbortedError
from lance_ops.jobs.indices import create_scalar_index, optimize_indices
from lance_ops.jobs.maintenance import cleanup_old_versions, remove_orphan_files, restore
from lance_ops.jobs.mutations import delete, upsert
from lance_ops.jobs.results import (
    AppendResult,
    ChangeFeedWriteResult,
    CleanupResult,
    CompactResult,
    DeleteJobResult,
    IndexBuildResult,
    RestoreResult,
    UpsertResult,
)
from lance_ops.jobs.session import prepare_environment, register, spark_session
from lance_ops.jobs.source import LanceDataSource
from lance_ops.jobs.streaming import LanceChangesDataSource
from lance_ops.jobs.time_travel import latest_at_or_before, version_at
from lance_ops.jobs.writes import append

__all__ = [
    "SINK_ROW_ID",
    "AppendResult",
    "ChangeFeedWriteResult",
    "CleanupResult",
    "RestoreResult",
    "cleanup_old_versions",
    "remove_orphan_files",
    "restore",
    "CompactResult",
    "DeleteJobResult",
    "IndexBuildResult",
    "InjectedTaskFailure",
    "JobAbortedError",
    "InvalidOptionError",
    "LanceChangesDataSource",
    "LanceDataSource",
    "UpsertResult",
    "append",
    "change_feed",
    "compact",
    "create_scalar_index",
    "delete",
    "materialize_deletions",
    "optimize_indices",
    "latest_at_or_before",
    "prepare_environment",
    "range_location",
    "register",
    "spark_schema",
    "spark_session",
    "upsert",
    "version_at",
    "write_change_feed",
]
