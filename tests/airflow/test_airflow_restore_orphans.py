"""``LanceRestoreOperator`` and ``LanceRemoveOrphanFilesOperator`` in a real Airflow run
(``dag.test()`` on the session's SQLite metadata database): the registry's ``restore`` and
``remove_orphan_files`` tasks, stamped by the task instance, their XComs and asset events; a
restore target cleanup removed fails the task once, without retries."""

import json
import os
import sqlite3
import time
from datetime import timedelta

import pyarrow as pa
import pytest
from conftest import DATA, load_dag

import lance_ops.format as lf

pytestmark = pytest.mark.airflow

DAG = """
from datetime import datetime, timedelta

from airflow.sdk import DAG, chain
from lance_ops.airflow import LanceRemoveOrphanFilesOperator, LanceRestoreOperator

with DAG("lance_restore_sweep", schedule=None, start_date=datetime(2026, 1, 1), catchup=False,
         default_args={{"retries": 2, "retry_delay": timedelta(seconds=0)}}):
    chain(
        LanceRemoveOrphanFilesOperator(task_id="sweep_dry_run", dataset="events", dry_run=True),
        LanceRemoveOrphanFilesOperator(task_id="sweep", dataset="events", older_than=timedelta(hours=2)),
        LanceRestoreOperator(task_id="restore", dataset="events", version="{{{{ params.target }}}}"),
        LanceRestoreOperator(task_id="undo", dataset="events", tag="{{{{ ti.xcom_pull('restore')['undo_tag'] }}}}",
                             tag_current=False),
    )
"""
REMOVED = """
from datetime import datetime, timedelta

from airflow.sdk import DAG
from lance_ops.airflow import LanceRestoreOperator

with DAG("lance_restore_removed", schedule=None, start_date=datetime(2026, 1, 1), catchup=False,
         default_args={"retries": 3, "retry_delay": timedelta(seconds=0)}):
    LanceRestoreOperator(task_id="restore", uri=%r, version=1)
"""


def _rows(start: int, n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64()), "kind": ["click"] * n,
                     "amount": pa.array([1.0] * n)})


def _xcoms(db, dag_id, run_id):
    with sqlite3.connect(db) as c:
        rows = c.execute("SELECT task_id, value FROM xcom WHERE dag_id=? AND run_id=? AND key='return_value'",
                         (dag_id, run_id)).fetchall()
    return {t: json.loads(v) for t, v in rows}


def _states(run):
    return {ti.task_id: (str(ti.state), ti.try_number) for ti in run.get_task_instances()}


def test_sweep_then_restore_then_undo(airflow_db, fresh_dataset):
    uri = fresh_dataset
    for i in range(3):
        lf.write_dataset(_rows(10 * i, 10), uri, mode="append" if i else "create", enable_stable_row_ids=True)
    stray = os.path.join(uri, "data", "stray.lance")
    with open(stray, "wb") as f:
        f.write(b"x" * 200)
    old = time.time() - 3 * 3600
    os.utime(stray, (old, old))
    dag = load_dag("lance_restore_sweep", DAG.format())
    run = dag.test(run_conf={"target": 1})
    assert str(run.state) == "success", _states(run)
    out = _xcoms(airflow_db, "lance_restore_sweep", run.run_id)
    assert (out["sweep_dry_run"]["files_removed"], out["sweep_dry_run"]["bytes_removed"]) == (1, 200)
    assert out["sweep"]["files_removed"] == 1 and not os.path.exists(stray)
    assert (out["restore"]["version"], out["restore"]["restored_version"], out["restore"]["row_count"]) == (4, 1, 10)
    assert out["undo"]["restored_version"] == 3 and lf.dataset(uri).count_rows() == 30
    props = lf.dataset(uri).read_transaction(4).properties
    assert (props["airflow/dag_id"], props["lance_ops/operation"]) == ("lance_restore_sweep", "restore")
    with sqlite3.connect(airflow_db) as c:
        extras = [json.loads(x) for (x,) in c.execute(
            "SELECT e.extra FROM asset_event e JOIN asset a ON a.id = e.asset_id WHERE a.uri = ? "
            "AND e.source_dag_id = 'lance_restore_sweep' ORDER BY e.id", (f"file://{uri}",))]
    assert [(e["operation"], e["version"]) for e in extras][-2:] == [("restore", 4), ("restore", 5)]


def test_restore_of_a_removed_version_fails_without_retries(airflow_db, tmp_path):
    uri = str(DATA / "restore_removed")
    for i in range(2):
        lf.write_dataset(_rows(10 * i, 10), uri, mode="overwrite" if i == 0 else "append")
    lf.dataset(uri).cleanup_old_versions(timedelta(0), 1, retention_duration_check=False)
    run = load_dag("lance_restore_removed", REMOVED % uri).test()
    assert _states(run) == {"restore": ("failed", 1)}  # a retry cannot bring the version back
    assert lf.dataset(uri).version == 2 and lf.dataset(uri).tags.list() == {}
