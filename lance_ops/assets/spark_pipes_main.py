"""The spark-submit driver of ``PipesSparkSubmitResource``: one lance_ops operation, reported through Pipes.

    spark-submit --master spark://host:7077 lance_ops/assets/spark_pipes_main.py

Launched by a Dagster Pipes client, it reads its task from the Pipes extras
(``lance_ops_task``), runs it on the application's SparkSession through ``lance_ops.jobs``
and reports back: log lines, the job's result (custom message ``{"result": ...}``) and, for an
operation that committed a version of the run's asset, a materialization whose data version is
that Lance version.  A lance_ops error (bad predicate, wrong source schema, ...) is reported as
``{"error": ...}`` (``lance_ops.orchestration.error_to_json``: type and fields) and the driver exits 0, so the run fails with the same typed
error; anything else fails the application (non-zero exit).

Imports only ``dagster_pipes``, ``pyspark`` and ``lance_ops`` (no Dagster on the cluster).
"""

import json
import sys

from dagster_pipes import PipesContext, open_dagster_pipes


def main() -> int:
    with open_dagster_pipes() as pipes:
        return run(pipes)


def run(pipes: PipesContext) -> int:
    from pyspark.sql import SparkSession

    from lance_ops import jobs
    from lance_ops.format.errors import LanceOpsError
    from lance_ops.orchestration import Task, error_to_json

    task = Task.from_json(pipes.get_extra("lance_ops_task"))
    # spark-submit set the master and conf; the builder must not override them.
    spark = SparkSession.builder.appName(f"lance_ops {task.operation}").getOrCreate()
    jobs.register(spark)
    sc = spark.sparkContext
    pipes.log.info(f"spark-submit driver: {task.operation} on {task.table.uri} (master {sc.master}, "
                   f"application {sc.applicationId}, default parallelism {sc.defaultParallelism})")
    try:
        result = task.run(spark).to_dict()
    except LanceOpsError as e:
        pipes.log.error(f"{type(e).__name__}: {e}")
        pipes.report_custom_message({"error": error_to_json(e)})  # rebuilt as the same class in the run
        return 0
    result["executors"] = _executors(sc)
    pipes.log.info(f"{task.operation} result: {json.dumps(result, default=str)}")
    pipes.report_custom_message({"result": result})
    version = result.get("version")
    if version is not None and pipes.is_asset_step and len(pipes.asset_keys) == 1 \
            and task.operation != "write_change_feed":
        pipes.report_asset_materialization(
            metadata={"lance_ops/committed_version": {"raw_value": int(version), "type": "int"}},
            data_version=str(version),
        )
    return 0


def _executors(sc: object) -> int:
    """Executors that registered with the driver (the driver's own block manager excluded); -1 if unknown."""
    try:
        return int(sc._jsc.sc().getExecutorMemoryStatus().size()) - 1  # type: ignore[attr-defined]
    except Exception:  # a diagnostic only: never fail a run that committed
        return -1


if __name__ == "__main__":
    sys.exit(main())
