"""``cleanup_old_versions`` removes index directories no retained version references, keeps
every index a retained or tagged version uses, and counts them as pylance does."""

import os
import time
from datetime import timedelta

import lance
import pytest
from index_support import build, copy, wrong_answers

import lance_ops.format as lf

KINDS = ["BTREE", "BITMAP", "INVERTED", "IVF_PQ"]


def _index_dirs(uri: str) -> set[str]:
    root = os.path.join(uri, "_indices")
    return {d for d in os.listdir(root) if os.listdir(os.path.join(root, d))} if os.path.isdir(root) else set()


def _referenced(ds: lance.LanceDataset) -> set[str]:
    return {s.uuid for d in ds.describe_indices() for s in d.segments}


@pytest.fixture
def rebuilt(tmp_path):
    """Indexed dataset whose indices were remapped twice by lance_ops compactions (version 1's
    index directories and the first remaps are now referenced by old versions only)."""
    uri = str(tmp_path / "ds")
    build(uri, kinds=KINDS)
    lance.dataset(uri).delete("id % 10 = 0")
    before_compaction = lance.dataset(uri).version
    lf.dataset(uri).compact_files(target_rows_per_fragment=1200)
    lance.write_dataset(lance.dataset(uri).to_table(limit=600), uri, mode="append")
    lance.dataset(uri).delete("id % 7 = 0")
    lf.dataset(uri).compact_files(target_rows_per_fragment=100_000)
    return uri, before_compaction


def test_cleanup_removes_unreferenced_index_files_like_pylance(rebuilt, tmp_path):
    rebuilt, _ = rebuilt
    theirs = copy(rebuilt, str(tmp_path / "theirs"))
    assert len(_index_dirs(rebuilt)) == 3 * len(KINDS)
    stats = lf.dataset(rebuilt).cleanup_old_versions(older_than=timedelta(0), retention_duration_check=False)
    expected = lance.dataset(theirs).cleanup_old_versions(older_than=timedelta(0))
    assert stats.index_files_removed == expected.index_files_removed > 0
    assert stats.old_versions == expected.old_versions
    assert _index_dirs(rebuilt) == _referenced(lance.dataset(rebuilt)) == _index_dirs(theirs)
    assert not [d for d in os.listdir(os.path.join(rebuilt, "_indices"))
                if not os.listdir(os.path.join(rebuilt, "_indices", d))]  # emptied directories removed
    assert wrong_answers(lance.dataset(rebuilt), KINDS) == []


def test_cleanup_keeps_the_indices_of_tagged_versions(rebuilt):
    rebuilt, v = rebuilt
    lf.dataset(rebuilt).create_tag("before_compaction", v)
    before = _referenced(lance.dataset(rebuilt, version=v))
    assert len(before) == len(KINDS)
    lf.dataset(rebuilt).cleanup_old_versions(older_than=timedelta(0), retention_duration_check=False)
    assert before <= _index_dirs(rebuilt)
    assert wrong_answers(lance.dataset(rebuilt, version=v), KINDS) == []
    lf.dataset(rebuilt).delete_tag("before_compaction")
    stats = lf.dataset(rebuilt).cleanup_old_versions(older_than=timedelta(0), retention_duration_check=False)
    assert stats.index_files_removed > 0 and not before & _index_dirs(rebuilt)


def test_dry_run_and_young_orphans(rebuilt):
    rebuilt, _ = rebuilt
    orphan = os.path.join(rebuilt, "_indices", "00000000-0000-0000-0000-000000000000")
    os.makedirs(orphan)
    with open(os.path.join(orphan, "page_data.lance"), "wb") as f:
        f.write(b"x" * 100)
    dirs = _index_dirs(rebuilt)
    dry = lf.dataset(rebuilt).cleanup_old_versions(older_than=timedelta(0), retention_duration_check=False, dry_run=True)
    assert dry.index_files_removed > 0 and _index_dirs(rebuilt) == dirs
    stats = lf.dataset(rebuilt).cleanup_old_versions(older_than=timedelta(0), retention_duration_check=False)
    assert stats.index_files_removed == dry.index_files_removed
    assert os.path.exists(orphan)  # referenced by no version, but younger than the grace period
    old = time.time() - 8 * 86400
    os.utime(os.path.join(orphan, "page_data.lance"), (old, old))
    stats = lf.dataset(rebuilt).cleanup_old_versions(older_than=timedelta(0), retention_duration_check=False)
    assert stats.index_files_removed == 1 and not os.path.exists(orphan)
    assert wrong_answers(lance.dataset(rebuilt), KINDS) == []


def test_cleanup_keeps_indices_a_branch_inherited(tmp_path):
    """pylance's branch ``dev`` uses the root's BTREE (base_id 0); the root then replaces its
    index: the old one goes from the root's versions but stays for the branch."""
    uri = str(tmp_path / "ds")
    build(uri, kinds=["BTREE"])
    ds = lance.dataset(uri)
    inherited = ds.describe_indices()[0].segments[0].uuid
    ds.create_branch("dev", ds.version)
    ds.create_scalar_index("id", "BTREE", name="btree_idx", replace=True)
    lf.dataset(uri).cleanup_old_versions(older_than=timedelta(0), retention_duration_check=False)
    assert inherited in _index_dirs(uri)
    dev = lance.dataset(uri).checkout_version(("dev", None))
    assert dev.to_table(filter="id = 5").num_rows == 1
    assert dev.describe_indices()[0].segments[0].uuid == inherited
