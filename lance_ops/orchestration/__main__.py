"""``spark-submit .../lance_ops/orchestration/__main__.py TASK_JSON --result-json OUT``: run one
orchestration :class:`~lance_ops.orchestration.tasks.Task` on the application's SparkSession.

What Airflow's spark-submit mode launches.  ``OUT`` receives ``{"result": ...}`` or, when the task
raised a lance_ops error, ``{"error": ...}`` (:func:`~lance_ops.orchestration.errors.error_to_json`:
type and fields, rebuilt as the same class in the worker); the exit status is 0 in both cases and
non-zero for anything else.
"""

import os
import sys

if __package__ in (None, ""):
    # Run as a script: its directory is sys.path[0], where our module names would shadow others.
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]

import argparse  # noqa: E402
import json  # noqa: E402
from collections.abc import Sequence  # noqa: E402


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lance_ops.orchestration", description="run one lance_ops task")
    p.add_argument("task_json", help="the task (lance_ops.orchestration.Task.to_json)")
    p.add_argument("--result-json", required=True, help="where the result or the error goes")
    args = p.parse_args(argv)
    from pyspark.sql import SparkSession

    from lance_ops import jobs
    from lance_ops.format.errors import LanceOpsError
    from lance_ops.orchestration.errors import error_to_json
    from lance_ops.orchestration.tasks import Task

    with open(args.task_json) as fh:
        task = Task.from_json(json.load(fh))
    spark = SparkSession.builder.appName(f"lance_ops {task.operation}").getOrCreate()  # spark-submit's master
    jobs.register(spark)
    try:
        out = {"result": task.run(spark).to_dict()}
    except LanceOpsError as e:
        print(f"lance_ops {task.operation} on {task.table.uri}: {type(e).__name__}: {e}", file=sys.stderr)
        out = {"error": error_to_json(e)}
    with open(args.result_json, "w") as fh:
        json.dump(out, fh, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
