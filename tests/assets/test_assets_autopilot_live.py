"""The autopilot sensor in a live ``dagster dev`` (webserver + daemon, stock dagster.yaml) over a
fleet root of 20 tables: the daemon's ticks launch one run per chosen action and never the same
run key twice, what the tick's run budget left out is on the tick's log, and the last tick says
every table is healthy."""

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from planner import tables as T

from lance_ops.orchestration.planner import history, plan

pytestmark = pytest.mark.slow

DAGSTER = str(Path(sys.executable).parent / "dagster")
LOCATION = '''\
from dagster import DefaultSensorStatus

from lance_ops.assets.autopilot import autopilot_definitions
from lance_ops.orchestration.planner import FleetBudget
from lance_ops.settings import load_settings

defs = autopilot_definitions(load_settings(), FleetBudget(max_runs=2), minimum_interval_seconds=30,
                             default_status=DefaultSensorStatus.RUNNING)
'''
TICKS = """{ sensorOrError(sensorSelector: {repositoryLocationName: "autopilot", repositoryName: "__repository__",
    sensorName: "lance_autopilot_sensor"}) { ... on Sensor { sensorState { ticks(limit: 20) {
    status skipReason runKeys runIds logEvents { events { message } } } } } } }"""
RUNS = """{ runsOrError { ... on Runs { results { runId status tags { key value } } } } }"""


def _gql(base: str, query: str) -> dict:
    req = urllib.request.Request(f"{base}/graphql", json.dumps({"query": query}).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        out = json.load(r)
    assert "errors" not in out, out["errors"]
    return out["data"]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(what, predicate, timeout: float, proc, log: Path):
    deadline = time.time() + timeout
    while True:
        assert proc.poll() is None, log.read_text()[-5000:]
        try:
            got = predicate()
            if got:
                return got
        except OSError:
            pass
        assert time.time() < deadline, f"{what} did not happen in {timeout} s"
        time.sleep(1)


def test_autopilot_sensor_live(tmp_path):
    lake = tmp_path / "lake"
    needs = [f"t{i:02d}" for i in range(4)]
    for i in range(20):  # 4 tables need a compaction, 16 are healthy
        (T.small_fragments if i < 4 else T.healthy)(str(lake / f"t{i:02d}"), *((6,) if i < 4 else ()))
    (tmp_path / "lance_ops.yaml").write_text(
        f"roots:\n  - uri: {lake}\n    policy: {{target_rows_per_fragment: 1000, min_small_fragments: 4}}\n")
    (tmp_path / "autopilot_location.py").write_text(LOCATION)
    (tmp_path / "workspace.yaml").write_text(
        "load_from:\n  - python_file:\n      relative_path: autopilot_location.py\n      location_name: autopilot\n")
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\nnux:\n  enabled: false\n")
    port = _free_port()
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "DAGSTER_HOME": str(home), "LANCE_OPS_CONFIG": str(tmp_path / "lance_ops.yaml"),
           "DAGSTER_DISABLE_TELEMETRY": "1",
           "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    log = tmp_path / "dagster_dev.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([DAGSTER, "dev", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
                                cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        base = f"http://127.0.0.1:{port}"
        try:
            def runs():
                return _gql(base, RUNS)["runsOrError"]["results"]

            def all_done():
                got = runs()
                return got if len(got) == 4 and all(r["status"] == "SUCCESS" for r in got) else None

            finished = _wait("4 successful runs", all_done, 600, proc, log)

            def healthy_tick():
                ticks = _gql(base, TICKS)["sensorOrError"]["sensorState"]["ticks"]
                return ticks if any((t["skipReason"] or "").startswith("20 tables planned, 20 need nothing")
                                    for t in ticks) else None

            ticks = _wait("a tick with nothing to do", healthy_tick, 300, proc, log)
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
    # a tick may request a key again while its run is queued: Dagster launches a key once
    launched = [i for t in ticks for i in t["runIds"]]
    assert len(launched) == len(set(launched)) == 4 and set(launched) == {r["runId"] for r in finished}
    tags = [{t["key"]: t["value"] for t in r["tags"]} for r in finished]
    assert len({t["dagster/run_key"] for t in tags}) == 4
    assert sorted(os.path.basename(t["lance_ops/table"]) for t in tags) == needs
    assert all(t["lance_ops/operation"] == "compact" for t in tags)
    first = ticks[-1]  # oldest first in time: the list is newest first
    assert len(first["runKeys"]) == 2
    assert sum("run budget: 2 runs chosen" in e["message"] for e in first["logEvents"]["events"]) == 2
    for name in needs:
        uri = str(lake / name)
        (latest,) = history(uri, limit=1)
        assert latest["who"].startswith("dagster:") and latest["run_id"] in {r["runId"] for r in finished}
        assert plan(uri, T.POLICY).healthy
