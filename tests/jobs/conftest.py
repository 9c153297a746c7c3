"""The tests/jobs suite: the shared SparkSession fixture (tests/spark_fixture.py) and pylance warnings.

The master is ``local[2,2]``: two cores, and a failed task is retried once (``local[N]`` never
retries), so the fault tests can show that a retried write task adds its rows once.
"""

from spark_fixture import spark  # noqa: F401  (sets the Spark environment before any JVM starts)


def pytest_configure(config):
    # pylance warns when a process that imported it forks; the tests' subprocesses exec at once
    config.addinivalue_line("filterwarnings", "ignore:lance is not fork-safe:UserWarning")


