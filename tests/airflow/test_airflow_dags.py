"""The example DAGs run with ``dag.test()`` in a real Airflow 3 (temporary AIRFLOW_HOME, SQLite
metadata DB): versions, rows, XComs and asset events (with their extras) asserted."""

import json
import sqlite3
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import DATA, load_dag

import lance_ops.format as lf

pytestmark = [pytest.mark.airflow, pytest.mark.slow]


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


def history(uri: str, *sizes: int) -> None:
    """Versions 1.. of the dataset, one append of ``size`` rows each, written in process (the
    append DAG's own run is ``test_append_dag``'s; the other DAGs only need the versions)."""
    for size in sizes:
        exists = Path(uri).exists()
        start = lf.dataset(uri).manifest.next_row_id if exists else 0
        table = pa.table({"id": pa.array(range(start, start + size), pa.int64()),
                          "kind": pa.array(["click"] * size), "amount": pa.array([1.0] * size)})
        if exists:
            lf.write_dataset(table, uri, mode="append")
        else:
            lf.write_dataset(table, uri, enable_stable_row_ids=True)  # as the append job creates it


def append_later(uri: str, rows: int, delay: float) -> threading.Thread:
    """Append ``rows`` rows in another thread after ``delay`` seconds (what a trigger waits for)."""

    def run() -> None:
        time.sleep(delay)
        start = lf.dataset(uri).manifest.next_row_id
        table = pa.table({"id": pa.array(range(start, start + rows), pa.int64()),
                          "kind": pa.array(["late"] * rows), "amount": pa.array([1.0] * rows)})
        lf.write_dataset(table, uri, mode="append")

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_change_feed_dag_maps_one_task_per_version_and_defers(airflow_db, fresh_dataset, spark):
    history(fresh_dataset, 500, 500)
    feed = load_dag("lance_change_feed")
    run = feed.test()
    assert str(run.state) == "success", task_states(run)
    states = task_states(run)
    assert {k for k in states if k[0] == "write_change_feed"} == {("write_change_feed", 0), ("write_change_feed", 1)}
    out = xcoms(airflow_db, "lance_change_feed", run.run_id)
    assert out[("new_versions", -1)] == {"version": 2, "after_version": None, "new_versions": [1, 2]}
    assert [(out[("write_change_feed", i)]["begin_version"], out[("write_change_feed", i)]["end_version"],
             out[("write_change_feed", i)]["rows_written"]) for i in (0, 1)] == [(0, 1, 500), (1, 2, 500)]
    sink = DATA / "events_changes"
    assert sorted(p.name for p in sink.iterdir() if p.name.startswith("change_range")) == \
        ["change_range=0-1", "change_range=1-2"]
    assert pq.read_table(sink).num_rows == 1000
    events = asset_events(airflow_db, f"file://{sink}")  # the sink is the mapped tasks' outlet
    assert sorted((e["map_index"], e["extra"]["begin_version"], e["extra"]["version"], e["extra"]["row_count"])
                  for e in events) == [(0, 0, 1, 500), (1, 1, 2, 500)]
    assert {e["extra"]["location"] for e in events} == {f"{sink}/change_range=0-1", f"{sink}/change_range=1-2"}

    # Nothing new: the sensor defers; its trigger (run inline by dag.test) fires on version 3.
    writer = append_later(fresh_dataset, 7, 3.0)
    run = feed.test()
    writer.join()
    assert str(run.state) == "success", task_states(run)
    out = xcoms(airflow_db, "lance_change_feed", run.run_id)
    assert out[("new_versions", -1)] == {"version": 3, "after_version": 2, "new_versions": [3]}
    assert out[("write_change_feed", 0)]["rows_written"] == 7
    assert pq.read_table(sink / "change_range=2-3").num_rows == 7


def test_maintenance_dag_waits_for_the_policy_then_compacts(airflow_db, fresh_dataset, spark):
    history(fresh_dataset, 500, 500)
    before = lf.dataset(fresh_dataset)
    assert len(before.get_fragments()) >= 2
    # Fragments are small (< 10000 rows); compaction is due at 3.  The third arrives while the
    # sensor is deferred.
    frags = len(before.get_fragments())
    writer = append_later(fresh_dataset, 11, 3.0) if frags < 3 else None
    run = load_dag("lance_maintenance").test()
    if writer:
        writer.join()
    assert str(run.state) == "success", task_states(run)
    out = xcoms(airflow_db, "lance_maintenance", run.run_id)
    assert out[("maintenance_due", -1)]["operation"] == "compact"
    maintain = out[("maintain", -1)]
    assert maintain["operation"] == "compact" and maintain["reasons"]
    after = lf.dataset(fresh_dataset)
    assert len(after.get_fragments()) == 1
    assert after.count_rows() == 1000 + (11 if writer else 0)
    assert maintain["version"] == after.version
    ev = [e for e in asset_events(airflow_db, f"file://{fresh_dataset}") if e["dag_id"] == "lance_maintenance"]
    assert ev[0]["task_id"] == "maintain" and ev[0]["extra"]["operation"] == "compact"
    assert ev[0]["extra"]["version"] == after.version and ev[0]["extra"]["row_count"] == after.count_rows()
    assert out[("cleanup", -1)]["operation"] == "cleanup_old_versions"


OPTIMIZE_DAG = '''
from _common import CONN_ID, DATASET, DEFAULT_ARGS, START
from airflow.sdk import DAG

from lance_ops.airflow import LanceOptimizeIndicesOperator

with DAG("lance_optimize_indices", schedule=None, start_date=START, catchup=False, default_args=DEFAULT_ARGS):
    LanceOptimizeIndicesOperator(task_id="optimize_indices", dataset=DATASET, lance_conn_id=CONN_ID,
                                 num_indices_to_merge=0)
'''


def test_optimize_indices_operator_indexes_the_new_rows(airflow_db, fresh_dataset, spark):
    import lance

    history(fresh_dataset, 500)
    lance.dataset(fresh_dataset).create_scalar_index("id", "BTREE", name="id_idx")
    history(fresh_dataset, 500)  # 500 rows no segment covers
    assert lance.dataset(fresh_dataset).index_statistics("id_idx")["num_unindexed_rows"] == 500
    run = load_dag("lance_optimize_indices", OPTIMIZE_DAG).test()
    assert str(run.state) == "success", task_states(run)
    after = lance.dataset(fresh_dataset)
    assert after.index_statistics("id_idx")["num_unindexed_rows"] == 0
    got = sorted(after.to_table(columns=["id"], filter="id >= 700 AND id < 710")["id"].to_pylist())
    assert got == list(range(700, 710))
    assert "ScalarIndexQuery" in after.scanner(filter="id = 750").explain_plan()
    out = xcoms(airflow_db, "lance_optimize_indices", run.run_id)[("optimize_indices", -1)]
    assert out["version"] == after.version
    ev = asset_events(airflow_db, f"file://{fresh_dataset}")[-1]
    assert ev["extra"]["operation"] == "optimize_indices" and ev["extra"]["version"] == after.version
