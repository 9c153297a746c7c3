"""Writers killed with SIGKILL at every step of a commit leave a dataset that still opens.

Each case runs a child process (spawn) that arms a kill hook in its own process and starts a
commit; the parent then checks that lance_ops and pylance both open the last good version with
the same rows, that the next writer commits normally, and that
``cleanup_old_versions(delete_unverified=True)`` removes every file the dead writer left.
"""

import multiprocessing as mp
import os
import shutil
import signal
import time

import lance
import pyarrow.compute as pc
import pytest
from _crash_child import run
from datagen import META, simple_table

import lance_ops.format as lf

COLS = ["id", "val", "score"]

# (name, op, event, when, nth, versions that landed, leftovers the dead writer leaves)
CASES = [
    ("torn-data-file", "append", "data_write", "after", 3, 0, {"data"}),
    ("after-data-files", "append", "put:_transactions", "before", 1, 0, {"data"}),
    ("after-txn", "append", "put:_transactions", "after", 1, 0, {"data", "txn"}),
    ("before-manifest-link", "append", "link:manifest", "before", 1, 0, {"data", "txn", "tmp"}),
    ("after-manifest-link", "append", "link:manifest", "after", 1, 1, {"tmp"}),
    ("delete-after-deletion-file", "delete", "put:_transactions", "before", 1, 0, {"deletion"}),
    ("delete-before-manifest-link", "delete", "link:manifest", "before", 1, 0, {"deletion", "txn", "tmp"}),
    ("update-after-txn", "update", "put:_transactions", "after", 1, 0, {"data", "deletion", "txn"}),
    ("compaction-between-reserve-and-rewrite", "compact", "put:_transactions", "before", 2, 1, {"data"}),
]
IDS = [c[0] for c in CASES]


def files(root: str) -> set[str]:
    out = set()
    for d, _dirs, names in os.walk(root):
        for n in names:
            out.add(os.path.relpath(os.path.join(d, n), root))
    return out


def referenced(uri: str) -> set[str]:
    """Every file some version of the dataset names (plus the manifests and the hint)."""
    out = {"_versions/latest_version_hint.json"}
    ds = lf.dataset(uri)
    for v in ds.versions():
        m = lf.dataset(uri, version=v["version"]).manifest
        out.add(f"_versions/{18446744073709551615 - m.version:020d}.manifest")
        out.add(f"_transactions/{m.transaction_file}")
        for f in m.fragments:
            out |= {f"data/{df.path}" for df in f.files}
            if f.deletion_file is not None:
                d = f.deletion_file
                out.add(f"_deletions/{f.id}-{d.read_version}-{d.id}.{d.extension}")
    return out


def kind(rel: str) -> str:
    if rel.startswith("data/"):
        return "data"
    if rel.startswith("_deletions/"):
        return "deletion"
    if rel.startswith("_transactions/"):
        return "txn"
    if rel.startswith("_versions/") and not rel.endswith((".manifest", ".json")):
        return "tmp"
    return rel


def _make_base(path: str) -> None:
    lf.write_dataset(simple_table(0, 30), path, enable_stable_row_ids=True, max_rows_per_file=10)
    lf.dataset(path).delete(pc.field("id") == 7)


@pytest.fixture(scope="module")
def crashed(tmp_path_factory):
    """Run every case's child at once (they are independent); return their datasets."""
    root = tmp_path_factory.mktemp("crash")
    base = str(root / "base")
    _make_base(base)
    ctx = mp.get_context("spawn")
    procs = {}
    for name, op, event, when, nth, _landed, _left in CASES:
        uri = str(root / name)
        shutil.copytree(base, uri)
        procs[name] = (uri, files(uri), ctx.Process(target=run, args=(uri, op, event, when, nth)))
    for _uri, _before, p in procs.values():
        p.start()
    deadline = time.monotonic() + 60
    for _uri, _before, p in procs.values():
        p.join(timeout=max(1, deadline - time.monotonic()))
    return {name: (uri, before, p.exitcode) for name, (uri, before, p) in procs.items()}, base


@pytest.mark.parametrize(("name", "op", "event", "when", "nth", "landed", "leftovers"), CASES, ids=IDS)
def test_killed_writer(crashed, name, op, event, when, nth, landed, leftovers):
    cases, base = crashed
    uri, before, exitcode = cases[name]
    assert exitcode == -signal.SIGKILL, f"the child was not killed at {event}/{when} (exit code {exitcode})"
    expected_version = 2 + landed
    ours = lf.dataset(uri)
    theirs = lance.dataset(uri)
    assert ours.version == theirs.version == expected_version
    a = ours.to_table(columns=COLS + META)
    assert a.equals(theirs.to_table(columns=COLS + META))
    if landed == 0:
        assert a.equals(lf.dataset(base).to_table(columns=COLS + META)), "the dead writer's rows are visible"
    elif op == "append":
        assert sorted(a["id"].to_pylist()) == [i for i in range(30) if i != 7] + list(range(1000, 1050))
    else:  # compaction: the ReserveFragments landed, nothing else changed
        assert a.equals(lf.dataset(base).to_table(columns=COLS + META))
        assert ours.manifest.max_fragment_id > lf.dataset(base).manifest.max_fragment_id
    # what the dead writer left behind, by kind
    left = files(uri) - before - referenced(uri)
    assert {kind(p) for p in left} == leftovers, sorted(left)

    # the next writer is not disturbed by the leftovers
    nxt = lf.write_dataset(simple_table(2000, 3), uri, mode="append")
    assert nxt.version == expected_version + 1
    nxt.delete(pc.field("id") == 2001)
    assert lance.dataset(uri).count_rows() == a.num_rows + 2

    # cleanup: a default run keeps the young orphans (a writer might still be running) ...
    stats = lf.dataset(uri).cleanup_old_versions()
    assert stats.removed_paths == ()
    assert left <= files(uri)
    # ... delete_unverified removes them all, and nothing any version needs
    views = {v["version"]: lance.dataset(uri, version=v["version"]).to_table(columns=COLS + META)
             for v in lance.dataset(uri).versions()}
    stats = lf.dataset(uri).cleanup_old_versions(delete_unverified=True)
    assert set(stats.removed_paths) == left
    assert files(uri) == referenced(uri)
    for v, t in views.items():
        assert lance.dataset(uri, version=v).to_table(columns=COLS + META).equals(t)
        assert lf.dataset(uri, version=v).to_table(columns=COLS + META).equals(t)
