"""The conflict matrix (docs/FORMAT.md §10): two writers at the same read version, A commits, then B.

Every operation is *planned* against the old version before A commits and committed after it.
Outcomes: ``ok`` (B lands on top of A, and the result equals A then B applied one after the
other), ``R`` (RetryableCommitConflictError) or ``X`` (IncompatibleTransactionError).  Every
resulting version is also read with pylance.
"""

import os
from collections.abc import Callable

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from datagen import META, simple_table
from templates import copy_of

import lance_ops.format as lf
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.ops.compaction.rewrite import (
    CompactionOptions,
    commit_compaction,
    execute_task,
    plan_compaction,
)
from lance_ops.format.ops.delete_update import plan_delete, plan_update

COLS = ["id", "val", "score"]
BASE_VERSION = 2

Commit = Callable[[], object]


@pytest.fixture(scope="module")
def templates(tmp_path_factory):
    """Base datasets: fragments 0-2 (ids 0..29, version 1) and 3 (ids 30..39, version 2)."""
    out = {}
    for stable in (True, False):
        path = str(tmp_path_factory.mktemp("template") / ("stable" if stable else "plain"))
        lf.write_dataset(simple_table(0, 30), path, enable_stable_row_ids=stable, max_rows_per_file=10)
        lf.write_dataset(simple_table(30, 10), path, mode="append")
        out[stable] = path
    return out


def fresh(templates, tmp_path, name: str, stable: bool = True) -> str:
    return copy_of(templates[stable], tmp_path / name)


# ---------------------------------------------------------------- planned operations
def plan(kind: str, uri: str, version: int, **kw) -> Commit:
    """Plan ``kind`` against ``version`` now; the returned callable commits it later."""
    ds = lf.dataset(uri, version=version)
    store = ObjectStore(uri)
    if kind == "append":
        frags = lf.write_fragments(simple_table(kw.get("start", 100), 5), uri)
        return lambda: lf.commit(uri, lf.Append(frags), read_version=version)
    if kind == "delete":
        updated, removed, n = plan_delete(store, ds.manifest, kw.get("where", pc.field("id").isin([0, 1])))
        assert n > 0
        return lambda: lf.commit(uri, lf.Delete(updated, removed, "test"), read_version=version)
    if kind == "update":
        where = kw.get("where", pc.field("id") == 12)
        removed, updated, new, n = plan_update(store, ds.manifest, {"val": pa.scalar(kw.get("value", "U"))}, where)
        assert n > 0
        op = lf.Update(removed, updated, new, fields_for_preserving_frag_bitmap=[1])
        return lambda: lf.commit(uri, op, read_version=version)
    if kind == "rewrite":
        opts = CompactionOptions.resolve({}, target_rows_per_fragment=1000)
        cplan = plan_compaction(ds.manifest, uri, opts)
        assert cplan.tasks
        results = [execute_task(t, manifest=ds.manifest) for t in cplan.tasks]
        return lambda: commit_compaction(cplan, results)
    if kind == "overwrite":
        frags = lf.write_fragments(simple_table(500, 5), uri)
        op = lf.Overwrite(frags, ds.lance_schema, kw.get("config"))
        return lambda: lf.commit(uri, op, read_version=version)
    if kind == "reserve":
        return lambda: lf.commit(uri, lf.ReserveFragments(3), read_version=version)
    if kind == "config":
        op = lf.UpdateConfig(kw.get("config", {"shared.key": kind}))
        return lambda: lf.commit(uri, op, read_version=version)
    if kind == "restore":
        return lambda: lf.commit(uri, lf.Restore(1), read_version=version)
    raise AssertionError(kind)


OPS = ["append", "delete", "update", "rewrite", "overwrite", "reserve", "config", "restore"]

# row = B (mine, committed second), column = A (theirs, committed first); docs/FORMAT.md §10.
# delete = ids {0, 1} (fragment 0), update = id 12 (fragment 1), rewrite = compaction of all
# fragments, config = the same key on both sides.
MATRIX = {
    "append":    dict(append="ok", delete="ok", update="ok", rewrite="ok", overwrite="X", reserve="ok", config="ok", restore="X"),
    "delete":    dict(append="ok", delete="R", update="ok", rewrite="R", overwrite="X", reserve="ok", config="ok", restore="X"),
    "update":    dict(append="ok", delete="ok", update="R", rewrite="R", overwrite="X", reserve="ok", config="ok", restore="X"),
    "rewrite":   dict(append="ok", delete="ok", update="ok", rewrite="R", overwrite="X", reserve="ok", config="ok", restore="X"),
    "overwrite": dict(append="ok", delete="ok", update="ok", rewrite="ok", overwrite="ok", reserve="ok", config="ok", restore="ok"),
    "reserve":   dict(append="ok", delete="ok", update="ok", rewrite="ok", overwrite="X", reserve="ok", config="ok", restore="X"),
    "config":    dict(append="ok", delete="ok", update="ok", rewrite="ok", overwrite="ok", reserve="ok", config="X", restore="ok"),
    "restore":   dict(append="ok", delete="ok", update="ok", rewrite="ok", overwrite="ok", reserve="ok", config="ok", restore="ok"),
}  # fmt: skip
CASES = [(a, b, MATRIX[b][a]) for b in OPS for a in OPS]
ERRORS = {"R": lf.RetryableCommitConflictError, "X": lf.IncompatibleTransactionError}


def state(uri: str) -> tuple[pa.Table, dict[str, str]]:
    ds = lf.dataset(uri)
    t = ds.to_table(columns=COLS + META)
    return t.sort_by("id"), ds.config()


def assert_pylance_agrees(uri: str) -> None:
    latest = lance.dataset(uri).version
    for v in range(1, latest + 1):
        a = lf.dataset(uri, version=v).to_table(columns=COLS + META)
        b = lance.dataset(uri, version=v).to_table(columns=COLS + META)
        assert a.equals(b), f"version {v}:\nours:   {a}\ntheirs: {b}"


def live_ids(uri: str) -> list[int]:
    return sorted(lf.dataset(uri).to_table(columns=["id"])["id"].to_pylist())


@pytest.mark.parametrize(("a", "b", "expected"), CASES, ids=[f"{b}-after-{a}-{e}" for a, b, e in CASES])
def test_matrix(templates, tmp_path, a, b, expected):
    uri = fresh(templates, tmp_path, "race")
    commit_b = plan(b, uri, BASE_VERSION)
    plan(a, uri, BASE_VERSION)()
    after_a = lf.dataset(uri).version
    if expected == "ok":
        commit_b()
        # the oracle: the same two operations, one after the other
        serial = fresh(templates, tmp_path, "serial")
        plan(a, serial, BASE_VERSION)()
        plan(b, serial, lf.dataset(serial).version)()
        assert lf.dataset(uri).version == lf.dataset(serial).version
        got, want = state(uri), state(serial)
        assert got[1] == want[1]
        assert got[0].equals(want[0]), f"\nconcurrent: {got[0]}\nserial:     {want[0]}"
    else:
        with pytest.raises(ERRORS[expected]) as info:
            commit_b()
        err = info.value
        assert err.read_version == BASE_VERSION
        assert BASE_VERSION < err.conflicting_version <= after_a
        assert err.operation is not None and err.other_operation is not None
        # nothing of B landed (a compaction's ReserveFragments may have)
        assert lf.dataset(uri).version in (after_a, after_a + 1)
        assert isinstance(err, lf.CommitConflictError) and isinstance(err, lf.LanceOpsError)
    assert_pylance_agrees(uri)


# ------------------------------------------------------------------- specific races
def test_two_deletes_on_one_fragment_merge_their_deletion_vectors(templates, tmp_path):
    uri = fresh(templates, tmp_path, "ds")
    b = plan("delete", uri, 2, where=pc.field("id").isin([3, 4, 7]))
    plan("delete", uri, 2, where=pc.field("id").isin([0, 1]))()
    ds = b()
    assert ds.version == 4
    frag0 = ds.manifest.fragment(0)
    assert frag0.deletion_file.num_deleted_rows == 5
    assert frag0.deletion_file.read_version == 3  # written for the version it was rebased onto
    assert live_ids(uri) == [2, 5, 6, 8, 9, *range(10, 40)]
    assert sorted(lance.dataset(uri).to_table(columns=["id"])["id"].to_pylist()) == live_ids(uri)
    assert lance.dataset(uri).get_fragments()[0].count_rows() == 5
    assert_pylance_agrees(uri)


def test_deletes_that_together_empty_a_fragment_remove_it(templates, tmp_path):
    uri = fresh(templates, tmp_path, "ds")
    b = plan("delete", uri, 2, where=pc.field("id") >= 5)  # rest of fragment 0 and all others
    plan("delete", uri, 2, where=pc.field("id") < 5)()
    ds = b()
    assert ds.manifest.fragments == () and ds.count_rows() == 0
    assert lance.dataset(uri).count_rows() == 0
    assert_pylance_agrees(uri)


@pytest.mark.parametrize("stable", [True, False])
def test_update_and_delete_of_other_rows_in_one_fragment_both_land(templates, tmp_path, stable):
    uri = fresh(templates, tmp_path, "ds", stable)
    b = plan("update", uri, 2, where=pc.field("id") == 15, value="B")
    plan("delete", uri, 2, where=pc.field("id").isin([14, 16]))()
    b()
    rows = {r["id"]: r for r in lf.dataset(uri).to_table(columns=COLS + META).to_pylist()}
    assert 14 not in rows and 16 not in rows and rows[15]["val"] == "B"
    if stable:
        assert rows[15]["_rowid"] == 15 and rows[15]["_row_last_updated_at_version"] == 4
    assert lf.dataset(uri).manifest.fragment(1).deletion_file.num_deleted_rows == 3
    assert_pylance_agrees(uri)


@pytest.mark.parametrize("first", ["delete", "update"])
def test_delete_racing_update_of_the_same_row_exactly_one_wins(templates, tmp_path, first):
    uri = fresh(templates, tmp_path, "ds")
    second = "update" if first == "delete" else "delete"
    where = pc.field("id") == 12
    commit_second = plan(second, uri, 2, where=where)
    plan(first, uri, 2, where=where)()
    with pytest.raises(lf.RetryableCommitConflictError) as info:
        commit_second()
    assert info.value.read_version == 2 and info.value.conflicting_version == 3
    assert info.value.operation.name == second and info.value.other_operation.name == first
    rows = {r["id"]: r for r in lf.dataset(uri).to_table(columns=COLS).to_pylist()}
    if first == "delete":
        assert 12 not in rows
    else:
        assert rows[12]["val"] == "U"
    assert lf.dataset(uri).version == 3
    # the loser redoes its work on the new version and lands
    ds = lf.dataset(uri)
    if second == "update":
        assert ds.update({"val": "'again'"}, where=where) == {"num_rows_updated": 0}
        assert ds.version == 4  # nothing matched: committed all the same, as pylance's
    else:
        assert ds.delete(where) == {"num_deleted_rows": 1}
        assert ds.version == 4 and 12 not in live_ids(uri)
    assert_pylance_agrees(uri)


def test_a_commit_that_loses_its_race_and_conflicts_removes_its_transaction_file(templates, tmp_path):
    """The loser wrote its .txn, lost the put of the manifest to a conflicting commit, then
    found the conflict: its .txn is deleted (no manifest will ever reference it)."""
    from lance_ops.format.txn.commit_loop import commit_transaction
    from lance_ops.format.txn.handlers import ConditionalPutCommitHandler
    from lance_ops.format.txn.transaction import Transaction

    uri = fresh(templates, tmp_path, "ds")
    store = ObjectStore(uri)
    updated, removed, _ = plan_delete(store, lf.dataset(uri, version=2).manifest, pc.field("id") == 12)
    rival = plan("update", uri, 2, where=pc.field("id") == 12)

    class LosesFirstRace(ConditionalPutCommitHandler):
        raced = False

        def put_manifest_if_absent(self, manifest, txn, scheme):
            if not self.raced:
                self.raced = True
                rival()  # the conflicting update takes this version first
                return False
            return super().put_manifest_if_absent(manifest, txn, scheme)

    txn = Transaction(2, lf.Delete(updated, removed, "test"))
    with pytest.raises(lf.RetryableCommitConflictError):
        commit_transaction(store, txn, handler=LosesFirstRace(store))
    referenced = {lf.dataset(uri, version=v["version"]).manifest.transaction_file for v in lf.dataset(uri).versions()}
    assert txn.file_name not in os.listdir(os.path.join(uri, "_transactions"))
    assert set(os.listdir(os.path.join(uri, "_transactions"))) == referenced - {""}
    assert lf.dataset(uri).version == 3


def test_many_concurrent_appends_all_land(templates, tmp_path):
    uri = fresh(templates, tmp_path, "ds")
    commits = [plan("append", uri, 2, start=100 + 10 * i) for i in range(5)]
    for c in commits:
        c()
    ds = lf.dataset(uri)
    assert ds.version == 7
    expected = list(range(40)) + [100 + 10 * i + j for i in range(5) for j in range(5)]
    assert live_ids(uri) == expected
    rid = ds.to_table(columns=["_rowid"])["_rowid"].to_numpy()
    assert sorted(rid.tolist()) == list(range(65))
    assert sorted(f.id for f in ds.manifest.fragments) == list(range(9))
    assert_pylance_agrees(uri)


def test_compaction_losing_to_a_delete_is_rebased(templates, tmp_path):
    uri = fresh(templates, tmp_path, "ds")
    before = lf.dataset(uri).to_table(columns=COLS + META).sort_by("_rowid")
    compaction = plan("rewrite", uri, 2)
    # partial deletes in fragments 0 and 3, and fragment 2 deleted entirely
    gone = [0, 5, 9, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 33]
    plan("delete", uri, 2, where=pc.field("id").isin(gone))()
    plan("update", uri, 3, where=pc.field("id") == 11, value="U")()  # version 4
    metrics = compaction()
    assert metrics.version == 6  # ReserveFragments = 5, Rewrite = 6
    ds = lf.dataset(uri)
    # the compacted fragment replaced 0..3; the update's new fragment stays
    assert len(ds.manifest.fragments) == 2
    compacted = max(ds.manifest.fragments, key=lambda f: f.physical_rows)
    assert compacted.physical_rows == 40  # rewritten from version 2
    # their deletes (fragment 2 entirely) and the updated row's old copy, found by row id
    assert compacted.deletion_file.num_deleted_rows == len(gone) + 1
    assert live_ids(uri) == [i for i in range(40) if i not in gone]
    after = ds.to_table(columns=COLS + META).sort_by("_rowid")
    kept = before.filter(pc.invert(pc.field("id").isin(gone)))
    assert after["_rowid"].equals(kept["_rowid"])
    assert after["_row_created_at_version"].equals(kept["_row_created_at_version"])
    updated = after.filter(pc.field("id") == 11).to_pylist()[0]
    assert updated["val"] == "U" and updated["_row_last_updated_at_version"] == 4
    theirs = lance.dataset(uri)
    assert sorted(theirs.to_table(columns=["id"])["id"].to_pylist()) == live_ids(uri)
    assert not set(gone) & set(theirs.to_table(columns=["id"])["id"].to_pylist())
    assert_pylance_agrees(uri)
    # and pylance keeps working on top of the rebased compaction
    theirs.delete("id = 1")
    theirs.optimize.compact_files(target_rows_per_fragment=1000)
    assert live_ids(uri) == [i for i in range(40) if i not in gone and i != 1]
    assert_pylance_agrees(uri)


def test_compaction_losing_to_a_delete_without_stable_row_ids_must_retry(templates, tmp_path):
    uri = fresh(templates, tmp_path, "ds", stable=False)
    compaction = plan("rewrite", uri, 2)
    plan("delete", uri, 2)()
    with pytest.raises(lf.RetryableCommitConflictError) as info:
        compaction()
    assert info.value.other_operation.name == "delete"
    # ReserveFragments landed (harmless), the rewrite did not: no row came back
    assert live_ids(uri) == list(range(2, 40))
    assert lf.dataset(uri).version == 4
    assert_pylance_agrees(uri)


def test_config_changes_of_different_keys_merge(templates, tmp_path):
    uri = fresh(templates, tmp_path, "ds")
    b = plan("config", uri, 2, config={"b.key": "2"})
    plan("config", uri, 2, config={"a.key": "1"})()
    ds = b()
    assert ds.config() == {"a.key": "1", "b.key": "2"}
    assert lance.dataset(uri).config() == {"a.key": "1", "b.key": "2"}
    # an overwrite with its own config conflicts with a config change of the same key only
    c = plan("overwrite", uri, 4, config={"a.key": "9"})
    plan("config", uri, 4, config={"a.key": "3"})()
    with pytest.raises(lf.IncompatibleTransactionError):
        c()
    d = plan("overwrite", uri, 5, config={"c.key": "9"})
    plan("config", uri, 5, config={"a.key": "4"})()
    assert d().config() == {"a.key": "4", "b.key": "2", "c.key": "9"}
    assert live_ids(uri) == list(range(500, 505))
    assert_pylance_agrees(uri)


def test_conflict_with_pylance_commit(templates, tmp_path):
    """pylance commits in between; our planned operations rebase over (or conflict with) it."""
    uri = fresh(templates, tmp_path, "ds")
    our_delete = plan("delete", uri, 2, where=pc.field("id").isin([3, 4]))
    our_update = plan("update", uri, 2, where=pc.field("id") == 1)
    our_append = plan("append", uri, 2)
    lance.dataset(uri).delete("id = 2")  # version 3, same fragment, other row
    our_delete()
    with pytest.raises(lf.RetryableCommitConflictError):
        plan("delete", uri, 2, where=pc.field("id") == 2)()
    our_update()
    our_append()
    assert live_ids(uri) == [0, 1, *range(5, 40), *range(100, 105)]
    rows = {r["id"]: r for r in lance.dataset(uri).to_table(columns=COLS + META).to_pylist()}
    assert rows[1]["val"] == "U" and rows[1]["_rowid"] == 1
    assert rows[100]["_rowid"] == 40
    assert_pylance_agrees(uri)


def test_pylance_rebases_over_our_commits(templates, tmp_path):
    """The other direction: pylance's commit loop reads our transactions."""
    uri = fresh(templates, tmp_path, "ds")
    theirs = lance.dataset(uri, version=2)
    plan("delete", uri, 2, where=pc.field("id").isin([0, 1]))()
    plan("append", uri, 3)()
    plan("config", uri, 4, config={"k": "v"})()
    theirs.delete("id = 5")  # pylance planned on version 2: must rebase over 3, 4, 5
    assert lance.dataset(uri).version == 6
    assert live_ids(uri) == [2, 3, 4, *range(6, 40), *range(100, 105)]
    assert lf.dataset(uri).manifest.fragment(0).deletion_file.num_deleted_rows == 3
    assert_pylance_agrees(uri)


def test_failed_commit_keeps_error_fields_for_retry_loops(templates, tmp_path):
    uri = fresh(templates, tmp_path, "ds")
    b = plan("append", uri, 2)
    plan("overwrite", uri, 2)()
    with pytest.raises(lf.IncompatibleTransactionError) as info:
        b()
    e = info.value
    assert (e.read_version, e.conflicting_version) == (2, 3)
    assert isinstance(e.operation, lf.Append) and isinstance(e.other_operation, lf.Overwrite)
    assert "version 2" in str(e) and "version 3" in str(e)
    rid = lf.dataset(uri).to_table(columns=["_rowid"])["_rowid"].to_numpy()
    assert np.array_equal(rid, np.arange(40, 45, dtype=np.uint64))


def test_updates_of_other_rows_in_one_fragment_both_land(templates, tmp_path):
    uri = fresh(templates, tmp_path, "ds")
    b = plan("update", uri, 2, where=pc.field("id").isin([21, 29]), value="B")
    plan("update", uri, 2, where=pc.field("id") == 25, value="A")()
    b()
    rows = {r["id"]: r for r in lf.dataset(uri).to_table(columns=COLS + META).to_pylist()}
    assert [rows[i]["val"] for i in (21, 25, 29)] == ["B", "A", "B"]
    assert [rows[i]["_rowid"] for i in (21, 25, 29)] == [21, 25, 29]
    assert [rows[i]["_row_last_updated_at_version"] for i in (21, 25, 29)] == [4, 3, 4]
    assert lf.dataset(uri).manifest.fragment(2).deletion_file.num_deleted_rows == 3
    assert sorted(rows) == list(range(40))
    assert_pylance_agrees(uri)


def test_merged_deletion_vector_crosses_into_a_bitmap(tmp_path):
    uri = str(tmp_path / "big")
    lf.write_dataset(simple_table(0, 8000), uri, enable_stable_row_ids=True)
    b = plan("delete", uri, 1, where=pc.field("id") >= 5000)  # 3000 rows: .arrow
    plan("delete", uri, 1, where=pc.field("id") < 3000)()  # 3000 rows: .arrow
    ds = b()
    df = ds.manifest.fragment(0).deletion_file
    assert (df.extension, df.num_deleted_rows) == ("bin", 6000)
    assert live_ids(uri) == list(range(3000, 5000))
    assert lance.dataset(uri).count_rows() == 2000
    assert_pylance_agrees(uri)
