"""Compaction and deletion materialisation by lance_ops keep every pylance index working.

For each file format (the interop suite's ``file_version``), with and without stable row ids:
pylance builds a dataset with all 13 index kinds and deletes 10% of the rows; lance_ops and
pylance each run the same logical change on a copy.  Then, read by pylance: indexed rows equal
pylance's, the plans use the indices pylance's plans use, answers equal brute force -- also
after pylance's own append, delete, compact_files, cleanup_old_versions and optimize_indices.
"""

import lance
import pytest
from index_support import (
    ALL_KINDS,
    build,
    copy,
    follow_ups,
    index_name,
    indexed_rows,
    indices_used,
    table,
    wrong_answers,
)

import lance_ops.format as lf
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.table.manifest import NamingScheme
from lance_ops.format.txn.commit_loop import load_transaction

_TEMPLATES: dict[tuple[str, bool], str] = {}


@pytest.fixture
def template(tmp_path_factory, file_version, request):
    """pylance-built dataset with every index kind, 10% deleted (built once per combination)."""
    stable = request.param
    key = (file_version, stable)
    if key not in _TEMPLATES:
        uri = str(tmp_path_factory.mktemp("indexed") / "ds")
        build(uri, stable=stable, file_version=file_version)
        lance.dataset(uri).delete("id % 10 = 0")
        _TEMPLATES[key] = uri
    return _TEMPLATES[key], stable


def _pylance_same_change(uri: str, op: str) -> None:
    ds = lance.dataset(uri)
    if op == "compact":
        ds.optimize.compact_files(target_rows_per_fragment=1200)
    else:  # every fragment with deletions rewritten on its own
        ds.optimize.compact_files(target_rows_per_fragment=1, materialize_deletions_threshold=0.05)


def _lance_ops_change(uri: str, op: str) -> lf.CompactionMetrics:
    ds = lf.dataset(uri)
    if op == "compact":
        return ds.compact_files(target_rows_per_fragment=1200)
    return ds.materialize_deletions(threshold=0.05)


@pytest.mark.parametrize("template", [False, True], indirect=True, ids=["addresses", "stable_row_ids"])
@pytest.mark.parametrize("op", ["compact", "materialize_deletions"])
def test_rewrite_keeps_every_index_as_pylance_does(template, op, tmp_path, file_version):
    src, stable = template
    ours, theirs = copy(src, str(tmp_path / "ours")), copy(src, str(tmp_path / "theirs"))
    metrics = _lance_ops_change(ours, op)
    _pylance_same_change(theirs, op)
    a, b = lance.dataset(ours), lance.dataset(theirs)
    assert metrics.fragments_removed == 4 and metrics.version == a.version

    # coverage: the rows every index covers, as pylance counts them, equal pylance's own result
    assert indexed_rows(a) == indexed_rows(b)
    assert indexed_rows(a)["btree_idx"] == a.count_rows() == 2160
    assert indexed_rows(a)["zonemap_idx"] == 0  # pylance drops zone-map / bloom-filter coverage too
    # the plans use the same indices pylance's plans use (all but zone map and bloom filter)
    used = indices_used(a)
    assert used == indices_used(b)
    assert {k for k, u in used.items() if not u} == {"ZONEMAP", "BLOOMFILTER"}
    assert wrong_answers(a) == [] and wrong_answers(b) == []

    # what the result says: indices remapped (row addresses), coverage dropped and why
    remapped = {index_name(k) for k in ALL_KINDS if k not in ("ZONEMAP", "BLOOMFILTER")}
    assert set(metrics.indices_remapped) == ({"btree_idx"} if stable else remapped)
    dropped = " ".join(metrics.index_coverage_dropped)
    assert "'zonemap_idx' (ZONEMAP)" in dropped and "'bloomfilter_idx' (BLOOMFILTER)" in dropped
    assert metrics.fragments_skipped == ()

    # the Rewrite records each remap (old uuid -> new uuid) as pylance records its own
    rewrite = load_transaction(ObjectStore(ours), a.version, NamingScheme.V2).operation
    new_uuids = {d.name: d.segments[0].uuid for d in a.describe_indices()}
    assert {r.new_id for r in rewrite.rewritten_indices} == {new_uuids[n] for n in metrics.indices_remapped}
    if op == "compact" and file_version != "2.1":  # (2.1 reads and writes like 2.2 here)
        assert [(s, w) for s, w in follow_ups(ours) if w] == []


def test_rewrite_of_unindexed_fragments_leaves_indices_alone(tmp_path, file_version):
    """Fragments appended after the indices were built are compacted apart from indexed ones
    (pylance's planner never mixes them): the indices keep their files and coverage."""
    uri = str(tmp_path / "ds")
    build(uri, kinds=["BTREE", "IVF_PQ"], file_version=file_version, rows=1200, rows_per_file=1200)
    before = {d.name: d.segments[0].uuid for d in lance.dataset(uri).describe_indices()}
    for start in (5000, 6000, 7000):
        lance.write_dataset(table(300, start=start), uri, mode="append")
    m = lf.dataset(uri).compact_files(target_rows_per_fragment=100_000)
    ds = lance.dataset(uri)
    assert m.fragments_removed == 3 and m.indices_remapped == ()
    assert {d.name: d.segments[0].uuid for d in ds.describe_indices()} == before
    assert indexed_rows(ds) == {"btree_idx": 1200, "ivf_pq_idx": 1200}
    assert [f.fragment_id for f in ds.get_fragments()][0] == 0 and len(ds.get_fragments()) == 2
    assert wrong_answers(ds, ["BTREE", "IVF_PQ"]) == []

