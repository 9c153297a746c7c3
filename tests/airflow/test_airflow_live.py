"""Airflow as it runs in production: ``airflow api-server`` and ``airflow scheduler`` (LocalExecutor)
on 127.0.0.1 over this session's AIRFLOW_HOME and SQLite metadata DB, started once for this module.

1. A backfill of the change-feed example DAG over two past hours, created with
   ``airflow backfill create`` and executed by the scheduler: each run covers the versions
   committed in its hour (the dataset's history is written with commit times in those hours), one
   mapped ``write_change_feed`` task per version (two in the first hour, none in the second), each
   task process starting its own Spark.
2. The UI: the grid and mapped-task pages of that backfill run, rendered by headless Chromium,
   the mapped task instances asserted in the page.

Where the time of a scheduler-run Spark task goes (measured on two cores shared with other
jobs, load average 6-8): the task process parses the DAG file (~5 s), the driver JVM starts
(15-40 s), and the first Spark jobs of a fresh JVM warm up (Python data source planning and
worker daemons, ~20-45 s); the later ranges of the same JVM take ~3 s.  The scheduler itself
adds ~2 s per task (1 s heartbeat).  So the module runs as few Spark tasks as prove the mapping
(two, in parallel), parses nothing in a dag-processor (the DAG is serialised once with ``airflow dags
reserialize``), runs no triggerer (the backfill's sensors do not defer), and asks the task JVMs
for the C1 JIT only (``-XX:TieredStopAtLevel=1``: about a third less CPU for these short jobs).
"""

import html
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from browser import CHROMIUM, ensure_chromium, headless
from conftest import AIRFLOW, DATA, HOME

import lance_ops.format as lf
import lance_ops.format.txn.apply as manifest_build

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

DAG_ID = "lance_change_feed"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--virtual-time-budget=15000", "--window-size=1400,1400"]
#: the task JVMs' options: short jobs, so the C1 JIT only and the serial GC (less CPU at start)
TASK_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what: str, check: Callable[[], Any], timeout: float, log: Callable[[], str]) -> Any:
    deadline = time.time() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.time() < deadline, f"{what}: not within {timeout} s\n{log()[-6000:]}"
        time.sleep(1)


def query(sql: str, *args: Any) -> list[tuple]:
    with sqlite3.connect(HOME / "airflow.db") as c:
        return c.execute(sql, args).fetchall()


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM the process group (the component and the processes it started), SIGKILL what stays."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(60)
    except ProcessLookupError:
        return
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(10)


class Live(SimpleNamespace):
    base: str
    env: dict[str, str]
    logs: Callable[[], str]

    def cli(self, *args: str) -> str:
        """``airflow <args>`` against this Airflow; its output (asserting success).

        A command that failed on SQLAlchemy's OperationalError (SQLite busy while the scheduler
        writes: one full run saw ``backfill create`` fail so, the transaction rolled back) is run
        again, twice at most; any other failure fails at once."""
        for attempt in range(3):
            out = subprocess.run([AIRFLOW, *args], env=self.env, capture_output=True, text=True, timeout=300,
                                 check=False)
            if out.returncode == 0 or "sqlalche.me/e/21/e3q8" not in out.stdout + out.stderr or attempt == 2:
                break
            time.sleep(2)
        assert out.returncode == 0, (args, out.stdout[-3000:], out.stderr[-3000:])
        return out.stdout


@pytest.fixture(scope="module")
def live(airflow_db, tmp_path_factory) -> Iterator[Live]:
    """api-server + scheduler (LocalExecutor); no dag-processor (DAGs serialised by the CLI) and no
    triggerer (nothing here defers).  The scheduler creates no scheduled runs (``use_job_schedule``
    off): the backfill's runs are the only ones it executes."""
    port = free_port()
    conn = {"conn_type": "lance", "extra": {"spark": {"master": "local[2,2]", "conf": {
        "spark.driver.extraJavaOptions": TASK_JVM, "spark.ui.enabled": "false"}}}}
    env = {**os.environ, "PATH": f"{Path(AIRFLOW).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "AIRFLOW__API__PORT": str(port), "AIRFLOW__API__HOST": "127.0.0.1", "AIRFLOW__API__WORKERS": "1",
           "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
           "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
           "AIRFLOW__API_AUTH__JWT_SECRET": "lance-ops-tests-only",  # api-server and scheduler must agree
           "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True", "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
           "AIRFLOW__CORE__PARALLELISM": "2", "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False",
           "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "1", "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
           "AIRFLOW_CONN_LANCE_DEFAULT": json.dumps(conn),
           # five processes write the SQLite DB: wait up to a minute for its lock, not pysqlite's 5 s
           "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"{os.environ['AIRFLOW__DATABASE__SQL_ALCHEMY_CONN']}?timeout=60"}
    logdir = tmp_path_factory.mktemp("live_airflow")
    procs, files = [], []
    for name in ("api-server", "scheduler"):
        fh = open(logdir / f"{name}.log", "wb")
        files.append(fh)
        procs.append(subprocess.Popen([AIRFLOW, name], env=env, stdout=fh, stderr=subprocess.STDOUT,
                                      start_new_session=True))

    def logs() -> str:
        return "\n".join(f"--- {p.name}\n" + p.read_text(errors="replace")[-3000:] for p in sorted(logdir.glob("*.log")))

    base = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        for p in procs:
            assert p.poll() is None, logs()
        try:
            with urllib.request.urlopen(f"{base}/api/v2/monitor/health", timeout=5) as r:
                return r.status == 200
        except OSError:
            return False

    try:
        live = Live(base=base, env=env, logs=logs)
        live.cli("dags", "reserialize")  # while the api-server starts
        wait_for("api-server health", healthy, 240, logs)
        yield live
    finally:
        for p in procs:
            stop(p)
        for fh in files:
            fh.close()


@contextmanager
def committed_at(when: datetime) -> Iterator[None]:
    """Commits made inside stamp their manifests with ``when``: a history of past hours, written now."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(manifest_build, "time", SimpleNamespace(time_ns=lambda: int(when.timestamp() * 1e9)))
        yield


def rows(start: int, n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64()), "kind": pa.array(["click"] * n),
                     "amount": pa.array([1.25] * n)})


@pytest.fixture(scope="module")
def backfill(live: Live) -> dict[str, Any]:
    """The dataset's history, then ``airflow backfill create`` over two past hours, run by the
    scheduler to the end.  Hour A (the run at ``a``): v1 (300 rows) and v2 (200 rows); hour B (the
    run at ``b``): nothing; v3 (50 rows deleted) is committed now, after both hours."""
    for name in ("events", "events_changes"):
        shutil.rmtree(DATA / name, ignore_errors=True)
    uri = str(DATA / "events")
    top = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    a, b = top - timedelta(hours=2), top - timedelta(hours=1)  # the runs triggered at a and b cover (a-1h, a], (b-1h, b]
    with committed_at(a - timedelta(minutes=50)):
        lf.write_dataset(rows(0, 300), uri, enable_stable_row_ids=True)
    with committed_at(a - timedelta(minutes=20)):
        lf.write_dataset(rows(300, 200), uri, mode="append")
    lf.dataset(uri).delete("id < 50")
    assert [v["timestamp"] for v in lf.dataset(uri).versions()][:2] == [
        (a - timedelta(minutes=m)).replace(tzinfo=None) for m in (50, 20)]
    live.cli("dags", "unpause", DAG_ID)
    t0 = time.perf_counter()
    live.cli("backfill", "create", "--dag-id", DAG_ID, "--from-date", a.isoformat(), "--to-date", b.isoformat())

    def finished() -> bool:
        runs = query("SELECT state FROM dag_run WHERE dag_id=? AND run_type='backfill'", DAG_ID)
        done = query("SELECT completed_at FROM backfill WHERE dag_id=?", DAG_ID)
        return len(runs) == 2 and all(s in ("success", "failed") for (s,) in runs) and bool(done and done[-1][0])

    try:
        wait_for("the backfill's runs", finished, 600, lambda: live.logs() + task_logs())
    finally:
        live.cli("dags", "pause", DAG_ID)  # later dag.test() runs of this DAG stay the tests' own
    return {"a": a, "b": b, "uri": uri, "seconds": time.perf_counter() - t0}


def task_logs() -> str:
    return "\n".join(f"--- {p}\n{p.read_text(errors='replace')[-2000:]}"
                     for p in sorted((HOME / "logs").rglob(f"dag_id={DAG_ID}/run_id=backfill*/**/*.log")))


def test_backfill_runs_one_mapped_task_per_version_of_each_hour(live, backfill):
    a, b = backfill["a"], backfill["b"]
    runs = query("SELECT run_id, run_type, logical_date, data_interval_start, data_interval_end, state FROM dag_run "
                 "WHERE dag_id=? AND run_type='backfill' ORDER BY logical_date", DAG_ID)
    assert [(r[1], r[5]) for r in runs] == [("backfill", "success")] * 2, task_logs()[-6000:]
    fmt = "%Y-%m-%d %H:%M:%S.%f"
    assert [tuple(datetime.strptime(x, fmt) for x in r[2:5]) for r in runs] == [
        ((t - timedelta(hours=1)).replace(tzinfo=None), (t - timedelta(hours=1)).replace(tzinfo=None),
         t.replace(tzinfo=None)) for t in (a, b)]  # logical date = interval start; the run id names the trigger time
    run_a, run_b = runs[0][0], runs[1][0]
    assert run_a == f"backfill__{a.isoformat()}" and run_b == f"backfill__{b.isoformat()}"
    tis = query("SELECT run_id, task_id, map_index, state FROM task_instance WHERE dag_id=? AND run_id IN (?, ?) "
                "ORDER BY run_id, task_id, map_index", DAG_ID, run_a, run_b)
    assert tis == [(run_a, "new_versions", -1, "success"), (run_a, "versions", -1, "success"),
                   (run_a, "write_change_feed", 0, "success"), (run_a, "write_change_feed", 1, "success"),
                   (run_b, "new_versions", -1, "success"), (run_b, "versions", -1, "success"),
                   (run_b, "write_change_feed", -1, "skipped")]  # an hour without commits maps no task
    xcom = {(r, t, m): json.loads(v) for r, t, m, v in query(
        "SELECT run_id, task_id, map_index, value FROM xcom WHERE dag_id=? AND key='return_value' "
        "AND run_id IN (?, ?)", DAG_ID, run_a, run_b)}
    assert xcom[(run_a, "new_versions", -1)] == {
        "version": 2, "after_version": 0, "new_versions": [1, 2],
        "data_interval": [(a - timedelta(hours=1)).isoformat(), a.isoformat()]}
    assert xcom[(run_b, "new_versions", -1)] == {  # v3 came after the hour: the next run's
        "version": 2, "after_version": 2, "new_versions": [],
        "data_interval": [(b - timedelta(hours=1)).isoformat(), b.isoformat()]}
    written = [(r == run_a, m, x["begin_version"], x["end_version"], x["rows_written"])
               for (r, t, m), x in sorted(xcom.items()) if t == "write_change_feed"]
    assert sorted(written, reverse=True) == [(True, 1, 1, 2, 200), (True, 0, 0, 1, 300)]

    sink = DATA / "events_changes"  # the Hive-style layout, one directory per version
    assert sorted(p.name for p in sink.iterdir()) == ["change_range=0-1", "change_range=1-2"]
    feed = pq.read_table(sink)
    per_range = {}
    for rng in ("0-1", "1-2"):
        part = feed.filter(pc.equal(feed["change_range"].cast(pa.string()), rng))
        per_range[rng] = (part.num_rows, sorted(set(part["_change_type"].to_pylist())),
                          sorted(set(part["_commit_version"].to_pylist())), sorted(part["id"].to_pylist()))
    assert per_range == {"0-1": (300, ["insert"], [1], list(range(300))),
                         "1-2": (200, ["insert"], [2], list(range(300, 500)))}

    events = query("SELECT e.extra, e.source_run_id, e.source_map_index FROM asset_event e JOIN asset s "
                   "ON s.id = e.asset_id WHERE s.uri = ? AND e.source_run_id IN (?, ?)", f"file://{sink}", run_a, run_b)
    assert sorted((r == run_a, m, json.loads(x)["end_version"], json.loads(x)["row_count"]) for x, r, m in events) == \
        [(True, 0, 1, 300), (True, 1, 2, 200)]
    print(f"backfill of 2 runs (2 mapped Spark tasks) ran in {backfill['seconds']:.0f} s")


def rendered_text(dom: str) -> str:
    dom = re.sub(r"<script.*?</script>|<style.*?</style>", "", dom, flags=re.S)
    parts = (html.unescape(p).strip() for p in re.split(r"<[^>]+>", dom))
    return " | ".join(p for p in parts if p)


def page(common: list[str], url: str, png: Path) -> str:
    """Screenshot ``url`` to ``png`` and return the page's rendered text."""
    dom = headless([*common, "--dump-dom", url])
    assert dom.returncode == 0, dom.stderr[-2000:]
    shot = headless([*common, f"--screenshot={png}", url])
    assert shot.returncode == 0 and png.stat().st_size > 20_000, shot.stderr[-2000:]  # a blank page is ~6 KB
    return rendered_text(dom.stdout)


def test_change_feed_grid_shows_the_backfill_runs_mapped_tasks(live, backfill, tmp_path):
    ensure_chromium()
    run_id = f"backfill__{backfill['a'].isoformat()}"
    common = [CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'chromium-profile'}"]
    run_path = f"{live.base}/dags/{DAG_ID}/runs/{urllib.parse.quote(run_id, safe='')}"
    mapped = page(common, f"{run_path}/tasks/write_change_feed/mapped", tmp_path / "lance_change_feed_mapped.png")
    assert "write_change_feed" in mapped, mapped[:3000]
    assert re.search(r"Map Index.*\b0\b.*\b1\b", mapped, flags=re.S), mapped[:3000]
    assert mapped.lower().count("success") >= 2, mapped[:3000]
    grid = page(common, run_path, tmp_path / "lance_change_feed_grid.png")
    assert "new_versions" in grid and "write_change_feed" in grid and "versions" in grid, grid[:3000]
    assert "backfill" in grid.lower(), grid[:3000]
    keep = os.environ.get("LANCE_OPS_UI_SCREENSHOTS")
    if keep:
        os.makedirs(keep, exist_ok=True)
        for png in tmp_path.glob("*.png"):
            shutil.copyfile(png, os.path.join(keep, png.name))
