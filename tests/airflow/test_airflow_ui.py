"""The Airflow UI as a person sees it: ``airflow standalone`` (api-server, scheduler, dag-processor,
triggerer) on 127.0.0.1 over this session's AIRFLOW_HOME and metadata DB, after the change-feed
example DAG ran (``dag.test()``: its sensor and two mapped ``write_change_feed`` tasks), and its
grid and mapped-task pages rendered by headless Chromium, the mapped task instances asserted in
the page.

The run is made before the UI starts, in this process (its SparkSession is warm), not by the
standalone scheduler: on two busy cores a scheduler-launched task starts its own JVM per mapped
task (over a minute each here) and the SQLite metadata DB serialises the rest, which made the
scheduler-driven variant take over seven minutes (and time out).  The DAG stays paused.
"""

import html
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pyarrow as pa
import pytest
from conftest import AIRFLOW, DATA, HOME, load_dag

import lance_ops.format as lf

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--virtual-time-budget=15000", "--window-size=1400,1400"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rendered_text(dom: str) -> str:
    dom = re.sub(r"<script.*?</script>|<style.*?</style>", "", dom, flags=re.S)
    parts = (html.unescape(p).strip() for p in re.split(r"<[^>]+>", dom))
    return " | ".join(p for p in parts if p)


def rows(start: int, n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64()), "kind": pa.array(["click"] * n),
                     "amount": pa.array([1.25] * n)})


def page(common: list[str], url: str, png: Path) -> str:
    """Screenshot ``url`` to ``png`` and return the page's rendered text."""
    dom = subprocess.run([*common, "--dump-dom", url], capture_output=True, text=True, timeout=180)
    assert dom.returncode == 0, dom.stderr[-2000:]
    shot = subprocess.run([*common, f"--screenshot={png}", url], capture_output=True, text=True, timeout=180)
    assert shot.returncode == 0 and png.stat().st_size > 20_000, shot.stderr[-2000:]  # a blank page is ~6 KB
    return rendered_text(dom.stdout)


def wait_for(what: str, check, timeout: float, log) -> object:
    deadline = time.time() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.time() < deadline, f"{what}: not within {timeout} s\n{log()[-4000:]}"
        time.sleep(2)


def test_change_feed_grid_shows_mapped_tasks(airflow_db, fresh_dataset, tmp_path, spark):
    assert os.path.exists(CHROMIUM), "Debian's chromium is expected at /usr/bin/chromium"
    lf.write_dataset(rows(0, 300), fresh_dataset, enable_stable_row_ids=True)
    lf.write_dataset(rows(300, 200), fresh_dataset, mode="append")
    run = load_dag("lance_change_feed").test()
    assert str(run.state) == "success"
    sink = DATA / "events_changes"
    assert sorted(p.name for p in sink.iterdir() if p.name.startswith("change_range")) == \
        ["change_range=0-1", "change_range=1-2"]
    port = free_port()
    env = {**os.environ, "PATH": f"{Path(AIRFLOW).parent}{os.pathsep}{os.environ.get('PATH', '')}",  # standalone runs `airflow`
           "AIRFLOW__API__PORT": str(port), "AIRFLOW__API__HOST": "127.0.0.1",
           "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
           "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True", "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
           "AIRFLOW__CORE__PARALLELISM": "2", "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
           "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2"}
    log_path = tmp_path / "standalone.log"
    log = open(log_path, "wb")
    proc = subprocess.Popen([AIRFLOW, "standalone"], env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    base = f"http://127.0.0.1:{port}"

    def logs() -> str:
        return log_path.read_text(errors="replace")

    def healthy() -> bool:
        assert proc.poll() is None, logs()[-4000:]
        try:
            with urllib.request.urlopen(f"{base}/api/v2/monitor/health", timeout=5) as r:
                return r.status == 200
        except OSError:
            return False

    try:
        wait_for("api-server health", healthy, 240, logs)
        common = [CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'chromium-profile'}"]
        run_path = f"{base}/dags/lance_change_feed/runs/{urllib.parse.quote(run.run_id, safe='')}"
        mapped = page(common, f"{run_path}/tasks/write_change_feed/mapped",
                      tmp_path / "lance_change_feed_mapped.png")
        assert "write_change_feed" in mapped, mapped[:3000]
        assert re.search(r"Map Index.*\b0\b.*\b1\b", mapped, flags=re.S), mapped[:3000]
        assert mapped.lower().count("success") >= 2, mapped[:3000]
        grid = page(common, run_path, tmp_path / "lance_change_feed_grid.png")
        assert "new_versions" in grid and "write_change_feed" in grid and "versions" in grid, grid[:3000]
        keep = os.environ.get("LANCE_OPS_UI_SCREENSHOTS")
        if keep:
            os.makedirs(keep, exist_ok=True)
            for png in tmp_path.glob("*.png"):
                shutil.copyfile(png, os.path.join(keep, png.name))
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        else:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # children standalone left behind
            except ProcessLookupError:
                pass
        log.close()
    assert str(HOME) in env["AIRFLOW_HOME"]
