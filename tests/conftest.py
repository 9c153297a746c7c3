"""Shared fixtures (test data lives in datagen.py)."""

import itertools
import os

os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")

import sys
from pathlib import Path

import pytest

# What a test needs, from the folder it lives in (pyiceberg's style: no test goes unmarked).
# A bare ``pytest`` runs the fast tier (pyproject's addopts deselects these); ``make test`` runs all.
FOLDER_MARKERS = {
    "jobs": ("spark",),
    "assets": ("dagster", "spark"),
    "airflow": ("airflow", "spark"),
    "gcs": ("gcs",),
    "reliability": ("stress",),
    "interop": ("interop",),
}
# Files whose tests race against wall-clock deadlines or need the machine to themselves (live
# Dagster and Airflow servers, the browser, the stress run that must see commits race): ``make test``
# runs every other test on two xdist workers, then these alone (marker ``serial``).
SERIAL_FILES = {
    "airflow/test_airflow_live.py",
    "assets/test_assets_ui.py",
    "assets/test_assets_autopilot_live.py",
    "reliability/test_stress.py",
}
# markers set per test (not by folder): a folder is skipped only if no combination of them selects it
PER_TEST_MARKERS = ("slow", "pylance", "soak", "serial")
_TESTS = Path(__file__).resolve().parent


FAST_TIER = "not (spark or dagster or airflow or gcs or stress or interop or slow or soak)"


def pytest_configure(config):
    """The fast tier is the default of a bare ``pytest`` only: naming test files or folders runs them
    whatever they need (``pytest tests/jobs/test_compaction.py`` runs Spark tests)."""
    if config.getoption("markexpr", "") == FAST_TIER and list(config.args) != list(config.getini("testpaths")):
        config.option.markexpr = ""


def _folder_markers(path: Path) -> tuple[str, ...]:
    parts = _relative(path).split("/")
    return FOLDER_MARKERS.get(parts[0], ()) if len(parts) > 1 else ()


def pytest_ignore_collect(collection_path, config):
    """A folder whose markers the ``-m`` expression deselects is not even imported (the fast tier
    then never imports Spark, Dagster or Airflow: collection takes seconds, not half a minute)."""
    from _pytest.mark.expression import Expression

    markexpr = config.getoption("markexpr", "")
    markers = _folder_markers(collection_path)
    if not markexpr or not markers:
        return None
    # per-test markers: a folder is skipped only when no test in it could be selected
    expression = Expression.compile(markexpr)
    for bits in itertools.product((False, True), repeat=len(PER_TEST_MARKERS)):
        on = {m for m, bit in zip(PER_TEST_MARKERS, bits, strict=True) if bit}
        if expression.evaluate(lambda name, on=on: name in markers or name in on):
            return None
    return True


def _relative(path: Path) -> str:
    try:
        return Path(path).resolve().relative_to(_TESTS).as_posix()
    except ValueError:
        return ""


# Under xdist (``make test``) the files run longest first, so no long file starts last and leaves
# one worker running it alone: the files a full run measured at 45 s or more, longest first, then
# the folders whose files take minutes.  xdist's own reordering (scopes by number of tests) is off
# in the Makefile (``--no-loadscope-reorder``), so this order is the order files are handed out.
LONGEST_FIRST = (
    "jobs/test_cluster.py", "airflow/test_orchestrators_shared.py", "assets/test_assets_change_feed.py",
    "assets/test_assets_pipes.py", "docs/test_doc_examples.py", "interop/test_index_compaction.py",
    "jobs/test_index_jobs.py", "jobs/test_read_options.py", "test_packaging.py",
    "assets/test_assets_manifest_store.py", "format/test_file_v21_write.py", "jobs/test_manifest_store_writers.py",
    "gcs/test_soak_gcs.py", "jobs/test_change_feed.py", "assets/test_assets_indices.py", "reliability/test_soak.py",
    "assets/test_assets_sensors.py", "airflow/test_airflow_faults.py", "jobs/test_reader_leases.py",
    "jobs/test_failed_commit_cleanup_jobs.py", "jobs/test_sql_and_uris.py", "jobs/test_column_kinds_spark.py",
    "assets/test_assets_jobs.py", "airflow/test_airflow_dags.py", "format/test_file_v21.py",
    "jobs/test_strict_appends.py", "jobs/test_source.py", "jobs/test_zone_pruning_source.py", "jobs/test_faults.py",
    "assets/test_assets_checks.py", "jobs/test_mutations.py", "assets/test_assets_versions_by_tag.py",
    "jobs/test_pylance_default.py", "jobs/test_idempotent_jobs.py", "interop/test_model_based.py",
)
FIRST = ("assets", "airflow", "jobs", "reliability", "docs", "interop")


def _rank(item) -> tuple[int, int]:
    rel = _relative(Path(str(item.fspath)))
    if rel in LONGEST_FIRST:
        return 0, LONGEST_FIRST.index(rel)
    top = rel.split("/")[0]
    return 1, FIRST.index(top) if top in FIRST else len(FIRST)


def pytest_collection_modifyitems(config, items):
    """Mark every test by its folder, and ``pylance`` where its module imports pylance or lancedb."""
    for item in items:
        for name in _folder_markers(Path(str(item.fspath))):
            item.add_marker(getattr(pytest.mark, name))
        if _relative(Path(str(item.fspath))) in SERIAL_FILES:
            item.add_marker(pytest.mark.serial)
        module = getattr(item, "module", None)
        if module is not None and any(getattr(module, n, None) is sys.modules.get(n) for n in ("lance", "lancedb")
                                      if n in sys.modules):
            item.add_marker(pytest.mark.pylance)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items.sort(key=_rank)  # stable: each file's tests stay together and in order


@pytest.fixture
def uri(tmp_path):
    return str(tmp_path / "ds")
