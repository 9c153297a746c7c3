"""A commit that never lands leaves none of its files behind (pylance leaves them: lance#7207).

Each mutation plans on a version, loses its commit to a concurrent writer (a second handle
commits a conflicting transaction in between), and afterwards ``data/``, ``_deletions/``,
``_indices/`` and ``_transactions/`` hold nothing that no version references.  A commit whose
outcome is unknown removes nothing; an idempotent retry removes its duplicate's files.
"""

import lance
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from datagen import simple_table
from index_support import build

import lance_ops.format as lf
from lance_ops.format.errors import (
    CommitConflictError,
    CommitFailedError,
    CommitStateUnknownError,
    ConditionalPutError,
    IncompatibleTransactionError,
    RetryableCommitConflictError,
)
from lance_ops.format.testing.files import listing, unreferenced_files
from lance_ops.format.txn.manifest_store import SQLiteManifestStore

DIRS = ("data", "_deletions", "_indices", "_transactions")


@pytest.fixture
def uri(tmp_path):
    """4 fragments of 10 rows (ids 0..39), no stable row ids, version 1; 2 rows deleted in
    fragment 1 (version 2)."""
    path = str(tmp_path / "ds")
    lf.write_dataset(simple_table(0, 40), path, max_rows_per_file=10)
    lf.dataset(path).delete(pc.field("id").isin([10, 11]))
    return path


def snapshot(uri: str) -> dict[str, set[str]]:
    return {d: listing(uri, d) for d in DIRS}


def assert_left_nothing(uri: str, before: dict[str, set[str]], version: int) -> None:
    assert lf.dataset(uri).version == version
    assert unreferenced_files(uri) == []
    after = snapshot(uri)
    for d in ("data", "_deletions", "_indices"):
        assert after[d] == before[d], d  # the loser's files are all gone, nothing else was touched


def test_delete_losing_to_a_delete_of_the_same_row(uri):
    stale = lf.dataset(uri)
    lf.dataset(uri).delete(pc.field("id") == 12)
    before = snapshot(uri)
    with pytest.raises(RetryableCommitConflictError, match="changed by both"):
        # writes deletion files for fragments 1 and 2; no retry from the latest version
        stale.delete(pc.field("id").isin([12, 25]), conflict_retries=0)
    assert_left_nothing(uri, before, 3)
    assert stale.version == 2  # a failed commit leaves the handle where it was
    assert lf.dataset(uri).count_rows() == 37


def test_update_losing_to_a_delete_of_the_same_row(uri):
    stale = lf.dataset(uri)
    lf.dataset(uri).delete(pc.field("id") == 12)
    before = snapshot(uri)
    with pytest.raises(RetryableCommitConflictError):
        stale.update({"val": "'U'"}, pc.field("id").isin([12, 33]), conflict_retries=0)  # a data file + 2 deletion files
    assert_left_nothing(uri, before, 3)
    assert stale.version == 2
    assert "U" not in lf.dataset(uri).to_table(columns=["val"]).column("val").to_pylist()


def test_compaction_losing_to_a_delete_of_a_rewritten_fragment(uri):
    stale = lf.dataset(uri)
    lf.dataset(uri).delete(pc.field("id") == 3)
    before = snapshot(uri)
    with pytest.raises(RetryableCommitConflictError, match="compacted|rewritten|stable row ids"):
        stale.compact_files(target_rows_per_fragment=1000)
    # the ReserveFragments landed (version 4); the Rewrite's data files and .txn are gone
    assert_left_nothing(uri, before, 4)
    assert lf.dataset(uri).count_rows() == 37


def test_materialize_deletions_losing_to_a_delete_in_the_same_fragment(uri):
    stale = lf.dataset(uri)
    lf.dataset(uri).delete(pc.field("id") == 15)
    before = snapshot(uri)
    with pytest.raises(RetryableCommitConflictError):
        stale.materialize_deletions(threshold=0.1)
    assert_left_nothing(uri, before, 4)
    assert lf.dataset(uri).count_rows() == 37


def test_write_dataset_append_losing_to_an_overwrite(uri):
    def data():
        yield simple_table(100, 10).to_batches()[0]
        yield simple_table(110, 10).to_batches()[0]
        # after the files are written and before the commit: another writer replaces the dataset
        lf.write_dataset(simple_table(500, 5), uri, mode="overwrite")

    before_overwrite = snapshot(uri)
    with pytest.raises(IncompatibleTransactionError, match="replaced"):
        lf.write_dataset(data(), uri, mode="append", max_rows_per_file=10,
                         schema=simple_table(0, 1).schema)
    assert unreferenced_files(uri) == []
    new_data = listing(uri, "data") - before_overwrite["data"]
    assert len(new_data) == 1  # the overwrite's file only; the append's two are gone
    assert lf.dataset(uri).version == 3 and lf.dataset(uri).count_rows() == 5


class FaultyManifestStore(SQLiteManifestStore):
    """Fault injection: the first manifest create fails in transport, settled as ``applied``."""

    def __init__(self, path: str, applied: bool | None) -> None:
        super().__init__(path)
        self.applied = applied
        self.failed = False

    def put_if_not_exists(self, base_uri, version, path, size, e_tag=None):  # type: ignore[no-untyped-def]
        if not self.failed:
            self.failed = True
            raise ConditionalPutError(f"{path}: injected transport failure", path=path, applied=self.applied)
        return super().put_if_not_exists(base_uri, version, path, size, e_tag)


def test_write_dataset_overwrite_whose_create_failed(uri, tmp_path):
    before = snapshot(uri)
    with pytest.raises(CommitFailedError):
        lf.write_dataset(simple_table(500, 30), uri, mode="overwrite", max_rows_per_file=10,
                         manifest_store=FaultyManifestStore(str(tmp_path / "kv.db"), applied=False))
    assert_left_nothing(uri, before, 2)


def test_commit_state_unknown_removes_nothing(uri, tmp_path):
    before = snapshot(uri)
    with pytest.raises(CommitStateUnknownError):
        lf.write_dataset(simple_table(500, 30), uri, mode="overwrite", max_rows_per_file=10,
                         manifest_store=FaultyManifestStore(str(tmp_path / "kv.db"), applied=None))
    after = snapshot(uri)
    # the three data files and the .txn stay: the version may exist and reference them
    assert len(after["data"] - before["data"]) == 3
    assert len(after["_transactions"] - before["_transactions"]) == 1
    assert len(unreferenced_files(uri)) == 4


def test_commit_of_written_fragments_losing_to_an_overwrite(uri):
    frags = lf.write_fragments(simple_table(100, 25), uri, max_rows_per_file=10)
    assert len(frags) == 3
    lf.write_dataset(simple_table(500, 5), uri, mode="overwrite")
    with pytest.raises(IncompatibleTransactionError):
        lf.commit(uri, lf.Append(frags), read_version=2)
    assert unreferenced_files(uri) == []
    assert lf.dataset(uri).count_rows() == 5


def test_idempotent_retry_removes_the_duplicates_files(uri):
    props = {"txnAppId": "job-7", "txnVersion": "1"}
    first = lf.write_dataset(simple_table(100, 20), uri, mode="append", max_rows_per_file=10,
                             transaction_properties=props)
    before = snapshot(uri)
    again = lf.write_dataset(simple_table(100, 20), uri, mode="append", max_rows_per_file=10,
                             transaction_properties=props)
    assert again.version == first.version == 3
    assert_left_nothing(uri, before, 3)
    assert lf.dataset(uri).count_rows() == 58


def test_idempotent_retry_of_the_same_fragments_keeps_them(uri):
    """A retry committing the very files of the first attempt must not remove them."""
    props = {"txnAppId": "job-8", "txnVersion": "1"}
    frags = lf.write_fragments(simple_table(100, 20), uri, max_rows_per_file=10)
    lf.commit(uri, lf.Append(frags), read_version=2, transaction_properties=props)
    lf.commit(uri, lf.Append(frags), read_version=2, transaction_properties=props)
    assert unreferenced_files(uri) == []
    assert lf.dataset(uri).to_table(filter=pc.field("id") >= 100).num_rows == 20


def test_rebased_delete_leaves_no_superseded_deletion_file(uri):
    """Delete vs delete of other rows of one fragment rebases: the merged deletion file is
    committed; the one the planner wrote first is removed."""
    stale = lf.dataset(uri)
    lf.dataset(uri).delete(pc.field("id") == 12)
    assert stale.delete(pc.field("id") == 13) == {"num_deleted_rows": 1}
    assert stale.version == 4
    assert unreferenced_files(uri) == []
    assert sorted(set(range(10, 20)) - set(lf.dataset(uri).to_table(columns=["id"]).column("id").to_pylist())) == [
        10, 11, 12, 13]


def test_max_retries_exhausted_cleans_up(uri):
    """A conflict raised after lost races (the loop gave up) removes the files too."""
    from lance_ops.format.io.object_store import ObjectStore
    from lance_ops.format.txn.commit_loop import commit_transaction
    from lance_ops.format.txn.handlers import ConditionalPutCommitHandler
    from lance_ops.format.txn.transaction import Transaction

    class AlwaysLoses(ConditionalPutCommitHandler):
        def put_manifest_if_absent(self, manifest, txn, scheme):  # type: ignore[no-untyped-def]
            return False

    store = ObjectStore(uri)
    before = snapshot(uri)
    frags = lf.write_fragments(simple_table(100, 20), uri, max_rows_per_file=10)
    with pytest.raises(CommitConflictError, match="gave up"):
        commit_transaction(store, Transaction(2, lf.Append(frags)), handler=AlwaysLoses(store), max_retries=2)
    assert_left_nothing(uri, before, 2)


def test_compaction_with_a_remapped_index_losing_to_a_delete(tmp_path):
    """pylance builds a BTREE index; the compaction remaps it into a new ``_indices/<uuid>/``,
    loses to a delete of a rewritten fragment, and removes the remapped index with its files."""
    uri = str(tmp_path / "indexed")
    build(uri, kinds=["BTREE"])
    stale = lf.dataset(uri)
    lance.dataset(uri).delete("id = 5")
    v = lance.dataset(uri).version
    before = snapshot(uri)
    with pytest.raises(RetryableCommitConflictError):
        stale.compact_files(target_rows_per_fragment=100_000)
    assert_left_nothing(uri, before, v + 1)  # the ReserveFragments landed
    assert lance.dataset(uri).to_table(filter="id = 7").num_rows == 1


def test_overwrite_with_blob_sidecars_losing_cleans_the_sidecars(tmp_path):
    """Blob v2 payloads above the inline size go to sidecars ``data/<stem>/<id>.blob``: a lost
    commit removes them with their data file."""
    uri = str(tmp_path / "blobs")
    big = b"x" * (200 * 1024)
    from lance.blob import blob_array, blob_field  # pylance builds the blob v2 column type only

    t = pa.table({"id": pa.array([1, 2], pa.int64()), "blob": blob_array([big, big])},
                 schema=pa.schema([pa.field("id", pa.int64()), blob_field("blob")]))
    lance.write_dataset(t, uri, data_storage_version="2.2")
    before = snapshot(uri)
    stored = pa.table({"id": t.column("id"), "blob": t.column("blob").combine_chunks().storage})
    frags = lf.write_fragments(stored, uri)
    assert [rel for rel in listing(uri, "data") if rel.endswith(".blob")]
    lance.write_dataset(t, uri, mode="overwrite", data_storage_version="2.2")
    with pytest.raises(IncompatibleTransactionError):
        lf.commit(uri, lf.Append(frags), read_version=1)
    assert unreferenced_files(uri) == []
    stem = frags[0].files[0].path[: -len(".lance")]
    assert not any(rel.startswith(f"data/{stem}") for rel in listing(uri, "data"))
    assert listing(uri, "data") - before["data"]  # the overwrite's files are there
