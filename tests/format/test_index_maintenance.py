"""Updates, deletes and the compaction planner keep pylance's indices as pylance does.

pylance builds the datasets and their indices (tests only); lance_ops changes them; pylance
reads the result: coverage (``describe_indices``), plans and answers against brute force.
"""

import os

import lance
import pyarrow.compute as pc
import pytest
from index_support import build, copy, index_name, indexed_rows, indices_used, wrong_answers

import lance_ops.format as lf
from lance_ops.format.errors import CorruptFileError

KINDS = ["BTREE", "BITMAP", "ZONEMAP", "BLOOMFILTER", "INVERTED", "IVF_PQ", "IVF_HNSW_SQ", "LABEL_LIST", "NGRAM"]


@pytest.fixture(scope="module")
def templates(tmp_path_factory):
    root = tmp_path_factory.mktemp("tpl")
    return {stable: build(str(root / f"s{int(stable)}"), stable=stable, kinds=KINDS).uri for stable in (False, True)}


@pytest.mark.parametrize("stable", [False, True], ids=["addresses", "stable_row_ids"])
def test_update_keeps_coverage_as_pylance(templates, tmp_path, stable):
    """pylance 14.0.2 extends an index over the rows an update moved (stable row ids) unless the
    index is on a SET column or is a BTREE, ZONEMAP or BLOOMFILTER; without stable row ids the
    moved rows are unindexed.  lance_ops' update does exactly the same."""
    ours, theirs = copy(templates[stable], str(tmp_path / "o")), copy(templates[stable], str(tmp_path / "t"))
    lf.dataset(ours).update({"note": "'x'"}, where=pc.field("id") < 700)
    lance.dataset(theirs).update({"note": "'x'"}, where="id < 700")
    lf.dataset(ours).update({"cat": "'blue'"}, where=pc.field("id") >= 2300)  # an indexed column
    lance.dataset(theirs).update({"cat": "'blue'"}, where="id >= 2300")
    a, b = lance.dataset(ours), lance.dataset(theirs)
    assert indexed_rows(a) == indexed_rows(b)
    if stable:
        moved = {d.name: sorted(d.segments[0].fragment_ids) for d in a.describe_indices()}
        assert moved["inverted_idx"] == [0, 1, 2, 3, 4, 5]  # both moves: doc untouched
        assert moved["bitmap_idx"] == [0, 1, 2, 3, 4]  # not over the rows whose cat was set
        assert moved["btree_idx"] == [0, 1, 2, 3]
        assert indexed_rows(a)["inverted_idx"] == 2400
    else:
        assert indexed_rows(a)["inverted_idx"] == 1600
    assert indices_used(a, KINDS) == indices_used(b, KINDS)
    assert wrong_answers(a, KINDS) == []
    # and a compaction after the update still keeps every index right
    lf.dataset(ours).compact_files(target_rows_per_fragment=100_000)
    lance.dataset(theirs).optimize.compact_files(target_rows_per_fragment=100_000)
    a, b = lance.dataset(ours), lance.dataset(theirs)
    assert indexed_rows(a) == indexed_rows(b)
    assert wrong_answers(a, KINDS) == []


def test_delete_leaves_indices_as_pylance(templates, tmp_path):
    ours, theirs = copy(templates[False], str(tmp_path / "o")), copy(templates[False], str(tmp_path / "t"))
    lf.dataset(ours).delete(pc.field("id") < 600)  # fragment 0 entirely
    lance.dataset(theirs).delete("id < 600")
    a, b = lance.dataset(ours), lance.dataset(theirs)
    assert indexed_rows(a) == indexed_rows(b) == {index_name(k): 1800 for k in KINDS}
    assert {d.name: sorted(d.segments[0].fragment_ids) for d in a.describe_indices()} == {
        index_name(k): [0, 1, 2, 3] for k in KINDS}  # pylance keeps deleted fragments' ids
    assert wrong_answers(a, KINDS) == []


def test_describe_indices_matches_pylance(templates, tmp_path):
    uri = copy(templates[True], str(tmp_path / "d"))
    lance.write_dataset(lance.dataset(uri).to_table(limit=300), uri, mode="append")
    ours = {d.name: d for d in lf.dataset(uri).describe_indices()}
    theirs = {d.name: d for d in lance.dataset(uri).describe_indices()}
    assert sorted(ours) == sorted(theirs) == sorted(index_name(k) for k in KINDS)
    for name, t in theirs.items():
        o = ours[name]
        assert (o.index_type, o.num_rows_indexed, list(o.fields), list(o.field_names), o.total_size_bytes) == (
            t.index_type, t.num_rows_indexed, list(t.fields), list(t.field_names), t.total_size_bytes)
        assert [s.uuid for s in o.segments] == [s.uuid for s in t.segments]
        assert o.num_rows_unindexed == 300 and o.coverage == pytest.approx(2400 / 2700)
        stats = lance.dataset(uri).stats.index_stats(name)
        assert lf.dataset(uri).index_statistics(name) == {k: stats[k] for k in lf.dataset(uri).index_statistics(name)}
    listed = lf.dataset(uri).list_indices()
    assert {(r["name"], r["type"]) for r in listed} == {(d.name, d.index_type) for d in theirs.values()}
    with pytest.raises(KeyError, match='Index "nope" not found'):  # pylance's message
        lf.dataset(uri).index_statistics("nope")


def test_index_lance_ops_cannot_carry_keeps_its_fragments_out(tmp_path):
    """MINHASHLSH (built by pylance 14, not remappable by lance_ops): by default its fragments
    stay out of the plan and the result says why; ``ignore_remap=True`` compacts them and
    reports the dropped coverage, while the other indices are carried."""
    uri = str(tmp_path / "ds")
    build(uri, kinds=["BTREE"])
    lance.dataset(uri).create_scalar_index("text", "MINHASHLSH", name="mh")
    m = lf.dataset(uri).compact_files(target_rows_per_fragment=100_000)
    assert m.version is None and m.fragments_removed == 0
    assert "index 'mh' (MINHASHLSH) is of a kind lance_ops cannot carry" in m.fragments_skipped[0]
    assert "ignore_remap=True" in m.fragments_skipped[-1]
    assert lf.dataset(uri).compact_files(target_rows_per_fragment=100_000, dry_run=True).fragments_skipped
    m = lf.dataset(uri).compact_files(target_rows_per_fragment=100_000, ignore_remap=True)
    assert m.fragments_removed == 4 and m.indices_remapped == ("btree_idx",)
    assert "'mh' (MINHASHLSH)" in m.index_coverage_dropped[0] and "dropped" in m.index_coverage_dropped[0]
    ds = lance.dataset(uri)
    assert indexed_rows(ds) == {"btree_idx": 2400, "mh": 0}
    assert wrong_answers(ds, ["BTREE"]) == []


def test_planner_never_mixes_fragments_of_different_index_sets(tmp_path):
    """Fragments 0-1 are indexed, 2-3 were appended later: two groups, as pylance plans."""
    uri = str(tmp_path / "ds")
    build(uri, kinds=["BTREE", "BITMAP"], rows=1200)
    lance.write_dataset(lance.dataset(uri).to_table(), uri, mode="append", max_rows_per_file=600)
    m = lf.dataset(uri).compact_files(target_rows_per_fragment=100_000)
    ds = lance.dataset(uri)
    assert m.fragments_removed == 4 and m.fragments_added == 2
    assert indexed_rows(ds) == {"btree_idx": 1200, "bitmap_idx": 1200}
    assert wrong_answers(ds, ["BTREE", "BITMAP"]) == []


@pytest.mark.parametrize("pylance_commits_after", [False, True], ids=["bitmaps_as_deferred", "bitmaps_persisted"])
def test_compaction_after_pylance_deferred_remap(tmp_path, pylance_commits_after):
    """After pylance's compact_files(defer_index_remap=True) the index files keep the old
    addresses (pylance maps them through its fragment reuse index at query time; its next
    commit persists the mapped bitmaps, not the files).  lance_ops remaps through the reuse
    index first, so its compaction keeps the indices right in both states."""
    uri = str(tmp_path / "ds")
    # (no HNSW: pylance 14.0.2's own deferred remap of an HNSW index with deleted rows fails
    # its queries -- "HNSW graph has N nodes but its vector storage has M rows")
    kinds = ["BTREE", "BITMAP", "NGRAM", "INVERTED", "IVF_PQ", "LABEL_LIST"]
    build(uri, kinds=kinds)
    lance.dataset(uri).delete("id % 10 = 0")
    lance.dataset(uri).optimize.compact_files(target_rows_per_fragment=1200, defer_index_remap=True)
    if pylance_commits_after:
        lance.dataset(uri).delete("id % 9 = 0")
    else:
        lf.dataset(uri).delete(pc.equal(pc.divide(pc.field("id"), 9) * 9, pc.field("id")))
    assert wrong_answers(lance.dataset(uri), kinds) == []
    m = lf.dataset(uri).materialize_deletions(threshold=0.05)
    assert m.fragments_removed == 1 and m.fragments_skipped == ()
    assert set(m.indices_remapped) == {index_name(k) for k in kinds}
    ds = lance.dataset(uri)
    assert indexed_rows(ds) == {**{index_name(k): ds.count_rows() for k in kinds}, "__lance_frag_reuse": 0}
    assert wrong_answers(ds, kinds) == []
    lance.dataset(uri).optimize.optimize_indices()
    lance.dataset(uri).optimize.compact_files(target_rows_per_fragment=100_000)
    assert wrong_answers(lance.dataset(uri), kinds) == []


def test_compaction_rebased_over_a_concurrent_delete_keeps_indices(tmp_path):
    """Stable row ids: a compaction planned before a pylance delete lands on top of it (the
    deleted rows are found by row id in the new fragments) and the remapped BTREE and the
    moved coverage stay right."""
    uri = str(tmp_path / "ds")
    kinds = ["BTREE", "BITMAP", "IVF_PQ", "INVERTED"]
    build(uri, stable=True, kinds=kinds)
    lance.dataset(uri).delete("id % 10 = 0")
    planned = lf.dataset(uri)
    lance.dataset(uri).delete("id % 7 = 0")  # committed while the compaction runs
    m = planned.compact_files(target_rows_per_fragment=100_000)
    assert m.fragments_removed == 4 and m.indices_remapped == ("btree_idx",)
    ds = lance.dataset(uri)
    assert ds.count_rows() == 2400 - 240 - 343 + 35  # (multiples of 10, of 7, of 70 counted twice)
    assert indexed_rows(ds) == {index_name(k): ds.count_rows() for k in kinds}
    assert wrong_answers(ds, kinds) == []


def test_a_corrupt_index_file_fails_the_compaction_cleanly(tmp_path):
    uri = str(tmp_path / "ds")
    build(uri, kinds=["BITMAP", "IVF_PQ"])
    lance.dataset(uri).delete("id % 10 = 0")
    aux = next(d for d in lance.dataset(uri).describe_indices() if d.name == "ivf_pq_idx").segments[0].uuid
    path = tmp_path / "ds" / "_indices" / aux / "auxiliary.idx"
    data = path.read_bytes()
    path.write_bytes(data[:-100] + b"\0" * 100)  # footer gone
    dirs = set(os.listdir(tmp_path / "ds" / "_indices"))
    frags = [f.fragment_id for f in lance.dataset(uri).get_fragments()]
    with pytest.raises(CorruptFileError, match=f"{aux}/auxiliary.idx"):
        lf.dataset(uri).compact_files(target_rows_per_fragment=100_000)
    assert set(os.listdir(tmp_path / "ds" / "_indices")) == dirs  # the bitmap index's remap was removed
    assert [f.fragment_id for f in lance.dataset(uri).get_fragments()] == frags  # nothing committed
