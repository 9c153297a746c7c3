"""Shared fixtures (test data lives in datagen.py)."""

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
    "orchestration": ("orchestration",),
}
_TESTS = Path(__file__).resolve().parent


FAST_TIER = "not (spark or dagster or airflow or gcs or stress or interop or slow or soak)"


def pytest_configure(config):
    """The fast tier is the default of a bare ``pytest`` only: naming test files or folders runs them
    whatever they need (``pytest tests/jobs/test_compaction.py`` runs Spark tests)."""
    if config.getoption("markexpr", "") == FAST_TIER and list(config.args) != list(config.getini("testpaths")):
        config.option.markexpr = ""


def _folder_markers(path: Path) -> tuple[str, ...]:
    try:
        parts = Path(path).resolve().relative_to(_TESTS).parts
    except ValueError:
        return ()
    return FOLDER_MARKERS.get(parts[0], ()) if len(parts) > 1 else ()


def pytest_ignore_collect(collection_path, config):
    """A folder whose markers the ``-m`` expression deselects is not even imported (the fast tier
    then never imports Spark, Dagster or Airflow: collection takes seconds, not half a minute)."""
    from _pytest.mark.expression import Expression

    markexpr = config.getoption("markexpr", "")
    markers = _folder_markers(collection_path)
    if not markexpr or not markers:
        return None
    # slow/pylance are per test: a folder is skipped only when no test in it could be selected
    if not Expression.compile(markexpr).evaluate(lambda name: name in markers):
        return True
    return None


def pytest_collection_modifyitems(config, items):
    """Mark every test by its folder, and ``pylance`` where its module imports pylance or lancedb."""
    for item in items:
        for name in _folder_markers(Path(str(item.fspath))):
            item.add_marker(getattr(pytest.mark, name))
        module = getattr(item, "module", None)
        if module is not None and any(getattr(module, n, None) is sys.modules.get(n) for n in ("lance", "lancedb")
                                      if n in sys.modules):
            item.add_marker(pytest.mark.pylance)


@pytest.fixture
def uri(tmp_path):
    return str(tmp_path / "ds")
