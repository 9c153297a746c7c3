"""Tables whose fragments mix 2.x file versions (manifest feature flag 256, docs/FORMAT.md §17).

pylance 14's ``compact_files(data_storage_version=..., max_source_fragments=...)`` leaves such a
table: lance_ops reads it exactly, maintains it (append, delete, update, compaction,
optimize_indices) so pylance and lancedb read the result identically, and its own
``compact_files(data_storage_version=...)`` gives the manifest pylance's option gives.
For each file format of the suite (``file_version``) as the table's default; the target is 2.2,
or 2.1 for a 2.2 table.
"""

import os

import lance
import lancedb
import numpy as np
import pyarrow as pa
import pytest
from index_support import copy

import lance_ops.format as lf
from lance_ops.format.errors import UnsupportedFeatureError
from lance_ops.format.table import rowids
from lance_ops.format.table.manifest import FLAG_MIXED_FILE_VERSIONS

ROWS, PER_FILE = 900, 100


def _target(file_version: str) -> str:
    return "2.1" if file_version == "2.2" else "2.2"


def _table(n: int, start: int = 0) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table({"id": ids, "s": pa.array([f"v{i % 37}" for i in ids]), "x": pa.array(ids * 0.5)})


def _write(uri: str, file_version: str, stable: bool) -> None:
    lance.write_dataset(_table(ROWS), uri, max_rows_per_file=PER_FILE, data_storage_version=file_version,
                        enable_stable_row_ids=stable)


def _upgrade_step(ds, target: str, max_source_fragments: int | None = 3):
    return ds.optimize.compact_files(data_storage_version=target, target_rows_per_fragment=300,
                                     max_source_fragments=max_source_fragments)


def _cols(stable: bool) -> list[str]:
    meta = ["_rowid", "_rowaddr"] + (["_row_created_at_version", "_row_last_updated_at_version"] if stable else [])
    return ["id", "s", "x", *meta]


def _pylance_rows(uri: str, stable: bool) -> pa.Table:
    ds = lance.dataset(uri)
    names = ["id", "s", "x", "_rowid", "_rowaddr"]
    if stable:
        names += ["_row_created_at_version", "_row_last_updated_at_version"]
    return ds.to_table(columns=names)


def _file_versions(uri: str) -> list[tuple[int, list[str]]]:
    return [(f.fragment_id, [f"{d.file_major_version}.{d.file_minor_version}" for d in f.metadata.files])
            for f in lance.dataset(uri).get_fragments()]


@pytest.fixture(params=[False, True], ids=["addresses", "stable"])
def stable(request):
    return request.param


@pytest.mark.interop
def test_reads_pylance_mixed_table(tmp_path, file_version, stable):
    uri = str(tmp_path / "ds")
    _write(uri, file_version, stable)
    target = _target(file_version)
    _upgrade_step(lance.dataset(uri), target)
    lance.dataset(uri).delete("id % 11 = 3")
    _upgrade_step(lance.dataset(uri), target)
    versions = {v for _, vs in _file_versions(uri) for v in vs}
    assert versions == {file_version, target}
    ds = lf.dataset(uri)
    assert ds.data_storage_version == file_version  # the default for new files stays
    assert ds._manifest.reader_feature_flags & FLAG_MIXED_FILE_VERSIONS
    assert ds.to_table(columns=_cols(stable)).equals(_pylance_rows(uri, stable))
    assert ds.count_rows("id > 500") == lance.dataset(uri).count_rows("id > 500")


@pytest.mark.interop
def test_maintains_mixed_table(tmp_path, file_version, stable):
    uri = str(tmp_path / "t.lance")
    _write(uri, file_version, stable)
    target = _target(file_version)
    lance.dataset(uri).create_scalar_index("id", "BTREE")
    _upgrade_step(lance.dataset(uri), target)
    ds = lf.dataset(uri)
    ds.insert(_table(150, start=ROWS))
    ds.delete("id % 13 = 5")
    ds.update({"s": "'upd'"}, where="id < 40")
    ds.optimize.compact_files(target_rows_per_fragment=400)  # plain: the dataset's default version
    ds.optimize.optimize_indices()
    assert {v for _, vs in _file_versions(uri) for v in vs} <= {file_version, target}
    ours = lf.dataset(uri).to_table(columns=_cols(stable))
    assert ours.equals(_pylance_rows(uri, stable))
    assert lance.dataset(uri).has_stable_row_ids == stable
    wanted = [3, 5, 18, 401, 777, 960, 1049]
    q = f"id IN ({', '.join(map(str, wanted))})"
    truth = sorted(lance.dataset(uri).to_table(columns=["id"], filter=q, use_scalar_index=False)["id"].to_pylist())
    assert sorted(lance.dataset(uri).to_table(columns=["id"], filter=q)["id"].to_pylist()) == truth
    assert truth == [w for w in wanted if w % 13 != 5]
    db = lancedb.connect(str(tmp_path))
    got = db.open_table("t").search().where(q).select(["id"]).limit(None).to_arrow()
    assert sorted(got["id"].to_pylist()) == truth
    assert db.open_table("t").count_rows() == ours.num_rows
    # pylance keeps maintaining it after lance_ops
    lance.dataset(uri).optimize.compact_files(target_rows_per_fragment=2000)
    assert lf.dataset(uri).to_table(columns=["id", "s", "x"]).equals(
        lance.dataset(uri).to_table(columns=["id", "s", "x"]))


def _manifest_facts(uri: str) -> dict:
    m = lf.dataset(uri)._manifest
    return {
        "version": m.version,
        "default": m.data_storage_version,
        "flags": (m.reader_feature_flags, m.writer_feature_flags),
        "max_fragment_id": m.max_fragment_id,
        "next_row_id": m.next_row_id,
        "fragments": [
            (f.id, f.physical_rows, [d.version for d in f.files], f.deletion_file is not None,
             *((rowids.fragment_row_ids(f, m.source).tolist(),
                rowids.fragment_versions(f, m.source, created=True).tolist(),
                rowids.fragment_versions(f, m.source, created=False).tolist()) if m.uses_stable_row_ids else ()))
            for f in m.fragments
        ],
    }


@pytest.mark.interop
@pytest.mark.parametrize("deleted", [True, False], ids=["deletions", "plain"])
def test_upgrade_matches_pylance(tmp_path, file_version, stable, deleted):
    """The same manifest as pylance's option, run after run: ``max_source_fragments`` takes bins
    in manifest order until one does not fit, as pylance's (the planner's value order is opt-in,
    ``bin_order="value"``), with and without deleted rows."""
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    _write(theirs, file_version, stable)
    if deleted:
        lance.dataset(theirs).delete("id % 17 = 2")
    copy(theirs, ours)
    target = _target(file_version)
    limit = 4 if deleted else 3  # a bin of fragments with deleted rows needs four to reach the target
    for _ in range(8):  # resumable: bounded runs until nothing is left
        m_theirs = _upgrade_step(lance.dataset(theirs), target, limit)
        m_ours = _upgrade_step(lf.dataset(ours), target, limit)
        if m_theirs.fragments_removed == 0:
            assert m_ours.fragments_removed == 0
            break
        assert (m_ours.fragments_removed, m_ours.fragments_added) == (
            m_theirs.fragments_removed, m_theirs.fragments_added)
        assert _manifest_facts(ours) == _manifest_facts(theirs)
        assert lance.dataset(ours).to_table(columns=["id", "s", "x"], with_row_id=True).equals(
            lance.dataset(theirs).to_table(columns=["id", "s", "x"], with_row_id=True))
    assert _file_versions(ours) == _file_versions(theirs)
    assert target in {v for _, vs in _file_versions(ours) for v in vs}
    # "stable" is fixed to its version, as pylance's planner fixes it
    assert lf.dataset(ours).optimize.compact_files(data_storage_version="stable", dry_run=True).dry_run


@pytest.mark.interop
def test_upgrade_refusals(tmp_path, file_version):
    uri = str(tmp_path / "ds")
    _write(uri, file_version, False)
    with pytest.raises(UnsupportedFeatureError, match="2.3"):
        lf.dataset(uri).optimize.compact_files(data_storage_version="2.3")
    with pytest.raises(UnsupportedFeatureError, match="legacy|0.1"):
        lf.dataset(uri).optimize.compact_files(data_storage_version="legacy")
    assert lf.dataset(uri).version == 1
    assert len(os.listdir(os.path.join(uri, "data"))) == ROWS // PER_FILE
