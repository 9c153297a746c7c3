"""Cleanups racing writers of both libraries and each other, in separate processes.

Two lance_ops writers and one pylance writer append and delete on one dataset while two
lance_ops cleanups and one pylance cleanup keep removing versions older than half a second
(the retention guard turned off, as a user who knows what they do would).  Required: 0 failed
lance_ops cleanups, 0 lost rows (every acknowledged append is there unless an acknowledged
delete removed it), every acknowledged commit owns its own version, the remaining versions are
contiguous up to the latest, and both libraries read the same final table.  Writers may hit
typed errors (a lost race, a file the cleanup removed under a slow reader) and retry.
"""

import multiprocessing as mp
import os
import queue as queue_mod
import time

import lance
import numpy as np
from _cleanup_workers import CleanerReport, WriterReport, table

import lance_ops.format as lf
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.table.manifest import list_versions

COMMITS = 20
COLS = ["id", "val", "score", "_rowid"]


def _run(uri: str, specs: list[tuple[str, tuple]]) -> list[object]:
    ctx = mp.get_context("spawn")
    barrier, stop, results = ctx.Barrier(len(specs)), ctx.Event(), ctx.Queue()
    import _cleanup_workers

    procs = [ctx.Process(target=_cleanup_workers.child, args=(kind, args, barrier, stop, results)) for kind, args in specs]
    for p in procs:
        p.start()
    writers = sum(1 for kind, _ in specs if kind.endswith("writer"))
    out: list[object] = []
    deadline = time.monotonic() + 180
    while len(out) < len(procs):
        try:
            item = results.get(timeout=0.5)
        except queue_mod.Empty:
            dead = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
            assert not dead, f"a process died: exit codes {dead}"
            assert time.monotonic() < deadline, "processes did not finish in 180 s"
            continue
        assert not isinstance(item, str), item
        out.append(item)
        if sum(isinstance(r, WriterReport) for r in out) == writers:
            stop.set()  # the writers are done: let the cleaners finish their round
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    return out


def test_cleanups_race_writers_of_both_libraries(tmp_path):
    uri = str(tmp_path / "ds")
    lf.write_dataset(table(list(range(100))), uri, enable_stable_row_ids=True, max_rows_per_file=50)
    specs = [
        ("lance_ops_writer", (uri, "ops-a", 1_000_000, COMMITS, 1)),
        ("lance_ops_writer", (uri, "ops-b", 2_000_000, COMMITS, 2)),
        ("pylance_writer", (uri, "pylance", 3_000_000, COMMITS, 3)),
        ("lance_ops_cleaner", (uri, "ops-cleanup-1")),
        ("lance_ops_cleaner", (uri, "ops-cleanup-2")),
        ("pylance_cleaner", (uri, "pylance-cleanup")),
    ]
    reports = _run(uri, specs)
    writers = [r for r in reports if isinstance(r, WriterReport)]
    cleaners = [r for r in reports if isinstance(r, CleanerReport)]
    ours = [c for c in cleaners if c.name.startswith("ops-")]

    print("\n" + "; ".join(f"{c.name}: {c.runs} runs ({c.runs_during_writes} during writes), {c.removed_versions} versions removed, {len(c.failures)} failed" for c in cleaners)
          + "; " + "; ".join(f"{w.name}: {w.retries} retries" for w in writers))
    # 0 failed cleanups (ours), and they really ran and removed versions while writers committed
    for c in ours:
        assert not c.failures, f"{c.name}: {len(c.failures)} of {c.runs + len(c.failures)} failed:\n{c.failures[0]}"
    assert sum(c.runs_during_writes for c in ours) >= 6, [(c.name, c.runs_during_writes) for c in cleaners]
    assert sum(c.removed_versions for c in cleaners) >= 10, [(c.name, c.removed_versions) for c in cleaners]
    for w in writers:
        assert not w.untyped, w.untyped[0]
        assert not w.gave_up, (w.name, w.gave_up, w.typed_failures[-3:])

    # every acknowledged commit owns one version; the versions left are contiguous to the latest
    claimed = [v for w in writers for v in (*w.appended, *w.deleted)]
    assert len(claimed) == len(set(claimed)) == 3 * COMMITS
    _scheme, versions = list_versions(ObjectStore(uri))
    latest = versions[-1]
    assert versions == list(range(versions[0], latest + 1))
    assert max(claimed) <= latest and latest == 1 + len(claimed)

    # 0 lost rows, 0 resurrected rows, and both libraries agree
    appended = set(range(100)) | {i for w in writers for ids in w.appended.values() for i in ids}
    deleted = {i for w in writers for ids in w.deleted.values() for i in ids}
    ours_t = lf.dataset(uri).to_table(columns=COLS)
    ids = ours_t["id"].to_numpy()
    assert len(np.unique(ids)) == len(ids)
    assert set(ids.tolist()) == appended - deleted
    theirs = lance.dataset(uri).to_table(columns=COLS)
    assert theirs.sort_by("id").equals(ours_t.sort_by("id"))
    # nothing a retained version needs was removed: each one still reads in both libraries
    for v in versions[-3:]:
        assert lf.dataset(uri, version=v).count_rows() == lance.dataset(uri, version=v).count_rows()
    assert not [f for f in os.listdir(os.path.join(uri, "_versions")) if f.endswith(".tmp")]
