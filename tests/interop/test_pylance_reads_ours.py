"""pylance (the reference) reads every version lance_ops writes, identically."""

import lance
import pyarrow as pa
import pytest
from datagen import META, nested_table, rich_table, simple_table

import lance_ops.format as lf

pytestmark = pytest.mark.interop


def assert_same(ours: lf.LanceDataset, theirs: "lance.LanceDataset", columns=None) -> None:
    cols = (columns or ours.schema.names) + META
    a = ours.to_table(columns=cols)
    b = theirs.to_table(columns=cols)
    assert a.num_rows == b.num_rows
    assert a.equals(b), f"\nours:  {a.slice(0, 5)}\ntheirs: {b.slice(0, 5)}"


def test_history_with_stable_row_ids(uri):
    lf.write_dataset(simple_table(0, 100), uri, enable_stable_row_ids=True, max_rows_per_file=40)
    lf.write_dataset(simple_table(100, 50), uri, mode="append", max_rows_per_file=20)
    lf.write_dataset(simple_table(150, 10), uri, mode="append")
    lf.write_dataset(simple_table(1000, 30), uri, mode="overwrite")
    ours = lf.dataset(uri)
    assert ours.version == 4
    for v in range(1, 5):
        mine = lf.dataset(uri, version=v)
        theirs = lance.dataset(uri, version=v)
        assert theirs.version == v
        assert_same(mine, theirs)
    latest = lance.dataset(uri).to_table(columns=META)
    # overwrite continues next_row_id and stamps the new version
    assert latest["_rowid"].to_pylist() == list(range(160, 190))
    assert set(latest["_row_created_at_version"].to_pylist()) == {4}
    v3 = lance.dataset(uri, version=3)
    assert v3.to_table(columns=["_rowid"])["_rowid"].to_pylist() == list(range(160))
    assert len(v3.get_fragments()) == 3 + 3 + 1


def test_rich_schema_roundtrip(uri):
    tbl = rich_table(300)
    lf.write_dataset(tbl, uri, max_rows_per_file=128)
    theirs = lance.dataset(uri)
    assert theirs.schema == tbl.schema
    assert theirs.to_table().equals(tbl)
    assert_same(lf.dataset(uri), theirs)


def test_pylance_appends_and_deletes_on_ours(uri):
    lf.write_dataset(simple_table(0, 30), uri, enable_stable_row_ids=True)
    ds = lance.write_dataset(simple_table(30, 20), uri, mode="append")
    ds.delete("id < 5 OR id = 40")
    ours = lf.dataset(uri)
    assert ours.version == 3
    assert_same(ours, lance.dataset(uri))
    assert ours.count_rows() == 44
    # and we append on top of that
    lf.write_dataset(simple_table(50, 5), uri, mode="append")
    assert_same(lf.dataset(uri), lance.dataset(uri))
    assert lance.dataset(uri).to_table(columns=["_rowid"])["_rowid"].to_pylist()[-5:] == list(range(50, 55))


def test_without_stable_row_ids_rowid_is_address(uri):
    lf.write_dataset(simple_table(0, 10), uri, max_rows_per_file=4)
    t = lance.dataset(uri).to_table(columns=["id", "_rowid", "_rowaddr"])
    assert t["_rowid"].to_pylist() == [0, 1, 2, 3, 1 << 32, (1 << 32) + 1, (1 << 32) + 2, (1 << 32) + 3, 2 << 32, (2 << 32) + 1]
    assert lf.dataset(uri).to_table(columns=["id", "_rowid", "_rowaddr"]).equals(t)


def test_empty_append_and_streamed_reader(uri):
    tbl = simple_table(0, 1000)
    reader = pa.RecordBatchReader.from_batches(tbl.schema, tbl.to_batches(max_chunksize=100))
    lf.write_dataset(reader, uri, max_rows_per_file=300)
    theirs = lance.dataset(uri)
    assert [f.count_rows() for f in theirs.get_fragments()] == [300, 300, 300, 100]
    assert theirs.to_table().equals(tbl)


def test_nested_types_both_directions(uri, file_version, tmp_path):
    # 2.0 cannot store null structs; 2.1+ stores any nesting as rep/def levels
    tbl = nested_table(3000, null_structs=file_version != "2.0")
    lf.write_dataset(tbl, uri, max_rows_per_file=1200)
    theirs = lance.dataset(uri)
    assert theirs.data_storage_version == file_version
    assert theirs.to_table().equals(tbl)
    assert_same(lf.dataset(uri), theirs)
    other = str(tmp_path / "theirs")
    lance.write_dataset(tbl, other, max_rows_per_file=1200)
    assert lf.dataset(other).to_table().equals(tbl)


def test_large_pages_both_directions(uri, tmp_path):
    # several pages per column and chunks of many mini-blocks (300k rows of mixed columns)
    import numpy as np

    n = 300_000
    rng = np.random.default_rng(1)
    tbl = pa.table({
        "id": np.arange(n, dtype=np.int64),
        "f": rng.random(n),
        "s": pa.array([f"row-{i}" * (i % 4) for i in range(n)]),
        "l": pa.array([[i] * (i % 3) if i % 11 else None for i in range(n)], pa.list_(pa.int32())),
    })
    lf.write_dataset(tbl, uri)
    assert lance.dataset(uri).to_table().equals(tbl)
    other = str(tmp_path / "theirs")
    lance.write_dataset(tbl, other)
    assert lf.dataset(other).to_table().equals(tbl)
