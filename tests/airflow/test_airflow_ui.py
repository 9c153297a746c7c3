"""The Airflow UI as a person sees it: ``airflow standalone`` (api-server, scheduler, dag-processor,
triggerer; LocalExecutor) on 127.0.0.1 over this session's AIRFLOW_HOME, the change-feed DAG
unpaused and run by the scheduler (its sensor, the mapped ``write_change_feed`` tasks in their own
worker processes), and its grid screenshotted with headless Chromium, the mapped task instances
asserted in the rendered page."""

import html
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.request

import pyarrow as pa
import pytest
from conftest import AIRFLOW, DATA, HOME

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


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([AIRFLOW, *args], env=env, capture_output=True, text=True, timeout=180, check=False)


def wait_for(what: str, check, timeout: float, log) -> object:
    deadline = time.time() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.time() < deadline, f"{what}: not within {timeout} s\n{log()[-4000:]}"
        time.sleep(2)


def test_change_feed_grid_shows_mapped_tasks(airflow_db, fresh_dataset, tmp_path):
    assert os.path.exists(CHROMIUM), "Debian's chromium is expected at /usr/bin/chromium"
    lf.write_dataset(rows(0, 300), fresh_dataset, enable_stable_row_ids=True)
    lf.write_dataset(rows(300, 200), fresh_dataset, mode="append")
    port = free_port()
    env = {**os.environ, "AIRFLOW__API__PORT": str(port), "AIRFLOW__API__HOST": "127.0.0.1",
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
        wait_for("lance_change_feed parsed", lambda: cli(env, "dags", "unpause", "lance_change_feed").returncode == 0,
                 240, logs)

        def finished_run() -> dict | None:
            out = cli(env, "dags", "list-runs", "lance_change_feed", "-o", "json")
            runs = json.loads(out.stdout or "[]") if out.returncode == 0 else []
            assert not [r for r in runs if r["state"] == "failed"], (runs, logs()[-4000:])
            done = [r for r in runs if r["state"] == "success"]
            return done[0] if done else None

        run = wait_for("a successful lance_change_feed run", finished_run, 420, logs)
        sink = DATA / "events_changes"
        assert sorted(p.name for p in sink.iterdir() if p.name.startswith("change_range")) == \
            ["change_range=0-1", "change_range=1-2"]

        common = [CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'chromium-profile'}"]
        url = f"{base}/dags/lance_change_feed/runs/{run['run_id']}/tasks/write_change_feed/mapped"
        dom = subprocess.run([*common, "--dump-dom", url], capture_output=True, text=True, timeout=180)
        assert dom.returncode == 0, dom.stderr[-2000:]
        text = rendered_text(dom.stdout)
        assert "write_change_feed" in text and "lance_change_feed" in text, text[:3000]
        assert re.search(r"\b0\b.*\b1\b", text) and text.count("Success") + text.count("success") >= 2, text[:3000]
        grid = f"{base}/dags/lance_change_feed/grid"
        png = tmp_path / "lance_change_feed_grid.png"
        shot = subprocess.run([*common, f"--screenshot={png}", url if "grid" not in grid else grid],
                              capture_output=True, text=True, timeout=180)
        assert shot.returncode == 0 and png.stat().st_size > 20_000, shot.stderr[-2000:]
        keep = os.environ.get("LANCE_OPS_UI_SCREENSHOTS")
        if keep:
            os.makedirs(keep, exist_ok=True)
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
