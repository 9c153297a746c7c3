"""Fixtures for the Dagster layer: one SparkSession for every test, Dagster instances in temp dirs.

The SparkResource builds its session with ``getOrCreate``, so every run here reuses the
session fixture's JVM (RECIPES.md §6).
"""

from lance_ops.jobs import prepare_environment

prepare_environment()  # PYSPARK_PYTHON etc. before any JVM starts (the env is frozen then)

import warnings  # noqa: E402

import pytest  # noqa: E402
from dagster import instance_for_test  # noqa: E402

warnings.filterwarnings("ignore", module="dagster")


def pytest_configure(config):
    # Known and accepted: backfill_policy (needed for single-run ranges) is beta in dagster 1.13.
    config.addinivalue_line("filterwarnings", "ignore::dagster.BetaWarning")
    config.addinivalue_line("filterwarnings", "ignore:Starting in dagster 1.11, get_sensor_def:UserWarning")


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    """The same settings as tests/jobs/conftest.py: in one pytest process both fixtures get the
    JVM whichever starts first (``getOrCreate``), so they must agree (``local[2,2]`` retries a
    failed task once, which the jobs' fault tests rely on)."""
    from lance_ops.jobs import spark_session

    d = tmp_path_factory.mktemp("spark-assets")
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
    yield s
    s.stop()


@pytest.fixture
def instance(tmp_path):
    """A real DagsterInstance (sqlite storage) in a temp dir."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    with instance_for_test(temp_dir=str(home)) as inst:
        yield inst


@pytest.fixture(scope="module")
def module_instance(tmp_path_factory):
    home = tmp_path_factory.mktemp("dagster_home")
    with instance_for_test(temp_dir=str(home)) as inst:
        yield inst
