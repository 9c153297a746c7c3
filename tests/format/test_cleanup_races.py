"""cleanup_old_versions never fails because others work, and refuses unsafe retention.

Faults are injected through a store wrapper: files and manifests vanish between the listing
and their use (another cleanup, a committer's temp file), and versions appear while cleanup
runs.  Two cleanups racing in threads both succeed and leave what one cleanup would.
"""

import os
import shutil
import threading
from datetime import timedelta

import lance
import pyarrow.compute as pc
import pytest
from datagen import META, simple_table
from templates import template_copy

import lance_ops.format as lf
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.ops.cleanup import MIN_RETENTION, cleanup_old_versions

COLS = ["id", "val", "score"]
NO_CHECK = dict(retention_duration_check=False)


def files(root: str) -> set[str]:
    return {os.path.relpath(os.path.join(d, n), root) for d, _, ns in os.walk(root) for n in ns}


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """Versions 1-6: write, delete, update, append, compaction (2 versions)."""
    uri = str(tmp_path_factory.mktemp("races") / "ds")
    lf.write_dataset(simple_table(0, 40), uri, enable_stable_row_ids=True, max_rows_per_file=10)
    lf.dataset(uri).delete(pc.field("id") < 3)
    lf.dataset(uri).update({"val": "'u'"}, where=pc.field("id") == 15)
    lf.write_dataset(simple_table(40, 5), uri, mode="append")
    lf.dataset(uri).compact_files(target_rows_per_fragment=1000)
    return uri


uri = template_copy("uri")


class VanishingStore(ObjectStore):
    """Deletes chosen paths right after listing them (as a concurrent cleanup would)."""

    def __init__(self, uri: str, vanish) -> None:
        super().__init__(uri)
        self.vanish = vanish
        self.vanished: list[str] = []

    def list_files(self, rel):
        for path, size, mtime in super().list_files(rel):
            if self.vanish(path):
                os.unlink(self.full_path(path))
                self.vanished.append(path)
            yield path, size, mtime

    def list_dir(self, rel):
        names = super().list_dir(rel)
        for name in names:
            if self.vanish(f"{rel}/{name}"):
                os.unlink(self.full_path(f"{rel}/{name}"))
                self.vanished.append(f"{rel}/{name}")
        return names


def test_files_vanishing_between_listing_and_use_are_skipped(uri):
    latest = lf.dataset(uri).version
    expected = lf.dataset(uri).to_table(columns=COLS + META)
    # every old manifest but version 2, every .txn and every data file of old versions vanish
    # as soon as they are listed: what a second cleanup running at the same time does
    keep = {"_versions/" + f"{2**64 - 1 - latest:020d}.manifest", "_versions/" + f"{2**64 - 1 - 2:020d}.manifest"}
    live = {f"data/{df.path}" for f in lf.dataset(uri).manifest.fragments for df in f.files}

    def vanish(path: str) -> bool:
        if path.startswith("_versions/") and path.endswith(".manifest"):
            return path not in keep
        return path.startswith("_transactions/") or (path.startswith("data/") and path not in live)

    store = VanishingStore(uri, vanish)
    stats = cleanup_old_versions(store, older_than=timedelta(0), **NO_CHECK)
    assert store.vanished and stats.failed_deletes == 0
    assert stats.old_versions == 1  # version 2: the only old manifest still there to remove
    assert lf.dataset(uri).to_table(columns=COLS + META).equals(expected)
    assert lance.dataset(uri).to_table(columns=COLS + META).equals(expected)
    assert [v["version"] for v in lance.dataset(uri).versions()] == [latest]


def test_tag_files_and_temps_vanishing_are_skipped(uri):
    ds = lf.dataset(uri)
    ds.tags.create("t", 2)
    open(os.path.join(uri, "_versions", "x.manifest#0123.tmp"), "wb").write(b"partial")
    store = VanishingStore(uri, lambda p: p.startswith("_refs/tags/") or p.endswith(".tmp"))
    stats = cleanup_old_versions(store, older_than=timedelta(0), delete_unverified=True, **NO_CHECK)
    assert sorted(store.vanished) == ["_refs/tags/t.json", "_versions/x.manifest#0123.tmp"]
    assert stats.failed_deletes == 0 and stats.old_versions == 5  # the tag was gone: 2 went too


class GrowingStore(ObjectStore):
    """A commit lands (and another cleanup removes the listed latest) right after the first listing."""

    def __init__(self, uri: str, during) -> None:
        super().__init__(uri)
        self.during = during
        self.listings = 0

    def list_dir(self, rel):
        names = super().list_dir(rel)
        if rel == "_versions":
            self.listings += 1
            if self.listings == 1:
                self.during()
        return names


def test_versions_committed_while_cleanup_runs_keep_their_files(uri):
    """A commit lands after cleanup listed the versions, and another cleanup then removes the
    version this one thought latest: the new version's files must all stay."""
    latest = lf.dataset(uri).version

    def during() -> None:
        lf.dataset(uri).delete(pc.field("id") == 20)  # latest + 1, on the compacted files
        os.unlink(os.path.join(uri, "_versions", f"{2**64 - 1 - latest:020d}.manifest"))

    expected_ids = sorted(set(range(3, 45)) - {20})
    store = GrowingStore(uri, during)
    stats = cleanup_old_versions(store, older_than=timedelta(0), **NO_CHECK)
    assert stats.failed_deletes == 0
    t = lf.dataset(uri).to_table(columns=COLS + META)
    assert sorted(t["id"].to_pylist()) == expected_ids
    assert lance.dataset(uri).to_table(columns=COLS + META).equals(t)


def test_two_cleanups_at_once_both_succeed(uri, tmp_path):
    reference = str(tmp_path / "reference")
    shutil.copytree(uri, reference)
    once = lf.dataset(reference).cleanup_old_versions(older_than=timedelta(0), **NO_CHECK)
    assert once.old_versions == 5
    results, errors = [], []
    barrier = threading.Barrier(3)

    def run() -> None:
        barrier.wait(timeout=10)
        try:
            results.append(cleanup_old_versions(ObjectStore(uri), older_than=timedelta(0), **NO_CHECK))
        except Exception as e:  # noqa: BLE001 - recorded and asserted on below
            errors.append(e)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    assert len(results) == 3 and all(r.failed_deletes == 0 for r in results)
    assert files(uri) == files(reference)
    assert lf.dataset(uri).to_table(columns=COLS + META).equals(lf.dataset(reference).to_table(columns=COLS + META))


@pytest.mark.parametrize("older_than", [timedelta(0), timedelta(minutes=59), timedelta(seconds=1)])
def test_retention_guard_refuses_short_retention(uri, older_than):
    before = files(uri)
    with pytest.raises(lf.InvalidArgumentError, match="retention_duration_check=False") as info:
        lf.dataset(uri).cleanup_old_versions(older_than=older_than)
    assert isinstance(info.value, ValueError) and str(older_than) in str(info.value)
    with pytest.raises(lf.InvalidArgumentError):
        lf.dataset(uri).cleanup_old_versions(older_than=older_than, dry_run=True)
    assert files(uri) == before
    # the explicit override works; the minimum itself is accepted
    assert lf.dataset(uri).cleanup_old_versions(older_than=MIN_RETENTION).old_versions == 0
    removed = lf.dataset(uri).cleanup_old_versions(older_than=older_than, **NO_CHECK).old_versions
    if older_than == timedelta(0):
        assert removed == 5
    elif older_than >= timedelta(minutes=1):
        assert removed == 0
    else:  # seconds: depends on how long ago the template was built
        assert removed in (0, 5)


def test_negative_retention_is_always_refused(uri):
    for check in (True, False):
        with pytest.raises(lf.InvalidArgumentError, match="must not be negative"):
            lf.dataset(uri).cleanup_old_versions(older_than=timedelta(days=-1), retention_duration_check=check)
    with pytest.raises(lf.InvalidArgumentError, match="timedelta"):
        lf.dataset(uri).cleanup_old_versions(older_than=3600)
    with pytest.raises(lf.InvalidArgumentError, match="retain_versions"):
        lf.dataset(uri).cleanup_old_versions(retain_versions=0)


def test_files_younger_than_the_cut_off_are_kept(uri):
    """Files of removed versions go only when older than ``now - older_than`` (as pylance): a
    file modified after the cut-off may belong to a commit in flight."""
    latest = lf.dataset(uri).version
    needed = {f"data/{df.path}" for f in lf.dataset(uri).manifest.fragments for df in f.files}
    old_data = sorted(
        {f"data/{df.path}" for v in range(1, latest) for f in lf.dataset(uri, version=v).manifest.fragments
         for df in f.files} - needed
    )
    assert len(old_data) >= 4
    young, aged = old_data[::2], old_data[1::2]
    future = os.path.getmtime(os.path.join(uri, young[0])) + 600
    for rel in young:
        os.utime(os.path.join(uri, rel), (future, future))
    stats = lf.dataset(uri).cleanup_old_versions(older_than=timedelta(0), **NO_CHECK)
    left = files(uri)
    assert stats.old_versions == latest - 1
    assert set(young) <= left and not set(aged) & left
    assert set(aged) <= set(stats.removed_paths)
    assert lance.dataset(uri).to_table(columns=COLS + META).equals(lf.dataset(uri).to_table(columns=COLS + META))
