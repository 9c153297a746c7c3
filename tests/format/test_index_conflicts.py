"""A pylance ``create_index`` concurrent with a lance_ops rewrite, delete or update resolves as
pylance's conflict matrix says (upstream ``conflict_resolver.rs``: ``check_rewrite_txn`` and
``check_create_index_txn``), whichever commits first.

- Rewrite vs CreateIndex: retryable when the new index covers a fragment the rewrite replaces
  (the index holds addresses the rewrite moves), compatible otherwise.
- Delete / Update vs CreateIndex: always compatible (the index's row ids stay valid).
"""

import lance
import pyarrow.compute as pc
import pytest
from index_support import build, indexed_rows, wrong_answers

import lance_ops.format as lf
from lance_ops.format.errors import RetryableCommitConflictError
from lance_ops.format.io.object_store import ObjectStore


def _uncommitted_index(uri: str, version: int, fragments: list[int]) -> "lance.dataset.Index":
    return lance.dataset(uri, version=version).create_index_uncommitted(
        "id", "BTREE", name="id_idx", fragment_ids=fragments
    )


def _pylance_commit_index(uri: str, version: int, index: "lance.dataset.Index") -> None:
    op = lance.LanceOperation.CreateIndex(new_indices=[index], removed_indices=[])
    lance.LanceDataset.commit(uri, op, read_version=version)


def _files(uri: str, prefix: str) -> set[str]:
    return {rel for rel, _, _ in ObjectStore(uri).list_files(prefix)}


@pytest.fixture
def plain(tmp_path):
    """pylance dataset, 4 fragments of 600 rows, no index yet, 10% deleted (version 2)."""
    uri = str(tmp_path / "ds")
    build(uri, kinds=["BITMAP"])
    lance.dataset(uri).delete("id % 10 = 0")
    return uri, lance.dataset(uri).version


# ------------------------------------------------------------- pylance first, lance_ops second
def test_lance_ops_rewrite_after_create_index_over_its_fragments_retries(plain):
    uri, v = plain
    planned = lf.dataset(uri, version=v)
    _pylance_commit_index(uri, v, _uncommitted_index(uri, v, [0, 1, 2, 3]))
    indices_before, txns_before = _files(uri, "_indices"), _files(uri, "_transactions")
    with pytest.raises(RetryableCommitConflictError, match="index 'id_idx' was created over fragments"):
        planned.compact_files(target_rows_per_fragment=100_000)
    ds = lance.dataset(uri)
    assert ds.version == v + 2  # the index, and the ReserveFragments of the compaction
    assert _files(uri, "_indices") == indices_before  # the remapped bitmap index was removed
    assert len(_files(uri, "_transactions") - txns_before) == 1  # the ReserveFragments'; the Rewrite's was removed
    assert indexed_rows(ds) == {"bitmap_idx": 2160, "id_idx": 2160}
    assert wrong_answers(ds, ["BTREE", "BITMAP"]) == []


def test_lance_ops_rewrite_after_create_index_elsewhere_lands(tmp_path):
    """The new index covers fragment 0 only; the compaction rewrites fragments 2 and 3."""
    uri = str(tmp_path / "ds")
    build(uri, kinds=[], rows=2400, rows_per_file=1000)  # fragments of 1000, 1000, 400 rows
    lance.write_dataset(lance.dataset(uri).to_table(limit=300), uri, mode="append")
    v = lance.dataset(uri).version
    planned = lf.dataset(uri, version=v)
    _pylance_commit_index(uri, v, _uncommitted_index(uri, v, [0]))
    m = planned.compact_files(target_rows_per_fragment=1000)
    assert m.fragments_removed == 2 and m.indices_remapped == ()
    ds = lance.dataset(uri)
    assert indexed_rows(ds) == {"id_idx": 1000}
    assert sorted(ds.describe_indices()[0].segments[0].fragment_ids) == [0]
    assert wrong_answers(ds, ["BTREE"]) == []


@pytest.mark.parametrize("op", ["delete", "update"])
def test_lance_ops_delete_or_update_after_create_index_lands(plain, op):
    uri, v = plain
    planned = lf.dataset(uri, version=v)
    _pylance_commit_index(uri, v, _uncommitted_index(uri, v, [0, 1, 2, 3]))
    if op == "delete":
        planned.delete(pc.field("id") < 100)
    else:
        planned.update({"note": "'x'"}, where=pc.field("id") < 100)
    ds = lance.dataset(uri)
    assert ds.version == v + 2
    assert {d.name for d in ds.describe_indices()} == {"bitmap_idx", "id_idx"}
    assert indexed_rows(ds)["id_idx"] == ds.count_rows() - (90 if op == "update" else 0)
    assert wrong_answers(ds, ["BTREE", "BITMAP"]) == []


# ------------------------------------------------------------- lance_ops first, pylance second
def test_pylance_create_index_after_lance_ops_rewrite_is_preempted(plain):
    uri, v = plain
    index = _uncommitted_index(uri, v, [0, 1, 2, 3])
    lf.dataset(uri).compact_files(target_rows_per_fragment=100_000)
    with pytest.raises(Exception, match="preempted by concurrent transaction Rewrite"):
        _pylance_commit_index(uri, v, index)
    ds = lance.dataset(uri)
    assert [d.name for d in ds.describe_indices()] == ["bitmap_idx"]
    assert wrong_answers(ds, ["BITMAP"]) == []


@pytest.mark.parametrize("op", ["delete", "update"])
def test_pylance_create_index_after_lance_ops_delete_or_update_lands(plain, op):
    uri, v = plain
    index = _uncommitted_index(uri, v, [0, 1, 2, 3])
    if op == "delete":
        lf.dataset(uri).delete(pc.field("id") < 100)
    else:
        lf.dataset(uri).update({"note": "'x'"}, where=pc.field("id") < 100)
    _pylance_commit_index(uri, v, index)
    ds = lance.dataset(uri)
    assert {d.name for d in ds.describe_indices()} == {"bitmap_idx", "id_idx"}
    assert wrong_answers(ds, ["BTREE", "BITMAP"]) == []
