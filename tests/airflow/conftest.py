"""One real Airflow 3 per test session: a temporary ``AIRFLOW_HOME`` with its SQLite metadata
database (``airflow db migrate`` once), the example DAGs as the DAG folder, a ``lance_default``
connection from the environment and a ``lance_ops.yaml`` whose dataset lives in a temp dir.

The environment is set when this conftest is imported, before anything imports airflow (Airflow
reads its configuration once, at import).
"""

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "airflow"
HOME = Path(tempfile.mkdtemp(prefix="lance_ops_airflow_home_"))
atexit.register(shutil.rmtree, HOME, ignore_errors=True)  # the session's Airflow leaves nothing behind
DATA = HOME / "data"
CONFIG = HOME / "lance_ops.yaml"
DAGS = HOME / "dags"  # the example DAGs, plus the DAG files tests write (dag.test() syncs the folder)

CONFIG_YAML = f"""\
spark:
  master: local[2,2]
datasets:
  events:
    uri: {DATA}/events
    source:
      format: generate
      rows: 500
    change_feed:
      sink_uri: {DATA}/events_changes
      format: parquet
    policy:
      target_rows_per_fragment: 10000
      min_small_fragments: 3
      deleted_ratio_threshold: 0.2
      max_versions_since_compaction: 20
"""

ENV = {
    "AIRFLOW_HOME": str(HOME),
    "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
    "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
    "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": "120",
    "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{HOME}/airflow.db",
    "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",
    "AIRFLOW_CONN_LANCE_DEFAULT": json.dumps({"conn_type": "lance", "extra": {"spark": {"master": "local[2,2]"}}}),
    "LANCE_OPS_CONFIG": str(CONFIG),
    # the OpenLineage provider's transport (read when its plugin loads: set for the whole session;
    # tests/airflow/test_airflow_lineage.py reads the file)
    "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps({"type": "file", "log_file_path": str(HOME / "openlineage.jsonl"),
                                                   "append": True}),
    "AIRFLOW__OPENLINEAGE__NAMESPACE": "airflow_test",
    "NUMBA_CACHE_DIR": str(HOME / "numba"),
    "PYTHONPATH": os.pathsep.join([str(ROOT), str(DAGS), os.environ.get("PYTHONPATH", "")]),
}
os.environ.update(ENV)
DATA.mkdir(parents=True, exist_ok=True)
CONFIG.write_text(CONFIG_YAML)
shutil.copytree(EXAMPLES, DAGS, ignore=shutil.ignore_patterns("__pycache__"))
sys.path.insert(0, str(DAGS))

import pytest  # noqa: E402
from spark_fixture import spark  # noqa: E402, F401  (the Spark environment before any JVM starts)

AIRFLOW = str(Path(sys.executable).parent / "airflow")


@pytest.fixture(scope="session")
def airflow_db():
    """The migrated metadata database of this session's AIRFLOW_HOME."""
    proc = subprocess.run([AIRFLOW, "db", "migrate"], env={**os.environ}, capture_output=True, text=True,
                          timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return HOME / "airflow.db"


def load_dag(name: str, source: str | None = None):
    """The DAG ``name`` parsed by Airflow from ``DAGS/<name>.py`` (written from ``source`` if given)."""
    from airflow.dag_processing.dagbag import DagBag

    path = DAGS / f"{name}.py"
    if source is not None:
        path.write_text(source)
    bag = DagBag(dag_folder=str(path))
    assert not bag.import_errors, bag.import_errors
    return bag.dags[name]


@pytest.fixture
def fresh_dataset():
    """The yaml's dataset and sink, removed before the test (tests in this module share the config)."""
    for name in ("events", "events_changes"):
        shutil.rmtree(DATA / name, ignore_errors=True)
    return str(DATA / "events")
