"""The Spark jobs keep pylance's indices (compact, materialize_deletions, upsert) and extend them
(optimize_indices, create_scalar_index).

Executors rewrite the fragments; the driver remaps the index files before its one commit (no
stable row ids) or moves the bitmaps (stable row ids), as lance_ops.format does in process.
Executors build index segments, one per task; the driver commits them once.
"""

import json
import os

import lance
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from index_support import (
    QUERY_VECTOR,
    build,
    copy,
    index_name,
    indexed_rows,
    indices_used,
    table,
    vector_column,
    wrong_answers,
)

import lance_ops.format as lf
from lance_ops import jobs
from lance_ops.format.errors import InvalidArgumentError, ManifestStoreRequiredError, UnsupportedFeatureError
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.txn.manifest_store import base_uri_of
from lance_ops.jobs.__main__ import main

KINDS = ["BTREE", "BITMAP", "LABEL_LIST", "NGRAM", "ZONEMAP", "INVERTED", "IVF_PQ", "IVF_HNSW_FLAT"]


@pytest.fixture(scope="module")
def templates(tmp_path_factory):
    root = tmp_path_factory.mktemp("jobs_idx")
    out = {}
    for stable in (False, True):
        uri = build(str(root / f"s{int(stable)}"), stable=stable, kinds=KINDS).uri
        lance.dataset(uri).delete("id % 10 = 0")
        out[stable] = uri
    return out


@pytest.mark.parametrize("stable", [False, True], ids=["addresses", "stable_row_ids"])
@pytest.mark.parametrize("job", ["compact", "materialize_deletions"])
def test_spark_rewrite_keeps_indices_as_pylance(spark, templates, tmp_path, stable, job):
    ours, theirs = copy(templates[stable], str(tmp_path / "o")), copy(templates[stable], str(tmp_path / "t"))
    if job == "compact":
        r = jobs.compact(spark, ours, target_rows_per_fragment=1200)
        lance.dataset(theirs).optimize.compact_files(target_rows_per_fragment=1200)
    else:
        r = jobs.materialize_deletions(spark, ours, threshold=0.05)
        lance.dataset(theirs).optimize.compact_files(target_rows_per_fragment=1, materialize_deletions_threshold=0.05)
    assert r.failed_tasks == () and r.fragments_removed == 4
    assert set(r.indices_remapped) == ({"btree_idx"} if stable else {index_name(k) for k in KINDS if k != "ZONEMAP"})
    assert any("zonemap_idx" in line for line in r.index_coverage_dropped)
    a, b = lance.dataset(ours), lance.dataset(theirs)
    assert indexed_rows(a) == indexed_rows(b)
    assert indices_used(a, KINDS) == indices_used(b, KINDS)
    assert wrong_answers(a, KINDS) == []


def test_spark_compaction_with_a_failed_task_remaps_only_the_committed_groups(spark, templates, tmp_path):
    uri = copy(templates[False], str(tmp_path / "o"))
    # four fragments of 540 live rows; a target of 1000 bins them two by two (pylance's plan:
    # a bin reaches the target, docs/FORMAT.md §16)
    r = jobs.compact(spark, uri, target_rows_per_fragment=1000, inject_task_failures=[1])
    assert len(r.failed_tasks) == 1 and r.tasks_succeeded == 1 and r.fragments_removed == 2
    ds = lance.dataset(uri)
    rows = indexed_rows(ds)
    assert rows["btree_idx"] == rows["ivf_pq_idx"] == ds.count_rows()  # every live row still indexed
    assert rows["zonemap_idx"] == 1080  # the zone map lost the rewritten group only
    assert wrong_answers(ds, KINDS) == []


@pytest.mark.parametrize("stable", [False, True], ids=["addresses", "stable_row_ids"])
def test_upsert_keeps_coverage_as_pylance_merge_insert(spark, templates, tmp_path, stable):
    """90 matched rows rewritten, 60 inserted: like pylance's merge_insert, no index is
    extended over the rewritten rows (every field counts as modified)."""
    ours, theirs = copy(templates[stable], str(tmp_path / "o")), copy(templates[stable], str(tmp_path / "t"))
    rows = pa.concat_tables([table(100, start=1000), table(50, start=9000)])
    rows = rows.set_column(rows.schema.get_field_index("note"), "note", pa.array(["up"] * rows.num_rows))
    pq.write_table(rows, tmp_path / "src.parquet")
    jobs.upsert(spark, ours, str(tmp_path / "src.parquet"), on=["id"], format="parquet")
    lance.dataset(theirs).merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(rows)
    a, b = lance.dataset(ours), lance.dataset(theirs)
    assert a.count_rows() == b.count_rows() == 2160 + 60  # (ids 1000, 1010, ... were deleted: inserts)
    assert indexed_rows(a) == indexed_rows(b)
    assert wrong_answers(a, KINDS) == []


# --------------------------------------------------------------- index segments built on Spark
BUILT = ["BTREE", "BITMAP", "LABEL_LIST", "IVF_PQ"]
NAMES = [index_name(k) for k in BUILT]


@pytest.fixture(scope="module")
def grown(tmp_path_factory):
    """pylance indexes 2,400 rows (4 fragments), then 900 rows are appended in 3 fragments no index covers."""
    root = tmp_path_factory.mktemp("jobs_grown")
    out = {}
    for stable in (False, True):
        uri = build(str(root / f"s{int(stable)}"), stable=stable, kinds=BUILT).uri
        lance.write_dataset(table(900, start=5000), uri, mode="append", max_rows_per_file=300)
        out[stable] = uri
    return out


def unindexed(ds: lance.LanceDataset) -> dict[str, int]:
    return {n: ds.index_statistics(n)["num_unindexed_rows"] for n in NAMES}


def index_dirs(uri: str) -> set[str]:
    return set(os.listdir(os.path.join(uri, "_indices")))


def vector_plan_uses_index(ds: lance.LanceDataset) -> bool:
    plan = ds.scanner(columns=["id"], nearest={"column": vector_column("IVF_PQ"), "q": QUERY_VECTOR, "k": 10,
                                               "nprobes": 2}, disable_scoring_autoprojection=True).explain_plan()
    return "ANNIvfPartition" in plan and "LanceScan" not in plan


@pytest.mark.parametrize("merge", [0, 1], ids=["add_segments", "merge_newest"])
@pytest.mark.parametrize("stable", [False, True], ids=["addresses", "stable_row_ids"])
def test_spark_optimize_indices_indexes_the_new_rows(spark, grown, tmp_path, stable, merge):
    uri = copy(grown[stable], str(tmp_path / "o"))
    before = lance.dataset(uri)
    assert set(unindexed(before).values()) == {900}
    r = jobs.optimize_indices(spark, uri, num_indices_to_merge=merge, rows_per_task=300)
    # merge 0: one task (and segment) per 300-row fragment; merge 1: one task per index
    assert r.tasks_planned == r.tasks_succeeded == (12 if merge == 0 else 4) and r.failed_tasks == ()
    assert r.segments_added == r.tasks_planned and r.segments_removed == (0 if merge == 0 else 4)
    assert r.indices == tuple(sorted(NAMES)) and r.version == before.version + 1 and r.read_version == before.version
    assert r.rows_indexed == (4 * 900 if merge == 0 else 4 * 3300)
    ds = lance.dataset(uri)
    assert unindexed(ds) == dict.fromkeys(NAMES, 0)
    assert {d.name: len(d.segments) for d in ds.describe_indices()} == dict.fromkeys(NAMES, 4 if merge == 0 else 1)
    assert wrong_answers(ds, BUILT) == []
    assert indices_used(ds, BUILT) == dict.fromkeys(BUILT, True) and vector_plan_uses_index(ds)
    assert jobs.optimize_indices(spark, uri).version is None  # nothing left to index: no commit


def test_spark_optimize_indices_adds_full_text_segments(spark, tmp_path):
    """The same planner extends a pylance full-text index: one segment per task, used by pylance."""
    uri = build(str(tmp_path / "fts"), kinds=["INVERTED"], rows=600, rows_per_file=300).uri
    lance.write_dataset(table(600, start=5000), uri, mode="append", max_rows_per_file=300)
    r = jobs.optimize_indices(spark, uri, num_indices_to_merge=0, rows_per_task=300)
    assert r.tasks_planned == r.tasks_succeeded == 2 and r.segments_added == 2 and r.failed_tasks == ()
    ds = lance.dataset(uri)
    name = index_name("INVERTED")
    assert ds.index_statistics(name)["num_unindexed_rows"] == 0 and len(ds.describe_indices()[0].segments) == 3
    assert wrong_answers(ds, ["INVERTED"]) == [] and indices_used(ds, ["INVERTED"]) == {"INVERTED": True}


def test_spark_optimize_indices_failed_task_drops_its_index_and_leaves_no_files(spark, grown, tmp_path):
    uri = copy(grown[True], str(tmp_path / "o"))
    dirs, version = index_dirs(uri), lance.dataset(uri).version
    r = jobs.optimize_indices(spark, uri, num_indices_to_merge=0, rows_per_task=300, inject_task_failures=[1])
    # tasks run index by index, 3 per index: task 1 is the first index's second segment
    assert len(r.failed_tasks) == 1 and "injected failure in index task 1" in r.failed_tasks[0]
    assert r.tasks_succeeded == 9 and r.segments_added == 9 and len(r.indices) == 3
    ds = lance.dataset(uri)
    assert ds.version == version + 1
    left_out = (set(NAMES) - set(r.indices)).pop()
    assert f"({left_out}, fragments [" in r.failed_tasks[0]
    assert unindexed(ds) == {n: 900 if n == left_out else 0 for n in NAMES}
    # only the committed segments were added: the failed index's two built siblings are gone
    added = {s.uuid for d in ds.describe_indices() for s in d.segments} - dirs
    assert index_dirs(uri) - dirs == added and len(added) == 9
    assert wrong_answers(ds, BUILT) == []


def test_spark_optimize_indices_every_task_failing_commits_nothing(spark, grown, tmp_path):
    uri = copy(grown[False], str(tmp_path / "o"))
    dirs, version = index_dirs(uri), lance.dataset(uri).version
    r = jobs.optimize_indices(spark, uri, num_indices_to_merge=1, inject_task_failures=range(4))
    assert r.version is None and len(r.failed_tasks) == 4 and r.tasks_succeeded == 0
    assert lance.dataset(uri).version == version and index_dirs(uri) == dirs


def test_spark_optimize_indices_through_a_manifest_store(spark, grown, tmp_path):
    uri, db = copy(grown[True], str(tmp_path / "o")), str(tmp_path / "manifests.db")
    lance.dataset(uri).delete("id % 5 = 0")  # (a commit before the store: the store starts at a later version)
    r = jobs.optimize_indices(spark, uri, num_indices_to_merge=0, rows_per_task=None, manifest_store=db)
    assert r.segments_added == 4 and r.failed_tasks == ()
    assert os.path.exists(os.path.join(uri, "_manifest_store.json"))
    latest = lf.SQLiteManifestStore(db).latest(base_uri_of(ObjectStore(uri)))
    assert latest is not None and latest.version == r.version == lance.dataset(uri).version
    ds = lance.dataset(uri)
    assert unindexed(ds) == dict.fromkeys(NAMES, 0) and wrong_answers(ds, BUILT) == []
    with pytest.raises(ManifestStoreRequiredError):  # not told about the store: refused before any task
        jobs.optimize_indices(spark, uri)


@pytest.mark.parametrize("stable", [False, True], ids=["addresses", "stable_row_ids"])
def test_spark_create_scalar_index_as_pylance(spark, grown, tmp_path, stable):
    ours, theirs = copy(grown[stable], str(tmp_path / "o")), copy(grown[stable], str(tmp_path / "t"))
    r = jobs.create_scalar_index(spark, ours, "val", "BTREE", rows_per_task=1200)
    lance.dataset(theirs).create_scalar_index("val", "BTREE")
    assert r.indices == ("val_idx",) and r.segments_added == r.tasks_planned == 3 and r.rows_indexed == 3300
    a, b = lance.dataset(ours), lance.dataset(theirs)
    assert a.index_statistics("val_idx")["num_unindexed_rows"] == 0
    assert a.index_statistics("val_idx")["num_indexed_rows"] == b.index_statistics("val_idx")["num_indexed_rows"]
    for q in ("val = 300", "val < 10", "val >= 990"):
        assert "@val_idx(" in a.scanner(columns=["id"], filter=q).explain_plan()
        got = sorted(a.to_table(columns=["id"], filter=q)["id"].to_pylist())
        assert got == sorted(b.to_table(columns=["id"], filter=q, use_scalar_index=False)["id"].to_pylist())
    r = jobs.create_scalar_index(spark, ours, "id", "BTREE", name="btree_idx")  # replaces pylance's, one segment
    assert r.segments_removed == 1 and r.segments_added == 1
    assert wrong_answers(lance.dataset(ours), BUILT) == []
    dirs, version = index_dirs(ours), lance.dataset(ours).version
    with pytest.raises(InvalidArgumentError, match="already exists"):
        jobs.create_scalar_index(spark, ours, "id", "BTREE", name="btree_idx", replace=False)
    with pytest.raises(UnsupportedFeatureError, match="BLOOMFILTER"):
        jobs.create_scalar_index(spark, ours, "bid", "BLOOMFILTER")
    assert index_dirs(ours) == dirs and lance.dataset(ours).version == version  # refused before any task


def test_cli_optimize_indices_and_create_scalar_index(spark, grown, tmp_path, capsys):
    uri = copy(grown[False], str(tmp_path / "o"))
    assert main(["optimize_indices", uri, "--num-indices-to-merge", "0", "--index-name", "btree_idx"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["indices"] == ["btree_idx"] and out["segments_added"] == 1 and out["rows_indexed"] == 900
    assert lance.dataset(uri).index_statistics("btree_idx")["num_unindexed_rows"] == 0
    assert main(["create-scalar-index", uri, "--column", "val", "--index-type", "ZONEMAP"]) == 0
    assert json.loads(capsys.readouterr().out)["indices"] == ["val_idx"]
    assert lance.dataset(uri).index_statistics("val_idx")["num_unindexed_rows"] == 0
    assert main(["create-scalar-index", uri, "--column", "bid", "--index-type", "BLOOMFILTER"]) == 2
    assert "BLOOMFILTER" in capsys.readouterr().err


def test_spark_optimize_indices_with_a_txn_app_id_commits_once(spark, grown, tmp_path):
    """A retry of the same write (same txnAppId/txnVersion, e.g. a re-executed Dagster step) returns
    the earlier commit; the segments the retry built are removed by the commit loop."""
    uri = copy(grown[False], str(tmp_path / "o"))
    key = lf.CommitOptions(txn_app_id="dagster/run-1/events/optimize_indices", txn_version=0)
    first = jobs.optimize_indices(spark, uri, num_indices_to_merge=0, rows_per_task=None, index_names=["btree_idx"],
                                  commit=key)
    dirs = index_dirs(uri)
    lance.write_dataset(table(300, start=8000), uri, mode="append")  # something new for the retry to build
    again = jobs.optimize_indices(spark, uri, num_indices_to_merge=0, rows_per_task=None, index_names=["btree_idx"],
                                  commit=key)
    assert again.version == first.version and lance.dataset(uri).version == first.version + 1  # (the append)
    assert index_dirs(uri) == dirs
    assert lance.dataset(uri).index_statistics("btree_idx")["num_unindexed_rows"] == 300
