"""cleanup_old_versions: what goes, what stays, and pylance as the oracle.

pylance's own ``cleanup_old_versions`` on a byte-identical copy of the dataset is the oracle:
both must leave exactly the same files behind.
"""

import os
import shutil
import time
import uuid
from datetime import timedelta

import lance
import numpy as np
import pyarrow.compute as pc
import pytest
from datagen import META, simple_table
from templates import template_copy

import lance_ops.format as lf
from lance_ops.format.errors import TagError
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.table.deletion import write_deletion_file

COLS = ["id", "val", "score"]


def files(root: str) -> set[str]:
    out = set()
    for d, _dirs, names in os.walk(root):
        for n in names:
            out.add(os.path.relpath(os.path.join(d, n), root))
    return out


def age(root: str, rel: str, days: float) -> None:
    t = time.time() - days * 86400
    os.utime(os.path.join(root, rel), (t, t))


def referenced(uri: str, version: int) -> set[str]:
    """Files a version needs, from its manifest."""
    m = lf.dataset(uri, version=version).manifest
    out = {f"data/{df.path}" for f in m.fragments for df in f.files}
    for f in m.fragments:
        if f.deletion_file is not None:
            d = f.deletion_file
            out.add(f"_deletions/{f.id}-{d.read_version}-{d.id}.{d.extension}")
    out.add(f"_transactions/{m.transaction_file}")
    return out


def snapshot(uri: str, versions) -> dict[int, object]:
    return {v: lance.dataset(uri, version=v).to_table(columns=COLS + META) for v in versions}


def build_history(uri: str) -> None:
    """Versions 1-7: write, delete (.arrow), update, compaction (2 versions), delete, append."""
    lf.write_dataset(simple_table(0, 40), uri, enable_stable_row_ids=True, max_rows_per_file=10)  # 1
    lf.dataset(uri).delete(pc.field("id") < 3)  # 2
    lf.dataset(uri).update({"val": "'u'"}, where=pc.field("id") == 15)  # 3
    lf.dataset(uri).compact_files(target_rows_per_fragment=1000)  # 4, 5
    lf.dataset(uri).delete(pc.field("id") == 7)  # 6
    lf.write_dataset(simple_table(40, 5), uri, mode="append")  # 7


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("cleanup") / "ds")
    build_history(path)
    return path


ds_uri = template_copy("ds_uri")


def test_removes_exactly_what_only_old_versions_use(ds_uri):
    uri = ds_uri
    lf.dataset(uri).tags.create("keep", 2)
    before = files(uri)
    views = snapshot(uri, [2, 6, 7])
    needed = referenced(uri, 2) | referenced(uri, 6) | referenced(uri, 7)
    only_old = set().union(*(referenced(uri, v) for v in (1, 3, 4, 5))) - needed
    assert any(p.startswith("data/") for p in only_old) and any(p.startswith("_transactions/") for p in only_old)
    assert any(p.startswith("_deletions/") for p in only_old)

    stats = lf.dataset(uri).cleanup_old_versions(older_than=timedelta(0), retention_duration_check=False, retain_versions=2)
    gone = before - files(uri)
    manifests = {p for p in gone if p.startswith("_versions/")}
    assert len(manifests) == stats.old_versions == 4  # 1, 3, 4, 5
    assert gone - manifests == only_old
    assert set(stats.removed_paths) == gone
    assert stats.data_files_removed == sum(p.startswith("data/") for p in only_old)
    assert stats.deletion_files_removed == sum(p.startswith("_deletions/") for p in only_old)
    assert stats.transaction_files_removed == sum(p.startswith("_transactions/") for p in only_old)
    assert stats.bytes_removed > 0 and stats.failed_deletes == 0
    # every retained (and the tagged) version still reads identically, in both libraries
    assert [v["version"] for v in lance.dataset(uri).versions()] == [2, 6, 7]
    for v, table in views.items():
        assert lance.dataset(uri, version=v).to_table(columns=COLS + META).equals(table)
        assert lf.dataset(uri, version=v).to_table(columns=COLS + META).equals(table)
    with pytest.raises(lf.DatasetNotFoundError):
        lf.dataset(uri, version=3)
    # a later commit still works on the trimmed history, and pylance finds nothing else to remove
    lf.dataset(uri).delete(pc.field("id") == 8)
    again = lance.dataset(uri).cleanup_old_versions(older_than=timedelta(days=1))
    assert again.old_versions == 0 and again.bytes_removed == 0


def test_dry_run_reports_and_removes_nothing(ds_uri):
    uri = ds_uri
    before = files(uri)
    dry = lf.dataset(uri).cleanup_old_versions(older_than=timedelta(0), retention_duration_check=False, dry_run=True)
    assert files(uri) == before
    assert dry.old_versions == 6 and dry.data_files_removed > 0
    real = lf.dataset(uri).cleanup_old_versions(older_than=timedelta(0), retention_duration_check=False)
    assert real.removed_paths == dry.removed_paths
    assert (real.bytes_removed, real.old_versions, real.data_files_removed) == (
        dry.bytes_removed, dry.old_versions, dry.data_files_removed,
    )
    assert before - files(uri) == set(dry.removed_paths)


def test_recent_versions_are_kept(ds_uri):
    before = files(ds_uri)
    stats = lf.dataset(ds_uri).cleanup_old_versions(older_than=timedelta(hours=1))
    assert stats.old_versions == 0 and stats.removed_paths == () and files(ds_uri) == before
    with pytest.raises(ValueError):
        lf.dataset(ds_uri).cleanup_old_versions(retain_versions=0)


def test_tags_protect_their_version(ds_uri):
    uri = ds_uri
    ds = lf.dataset(uri)
    ds.tags.create("first", 1)
    lance.dataset(uri).tags.create("theirs", 3)  # pylance-written tag files are honoured too
    assert set(ds.tags.list()) == {"first", "theirs"}
    with pytest.raises(TagError):
        ds.tags.create("first", 2)
    with pytest.raises(TagError):
        ds.tags.create("nope", 99)
    v1 = snapshot(uri, [1, 3])
    lf.dataset(uri).cleanup_old_versions(older_than=timedelta(0), retention_duration_check=False)
    assert [v["version"] for v in lance.dataset(uri).versions()] == [1, 3, 7]
    for v, t in v1.items():
        assert lance.dataset(uri, version=v).to_table(columns=COLS + META).equals(t)
    ds.tags.delete("first")
    with pytest.raises(TagError):
        ds.tags.delete("first")
    lf.dataset(uri).cleanup_old_versions(older_than=timedelta(0), retention_duration_check=False)
    assert [v["version"] for v in lance.dataset(uri).versions()] == [3, 7]
    assert lance.dataset(uri).tags.list()["theirs"]["version"] == 3


def _orphans(uri: str) -> dict[str, str]:
    """Uncommitted files of every kind, as killed writers leave them."""
    frag = lf.write_fragments(simple_table(100, 3), uri)[0]
    out = {"data": f"data/{frag.files[0].path}"}
    store = ObjectStore(uri)
    df = write_deletion_file(store, 0, 7, np.array([1, 2], dtype=np.uint32))
    out["deletion"] = f"_deletions/0-7-{df.id}.arrow"
    out["txn"] = f"_transactions/7-{uuid.uuid4()}.txn"
    store.put(out["txn"], b"\x08\x07")
    return out


def test_orphans_older_than_the_grace_period_are_removed(ds_uri):
    uri = ds_uri
    old, young = _orphans(uri), _orphans(uri)
    for rel in old.values():
        age(uri, rel, 8)
    for rel in young.values():
        age(uri, rel, 3)
    views = snapshot(uri, range(1, 8))
    stats = lf.dataset(uri).cleanup_old_versions(older_than=timedelta(days=30))
    left = files(uri)
    assert stats.old_versions == 0
    assert not set(old.values()) & left
    assert set(young.values()) <= left
    assert set(stats.removed_paths) == set(old.values())
    # delete_unverified: orphans of any age (no writer may be running)
    stats = lf.dataset(uri).cleanup_old_versions(older_than=timedelta(days=30), delete_unverified=True)
    assert set(stats.removed_paths) == set(young.values())
    for v, t in views.items():
        assert lance.dataset(uri, version=v).to_table(columns=COLS + META).equals(t)


@pytest.mark.parametrize(
    "params",
    [
        dict(older_than=timedelta(0)),
        dict(older_than=timedelta(0), retain_versions=3),
        dict(older_than=timedelta(hours=1)),
        dict(older_than=timedelta(days=2)),
        dict(older_than=timedelta(days=10)),
        dict(older_than=timedelta(0), delete_unverified=True),
    ],
    ids=["all-old", "retain3", "1h", "2d", "10d", "unverified"],
)
def test_same_files_left_as_pylance_cleanup(ds_uri, tmp_path, params):
    uri = ds_uri
    lf.dataset(uri).tags.create("t", 4)
    orphans = [_orphans(uri), _orphans(uri), _orphans(uri)]
    for days, group in zip((8, 3, 0), orphans, strict=True):
        for rel in group.values():
            age(uri, rel, days)
    theirs = str(tmp_path / "theirs")
    shutil.copytree(uri, theirs)
    for days, group in zip((8, 3, 0), orphans, strict=True):
        for rel in group.values():
            age(theirs, rel, days)
    ours = lf.dataset(uri).cleanup_old_versions(**params, retention_duration_check=False)
    oracle = lance.dataset(theirs).cleanup_old_versions(**params, error_if_tagged_old_versions=False)
    assert files(uri) == files(theirs)
    assert ours.old_versions == oracle.old_versions
    assert ours.bytes_removed == oracle.bytes_removed
    for v in lance.dataset(uri).versions():
        version = v["version"]
        a = lance.dataset(uri, version=version).to_table(columns=COLS + META)
        assert a.equals(lance.dataset(theirs, version=version).to_table(columns=COLS + META))


def test_cleanup_of_a_pylance_history(tmp_path):
    uri = str(tmp_path / "ds")
    lance.write_dataset(simple_table(0, 30), uri, data_storage_version="2.0",
                        enable_stable_row_ids=True, max_rows_per_file=10)
    d = lance.dataset(uri)
    d.delete("id < 4")
    d.update({"val": "'x'"}, where="id = 12")
    d.optimize.compact_files(target_rows_per_fragment=100)
    d.delete("id = 20")
    theirs = str(tmp_path / "theirs")
    shutil.copytree(uri, theirs)
    latest = snapshot(uri, [lance.dataset(uri).version])
    ours = lf.dataset(uri).cleanup_old_versions(older_than=timedelta(0), retention_duration_check=False)
    oracle = lance.dataset(theirs).cleanup_old_versions(older_than=timedelta(0))
    assert files(uri) == files(theirs)
    assert (ours.old_versions, ours.bytes_removed) == (oracle.old_versions, oracle.bytes_removed)
    for v, t in latest.items():
        assert lf.dataset(uri, version=v).to_table(columns=COLS + META).equals(t)
        assert lance.dataset(uri, version=v).to_table(columns=COLS + META).equals(t)


def test_commit_temp_files_go_but_staged_manifests_stay(ds_uri):
    """Temp files of killed committers in _versions/ are orphans; an external manifest store's
    staging copy (``<name>.manifest-<uuid>``) may be the only copy of a committed version."""
    versions = os.path.join(ds_uri, "_versions")
    temp = "18446744073709551607.manifest#0123abcd.tmp"
    staged = "18446744073709551607.manifest-8d3c1f6e-0000-4000-8000-000000000000"
    hint_temp = "latest_version_hint.json.tmp-0123abcd"
    for name in (temp, staged, hint_temp):
        open(os.path.join(versions, name), "wb").write(b"partial")
    stats = lf.dataset(ds_uri).cleanup_old_versions(older_than=timedelta(days=1))
    assert stats.temporary_files_removed == 0  # young: a committer may be between write and link
    stats = lf.dataset(ds_uri).cleanup_old_versions(older_than=timedelta(days=1), delete_unverified=True)
    assert stats.temporary_files_removed == 2
    left = set(os.listdir(versions))
    assert staged in left and temp not in left and hint_temp not in left
    assert "latest_version_hint.json" in left
    assert lf.dataset(ds_uri).version == lance.dataset(ds_uri).version == 7
