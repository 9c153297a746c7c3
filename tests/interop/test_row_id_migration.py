"""Migrating a pylance table from row addresses to stable row ids in place (docs/FORMAT.md §19)."""

import os

import lance
import lancedb
import numpy as np
import pyarrow as pa
import pytest
from index_support import ALL_KINDS, build, index_name, indices_used, wrong_answers

import lance_ops.format as lf
from lance_ops.format.errors import UnsupportedFeatureError


def _write(uri: str) -> None:
    t = pa.table({"id": np.arange(1000), "s": [f"v{i % 7}" for i in range(1000)]})
    lance.write_dataset(t, uri, max_rows_per_file=300)
    lance.dataset(uri).delete("id % 10 = 4")


@pytest.mark.interop
def test_migration_keeps_rows_and_numbers_them(tmp_path, file_version):
    uri = str(tmp_path / "t.lance")
    _write(uri)
    before = lance.dataset(uri).to_table(columns=["id", "s"])
    files = sorted(os.listdir(os.path.join(uri, "data")))
    ds = lf.dataset(uri)
    ds.migrate_to_stable_row_ids()
    v = ds.version
    assert sorted(os.listdir(os.path.join(uri, "data"))) == files  # no data file written
    theirs = lance.dataset(uri)
    assert theirs.has_stable_row_ids and ds.has_stable_row_ids
    got = theirs.to_table(columns=["id", "s", "_rowid", "_row_created_at_version", "_row_last_updated_at_version"])
    assert got.select(["id", "s"]).equals(before)
    # _rowid = position among all physical rows in fragment order (deleted rows keep theirs)
    ids = got["id"].to_numpy()
    assert got["_rowid"].to_pylist() == ids.tolist()
    assert set(got["_row_created_at_version"].to_pylist()) == {v}
    assert lf.dataset(uri).to_table(columns=["id", "s", "_rowid", "_row_created_at_version",
                                             "_row_last_updated_at_version"]).equals(got)
    # both libraries keep maintaining it with stable row ids
    lance.dataset(uri).update({"s": "'x'"}, where="id = 5")
    ds = lf.dataset(uri)
    ds.insert(pa.table({"id": [2000], "s": ["new"]}))
    ds.delete("id = 7")
    ds.optimize.compact_files()
    assert lance.dataset(uri).to_table(columns=["_rowid"], filter="id = 5")["_rowid"].to_pylist() == [5]
    assert lance.dataset(uri).to_table(columns=["_rowid"], filter="id = 2000")["_rowid"].to_pylist() == [1000]
    feed = lf.dataset(uri).change_feed(begin_version=v, end_version=lf.dataset(uri).version)
    assert sorted(zip(feed["id"].to_pylist(), feed["_change_type"].to_pylist(), strict=True)) == [
        (5, "update_postimage"), (5, "update_preimage"), (7, "delete"), (2000, "insert")]
    # the migration changed no row: its own feed is empty, and a range from the version it read
    # equals the range from it; from earlier the rows had no ids: refused
    assert lf.dataset(uri).change_feed(begin_version=v - 1, end_version=v).num_rows == 0
    assert lf.dataset(uri).change_feed(begin_version=v - 1).equals(feed)
    with pytest.raises(UnsupportedFeatureError, match="migration"):
        lf.dataset(uri).change_feed(begin_version=v - 2, end_version=v)
    db = lancedb.connect(str(tmp_path))
    assert db.open_table("t").count_rows() == lance.dataset(uri).count_rows()
    assert lf.dataset(uri).migrate_to_stable_row_ids() is None  # already stable: nothing committed
    assert lf.dataset(uri).version == lance.dataset(uri).version


@pytest.mark.interop
def test_migration_carries_every_index_kind(tmp_path, file_version):
    """A pylance table with row addresses and all 13 index kinds, 10% deleted: after the
    migration pylance answers every index query exactly (and uses the indices it used before),
    lancedb too, and both keep maintaining it."""
    uri = str(tmp_path / "t.lance")
    build(uri, stable=False, file_version=file_version)
    lance.dataset(uri).delete("id % 10 = 0")
    used = indices_used(lance.dataset(uri))
    ds = lf.dataset(uri)
    ds.migrate_to_stable_row_ids()
    theirs = lance.dataset(uri)
    assert theirs.has_stable_row_ids
    assert {i.name for i in theirs.describe_indices()} == {index_name(k) for k in ALL_KINDS}
    assert wrong_answers(theirs) == []
    assert indices_used(theirs) == used
    got = theirs.to_table(columns=["id", "_rowid"])
    assert got["_rowid"].to_pylist() == got["id"].to_pylist()  # one fragment order, ids from 0
    db = lancedb.connect(str(tmp_path))
    t = db.open_table("t")
    for q in ("cat = 'red'", "id < 50", "val = 300"):
        expect = sorted(theirs.to_table(columns=["id"], filter=q, use_scalar_index=False)["id"].to_pylist())
        assert sorted(t.search().where(q).select(["id"]).limit(None).to_arrow()["id"].to_pylist()) == expect
    # then upgraded to 2.2 files by compaction: every index still exact, and the change feed
    # across migration and upgrade is empty (neither changed a row)
    m = lf.dataset(uri).optimize.compact_files(target_rows_per_fragment=1200, data_storage_version="2.2")
    assert m.fragments_removed == 4
    assert {d.file_minor_version for f in lance.dataset(uri).get_fragments() for d in f.metadata.files} == {2}
    assert wrong_answers(lance.dataset(uri)) == []
    assert lf.dataset(uri).change_feed(begin_version=ds.version - 1).num_rows == 0
    # maintained afterwards by both libraries
    lance.dataset(uri).delete("id % 10 = 1")
    lance.dataset(uri).optimize.optimize_indices()
    assert wrong_answers(lance.dataset(uri)) == []
