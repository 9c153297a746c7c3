"""Migrating a pylance table from row addresses to stable row ids in place (docs/FORMAT.md §19)."""

import os

import lance
import lancedb
import numpy as np
import pyarrow as pa
import pytest

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
    with pytest.raises(UnsupportedFeatureError, match="migration"):
        lf.dataset(uri).change_feed(begin_version=v - 1, end_version=v)
    db = lancedb.connect(str(tmp_path))
    assert db.open_table("t").count_rows() == lance.dataset(uri).count_rows()
    assert lf.dataset(uri).migrate_to_stable_row_ids() is None  # already stable: nothing committed
    assert lf.dataset(uri).version == lance.dataset(uri).version


@pytest.mark.interop
def test_migration_refuses_indexed_tables(tmp_path, file_version):
    uri = str(tmp_path / "ds")
    _write(uri)
    lance.dataset(uri).create_scalar_index("id", "BTREE")
    version = lance.dataset(uri).version
    with pytest.raises(UnsupportedFeatureError, match="'id_idx' .*row addresses"):
        lf.dataset(uri).migrate_to_stable_row_ids()
    assert lance.dataset(uri).version == version and not lance.dataset(uri).has_stable_row_ids
