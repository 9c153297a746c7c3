"""Four processes commit mixed operations to one local dataset at the same time.

Invariants: versions 1..N without gaps, every reported commit owns exactly one version, no
committed append is lost unless a committed delete removed it, no row id is duplicated, the
last committed update of every row wins, and every failure is a typed LanceOpsError (only
incompatible config races on the shared key are expected).  pylance reads the result.
A second run races three such writers against a process that keeps compacting.
"""

import multiprocessing as mp
import os
import queue as queue_mod
import time

import lance
import numpy as np
from _stress_workers import WORKERS, Report, run_compactor, run_worker, table

import lance_ops.format as lf
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.table.manifest import list_versions
from lance_ops.format.txn.commit_loop import load_transaction

COMMITS = 25


def check_history(uri: str, reports: list[Report], storage_options=None, compaction_versions=()) -> None:
    for r in reports:
        assert not r.untyped, "\n".join(r.untyped)
        for kind, msg in r.failures:
            # only same-key config races may fail, and they fail as incompatible
            assert kind == "IncompatibleTransactionError" and "config" in msg, (kind, msg)
    store = ObjectStore(uri, storage_options)
    _scheme, versions = list_versions(store)
    n = versions[-1]
    assert versions == list(range(1, n + 1))
    claimed = [v for r in reports for v in r.versions] + list(compaction_versions)
    assert sorted(claimed) == list(range(2, n + 1)), "every commit is exactly one version"

    ds = lf.dataset(uri, storage_options=storage_options)
    t = ds.to_table(columns=["id", "val", "_rowid", "_row_last_updated_at_version"])
    ids = t["id"].to_numpy()
    rowids = t["_rowid"].to_numpy()
    assert len(np.unique(ids)) == len(ids), "a row is duplicated"
    assert len(np.unique(rowids)) == len(rowids), "a row id is duplicated"
    appended = set(range(400)) | {i for r in reports for a in r.appended.values() for i in a}
    deleted = {i for r in reports for d in r.deleted.values() for i in d}
    assert set(ids.tolist()) == appended - deleted
    # the last committed update of each row wins (a delete always comes after)
    last: dict[int, tuple[int, str]] = {}
    for r in reports:
        for v, (u_ids, value) in r.updated.items():
            for i in u_ids:
                if i not in last or last[i][0] < v:
                    last[i] = (v, value)
    rows = {i: (val, up) for i, val, up in zip(ids.tolist(), t["val"].to_pylist(),
                                              t["_row_last_updated_at_version"].to_pylist(), strict=True)}
    for i, (v, value) in last.items():
        if i in rows:
            assert rows[i] == (value, v), (i, rows[i], (value, v))
    # every row id a committed append was given stays with its row (stable ids)
    assert int(rowids.max()) < ds.manifest.next_row_id
    config = ds.config()
    for r in reports:
        if r.configs:
            v = max(r.configs)
            assert config[f"worker.{r.worker}"] == r.configs[v][f"worker.{r.worker}"]
    shared = [(v, c["shared"]) for r in reports for v, c in r.configs.items() if "shared" in c]
    if shared:
        assert config["shared"] == max(shared)[1]


def _child(uri: str, worker: int, commits: int, barrier, queue) -> None:
    barrier.wait(timeout=60)  # start together: the commits must really race
    if worker < 0:
        queue.put(run_compactor(uri, commits, 3))
    else:
        queue.put(run_worker(uri, worker, commits, 7))


def run_processes(uri: str, workers=tuple(range(WORKERS)), commits: int = 25) -> list[Report]:
    ctx = mp.get_context("spawn")
    barrier, queue = ctx.Barrier(len(workers)), ctx.Queue()
    procs = [ctx.Process(target=_child, args=(uri, w, commits, barrier, queue)) for w in workers]
    for p in procs:
        p.start()
    reports: list[Report] = []
    deadline = time.monotonic() + 120
    while len(reports) < len(procs):
        try:
            reports.append(queue.get(timeout=0.5))
        except queue_mod.Empty:
            dead = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
            assert not dead, f"a worker process died: exit codes {dead}"
            assert time.monotonic() < deadline, "workers did not finish in 120 s"
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    return sorted(reports, key=lambda r: r.worker)


def transactions(uri: str) -> dict[int, object]:
    store = ObjectStore(uri)
    scheme, versions = list_versions(store)
    return {v: load_transaction(store, v, scheme) for v in versions}


def rebased_commits(uri: str) -> int:
    """Versions whose transaction was planned on an older version than the one before it."""
    return sum(t.read_version < v - 1 for v, t in transactions(uri).items() if v > 1)


def test_four_processes_mixed_commits(tmp_path):
    uri = str(tmp_path / "ds")
    lf.write_dataset(table(list(range(400)), "init"), uri, enable_stable_row_ids=True, max_rows_per_file=100)
    reports = run_processes(uri)
    assert sum(len(r.versions) for r in reports) >= WORKERS * COMMITS * 0.9
    check_history(uri, reports)
    # the commits really raced: many were rebased over commits made after they read
    assert rebased_commits(uri) >= 10
    # pylance agrees on the final state and on a sample of the history
    latest = lf.dataset(uri).version
    for v in sorted({1, latest // 3, latest // 2, latest - 1, latest}):
        a = lf.dataset(uri, version=v).to_table(columns=["id", "val", "_rowid", "_row_created_at_version",
                                                         "_row_last_updated_at_version"])
        b = lance.dataset(uri, version=v).to_table(columns=a.column_names)
        assert a.equals(b), f"version {v}"
    # the file tree holds nothing but what lance_ops wrote on purpose
    assert not [f for f in os.listdir(os.path.join(uri, "_versions")) if f.endswith(".tmp")]


def test_mixed_commits_racing_compaction(tmp_path):
    """Three writers delete/update/append while a fourth process keeps compacting the same
    fragments: lost compactions are rebased (stable row ids) and no delete or update is lost."""
    uri = str(tmp_path / "ds")
    lf.write_dataset(table(list(range(400)), "init"), uri, enable_stable_row_ids=True, max_rows_per_file=50)
    reports = run_processes(uri, workers=(0, 1, 2, -1), commits=12)
    compactor = reports[0]
    assert compactor.worker == -1 and not compactor.untyped and not compactor.failures, compactor
    workers = reports[1:]
    txns = transactions(uri)
    compaction = [v for v, t in txns.items() if t.operation.name in ("reserve_fragments", "rewrite")]
    rewrites = [v for v, t in txns.items() if t.operation.name == "rewrite"]
    assert len(rewrites) >= 2, "the compactor hardly ran"
    # a compaction that lost the race to a delete/update was rebased, not thrown away
    assert any(txns[v].read_version < v - 2 for v in rewrites)
    check_history(uri, workers, compaction_versions=compaction)
    latest = lf.dataset(uri).version
    cols = ["id", "val", "_rowid", "_row_created_at_version", "_row_last_updated_at_version"]
    for v in sorted({latest // 2, latest}):
        assert lf.dataset(uri, version=v).to_table(columns=cols).equals(lance.dataset(uri, version=v).to_table(columns=cols))
