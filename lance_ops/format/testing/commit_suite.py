"""The commit loop, conflicts, cleanup and failed-commit cleanup, written once for every backend.

:class:`CommitConformance` holds the tests; a subclass provides the ``backend`` fixture (a
:class:`~lance_ops.format.testing.backends.Backend`).  ``tests/conformance`` runs it on local
disk, ``memory://``, the GCS emulator over HTTP and local disk with an external manifest store.
"""

from datetime import timedelta

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from lance_ops.format.api.functions import commit
from lance_ops.format.api.lance_dataset import LanceDataset
from lance_ops.format.errors import CommitConflictError, RetryableCommitConflictError
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.ops.write import write_fragments
from lance_ops.format.testing.backends import Backend, simple_table
from lance_ops.format.testing.files import listing, unreferenced_files
from lance_ops.format.txn.operations import Append

DIRS = ("data", "_deletions", "_indices")


def ids(ds: LanceDataset) -> list[int]:
    """The dataset's ids, sorted."""
    return sorted(ds.to_table(columns=["id"]).column("id").to_pylist())


def snapshot(b: Backend) -> dict[str, set[str]]:
    """The files under data/, _deletions/ and _indices/."""
    return {d: listing(b.uri, d, b.storage_options or None) for d in DIRS}


def assert_nothing_left(b: Backend, before: dict[str, set[str]], version: int) -> None:
    """The dataset is at ``version`` and holds exactly the files it held before the failed call."""
    assert b.open().version == version
    assert unreferenced_files(b.uri, b.storage_options or None) == []
    assert snapshot(b) == before


class CommitConformance:
    """The suite; subclass it and define a ``backend`` fixture returning a ``Backend``."""

    @pytest.fixture
    def seeded(self, backend):
        """40 rows (ids 0..39) in 4 fragments at version 1, rows 10 and 11 deleted at version 2."""
        backend.write(simple_table(0, 40), max_rows_per_file=10)
        backend.open().delete(pc.field("id").isin([10, 11]))
        return backend

    def test_rows_round_trip_and_old_versions_stay_readable(self, seeded):
        ds = seeded.open()
        assert ds.version == 2
        assert ids(ds) == [i for i in range(40) if i not in (10, 11)]
        assert ids(ds.checkout_version(1)) == list(range(40))
        assert [v["version"] for v in ds.versions()] == [1, 2]

    def test_racing_appends_both_land(self, seeded):
        a = write_fragments(simple_table(100, 5), seeded.uri, **seeded.kw)
        b = write_fragments(simple_table(200, 5), seeded.uri, **seeded.kw)
        first = commit(seeded.uri, Append(a), read_version=2, **seeded.kw)
        second = commit(seeded.uri, Append(b), read_version=2, **seeded.kw)  # rebased over the first
        assert (first.version, second.version) == (3, 4)
        assert ids(seeded.open())[-10:] == list(range(100, 105)) + list(range(200, 205))
        assert unreferenced_files(seeded.uri, seeded.storage_options or None) == []

    def test_conflicting_delete_is_typed_and_leaves_nothing(self, seeded):
        stale = seeded.open()
        seeded.open().delete(pc.field("id") == 12)
        before = snapshot(seeded)
        with pytest.raises(RetryableCommitConflictError, match="changed by both"):
            stale.delete(pc.field("id").isin([12, 25]), conflict_retries=0)
        assert_nothing_left(seeded, before, 3)
        assert seeded.open().count_rows() == 37 and stale.version == 2
        # with pylance's default retries the delete is planned again on version 3 and lands
        assert stale.delete(pc.field("id").isin([12, 25])) == {"num_deleted_rows": 1}
        assert stale.version == 4 and seeded.open().count_rows() == 36

    def test_deletes_of_different_rows_rebase(self, seeded):
        stale = seeded.open()
        seeded.open().delete(pc.field("id") == 12)
        assert stale.delete(pc.field("id") == 13) == {"num_deleted_rows": 1}  # same fragment, other row: merged
        assert stale.version == 4
        assert 12 not in ids(seeded.open()) and 13 not in ids(seeded.open())
        assert seeded.open().count_rows() == 36
        assert unreferenced_files(seeded.uri, seeded.storage_options or None) == []

    def test_losing_update_leaves_nothing(self, seeded):
        stale = seeded.open()
        seeded.open().delete(pc.field("id") == 12)
        before = snapshot(seeded)
        with pytest.raises(CommitConflictError):
            stale.update({"val": "'U'"}, pc.field("id").isin([12, 33]), conflict_retries=0)
        assert_nothing_left(seeded, before, 3)
        assert "U" not in seeded.open().to_table(columns=["val"]).column("val").to_pylist()

    def test_losing_compaction_leaves_nothing(self, seeded):
        stale = seeded.open()
        seeded.open().delete(pc.field("id") == 3)
        before = snapshot(seeded)
        with pytest.raises(CommitConflictError):
            stale.compact_files(target_rows_per_fragment=1000)
        assert unreferenced_files(seeded.uri, seeded.storage_options or None) == []
        assert snapshot(seeded) == before
        assert seeded.open().count_rows() == 37

    def test_idempotent_append_commits_once(self, seeded):
        props = {"txnAppId": "conformance", "txnVersion": "7"}
        first = seeded.write(simple_table(100, 5), mode="append", transaction_properties=props)
        again = seeded.write(simple_table(100, 5), mode="append", transaction_properties=props)
        assert first.version == again.version == 3
        assert seeded.open().count_rows() == 43
        assert unreferenced_files(seeded.uri, seeded.storage_options or None) == []

    def test_cleanup_keeps_the_latest_and_removes_what_only_old_versions_use(self, seeded):
        seeded.open().compact_files(target_rows_per_fragment=1000)
        latest = seeded.open()
        expected = ids(latest)
        stats = latest.cleanup_old_versions(older_than=timedelta(0), retention_duration_check=False)
        assert stats.old_versions >= 1 and stats.bytes_removed > 0
        after = seeded.open()
        assert [v["version"] for v in after.versions()] == [latest.version]
        assert ids(after) == expected
        assert unreferenced_files(seeded.uri, seeded.storage_options or None) == []
        # the compacted dataset's only fragment and nothing else is left in data/
        assert len(listing(seeded.uri, "data", seeded.storage_options or None)) == len(after.get_fragments())

    def test_put_if_absent_creates_once(self, backend):
        store = ObjectStore(backend.uri, backend.storage_options or None)
        assert store.put_if_absent("probe/x.bin", b"first") is True
        assert store.put_if_absent("probe/x.bin", b"second") is False
        assert store.read("probe/x.bin") == b"first"

    def test_overwrite_replaces_and_keeps_history(self, seeded):
        seeded.write(pa.table({"id": pa.array([7], pa.int64()), "val": ["x"], "score": [1.0]}), mode="overwrite")
        ds = seeded.open()
        assert ds.version == 3 and ids(ds) == [7]
        assert ids(ds.checkout_version(2)) == [i for i in range(40) if i not in (10, 11)]
