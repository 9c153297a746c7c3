"""The autopilot example DAG in a real Airflow 3 (``dag.test()``): it plans a fleet root and maps
one task per chosen action; afterwards every table plans nothing and each commit names the
Airflow run."""

import os

import pytest
from conftest import load_dag
from planner import tables as T
from test_airflow_dags import task_states, xcoms

from lance_ops.orchestration.planner import history, plan
from lance_ops.settings import parse_settings

pytestmark = [pytest.mark.airflow, pytest.mark.slow]


def test_autopilot_dag_maps_one_task_per_action(airflow_db, tmp_path, monkeypatch):
    root = tmp_path / "lake"
    for name in ("a", "b", "c"):
        T.small_fragments(str(root / name), 6)
    T.deleted(str(root / "d"))
    T.healthy(str(root / "e"))
    cfg = tmp_path / "lance_ops.yaml"
    cfg.write_text("roots:\n  - uri: lake\n    policy: {target_rows_per_fragment: 1000, min_small_fragments: 4}\n")
    monkeypatch.setenv("LANCE_OPS_AUTOPILOT_CONFIG", str(cfg))
    monkeypatch.setenv("LANCE_OPS_AUTOPILOT_MAX_RUNS", "3")  # the tick's run budget: one action waits
    dag = load_dag("lance_autopilot")
    run = dag.test()
    assert str(run.state) == "success", task_states(run)
    out = xcoms(airflow_db, "lance_autopilot", run.run_id)
    planned = out[("plan", -1)]
    assert [(os.path.basename(a["table"]), a["operation"]) for a in planned] == [
        ("d", "materialize_deletions"), ("a", "compact"), ("b", "compact")]
    ran = sorted((v["table"], v["status"]) for (t, _), v in out.items() if t == "run")
    assert ran == sorted((a["table"], "ran") for a in planned)
    for a in planned:
        (latest,) = history(a["table"], limit=1)
        assert latest["run_id"] == run.run_id and latest["who"].startswith("airflow:")
    settings = parse_settings(cfg.read_text(), base_dir=tmp_path)
    policy = settings.roots[0].policy
    assert [os.path.basename(str(p)) for p in sorted(root.iterdir()) if not plan(str(p), policy).healthy] == ["c"]
    second = dag.test()  # the next tick runs what the budget left
    assert str(second.state) == "success", task_states(second)
    assert all(plan(str(p), policy).healthy for p in root.iterdir())
