"""The jobs on a real Spark standalone cluster: a master and two 1-core workers on 127.0.0.1.

One cluster for the module: the jobs run from a driver program (the Python API), and through
spark-submit, with lance_ops installed and with lance_ops shipped as ``--py-files`` to nodes
that do not have it.  Spark's event log shows which executors ran which tasks.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import lance
import pyspark
import pytest
from datagen import simple_table
from helpers import data_files, referenced_files, snapshot

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def master_up(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def alive_workers(webui: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{webui}/json/", timeout=2) as r:
            state = json.load(r)
    except OSError:
        return 0
    return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("cluster")
    home = os.path.dirname(pyspark.__file__)
    # No checkout on PYTHONPATH: the nodes find lance_ops where it is installed (this venv), or
    # nowhere (the --py-files test runs Python without site-packages processing).
    path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and os.path.abspath(p) != ROOT]
    env = dict(os.environ, SPARK_HOME=home, SPARK_LOCAL_IP="127.0.0.1", SPARK_LOG_DIR=str(tmp_path / "logs"),
               SPARK_WORKER_DIR=str(tmp_path / "work"), PYSPARK_PYTHON=sys.executable,
               PYTHONPATH=os.pathsep.join(path),
               PATH=os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]))
    spark_class = os.path.join(home, "bin", "spark-class")
    port, webui = free_port(), free_port()
    url = f"spark://127.0.0.1:{port}"
    procs = []

    def start(name: str, *args: str) -> None:
        log = open(tmp_path / f"{name}.log", "wb")
        procs.append(subprocess.Popen([spark_class, *args], env=env, stdout=log, stderr=subprocess.STDOUT,
                                      start_new_session=True))

    try:
        start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
              "--webui-port", str(webui))
        for i in range(2):
            start(f"worker{i}", "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", "1",
                  "--memory", "1g", "--webui-port", str(free_port()), "--work-dir", str(tmp_path / f"w{i}"), url)
        # The driver starts while the workers register (it waits for two executors itself).
        deadline = time.monotonic() + 90
        while not master_up(port):
            assert time.monotonic() < deadline, "the standalone master did not come up"
            assert all(p.poll() is None for p in procs), "a cluster process died"
            time.sleep(0.2)
        yield url, env
        assert alive_workers(webui) == 2
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(10)


def test_jobs_from_a_driver_program(cluster, tmp_path):
    url, env = cluster
    uri = str(tmp_path / "ds")
    out = subprocess.run([sys.executable, os.path.join(HERE, "cluster_driver.py"), url, uri], env=env,
                         capture_output=True, text=True, timeout=300)
    lines = [line for line in out.stdout.splitlines() if line.startswith("REPORT ")]
    assert out.returncode == 0 and lines, out.stderr[-3000:]
    report = json.loads(lines[-1][len("REPORT "):])
    print("cluster driver timings (s since the session started):", report["timings"])
    assert report["executors"] == 2 and len(report["task_pids"]) >= 2  # two workers did the work
    assert (report["append1"]["version"], report["append1"]["rows_written"]) == (1, 3000)
    assert (report["delete"]["version"], report["delete"]["num_deleted_rows"]) == (2, 300)
    comp = report["compact"]
    assert comp["failed_tasks"] == [] and comp["version"] == 4, comp
    assert comp["fragments_removed"] > comp["fragments_added"] >= 1 and comp["rows_rewritten"] > 2000, comp
    assert report["change_feed"] == {"delete": 300}  # (1, 4]: the delete; the compaction adds nothing
    t = snapshot(uri)
    assert sorted(t["id"].to_pylist()) == [i for i in range(3000) if i % 10]
    after = sorted(map(list, zip(t["id"].to_pylist(), t["_rowid"].to_pylist(), t["_row_created_at_version"].to_pylist(),
                                 strict=True)))
    assert after == report["rows_before_compaction"]  # compaction kept every row's id and version
    ids = t["_rowid"].to_pylist()
    assert len(set(ids)) == 2700 and max(ids) < 3000
    assert len(lance.dataset(uri).get_fragments()) == 8 - comp["fragments_removed"] + comp["fragments_added"]
    assert data_files(uri) == referenced_files(uri)


# --------------------------------------------------------------------------- spark-submit

SUBMIT_CONF = [
    # wait for both executors before the first task, so two tasks can go to two executors
    "spark.scheduler.minRegisteredResourcesRatio=1.0", "spark.scheduler.maxRegisteredResourcesWaitingTime=120s",
    "spark.cores.max=2", "spark.executor.cores=1", "spark.executor.memory=512m",
    "spark.driver.host=127.0.0.1", "spark.driver.bindAddress=127.0.0.1",
    "spark.eventLog.enabled=true", "spark.eventLog.compress=false",
    "spark.ui.showConsoleProgress=true",  # lance_ops' default is false: --conf must win
]


def spark_submit(url: str, env: dict, events: str, *args: str, cwd: str, extra_env: dict | None = None) -> dict:
    """Run spark-submit with the module's conf; return the job's JSON result (stdout)."""
    os.makedirs(events, exist_ok=True)
    cmd = [os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-submit"), "--master", url]
    for c in SUBMIT_CONF + [f"spark.eventLog.dir={events}"]:
        cmd += ["--conf", c]
    out = subprocess.run([*cmd, *args], env={**env, **(extra_env or {})}, cwd=cwd, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-4000:]
    return json.loads(out.stdout[out.stdout.index("{"):])


def event_log(events: str) -> list[dict]:
    """Every event of the one application logged under ``events`` (Spark 4: a directory of parts)."""
    (app,) = os.listdir(events)
    parts = sorted(n for n in os.listdir(os.path.join(events, app)) if n.startswith("events_"))
    out = []
    for name in parts:
        with open(os.path.join(events, app, name)) as f:
            out += [json.loads(line) for line in f if line.strip()]
    return out


def test_spark_submit_with_py_files_honours_master_and_conf_and_shares_compaction_tasks(cluster, tmp_path):
    """The README's entry point under spark-submit, on nodes without lance_ops (shipped with
    --py-files): the job runs on the master and with the conf spark-submit was given, and the
    two compaction tasks run on the two executors."""
    url, env = cluster
    site = subprocess.run([sys.executable, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    bare = tmp_path / "python-without-lance_ops"
    bare.write_text(f'#!/bin/sh\nPYTHONPATH="{site}${{PYTHONPATH:+:$PYTHONPATH}}" exec {sys.executable} -S "$@"\n')
    bare.chmod(0o755)
    probe = subprocess.run([str(bare), "-c", "import pyarrow, pyspark; import lance_ops"], capture_output=True,
                           text=True, env=env, cwd=str(tmp_path))
    assert "No module named 'lance_ops'" in probe.stderr  # the nodes really do not have it
    pkg = json.loads(subprocess.run([sys.executable, "-m", "lance_ops.jobs", "package", str(tmp_path / "pkg")],
                                    capture_output=True, text=True, check=True).stdout)

    uri = str(tmp_path / "ds")
    for i in range(8):  # eight 500-row fragments, stable row ids, pylance's default file format
        lance.write_dataset(simple_table(i * 500, 500), uri, mode="append" if i else "create",
                            enable_stable_row_ids=True)
    before = snapshot(uri)
    entry = os.path.join(ROOT, "lance_ops", "jobs", "__main__.py")  # the README's entry point
    events = str(tmp_path / "events")
    res = spark_submit(url, env, events, "--conf", f"spark.pyspark.python={bare}", "--py-files", pkg["py_files"],
                       entry, "compact", "ds", "--target-rows-per-fragment", "2000", cwd=str(tmp_path),
                       extra_env={"PYSPARK_PYTHON": str(bare), "PYSPARK_DRIVER_PYTHON": str(bare)})
    assert (res["uri"], res["tasks_planned"], res["tasks_succeeded"], res["failed_tasks"]) == ("ds", 2, 2, [])
    assert (res["fragments_removed"], res["fragments_added"], res["version"]) == (8, 2, 10)
    assert snapshot(uri).to_pylist() == before.to_pylist()  # same rows, ids and versions
    assert data_files(uri) == referenced_files(uri)
    log = event_log(events)
    props = next(e for e in log if e["Event"] == "SparkListenerEnvironmentUpdate")["Spark Properties"]
    props = dict(props) if isinstance(props, list) else props
    assert props["spark.master"] == url and props["spark.ui.showConsoleProgress"] == "true"
    tasks = [e for e in log if e["Event"] == "SparkListenerTaskEnd"]
    assert len(tasks) == 2 and all(t["Task End Reason"]["Reason"] == "Success" for t in tasks)
    assert len({t["Task Info"]["Executor ID"] for t in tasks}) == 2  # two executors shared the work
