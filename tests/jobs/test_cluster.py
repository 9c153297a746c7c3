"""The jobs on a real Spark standalone cluster: a master and two 1-core workers on 127.0.0.1."""

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


@pytest.fixture
def cluster(tmp_path):
    home = os.path.dirname(pyspark.__file__)
    env = dict(os.environ, SPARK_HOME=home, SPARK_LOCAL_IP="127.0.0.1", SPARK_LOG_DIR=str(tmp_path / "logs"),
               SPARK_WORKER_DIR=str(tmp_path / "work"), PYSPARK_PYTHON=sys.executable,
               PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
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


def test_jobs_on_a_standalone_cluster(cluster, tmp_path):
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
    assert (report["delete"]["version"], report["delete"]["rows_deleted"]) == (2, 300)
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
