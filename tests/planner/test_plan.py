"""The planner on tables in known states: each plan lists exactly the expected actions, with the
parameters and estimates format and pylance agree on; ``maintain`` leaves every table needing
nothing, with the same rows and index answers as before."""

import json
import os
import time

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_ops.format as lf
from lance_ops.orchestration.planner import TableRef, history, maintain, plan
from planner import tables as T


def _ops(p):
    return [a.operation for a in p.actions]


def _file_bytes(uri, frag_ids):
    ds = lance.dataset(uri)
    frags = {f.fragment_id: f for f in ds.get_fragments()}
    return sum(os.path.getsize(os.path.join(uri, "data", df.path)) for i in frag_ids for df in frags[i].data_files())


def _rewritten(uri, version):
    txn = lf.dataset(uri).read_transaction(version)
    assert txn.operation.name == "rewrite"
    return [[f.id for f in g.old_fragments] for g in txn.operation.groups]


def test_small_fragments_compact_exactly_the_bins_compact_files_rewrites(tmp_path):
    uri = str(tmp_path / "small")
    T.small_fragments(uri)
    p = plan(uri, T.POLICY)
    assert _ops(p) == ["compact"]
    (a,) = p.actions
    assert a.parameters == {"target_rows_per_fragment": 1000, "max_rows_per_group": 1024,
                            "materialize_deletions_threshold": 0.1}
    assert a.details["bins"] == [list(range(10)), list(range(10, 20))]
    assert [(r.metric, r.value, r.threshold) for r in a.reasons] == [("small_fragments", 20, 4)]
    e = a.estimate
    assert (e.rows_read, e.rows_written, e.files_removed, e.files_added) == (2000, 2000, 20, 2)
    assert e.bytes_read == _file_bytes(uri, range(20))
    report = maintain([(TableRef(uri), T.POLICY)])
    (r,) = report.results
    assert r.status == "ran" and _rewritten(uri, r.version) == a.details["bins"]
    assert r.metrics["fragments_removed"] == 20 and r.metrics["fragments_added"] == 2


def test_deleted_rows_are_materialised_per_fragment(tmp_path):
    uri = str(tmp_path / "deleted")
    T.deleted(uri)
    p = plan(uri, T.POLICY)
    assert _ops(p) == ["materialize_deletions"]
    (a,) = p.actions
    assert a.parameters == {"threshold": 0.1}
    assert a.details["bins"] == [[0], [1], [2], [3]]
    assert [(r.metric, r.value) for r in a.reasons] == [("deleted_ratio", 0.3), ("deleted_rows_dropped", 2400)]
    e = a.estimate
    assert (e.rows_read, e.rows_written, e.files_removed, e.files_added) == (8000, 5600, 8, 4)
    assert e.bytes_read == _file_bytes(uri, range(4))


def test_unindexed_rows_are_caught_up_per_index(tmp_path):
    uri = str(tmp_path / "unindexed")
    T.unindexed(uri)
    p = plan(uri, T.POLICY)
    assert _ops(p) == ["optimize_indices", "optimize_indices"]
    by_name = {a.parameters["index_names"][0]: a for a in p.actions}
    assert sorted(by_name) == ["id_idx", "vec_idx"]
    for a in p.actions:
        assert a.parameters["num_indices_to_merge"] == 1  # the policy's (pylance's default)
        assert [(r.metric, r.value) for r in a.reasons] == [("unindexed_rows", 4000)]
        assert a.details["fragments"] == list(range(10)) and len(a.details["segments_removed"]) == 1
        assert a.estimate.rows_read == 10_000
    assert by_name["vec_idx"].details["index_type"] == "IVF_PQ"


def test_too_many_segments_are_merged(tmp_path):
    uri = str(tmp_path / "segments")
    T.segmented(uri, 12)
    p = plan(uri, T.POLICY)
    # 12 small fragments, but each in its own segment: compaction has no bin until they merge
    assert _ops(p) == ["optimize_indices"]
    (a,) = p.actions
    assert a.parameters == {"index_names": ["id_idx"], "num_indices_to_merge": 12}
    assert [(r.metric, r.value, r.threshold) for r in a.reasons] == [("index_segments", 12, 8)]
    assert len(a.details["segments_removed"]) == 12 and a.estimate.rows_read == 1200


def test_segments_that_block_compaction_are_merged(tmp_path):
    uri = str(tmp_path / "blocking")
    T.segmented(uri, 5)
    (a,) = plan(uri, T.POLICY).actions
    assert a.operation == "optimize_indices" and a.parameters["num_indices_to_merge"] == 5
    assert [(r.metric, r.value) for r in a.reasons] == [("fragments_blocked_by_segments", 5)]


def test_old_versions_cleanup_keeps_tags_and_the_branch(tmp_path):
    uri = str(tmp_path / "versions")
    T.many_versions(uri, 120)
    assert plan(uri, T.POLICY).healthy  # 14 days of retention: nothing is old yet
    (a,) = plan(uri, T.CLEANUP_POLICY).actions
    assert a.operation == "cleanup_old_versions"
    assert a.parameters == {"older_than_days": 0, "retain_versions": 1, "retention_duration_check": False}
    # 120 versions: the newest, the tagged 10 and 50 and the branch's 30 stay
    assert a.estimate.versions_removed == 116
    assert a.details == {"protected_by_tags": ["fifty", "ten"], "protected_by_branches": ["dev"]}


def test_deletions_that_leave_small_fragments_compact_them(tmp_path):
    uri = str(tmp_path / "deleted")
    lance.write_dataset(T.rows(0, 4 * T.TARGET), uri, max_rows_per_file=T.TARGET)
    lance.dataset(uri).delete("id % 10 < 3")  # 700 live rows each: small once materialised
    (a,) = plan(uri, T.POLICY).actions
    assert a.operation == "compact" and a.details["bins"] == [[0, 1], [2, 3]]
    assert [(r.metric, r.value) for r in a.reasons] == [("small_fragments", 4), ("deleted_rows_dropped", 1200)]


def test_healthy_table_plans_nothing_and_the_plan_is_json(tmp_path):
    uri = str(tmp_path / "healthy")
    T.healthy(uri)
    p = plan(uri, T.POLICY)
    assert p.healthy and p.notes == ()
    assert json.loads(p.to_json())["stats"]["rows"] == 1000


def test_orphan_files_are_proposed_and_swept(tmp_path):
    uri = str(tmp_path / "orphans")
    T.healthy(uri)
    stray = os.path.join(uri, "data", "stray.lance")
    with open(stray, "wb") as f:
        f.write(b"x" * 100)
    assert plan(uri, T.POLICY).healthy  # younger than orphan_min_age_hours: may be a commit in flight
    old = time.time() - 2 * 3600
    os.utime(stray, (old, old))
    (a,) = plan(uri, T.POLICY).actions
    assert a.operation == "remove_orphan_files" and a.details["paths"] == ["data/stray.lance"]
    assert (a.estimate.files_removed, a.estimate.bytes_removed) == (1, 100)
    assert a.parameters == {"older_than_hours": T.POLICY.orphan_min_age_hours,
                            "retention_duration_check": T.POLICY.cleanup_retention_duration_check}
    before = lance.dataset(uri).to_table()
    report = maintain([(TableRef(uri), T.POLICY)])
    (r,) = report.results
    assert (r.status, r.action.operation, r.version) == ("ran", "remove_orphan_files", None)
    assert (r.metrics["files_removed"], r.metrics["bytes_removed"]) == (1, 100) and report.skipped == ()
    assert not os.path.exists(stray) and plan(uri, T.POLICY).healthy
    assert lance.dataset(uri).to_table().equals(before)


def _answers(uri):
    ds = lance.dataset(uri)
    out = {"rows": ds.to_table().sort_by("id")}
    if "vec" in ds.schema.names:
        q = ds.to_table(columns=["vec"], filter="id = 7777").column("vec")[0].values.to_numpy()
        out["btree"] = ds.to_table(columns=["id", "val"], filter="id >= 6990 AND id < 7010").sort_by("id")
        hits = ds.to_table(columns=["id"], nearest={"column": "vec", "q": q, "k": 1, "refine_factor": 50})
        out["vector"] = hits.column("id").to_pylist()
    return out


@pytest.mark.parametrize("state", ["small_fragments", "deleted", "unindexed", "segmented", "many_versions", "healthy"])
def test_after_maintain_every_table_plans_nothing_and_reads_the_same(tmp_path, state):
    uri = str(tmp_path / state)
    getattr(T, state)(uri)
    before = _answers(uri)
    report = maintain([(TableRef(uri), T.CLEANUP_POLICY)], run_id=f"test-{state}")
    assert all(r.status == "ran" for r in report.results), report.results
    assert plan(uri, T.CLEANUP_POLICY).healthy, plan(uri, T.CLEANUP_POLICY).actions
    after = _answers(uri)
    assert after["rows"].equals(before["rows"])
    for key in ("btree", "vector"):
        assert after.get(key) == before.get(key)
    if state == "unindexed":
        assert all(d.num_rows_unindexed == 0 for d in lf.dataset(uri).describe_indices())
        assert after["vector"] == [7777]
    kept = {h["version"]: h for h in history(uri)}  # (cleanup may have removed earlier commits of the run)
    committed = [r.version for r in report.results if r.version is not None]
    assert all(kept[v]["run_id"] == f"test-{state}" for v in committed if v in kept)
    assert not committed or max(committed) in kept


@pytest.mark.interop  # lancedb opens the table: the interop tier
def test_lancedb_reads_the_maintained_table(tmp_path):
    lancedb = pytest.importorskip("lancedb")
    uri = str(tmp_path / "db" / "t.lance")
    T.unindexed(uri)
    maintain([(TableRef(uri), T.POLICY)])
    table = lancedb.connect(str(tmp_path / "db")).open_table("t")
    assert table.count_rows() == 10_000
    q = np.asarray(lance.dataset(uri).to_table(filter="id = 123").column("vec")[0].values, dtype=np.float32)
    assert table.search(q).limit(1).refine_factor(50).to_arrow().column("id").to_pylist() == [123]


def test_unknown_table_raises_the_format_error(tmp_path):
    with pytest.raises(lf.DatasetNotFoundError):
        plan(str(tmp_path / "nothing"))


def test_plan_round_trips_a_pyarrow_table_of_its_actions(tmp_path):
    uri = str(tmp_path / "small")
    T.small_fragments(uri)
    rows = [a.to_dict() for a in plan(uri, T.POLICY).actions]
    assert pa.Table.from_pylist([{"op": r["operation"], "priority": r["priority"]} for r in rows]).num_rows == 1


def test_a_store_backed_table_is_planned_maintained_and_its_history_read_through_the_store(tmp_path):
    uri, db = str(tmp_path / "stored"), str(tmp_path / "store.db")
    for i in range(6):
        lf.write_dataset(T.rows(i * 100, 100), uri, mode="append" if i else "create", manifest_store=db)
    ref = TableRef(uri, manifest_store=db)
    (a,) = plan(ref, T.POLICY).actions
    assert a.operation == "compact" and a.details["bins"] == [list(range(6))]
    report = maintain([(ref, T.POLICY)], run_id="stored")
    assert [r.status for r in report.results] == ["ran"] and plan(ref, T.POLICY).healthy
    (latest,) = history(ref, limit=1)
    assert latest["run_id"] == "stored" and latest["metrics"]["num_removed_fragments"] == 6
    assert lf.dataset(uri, manifest_store=db).count_rows() == 600


def test_an_action_round_trips_through_json(tmp_path):
    from lance_ops.orchestration.planner import Action

    uri = str(tmp_path / "unindexed")
    T.unindexed(uri)
    for a in plan(uri, T.POLICY).actions:
        assert Action.from_dict(json.loads(a.to_json())) == a
