"""The Spark jobs keep pylance's indices: compact, materialize_deletions, upsert.

Executors rewrite the fragments; the driver remaps the index files before its one commit (no
stable row ids) or moves the bitmaps (stable row ids), as lance_ops.format does in process.
"""

import lance
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from index_support import build, copy, index_name, indexed_rows, indices_used, table, wrong_answers

from lance_ops import jobs

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
    r = jobs.compact(spark, uri, target_rows_per_fragment=1200, inject_task_failures=[1])
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
