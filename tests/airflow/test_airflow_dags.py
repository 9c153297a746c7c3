"""The example DAGs run with ``dag.test()`` in a real Airflow 3 (temporary AIRFLOW_HOME, SQLite
metadata DB): versions, rows, XComs and asset events (with their extras) asserted."""

import json
import sqlite3
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import CONFIG, DATA, EXAMPLES

import lance_ops.format as lf

pytestmark = [pytest.mark.airflow, pytest.mark.slow]


def load_dag(name: str):
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(EXAMPLES / f"{name}.py"))
    assert not bag.import_errors, bag.import_errors
    return bag.dags[name]


def xcoms(db: Path, dag_id: str, run_id: str) -> dict[tuple[str, int], object]:
    with sqlite3.connect(db) as c:
        rows = c.execute("SELECT task_id, map_index, value FROM xcom WHERE dag_id=? AND run_id=? AND key='return_value'",
                         (dag_id, run_id)).fetchall()
    return {(t, m): json.loads(v) for t, m, v in rows}


def asset_events(db: Path, uri: str) -> list[dict]:
    with sqlite3.connect(db) as c:
        rows = c.execute("SELECT e.extra, e.source_dag_id, e.source_task_id, e.source_map_index FROM asset_event e "
                         "JOIN asset a ON a.id = e.asset_id WHERE a.uri = ? ORDER BY e.id", (uri,)).fetchall()
    return [{"extra": json.loads(x), "dag_id": d, "task_id": t, "map_index": m} for x, d, t, m in rows]


def task_states(run) -> dict[tuple[str, int], str]:
    return {(ti.task_id, ti.map_index): str(ti.state) for ti in run.get_task_instances()}


def test_append_dag(airflow_db, fresh_dataset, spark):
    dag = load_dag("lance_append")
    run = dag.test()
    assert str(run.state) == "success", task_states(run)
    ds = lf.dataset(fresh_dataset)
    assert (ds.version, ds.count_rows()) == (1, 500)
    out = xcoms(airflow_db, "lance_append", run.run_id)[("append", -1)]
    assert out["version"] == 1 and out["rows_written"] == 500 and out["row_count"] == 500
    events = asset_events(airflow_db, f"file://{fresh_dataset}")
    assert events[-1]["extra"] == {"version": 1, "row_count": 500, "operation": "append", "committed": True,
                                   "fragments": events[-1]["extra"]["fragments"]}
    txn_props = ds.versions()  # the commit carries the Airflow task instance's idempotency key
    assert txn_props[-1]["version"] == 1
