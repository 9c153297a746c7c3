"""Fixtures for the Dagster layer: one SparkSession for every test, Dagster instances in temp dirs.

The SparkResource builds its session with ``getOrCreate``, so every run here reuses the
session fixture's JVM (docs/RECIPES.md §6).
"""

import warnings

import pytest
from dagster import instance_for_test
from spark_fixture import spark  # noqa: F401  (sets the Spark environment before any JVM starts)

warnings.filterwarnings("ignore", module="dagster")


def pytest_configure(config):
    # Known and accepted: backfill_policy (needed for single-run ranges) is beta in dagster 1.13.
    config.addinivalue_line("filterwarnings", "ignore::dagster.BetaWarning")
    config.addinivalue_line("filterwarnings", "ignore:Starting in dagster 1.11, get_sensor_def:UserWarning")


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
