"""lance_ops reads every version of 2.0 datasets pylance wrote, identically."""

import lance
import pytest
from datagen import META, rich_table, simple_table

import lance_ops.format as lf

pytestmark = pytest.mark.interop


def assert_all_versions_same(uri: str, columns=None) -> None:
    for v in lance.dataset(uri).versions():
        version = v["version"]
        theirs = lance.dataset(uri, version=version)
        ours = lf.dataset(uri, version=version)
        cols = (columns or theirs.schema.names) + META
        a = ours.to_table(columns=cols)
        b = theirs.to_table(columns=cols)
        assert a.equals(b), f"version {version}:\nours:  {a.slice(0, 5)}\ntheirs: {b.slice(0, 5)}"
        assert ours.count_rows() == theirs.count_rows()
        assert ours.to_table(with_row_id=True, with_row_address=True).equals(
            theirs.to_table(with_row_id=True, with_row_address=True)
        )


def test_full_lifecycle_stable_row_ids(uri):
    lance.write_dataset(simple_table(0, 20000), uri,
                        enable_stable_row_ids=True, max_rows_per_file=8000)
    ds = lance.write_dataset(simple_table(20000, 100), uri, mode="append")
    ds.delete("id < 7000")            # >= 5000 rows in fragment 0 -> .bin
    ds.delete("id >= 8000 AND id < 8003")   # .arrow on fragment 1
    ds.delete("id >= 16000 AND id < 20000")  # whole fragment 2 gone
    ds.update({"val": "'updated'"}, where="id = 7500 OR id = 20050")
    ds.optimize.compact_files(target_rows_per_fragment=100000)
    ds = lance.dataset(uri)
    assert ds.version == 8
    assert_all_versions_same(uri)
    ours = lf.dataset(uri)
    upd = ours.to_table(columns=["id", "val", *META], filter=lf_filter_ids([7500, 20050]))
    assert upd["val"].to_pylist() == ["updated", "updated"]
    assert upd["_row_last_updated_at_version"].to_pylist() == [6, 6]
    assert upd["_row_created_at_version"].to_pylist() == [1, 2]


def lf_filter_ids(ids):
    import pyarrow.compute as pc

    return pc.field("id").isin(ids)


def test_rich_schema_written_by_pylance(uri):
    tbl = rich_table(500, seed=3)
    lance.write_dataset(tbl, uri, max_rows_per_file=200)
    ours = lf.dataset(uri)
    assert ours.schema == tbl.schema
    assert ours.to_table().equals(tbl)
    assert_all_versions_same(uri)


def test_low_cardinality_strings_dictionary_pages(uri):
    import pyarrow as pa

    tbl = pa.table({"k": [f"cat{i % 7}" for i in range(5000)], "n": list(range(5000))})
    lance.write_dataset(tbl, uri, )
    assert lf.dataset(uri).to_table().equals(tbl)


def test_we_append_to_pylance_dataset(uri):
    lance.write_dataset(simple_table(0, 10), uri, enable_stable_row_ids=True)
    lf.write_dataset(simple_table(10, 10), uri, mode="append")
    theirs = lance.dataset(uri)
    assert theirs.version == 2
    assert theirs.to_table(columns=["_rowid"])["_rowid"].to_pylist() == list(range(20))
    assert theirs.to_table(columns=["id"])["id"].to_pylist() == list(range(20))
    assert_all_versions_same(uri)


def test_pylance_default_22_dataset_is_maintained_at_22(uri):
    """pylance 14's default file format (2.2): every version reads identically, and our appends,
    updates, deletes, deletion materialisation and compaction keep writing 2.2 files (pylance
    refuses mixed file versions), with identical rows, ids and row versions in both libraries."""
    import pyarrow.compute as pc

    lance.write_dataset(simple_table(0, 6000), uri, enable_stable_row_ids=True, max_rows_per_file=2500,
                        data_storage_version="stable")
    ds = lance.write_dataset(simple_table(6000, 100), uri, mode="append")
    ds.delete("id < 10")
    ds.update({"val": "'u'"}, where="id = 20")
    ds.optimize.compact_files()
    assert lance.dataset(uri).data_storage_version == "2.2"
    assert_all_versions_same(uri)
    lf.write_dataset(simple_table(9000, 500), uri, mode="append")
    lf.dataset(uri).update({"val": "'x'"}, where=pc.field("id") == 60)
    lf.dataset(uri).delete(pc.field("id") < 50)
    lf.dataset(uri).materialize_deletions(threshold=0.0)
    lf.dataset(uri).optimize.compact_files(target_rows_per_fragment=4000)
    theirs = lance.dataset(uri)
    assert theirs.data_storage_version == "2.2"
    files = [f for fr in theirs.get_fragments() for f in fr.metadata.data_files()]
    assert {(f.file_major_version, f.file_minor_version) for f in files} == {(2, 2)}
    assert theirs.count_rows() == 6100 + 500 - 50
    assert theirs.to_table(filter="id = 60")["val"].to_pylist() == ["x"]
    assert_all_versions_same(uri)
    # pylance keeps maintaining what we wrote
    theirs.delete("id = 9001")
    lance.write_dataset(simple_table(20000, 10), uri, mode="append")
    assert_all_versions_same(uri)


def test_unsupported_file_version_is_refused(uri):
    lance.write_dataset(simple_table(0, 10), uri, data_storage_version="legacy")
    with pytest.raises(lf.UnsupportedFeatureError, match="legacy|0.1"):
        lf.dataset(uri)
