"""Driver program for test_cluster.py: runs jobs on a standalone cluster and prints a JSON report.

Run as ``python cluster_driver.py spark://127.0.0.1:PORT <dataset uri>`` (a separate process, so
its SparkSession does not clash with the test session).
"""

import json
import sys
import time

import numpy as np
import pyarrow as pa

import lance_ops.format as lf
from lance_ops import jobs


def table(start: int, n: int) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table({"id": ids, "val": pa.array([f"v{i}" for i in ids]), "score": ids * 0.5})


def main(master: str, uri: str) -> None:
    spark = jobs.spark_session(
        master,
        {
            "spark.cores.max": 2,
            "spark.executor.cores": 1,
            "spark.executor.memory": "512m",
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.sql.shuffle.partitions": 2,
            "spark.default.parallelism": 2,
            "spark.sql.session.timeZone": "UTC",
        },
        app_name="lance_ops-cluster-test",
    )
    spark.sparkContext.setLogLevel("ERROR")
    report: dict = {"timings": {}}
    t0 = time.perf_counter()

    def lap(name: str) -> None:
        report["timings"][name] = round(time.perf_counter() - t0, 2)

    lap("session")
    try:
        sc = spark.sparkContext
        deadline = time.monotonic() + 120  # the workers may still be registering with the master
        while sc._jsc.sc().getExecutorMemoryStatus().size() < 3 and time.monotonic() < deadline:
            time.sleep(0.2)
        lap("executors")
        report["executors"] = sc._jsc.sc().getExecutorMemoryStatus().size() - 1  # minus the driver
        report["task_pids"] = sorted(set(sc.parallelize(range(8), 8).map(lambda _: __import__("os").getpid()).collect()))
        df1 = spark.createDataFrame(table(0, 3000).to_pandas()).repartition(4)
        report["append1"] = jobs.append(spark, uri, df1, max_rows_per_file=500, enable_stable_row_ids=True).to_dict()
        lap("append")
        report["delete"] = jobs.delete(spark, uri, "id % 10 = 0").to_dict()
        before = lf.dataset(uri).to_table(columns=["id", "_rowid", "_row_created_at_version"])
        report["rows_before_compaction"] = sorted(map(list, zip(*before.to_pydict().values(), strict=True)))
        lap("delete")
        report["compact"] = jobs.compact(spark, uri, target_rows_per_fragment=2500).to_dict()
        lap("compact")
        cf = jobs.change_feed(spark, uri, 1, report["compact"]["version"])
        report["change_feed"] = {r["_change_type"]: r["count"] for r in cf.groupBy("_change_type").count().collect()}
        lap("change_feed")
    finally:
        spark.stop()
    print("REPORT " + json.dumps(report, default=str))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
