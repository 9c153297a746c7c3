"""lance_ops' own ``CreateIndex`` commits (create_scalar_index / optimize_indices) against what
lands meanwhile, and the files a failed build or commit leaves (none).

- Append, Delete (and a compaction of fragments the new segment does not cover) landing first:
  the segment is rebased on top; appended fragments stay unindexed.
- A compaction of covered fragments, an update of covered rows, or another CreateIndex of the
  same name landing first: retryable, and the segment's directory is removed.
"""

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_ops.format as lf
from lance_ops.format.errors import RetryableCommitConflictError, UnsupportedFeatureError
from lance_ops.format.io.object_store import ObjectStore


def _rows(start: int, n: int) -> pa.Table:
    ids = np.arange(start, start + n)
    return pa.table({"id": ids, "cat": ids % 5, "tags": pa.array([["a"] if i % 2 else [] for i in ids], pa.list_(pa.string()))})


@pytest.fixture
def uri(tmp_path):
    u = str(tmp_path / "ds")
    lf.write_dataset(_rows(0, 2000), u, max_rows_per_file=500)
    return u


def _index_dirs(uri: str) -> set[str]:
    return {rel.split("/")[1] for rel, _, _ in ObjectStore(uri).list_files("_indices")}


def _built(uri: str, column: str = "id", kind: str = "BTREE", name: str | None = None):
    ds = lf.dataset(uri)
    plan = lf.plan_create_scalar_index(ds.manifest, column, kind, name=name)
    return ds, plan, [lf.execute_index_task(ds._store, ds.manifest, t) for t in plan.tasks]


def test_rebased_over_append_and_delete(uri):
    ds, plan, segs = _built(uri)
    lf.write_dataset(_rows(5000, 300), uri, mode="append")
    lf.dataset(uri).delete(pc.field("id") < 10)
    lf.commit_index_build(ds._store, plan, segs)
    pl = lance.dataset(uri)
    stats = pl.stats.index_stats("id_idx")
    assert (stats["num_indexed_fragments"], stats["num_unindexed_rows"]) == (4, 300)
    for q in ("id = 5", "id = 777", "id >= 5100 AND id < 5110"):
        assert pl.to_table(filter=q).num_rows == pl.to_table(filter=q, use_scalar_index=False).num_rows
    new = lf.dataset(uri)
    new.optimize_indices(num_indices_to_merge=0)
    assert new.index_statistics("id_idx")["num_unindexed_rows"] == 0


@pytest.mark.parametrize("theirs", ["compact", "update", "same_name"])
def test_retryable_and_no_files_left(uri, theirs):
    before = _index_dirs(uri)
    ds, plan, segs = _built(uri)
    assert _index_dirs(uri) == before | {segs[0].uuid}
    if theirs == "compact":
        lf.dataset(uri).compact_files(target_rows_per_fragment=5000)
    elif theirs == "update":
        lf.dataset(uri).update({"cat": 7}, where=pc.field("id") == 3)
    else:
        lf.dataset(uri).create_scalar_index("cat", "BITMAP", name="id_idx")
    landed = lf.dataset(uri).version
    with pytest.raises(RetryableCommitConflictError):
        lf.commit_index_build(ds._store, plan, segs)
    assert segs[0].uuid not in _index_dirs(uri)
    assert lf.dataset(uri).version == landed


def test_failed_build_leaves_nothing(uri):
    before = _index_dirs(uri)
    with pytest.raises(UnsupportedFeatureError, match="'cat'"):
        lf.dataset(uri).create_scalar_index("cat", "LABEL_LIST")
    assert _index_dirs(uri) == before
    assert not lf.dataset(uri).describe_indices()
    ds = lf.dataset(uri)
    ds.create_scalar_index("tags", "LABEL_LIST")
    assert lance.dataset(uri).to_table(filter="array_has_any(tags, ['a'])").num_rows == 1000
    assert [d.name for d in ds.describe_indices()] == ["tags_idx"]


def test_create_index_refusals_leave_nothing(uri):
    v = pa.FixedSizeListArray.from_arrays(pa.array(np.arange(2000 * 4, dtype=np.float32)), 4)
    ds = lf.dataset(uri)
    before = _index_dirs(uri)
    with pytest.raises(UnsupportedFeatureError, match="IVF_HNSW_SQ"):
        ds.create_index("id", "IVF_HNSW_SQ")
    with pytest.raises(UnsupportedFeatureError, match="hamming"):
        ds.create_index("id", "IVF_PQ", metric="hamming")
    with pytest.raises(UnsupportedFeatureError, match="not a vector column"):
        ds.create_index("id", "IVF_FLAT", num_partitions=2)
    assert _index_dirs(uri) == before
    u2 = uri + "_vec"
    lf.write_dataset(pa.table({"id": np.arange(2000), "v": v}), u2)
    with pytest.raises(lf.InvalidArgumentError, match="num_sub_vectors=3"):
        lf.dataset(u2).create_index("v", "IVF_PQ", num_partitions=2, num_sub_vectors=3)
    assert not _index_dirs(u2)
    ds2 = lf.dataset(u2)
    ds2.create_index("v", "IVF_FLAT", num_partitions=2)
    with pytest.raises(lf.InvalidArgumentError, match="v_idx"):
        ds2.create_index("v", "IVF_FLAT", num_partitions=2)
    assert ds2.create_index("v", "IVF_PQ", num_partitions=2, num_sub_vectors=2, replace=True) is ds2  # as pylance
    assert [d.name for d in ds2.describe_indices()] == ["v_idx"]


@pytest.mark.parametrize("kind, column, query", [("BTREE", "id", "id >= 700 AND id < 1300"),
                                                 ("BITMAP", "cat", "cat = 3"),
                                                 ("LABEL_LIST", "tags", "array_has_any(tags, ['a'])")])
def test_tasks_per_fragment_group_commit_as_one_index(uri, kind, column, query):
    """As a Spark job would: one task per ~1,000 rows, executed separately, committed once."""
    ds = lf.dataset(uri)
    plan = lf.plan_create_scalar_index(ds.manifest, column, kind, rows_per_task=1000)
    assert [t.fragment_ids for t in plan.tasks] == [(0, 1), (2, 3)]
    segs = [lf.execute_index_task(ds._store, ds.manifest, t) for t in plan.tasks]
    lf.commit_index_build(ds._store, plan, segs)
    lf.write_dataset(_rows(3000, 1500), uri, mode="append", max_rows_per_file=500)
    plan = lf.plan_optimize_indices(lf.dataset(uri).manifest, num_indices_to_merge=0, rows_per_task=1000)
    assert [t.fragment_ids for t in plan.tasks] == [(4, 5), (6,)]
    m = lf.dataset(uri).manifest
    lf.commit_index_build(ds._store, plan, [lf.execute_index_task(ds._store, m, t) for t in plan.tasks])
    pl = lance.dataset(uri)
    name = f"{column}_idx"
    stats = pl.stats.index_stats(name)
    assert (stats["num_segments"], stats["num_unindexed_rows"]) == (4, 0)
    assert f"@{name}(" in pl.scanner(filter=query).explain_plan()
    assert pl.to_table(filter=query).num_rows == pl.to_table(filter=query, use_scalar_index=False).num_rows > 0
    with pytest.raises(lf.InvalidArgumentError, match="rows_per_task"):
        lf.plan_create_scalar_index(ds.manifest, column, kind, rows_per_task=0)
