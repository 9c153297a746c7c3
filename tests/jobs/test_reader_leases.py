"""Spark readers hold leases while a cleanup with zero retention runs in another process: a
Spark read, a streaming ``lance_changes`` query and a change-feed job finish and match; once
the lease is released or expired, the next cleanup removes those versions' files."""

import json
import os
import subprocess
import sys
import threading
import time

import pyarrow.compute as pc
import pytest
from datagen import simple_table
from helpers import normalize_feed, reference_feed

import lance_ops.format as lf
from lance_ops import jobs

_CLEAN = """
import json, sys, time
from datetime import timedelta
import lance_ops.format as lf
uri, stop = sys.argv[1], sys.argv[2]
if len(sys.argv) > 3:  # warm: wait for the go
    print("ready", flush=True)
    while not __import__("os").path.exists(sys.argv[3]):
        time.sleep(0.02)
while True:
    s = lf.dataset(uri).cleanup_old_versions(older_than=timedelta(0), retention_duration_check=False)
    print(json.dumps({"old_versions": s.old_versions, "leased_versions": list(s.leased_versions),
                      "leases": list(s.protected_by_leases), "data": s.data_files_removed}), flush=True)
    if stop == "once" or __import__("os").path.exists(stop):
        break
    time.sleep(0.05)
"""


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}


def cleanup_elsewhere(uri: str) -> dict:
    """One cleanup with zero retention, in another process."""
    out = subprocess.run([sys.executable, "-c", _CLEAN, uri, "once"], env=_env(), capture_output=True, text=True,
                         timeout=120, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def wait_for(predicate, timeout: float = 120.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def data_files(uri: str, versions) -> set[str]:
    return {df.path for v in versions for f in lf.dataset(uri, version=v).manifest.fragments for df in f.files}


def on_disk(uri: str) -> set[str]:
    return set(os.listdir(os.path.join(uri, "data")))


def test_spark_read_holds_its_lease_while_cleanup_runs(spark, tmp_path):
    uri = str(tmp_path / "ds")
    lf.write_dataset(simple_table(0, 80), uri, max_rows_per_file=10)  # v1: 8 fragments
    want = sorted(lf.dataset(uri, version=1).to_table().to_pylist(), key=lambda r: r["id"])
    lf.write_dataset(simple_table(1000, 5), uri, mode="overwrite")  # v2: v1's files unused
    v1 = data_files(uri, [1])
    flag, entered = str(tmp_path / "go"), str(tmp_path / "entered")

    def gate(batches):  # tasks wait until the cleanup ran; later partitions read after it
        import os
        import time

        for b in batches:
            open(entered, "w").close()
            while not os.path.exists(flag):
                time.sleep(0.05)
            yield b

    df = spark.read.format("lance").option("versionAsOf", 1).option("lease_ttl", 8).load(uri)
    df = df.mapInArrow(gate, df.schema)
    got: dict = {}
    t = threading.Thread(target=lambda: got.update(rows=df.collect()))
    t.start()
    try:
        wait_for(lambda: os.path.exists(entered), what="the read's first tasks")
        held = lf.list_leases(uri)  # Spark may build the reader more than once: a lease each
        assert held and {(x.version, x.holder) for x in held} == {(1, "spark read")}
        stats = cleanup_elsewhere(uri)
        assert stats["leased_versions"] == [1] and stats["old_versions"] == 0
        assert set(stats["leases"]) <= {x.id for x in lf.list_leases(uri, include_expired=True)}
        assert v1 <= on_disk(uri)
    finally:
        open(flag, "w").close()
        t.join(300)
    assert sorted((r.asDict() for r in got["rows"]), key=lambda r: r["id"]) == want
    wait_for(lambda: not lf.list_leases(uri), timeout=60, what="the lease to expire")
    stats = cleanup_elsewhere(uri)
    assert stats["old_versions"] == 1 and stats["leased_versions"] == []
    assert not v1 & on_disk(uri)


def compact(uri: str) -> set[str]:
    """A compaction after v4: the data files of v1-v4 it leaves unreferenced."""
    lf.dataset(uri).compact_files(target_rows_per_fragment=1000)
    return data_files(uri, [1, 2, 3, 4]) - data_files(uri, [lf.dataset(uri).version])


@pytest.fixture
def history(tmp_path):
    """v1-v4 a history with changes, and its change feed."""
    uri = str(tmp_path / "cdf")
    lf.write_dataset(simple_table(0, 60), uri, enable_stable_row_ids=True, max_rows_per_file=10)  # v1
    lf.write_dataset(simple_table(60, 20), uri, mode="append")  # v2
    lf.dataset(uri).delete(pc.field("id").isin([1, 2, 61]))  # v3
    lf.dataset(uri).update({"val": "'u'"}, pc.field("id") == 7)  # v4
    return uri, reference_feed(uri, 0, 4)


def test_streaming_changes_lease_each_micro_batch_range(spark, history, tmp_path):
    uri, want = history
    entered, go = threading.Event(), threading.Event()
    seen: list = []

    def batch(df, batch_id):
        if not entered.is_set():
            entered.set()
            assert go.wait(120)
        seen.extend(r.asDict() for r in df.collect())

    q = (spark.readStream.format("lance_changes").option("startingVersion", 1).option("maxVersionsPerTrigger", 4)
         .option("lease_ttl", 60).load(uri).writeStream.foreachBatch(batch)
         .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
    try:
        assert entered.wait(120)
        (lease,) = lf.list_leases(uri)
        assert (lease.first_version, lease.version, lease.holder) == (0, 4, "spark lance_changes")
        old = compact(uri)  # after the query started: availableNow reads up to v4
        stats = cleanup_elsewhere(uri)
        assert set(stats["leased_versions"]) == {1, 2, 3, 4} and stats["leases"] == [lease.id]
        assert old <= on_disk(uri)
    finally:
        go.set()
        q.awaitTermination(300)
    assert q.exception() is None
    first = [r for r in seen if r["_commit_version"] <= 4]
    assert normalize_feed(first) == want
    # released when Spark commits the micro-batches or stops the reader (at its worker's exit)
    wait_for(lambda: not lf.list_leases(uri), timeout=60, what="the stream's lease release")
    stats = cleanup_elsewhere(uri)
    assert stats["old_versions"] >= 4 and not old & on_disk(uri)


def test_change_feed_job_holds_its_range_while_a_cleaner_loops(spark, history, tmp_path):
    uri, want = history
    old = compact(uri)
    stop, go = str(tmp_path / "stop"), str(tmp_path / "go")
    cleaner = subprocess.Popen([sys.executable, "-c", _CLEAN, uri, stop, go], env=_env(), stdout=subprocess.PIPE,
                               text=True)
    assert cleaner.stdout.readline().strip() == "ready"
    got: dict = {}
    job = threading.Thread(target=lambda: got.update(res=jobs.write_change_feed(
        spark, uri, 0, 4, str(tmp_path / "sink"), format="parquet")))
    job.start()
    try:
        wait_for(lambda: lf.list_leases(uri) or not job.is_alive(), what="the job's lease")
        (lease,) = lf.list_leases(uri)
        assert (lease.first_version, lease.version, lease.holder) == (0, 4, "change feed job")
        open(go, "w").close()  # the cleaner loops while the job runs
    finally:
        job.join(300)
        open(stop, "w").close()
        open(go, "w").close()
        out, _ = cleaner.communicate(timeout=120)
    res = got["res"]
    runs = [json.loads(line) for line in out.splitlines()]
    during = [r for r in runs if r["leased_versions"]]
    assert during and all(set(r["leased_versions"]) == {1, 2, 3, 4} for r in during)
    assert res.rows_written == len(want)
    assert normalize_feed([r.asDict() for r in spark.read.parquet(str(tmp_path / "sink")).drop("change_range")
                           .collect()]) == want
    assert lf.list_leases(uri) == []  # released when the job ended
    cleanup_elsewhere(uri)  # (the looping cleaner may have removed them already, after the release)
    assert min(v["version"] for v in lf.dataset(uri).versions()) > 4 and not old & on_disk(uri)


def test_a_read_of_the_latest_leases_the_next_version_when_cleanup_removed_the_opened_one(tmp_path, monkeypatch):
    """Cleanup removes the version a Spark read opened before the read leased it: the read opens
    the new latest and leases that; a read pinned to the removed version fails naming it."""
    from datetime import timedelta

    from lance_ops.format.errors import VersionRemovedError
    from lance_ops.jobs import source

    uri = str(tmp_path / "ds")
    lf.write_dataset(simple_table(0, 10), uri)
    real_open = source._open_read
    raced = []

    def open_then_race(options):  # fault: a writer and a zero-retention cleanup run right after the open
        out = real_open(options)
        if not raced:
            raced.append(out[2].version)
            lf.write_dataset(simple_table(10, 5), uri, mode="append")
            lf.dataset(uri).cleanup_old_versions(older_than=timedelta(0), retention_duration_check=False)
        return out

    monkeypatch.setattr(source, "_open_read", open_then_race)
    got_uri, manifest, lease = source._open_leased({"path": uri})
    assert raced == [1] and manifest.version == 2 and lease is not None and lease.version == 2
    assert lf.dataset(uri).count_rows() == 15
    lease.release()

    raced.clear()
    lf.write_dataset(simple_table(15, 1), uri, mode="append")  # version 3; the pinned read of 3 races
    with pytest.raises(VersionRemovedError, match="version 3 was removed"):
        source._open_leased({"path": uri, "versionAsOf": "3"})
