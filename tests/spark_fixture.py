"""The one SparkSession fixture the jobs and assets suites share (docs/RECIPES.md §6).

The master is ``local[2,2]``: two cores, and a failed task is retried once (``local[N]`` never
retries), so the fault tests can show that a retried write task adds its rows once.  In one
pytest process both suites get the same JVM (``getOrCreate``).
"""

from lance_ops.jobs import prepare_environment

prepare_environment()  # PYSPARK_PYTHON etc. before any JVM starts (the env is frozen then)

import pytest  # noqa: E402


def start_session(tmp_path_factory):
    """The tests' SparkSession (or the one already running in this process: ``getOrCreate``)."""
    from lance_ops.jobs import spark_session

    d = tmp_path_factory.mktemp("spark")
    s = spark_session(
        "local[2,2]",
        {
            "spark.sql.shuffle.partitions": 2,
            "spark.default.parallelism": 2,
            "spark.driver.memory": "1g",
            "spark.local.dir": str(d),
            "spark.sql.warehouse.dir": str(d / "wh"),
            "spark.sql.session.timeZone": "UTC",
        },
        app_name="lance_ops-tests",
    )
    s.sparkContext.setLogLevel("ERROR")
    return s


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    s = start_session(tmp_path_factory)
    yield s
    s.stop()
