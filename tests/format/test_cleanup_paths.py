"""The two cleanup paths: routine (mode="lite", derived from metadata, no data listing) removes
what the full path removes when there are no orphans; the orphan sweep removes only files no
version names, older than its grace, with a dry run reporting files and bytes."""

import os
import time
from datetime import timedelta

import lance
import pyarrow.compute as pc
import pytest
from datagen import META, simple_table
from templates import copy_of
from test_cleanup import COLS, build_history, files

import lance_ops.format as lf
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.ops.cleanup import cleanup_old_versions

ZERO = dict(older_than=timedelta(0), retention_duration_check=False)


class NoDataListing(ObjectStore):
    """Fails the run if routine cleanup lists a data directory."""

    def list_files(self, rel: str):
        assert not rel.startswith(("data", "_deletions")) or rel.count("/") >= 1, f"listed {rel}"
        return super().list_files(rel)

    def list_dir(self, rel: str):
        assert rel not in ("data", "_deletions", "_indices"), f"listed {rel}"
        return super().list_dir(rel)


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("paths") / "ds")
    build_history(path)
    lf.dataset(path).create_scalar_index("id", "BTREE")  # 8
    lf.dataset(path).delete(pc.field("id") == 9)  # 9
    return path


@pytest.mark.parametrize("retain", [1, 3])
def test_lite_removes_what_full_removes(template, tmp_path, retain):
    a, b = copy_of(template, tmp_path / "a"), copy_of(template, tmp_path / "b")
    lf.dataset(a).tags.create("keep", 3)
    lf.dataset(b).tags.create("keep", 3)
    full = lf.dataset(a).cleanup_old_versions(**ZERO, retain_versions=retain)
    lite = cleanup_old_versions(NoDataListing(b), **ZERO, retain_versions=retain, mode="lite")
    assert files(a) == files(b)
    assert set(lite.removed_paths) == set(full.removed_paths) and lite.old_versions == full.old_versions > 0
    assert lite.bytes_removed == full.bytes_removed
    assert (lite.data_files_removed, lite.deletion_files_removed, lite.transaction_files_removed,
            lite.index_files_removed) == (full.data_files_removed, full.deletion_files_removed,
                                          full.transaction_files_removed, full.index_files_removed)
    assert lite.protected_by_tags == full.protected_by_tags == ("keep",)
    for v in [x["version"] for x in lance.dataset(b).versions()]:
        assert lance.dataset(b, version=v).to_table(columns=COLS + META).equals(
            lf.dataset(a, version=v).to_table(columns=COLS + META))


def test_lite_keeps_files_a_restore_brought_back(tmp_path):
    """v1 A; v2 overwrite B; v3 restore(1) = A again; v4 append. Removing v1 alone must keep A:
    the boundary (v2) does not name A, the restore in v3's transaction does."""
    uri = str(tmp_path / "ds")
    lf.write_dataset(simple_table(0, 20), uri, enable_stable_row_ids=True, max_rows_per_file=10)
    lf.write_dataset(simple_table(100, 5), uri, mode="overwrite")
    lf.dataset(uri).restore(1)
    lf.write_dataset(simple_table(200, 5), uri, mode="append")
    views = {v: lf.dataset(uri, version=v).to_table() for v in (2, 3, 4)}
    stats = cleanup_old_versions(NoDataListing(uri), **ZERO, retain_versions=3, mode="lite")
    assert stats.old_versions == 1 and stats.data_files_removed == 0 and stats.transaction_files_removed == 1
    for v, t in views.items():
        assert lance.dataset(uri, version=v).to_table().equals(t)


def test_lite_leaves_orphans_to_the_sweep(tmp_path):
    uri = str(tmp_path / "ds")
    lf.write_dataset(simple_table(0, 20), uri, max_rows_per_file=10)
    lf.write_dataset(simple_table(100, 5), uri, mode="overwrite")
    orphan = os.path.join(uri, "data", "orphan.lance")
    with open(orphan, "wb") as f:
        f.write(b"x" * 1000)
    old = time.time() - 8 * 86400
    os.utime(orphan, (old, old))
    young = os.path.join(uri, "data", "young.lance")
    with open(young, "wb") as f:
        f.write(b"y" * 10)
    lite = lf.dataset(uri).cleanup_old_versions(**ZERO, mode="lite")
    assert lite.old_versions == 1 and os.path.exists(orphan)
    before = files(uri)
    dry = lf.dataset(uri).remove_orphan_files(dry_run=True)
    assert files(uri) == before
    assert dry.removed_paths == ("data/orphan.lance",) and dry.bytes_removed == 1000 and dry.data_files_removed == 1
    assert dry.old_versions == 0
    real = lf.dataset(uri).remove_orphan_files()
    assert real.removed_paths == dry.removed_paths and not os.path.exists(orphan) and os.path.exists(young)
    # younger than the grace: only with an explicit short grace, and only without the check
    with pytest.raises(lf.InvalidArgumentError, match="minimum retention"):
        lf.dataset(uri).remove_orphan_files(timedelta(minutes=1))
    assert lf.dataset(uri).remove_orphan_files(timedelta(0), retention_duration_check=False).removed_paths == (
        "data/young.lance",)
    assert lance.dataset(uri).to_table().equals(lf.dataset(uri).to_table())


def test_the_sweep_keeps_every_version_and_what_it_names(tmp_path):
    uri = str(tmp_path / "ds")
    lf.write_dataset(simple_table(0, 20), uri, max_rows_per_file=10)
    lf.write_dataset(simple_table(100, 5), uri, mode="overwrite")
    lf.dataset(uri).delete(pc.field("id") == 101)
    before = files(uri)
    stats = lf.dataset(uri).remove_orphan_files(timedelta(0), retention_duration_check=False)
    assert stats.removed_paths == () and files(uri) == before
    assert [v["version"] for v in lance.dataset(uri).versions()] == [1, 2, 3]


def test_unknown_mode_is_refused(tmp_path):
    uri = str(tmp_path / "ds")
    lf.write_dataset(simple_table(0, 5), uri)
    with pytest.raises(lf.InvalidArgumentError, match="mode must be"):
        lf.dataset(uri).cleanup_old_versions(mode="fast")
