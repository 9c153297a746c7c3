"""Compaction streams row ids and versions per output file: tasks whose rows span several output
files keep every row's _rowid and versions, as pylance reads them, and pylance keeps maintaining."""

import shutil

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_ops.format as lf
from lance_ops.format._proto import rowids_pb2
from lance_ops.format.ops.compaction.rewrite import _RowMetaStream
from lance_ops.format.table import rowids

META = ["_rowid", "_row_created_at_version", "_row_last_updated_at_version"]


def snapshot(uri: str) -> list[dict]:
    ds = lance.dataset(uri)
    return ds.to_table(columns=ds.schema.names + META).sort_by("_rowid").to_pylist()


def segments(frag) -> list[str]:
    seq = rowids_pb2.RowIdSequence()
    seq.ParseFromString(frag.row_ids)
    return [s.WhichOneof("segment") for s in seq.segments]


def test_a_task_writing_several_files_keeps_ids_and_versions(uri):
    """pylance builds the history (its default file format 2.2, stable row ids): a 100-row
    fragment loses 25 rows to a delete and 10 to an update (pylance moves updated rows to a new
    fragment, same row ids), then three 10-row fragments are appended.  A target of 30 rows
    rewrites the big fragment alone into two balanced files (33, 32 rows) and the updated fragment
    with the three appended ones into one file of 40 (the 10 left after 30 are too few for a bin
    of their own), as pylance 14 plans and cuts them (docs/FORMAT.md §16)."""
    n = 100
    lance.write_dataset(pa.table({"id": np.arange(n), "s": [f"r{i}" for i in range(n)]}), uri,
                        enable_stable_row_ids=True)
    ds = lance.dataset(uri)
    ds.delete("id % 4 = 1")
    ds.update({"s": "'updated'"}, where="id >= 40 AND id < 60 AND id % 2 = 0")
    for i in range(3):
        lance.write_dataset(pa.table({"id": np.arange(1000 + 10 * i, 1010 + 10 * i), "s": ["small"] * 10}), uri,
                            mode="append")
    before = snapshot(uri)
    assert {r["_row_last_updated_at_version"] for r in before} == {1, 3, 4, 5, 6}

    metrics = lf.dataset(uri).compact_files(target_rows_per_fragment=30)
    assert (metrics.rows_rewritten, metrics.fragments_removed, metrics.fragments_added) == (105, 5, 3)  # 65 + 40
    assert snapshot(uri) == before  # pylance: same rows, ids and both versions
    frags = lf.dataset(uri).manifest.fragments
    assert [f.physical_rows for f in frags] == [33, 32, 40]
    binned = frags[2]  # the updated rows' fragment + three appended ones: one segment per old fragment
    assert len(segments(binned)) == 4 and segments(binned)[1:] == ["range", "range", "range"]
    # pylance keeps maintaining the result
    lance.dataset(uri).delete("id = 1002")
    lance.dataset(uri).optimize.compact_files(target_rows_per_fragment=1000)
    after = lance.dataset(uri).to_table(columns=["id"] + META).sort_by("_rowid").to_pylist()
    assert after == [{k: r[k] for k in ["id"] + META} for r in before if r["id"] != 1002]


def test_row_meta_stream_cuts_at_file_boundaries_like_the_writer():
    """Batches of three old fragments (ids consecutive, with a gap, consecutive) through files of 4 rows."""
    stream = _RowMetaStream(4)
    stream.add(0, np.array([0, 1, 2], np.uint64), np.full(3, 1, np.uint64), np.full(3, 1, np.uint64))
    stream.add(0, np.array([3], np.uint64), np.full(1, 1, np.uint64), np.full(1, 2, np.uint64))
    stream.add(1, np.array([10, 12, 13], np.uint64), np.full(3, 2, np.uint64), np.array([2, 3, 3], np.uint64))
    stream.add(2, np.array([20, 21], np.uint64), np.full(2, 5, np.uint64), np.full(2, 5, np.uint64))
    files = stream.finish()
    assert len(files) == 3  # 4 + 4 + 1 rows
    want_ids = [[0, 1, 2, 3], [10, 12, 13, 20], [21]]
    want_c = [[1, 1, 1, 1], [2, 2, 2, 5], [5]]
    want_u = [[1, 1, 1, 2], [2, 3, 3, 5], [5]]
    for (ids, c, u), wi, wc, wu in zip(files, want_ids, want_c, want_u, strict=True):
        assert rowids.decode_row_ids(ids).tolist() == wi
        assert rowids.decode_versions(c).tolist() == wc
        assert rowids.decode_versions(u).tolist() == wu
    seq = rowids_pb2.RowIdSequence()
    seq.ParseFromString(files[0][0])
    assert [s.WhichOneof("segment") for s in seq.segments] == ["range"]  # 0..3 across two batches: one range
    seq.ParseFromString(files[1][0])
    assert [s.WhichOneof("segment") for s in seq.segments] == ["range_with_bitmap", "range"]  # as encode_segment picks
    assert pc.sum(pa.array([len(rowids.decode_row_ids(f[0])) for f in files])).as_py() == 9


PLANS = {  # (fragment sizes, delete predicate, compact_files options)
    "two_small_make_one_bin": ([3, 2], None, {"target_rows_per_fragment": 4}),  # lance_ops left both
    "bins_reach_the_target": ([3, 3, 3, 3], None, {"target_rows_per_fragment": 4}),
    "the_rest_joins_the_last_bin": ([10] * 7, None, {"target_rows_per_fragment": 30}),
    "balanced_files": ([100], "id % 4 = 1", {"target_rows_per_fragment": 30}),
    "physical_rows_decide_smallness": ([3, 3, 3], "id = 0 OR id = 4", {"target_rows_per_fragment": 3}),
    "threshold_is_strict": ([10, 10], "id = 0", {"target_rows_per_fragment": 5,
                                                 "materialize_deletions_threshold": 0.1}),
}


@pytest.mark.parametrize("case", list(PLANS))
@pytest.mark.parametrize("stable", [True, False], ids=["stable_ids", "address_ids"])
def test_compaction_plans_and_cuts_files_as_pylance(tmp_path, case, stable):
    """Found by tests/interop/test_model_based.py: bins (manifest order, physical rows, deletions
    strictly above the threshold, split for size) and balanced output files as pylance 14's
    (docs/FORMAT.md §16), on copies of one dataset pylance wrote."""
    sizes, predicate, options = PLANS[case]
    theirs, ours = str(tmp_path / "theirs"), str(tmp_path / "ours")
    start = 0
    for n in sizes:
        lance.write_dataset(pa.table({"id": pa.array(np.arange(start, start + n), pa.int64())}), theirs,
                            mode="append" if start else "create", enable_stable_row_ids=stable)
        start += n
    if predicate:
        lance.dataset(theirs).delete(predicate)
    shutil.copytree(theirs, ours)
    expected = lance.dataset(theirs).optimize.compact_files(**options)
    got = lf.dataset(ours).optimize.compact_files(**options)
    assert (got.fragments_removed, got.fragments_added) == (expected.fragments_removed, expected.fragments_added)
    for reader in (lance, lf):
        assert [f.count_rows() for f in reader.dataset(ours).get_fragments()] == \
            [f.count_rows() for f in lance.dataset(theirs).get_fragments()]
    assert lance.dataset(ours).version == lance.dataset(theirs).version
    cols = ["id"] + (META if stable else [])
    assert lance.dataset(ours).to_table(columns=cols).sort_by("id") == \
        lance.dataset(theirs).to_table(columns=cols).sort_by("id")
