"""The Spark side of a dataset operation: moved to :mod:`lance_ops.jobs.tasks` (the Airflow
operators run the same tasks); re-exported here for the Dagster resources and the Pipes driver."""

from lance_ops.jobs.tasks import (
    SPARK_OPERATIONS,
    check_source_schema,
    resolve_storage_options,
    run_task,
    source_frame,
)

__all__ = [
    "SPARK_OPERATIONS",
    "check_source_schema",
    "resolve_storage_options",
    "run_task",
    "source_frame",
]
