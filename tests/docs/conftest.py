"""The docs examples: Spark sections share the tests' SparkSession, started only when one runs
(the fast tier never imports Spark)."""

import pytest


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    import spark_fixture  # sets the Spark environment before the JVM starts

    s = spark_fixture.start_session(tmp_path_factory)
    yield s
    s.stop()
