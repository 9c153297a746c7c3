"""pylance's write inputs and surface, one test body run on both ``lance`` and ``lance_ops.format``.

The ``impl`` fixture yields the module; a difference between the two libraries fails a test.
Where the call itself must differ (predicates: SQL strings on pylance, pyarrow expressions on
lance_ops until the SQL branch lands; pylance moves the handle on a mutation, lance_ops returns
the new version), the test reopens the dataset by URI and compares what is stored.
Issue 24 items 2 and 6 (inputs and wrong data) and the smaller gaps.
"""

import os
import time
from datetime import datetime

import lance
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pytest

import lance_ops.format as lf
from lance_ops.format.errors import DatasetNotFoundError, SchemaError

pytestmark = pytest.mark.interop

IMPLS = {"pylance": lance, "lance_ops": lf}


@pytest.fixture(params=list(IMPLS))
def impl(request):
    return IMPLS[request.param]


def _is_lance_ops(impl) -> bool:
    return impl is lf


def _base() -> pa.Table:
    return pa.table({"a": pa.array([1, 2], pa.int64()), "b": pa.array(["x", "y"]), "c": pa.array([1.0, 2.0])})


def _rows(impl, uri: str) -> list[dict]:
    return impl.dataset(uri).to_table().sort_by("a").to_pylist()


def _where(impl, column: str, value) -> str:
    """``column = value`` in SQL (both libraries parse it)."""
    return f"{column} = {value!r}"


# --------------------------------------------------------------------------- inputs

BASE_ROWS = [{"a": 1, "b": "x", "c": 1.0}, {"a": 2, "b": "y", "c": 2.0}]


def _inputs(kind: str):
    """(data, schema=) for each kind of input pylance's write_dataset takes."""
    t = _base()
    return {
        "table": (t, None),
        "record_batch": (t.to_batches()[0], None),
        "reader": (t.to_reader(), None),
        "arrow_dataset": (pads.dataset(t), None),
        "arrow_scanner": (pads.dataset(t).scanner(), None),
        "pandas": (t.to_pandas(), None),
        "dict": ({"a": [1, 2], "b": ["x", "y"], "c": [1.0, 2.0]}, None),
        "list_of_dicts": (BASE_ROWS, None),
        "iterable_with_schema": (iter(t.to_batches()), t.schema),
        "generator_cast_to_schema": (
            (b for b in [pa.record_batch({"a": pa.array([1, 2], pa.int32()),
                                          "b": pa.array(["x", "y"], pa.large_string()), "c": [1.0, 2.0]})]),
            t.schema,
        ),
    }[kind]


INPUT_KINDS = ["table", "record_batch", "reader", "arrow_dataset", "arrow_scanner", "pandas", "dict",
               "list_of_dicts", "iterable_with_schema", "generator_cast_to_schema"]


@pytest.mark.parametrize("kind", INPUT_KINDS)
def test_write_dataset_takes_every_input(impl, tmp_path, kind):
    data, schema = _inputs(kind)
    uri = str(tmp_path / "ds")
    impl.write_dataset(data, uri, schema=schema)
    ds = impl.dataset(uri)
    assert ds.schema.names == ["a", "b", "c"]
    assert [f.type for f in ds.schema] == [pa.int64(), pa.string(), pa.float64()]
    assert _rows(impl, uri) == BASE_ROWS


@pytest.mark.parametrize("kind", ["table", "pandas", "dict", "list_of_dicts", "generator_cast_to_schema"])
def test_append_takes_every_input(impl, tmp_path, kind):
    uri = str(tmp_path / "ds")
    impl.write_dataset(_base(), uri)
    data, schema = _inputs(kind)
    impl.write_dataset(data, uri, mode="append", schema=schema)
    assert _rows(impl, uri) == sorted(BASE_ROWS * 2, key=lambda r: r["a"])


def test_a_lance_dataset_is_an_input(impl, tmp_path):
    src = str(tmp_path / "src")
    impl.write_dataset(_base(), src)
    impl.write_dataset(impl.dataset(src), str(tmp_path / "copy"))
    assert _rows(impl, str(tmp_path / "copy")) == BASE_ROWS


@pytest.mark.parametrize("subset", [pa.table({"a": pa.array([3], pa.int64())}), {"a": [3]},
                                    pd.DataFrame({"a": [3]}), [{"a": 3, "c": 0.5}]],
                         ids=["table", "dict", "pandas", "list_of_dicts"])
def test_append_of_a_subset_writes_nulls(impl, tmp_path, subset):
    uri = str(tmp_path / "ds")
    impl.write_dataset(_base(), uri)
    impl.write_dataset(subset, uri, mode="append")
    last = _rows(impl, uri)[-1]
    assert last["a"] == 3 and last["b"] is None
    assert last["c"] == (0.5 if isinstance(subset, list) else None)
    assert impl.dataset(uri).schema == _base().schema


def test_append_in_another_column_order(impl, tmp_path):
    uri = str(tmp_path / "ds")
    impl.write_dataset(_base(), uri)
    impl.write_dataset(pa.table({"c": [3.0], "a": pa.array([3], pa.int64()), "b": ["z"]}), uri, mode="append")
    assert _rows(impl, uri)[-1] == {"a": 3, "b": "z", "c": 3.0}


def test_append_without_a_non_nullable_column_is_refused(impl, tmp_path):
    uri = str(tmp_path / "ds")
    schema = pa.schema([pa.field("a", pa.int64(), nullable=False), pa.field("b", pa.string())])
    impl.write_dataset(pa.table({"a": [1], "b": ["x"]}, schema=schema), uri)
    with pytest.raises(SchemaError if _is_lance_ops(impl) else OSError, match="missing"):
        impl.write_dataset(pa.table({"b": ["q"]}), uri, mode="append")
    assert impl.dataset(uri).version == 1
    assert sorted(os.listdir(tmp_path / "ds" / "data")) == sorted(os.listdir(tmp_path / "ds" / "data"))


def test_append_of_an_unexpected_column_is_refused(impl, tmp_path):
    uri = str(tmp_path / "ds")
    impl.write_dataset(_base(), uri)
    files = sorted(os.listdir(tmp_path / "ds" / "data"))
    with pytest.raises(SchemaError if _is_lance_ops(impl) else OSError, match="unexpected"):
        impl.write_dataset(pa.table({"a": pa.array([3], pa.int64()), "z": [1]}), uri, mode="append")
    assert impl.dataset(uri).version == 1
    assert sorted(os.listdir(tmp_path / "ds" / "data")) == files


def test_a_batch_that_cannot_be_cast_to_schema_is_refused(impl, tmp_path):
    """pylance raises its ValueError inside the Rust reader, which re-raises it as an OSError;
    lance_ops raises a CastError (a SchemaError and a ValueError) with the same message."""
    batch = pa.record_batch({"a": pa.array(["not a number"]), "b": ["x"], "c": [1.0]})
    expected = lf.CastError if _is_lance_ops(impl) else OSError
    with pytest.raises(expected, match="does not match the expected schema"):
        impl.write_dataset(iter([batch]), str(tmp_path / "ds"), schema=_base().schema)


def test_a_string_is_not_data(impl, tmp_path):
    with pytest.raises((TypeError, ValueError)):
        impl.write_dataset("not data", str(tmp_path / "ds"))


def test_widening_append_lance_ops_accepts_what_pylance_refuses(tmp_path):
    """Deliberate superset (issue 24): lossless casts on append; pylance 14 refuses them for Tables."""
    data = pa.table({"a": pa.array([3], pa.int32()), "b": pa.array(["z"], pa.large_string()), "c": [3.0]})
    for impl in (lance, lf):
        uri = str(tmp_path / impl.__name__)
        impl.write_dataset(_base(), uri)
        if impl is lance:
            with pytest.raises(OSError, match="should have type int64 but type was int32"):
                impl.write_dataset(data, uri, mode="append")
        else:
            impl.write_dataset(data, uri, mode="append")
            assert _rows(impl, uri)[-1] == {"a": 3, "b": "z", "c": 3.0}
            assert impl.dataset(uri).schema == _base().schema
    with pytest.raises(SchemaError, match="only lossless casts"):  # narrowing stays refused
        lf.write_dataset(pa.table({"a": [1.5], "b": ["z"], "c": [1.0]}), str(tmp_path / "lance_ops.format"),
                         mode="append")


def test_insert(impl, tmp_path):
    uri = str(tmp_path / "ds")
    ds = impl.write_dataset(_base(), uri)
    ds.insert({"a": [3], "b": ["z"], "c": [3.0]})
    ds = impl.dataset(uri)
    assert ds.version == 2
    assert _rows(impl, uri)[-1] == {"a": 3, "b": "z", "c": 3.0}
    impl.dataset(uri).insert(pa.table({"a": pa.array([9], pa.int64())}), mode="overwrite")
    assert _rows(impl, uri) == [{"a": 9}]


@pytest.mark.parametrize("kind", ["dict", "pandas", "list_of_dicts", "iterable_with_schema"])
def test_merge_insert_takes_every_input(impl, tmp_path, kind):
    uri = str(tmp_path / "ds")
    ds = impl.write_dataset(_base(), uri)
    source = {"a": [2, 3], "b": ["Y", "z"], "c": [20.0, 3.0]}
    data = {"dict": source, "pandas": pd.DataFrame(source), "list_of_dicts": pa.table(source).to_pylist(),
            "iterable_with_schema": iter(pa.table(source, schema=_base().schema).to_batches())}[kind]
    schema = _base().schema if kind == "iterable_with_schema" else None
    stats = ds.merge_insert("a").when_matched_update_all().when_not_matched_insert_all().execute(data, schema=schema)
    assert (stats["num_updated_rows"], stats["num_inserted_rows"]) == (1, 1)
    assert _rows(impl, uri) == [{"a": 1, "b": "x", "c": 1.0}, {"a": 2, "b": "Y", "c": 20.0},
                                {"a": 3, "b": "z", "c": 3.0}]


def test_merge_insert_only_inserting_a_subset_writes_nulls(impl, tmp_path):
    uri = str(tmp_path / "ds")
    ds = impl.write_dataset(_base(), uri)
    ds.merge_insert("a").when_not_matched_insert_all().execute(pa.table({"a": pa.array([2, 5], pa.int64())}))
    assert _rows(impl, uri)[-1] == {"a": 5, "b": None, "c": None}
    assert len(_rows(impl, uri)) == 3


def test_fragment_create_then_commit(impl, tmp_path):
    uri = str(tmp_path / "ds")
    ds = impl.write_dataset(_base(), uri)
    frag = impl.LanceFragment.create(uri, {"a": [3, 4], "b": ["z", "w"], "c": [3.0, 4.0]})
    assert frag.physical_rows == 2 and len(frag.files) == 1
    append = lance.LanceOperation.Append([frag]) if not _is_lance_ops(impl) else lf.Append([frag])
    impl.LanceDataset.commit(uri, append, read_version=ds.version) if not _is_lance_ops(impl) else \
        lf.commit(uri, append, read_version=ds.version)
    ds = impl.dataset(uri)
    assert [a for a in ds.to_table().column("a").to_pylist()] == [1, 2, 3, 4]
    assert len(ds.get_fragments()) == 2


def test_fragment_delete_files_and_num_deletions(impl, tmp_path):
    uri = str(tmp_path / "ds")
    ds = impl.write_dataset(pa.table({"a": pa.array([1, 2, 3], pa.int64())}), uri, max_rows_per_file=2)
    f0 = ds.get_fragment(0)
    assert f0.num_deletions == 0
    assert len(f0.data_files()) == 1 and f0.data_files()[0].path.endswith(".lance")
    meta = f0.delete(_where(impl, "a", 1))
    assert meta.deletion_file.num_deleted_rows == 1 and meta.physical_rows == 2
    assert ds.get_fragment(1).delete(_where(impl, "a", 3)) is None  # every row gone
    assert impl.dataset(uri).version == 1  # nothing committed


# --------------------------------------------------------------------------- wrong data


def _list_table() -> pa.Table:
    return pa.table({"a": pa.array([1, 2, 3], pa.int64()), "l": pa.array([[1], [2], None], pa.list_(pa.int64())),
                     "f": pa.array([[1, 2], [3, 4], [5, 6]], pa.list_(pa.int32(), 2))})


def test_update_of_list_and_fixed_size_list_columns(impl, tmp_path):
    uri = str(tmp_path / "ds")
    ds = impl.write_dataset(_list_table(), uri, max_rows_per_file=2)  # fragment 1 has no matching row
    values_l = {"l": "[7, 8]"} if not _is_lance_ops(impl) else {"l": [7, 8]}
    values_f = {"f": "[9, 9]"} if not _is_lance_ops(impl) else {"f": [9, 9]}
    ds.update(values_l, where=_where(impl, "a", 1))
    impl.dataset(uri).update(values_f, where=_where(impl, "a", 2))
    assert _rows(impl, uri) == [{"a": 1, "l": [7, 8], "f": [1, 2]}, {"a": 2, "l": [2], "f": [9, 9]},
                                {"a": 3, "l": None, "f": [5, 6]}]


@pytest.mark.parametrize("metadata", [{b"k": b"\xff\xfe"}, {b"\xff": b"v"}], ids=["value", "key"])
def test_non_utf8_schema_metadata_is_refused(impl, tmp_path, metadata):
    t = pa.table({"a": [1]}).replace_schema_metadata(metadata)
    with pytest.raises(ValueError):
        impl.write_dataset(t, str(tmp_path / "m"))
    assert not os.path.exists(tmp_path / "m" / "_versions")


def test_non_utf8_metadata_error_names_the_key(tmp_path):
    t = pa.table({"a": [1]}).replace_schema_metadata({b"k": b"\xff\xfe"})
    with pytest.raises(lf.InvalidArgumentError, match="metadata key b'k' is not valid utf8"):
        lf.write_dataset(t, str(tmp_path / "m"))


def test_tilde_is_expanded(impl, tmp_path, monkeypatch):
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(cwd)
    impl.write_dataset(_base(), "~/x.lance")
    assert (home / "x.lance" / "_versions").is_dir()
    assert not (cwd / "~").exists()
    assert impl.dataset("~/x.lance").count_rows() == 2


def test_not_found_is_a_value_error(impl, tmp_path):
    with pytest.raises(ValueError):
        impl.dataset(str(tmp_path / "nope"))
    impl.write_dataset(_base(), str(tmp_path / "ds"))
    with pytest.raises(ValueError):
        impl.dataset(str(tmp_path / "ds"), version=9)


def test_not_found_keeps_the_typed_error(tmp_path):
    with pytest.raises(DatasetNotFoundError):
        lf.dataset(str(tmp_path / "nope"))
    assert issubclass(DatasetNotFoundError, lf.LanceOpsError)


@pytest.mark.parametrize(("kw", "message"), [({"offset": -1}, "Offset must be non-negative"),
                                             ({"limit": -1}, "Limit must be non-negative"),
                                             ({"batch_size": 0}, "batch_size must be between 1 and 4294967295")])
def test_bad_scan_arguments(impl, tmp_path, kw, message):
    ds = impl.write_dataset(_base(), str(tmp_path / "ds"))
    with pytest.raises(ValueError, match=message):
        ds.to_table(**kw)


@pytest.mark.parametrize(("kw", "rows"), [({"limit": 0}, 0), ({"offset": 5}, 0), ({"offset": 1, "limit": 5}, 1)])
def test_scan_limits_at_the_edges(impl, tmp_path, kw, rows):
    ds = impl.write_dataset(_base(), str(tmp_path / "ds"))
    assert ds.to_table(**kw).num_rows == rows


# --------------------------------------------------------------------------- smaller gaps


def test_dataset_stats(impl, tmp_path):
    uri = str(tmp_path / "ds")
    ds = impl.write_dataset(pa.table({"a": pa.array(range(3), pa.int64())}), uri, max_rows_per_file=2)
    ds.delete(_where(impl, "a", 0))
    assert impl.dataset(uri).stats.dataset_stats() == {"num_deleted_rows": 1, "num_fragments": 2, "num_small_files": 2}
    assert impl.dataset(uri).stats.dataset_stats(max_rows_per_group=2)["num_small_files"] == 1


def test_dataset_asof(impl, tmp_path):
    uri = str(tmp_path / "ds")
    impl.write_dataset(_base(), uri)
    time.sleep(0.05)
    between = datetime.utcnow()
    time.sleep(0.05)
    impl.write_dataset(_base(), uri, mode="append")
    assert impl.dataset(uri, asof=between).version == 1
    assert impl.dataset(uri, asof=datetime.utcnow()).version == 2


def test_commit_message_and_read_transaction(impl, tmp_path):
    uri = str(tmp_path / "ds")
    impl.write_dataset(_base(), uri, commit_message="first load", enable_v2_manifest_paths=True)
    txn = impl.dataset(uri).read_transaction(1)
    assert txn.read_version == 0
    assert txn.transaction_properties["__lance_commit_message"] == "first load"


def test_scan_readahead_and_compaction_options(impl, tmp_path):
    uri = str(tmp_path / "ds")
    ds = impl.write_dataset(pa.table({"a": pa.array(range(6), pa.int64())}), uri, max_rows_per_file=2)
    assert sum(b.num_rows for b in ds.to_batches(batch_readahead=2, fragment_readahead=1)) == 6
    metrics = ds.optimize.compact_files(num_threads=1, batch_size=1024, max_bytes_per_file=1 << 30)
    assert (metrics.fragments_removed, metrics.fragments_added) == (3, 1)
    assert impl.dataset(uri).to_table().column("a").to_pylist() == list(range(6))


def test_update_schema_metadata(impl, tmp_path):
    uri = str(tmp_path / "ds")
    impl.write_dataset(_base(), uri)
    assert impl.dataset(uri).update_schema_metadata({"k": "v", "owner": "me"}) == {"k": "v", "owner": "me"}
    assert impl.dataset(uri).update_schema_metadata({"k": None}) == {"owner": "me"}
    ds = impl.dataset(uri)
    assert ds.version == 3 and ds.schema.metadata == {b"owner": b"me"}
    assert lance.dataset(uri).schema.metadata == {b"owner": b"me"}  # pylance reads what either wrote
    assert impl.dataset(uri).update_schema_metadata({"x": "y"}, replace=True) == {"x": "y"}
    assert lance.dataset(uri).schema.metadata == lf.dataset(uri).schema.metadata == {b"x": b"y"}
    assert impl.dataset(uri).read_transaction(4).operation is not None


def _nested(impl, tmp_path) -> str:
    uri = str(tmp_path / "nested")
    t = pa.table({"a": pa.array([1, 2], pa.int64()),
                  "s": pa.array([{"x": 1, "y": "a"}, {"x": 2, "y": "b"}])})
    impl.write_dataset(t, uri)
    return uri


def test_nested_projection(impl, tmp_path):
    ds = impl.dataset(_nested(impl, tmp_path))
    t = ds.to_table(columns=["a", "s.y"])
    assert t.schema.names == ["a", "s.y"] and t.column("s.y").to_pylist() == ["a", "b"]
    t = ds.to_table(columns=["s.x"], filter=pc.field("a") == 2)
    assert t.to_pylist() == [{"s.x": 2}]


def test_dict_projection(impl, tmp_path):
    ds = impl.dataset(_nested(impl, tmp_path))
    t = ds.to_table(columns={"z": "a + 1", "sx": "s.x"})
    assert t.to_pylist() == [{"z": 2, "sx": 1}, {"z": 3, "sx": 2}]
    if _is_lance_ops(impl):  # lance_ops also takes expressions (pylance raises TypeError)
        assert ds.to_table(columns={"z": pc.field("a") * 2}).column("z").to_pylist() == [2, 4]
    assert sum(b.num_rows for b in ds.to_batches(columns={"sx": "s.x"})) == 2


def test_commit_without_read_version(impl, tmp_path):
    uri = str(tmp_path / "ds")
    ds = impl.write_dataset(_base(), uri)
    frags = [f.metadata for f in ds.get_fragments()]
    ops = impl.LanceOperation
    commit = lance.LanceDataset.commit if not _is_lance_ops(impl) else lf.commit
    overwrite, append = ops.Overwrite(ds.schema, frags), ops.Append(frags)
    commit(uri, overwrite)
    assert impl.dataset(uri).version == 2 and _rows(impl, uri) == BASE_ROWS
    with pytest.raises(ValueError, match="read_version is required for all operations except Overwrite and Restore"):
        commit(uri, append)


def test_large_binary_blob_columns_at_2_2_become_blob_v2(impl, tmp_path, file_version):
    """pylance 14 stores a ``lance-encoding:blob`` large_binary column of a 2.2 dataset as blob v2;
    lance_ops writes the same schema, and either library appends to and reads the other's."""
    schema = pa.schema([pa.field("id", pa.int64()),
                        pa.field("blob", pa.large_binary(), metadata={"lance-encoding:blob": "true"})])
    t = pa.table({"id": [1, 2, 3], "blob": [b"abc", None, b"x" * 100_000]}, schema=schema)
    uri = str(tmp_path / "blobs")
    impl.write_dataset(t, uri, data_storage_version="2.2")
    other = lance if _is_lance_ops(impl) else lf
    other.write_dataset(t, uri, mode="append")
    mine, theirs = lf.dataset(uri), lance.dataset(uri)
    assert [(f.name, f.id, f.parent_id, f.logical_type, dict(f.metadata)) for f in mine.lance_schema.fields] == [
        ("id", 0, -1, "int64", {}),
        ("blob", 1, -1, "struct", {"ARROW:extension:name": b"lance.blob.v2"}),
        ("data", 2, 1, "large_binary", {}), ("uri", 3, 1, "string", {})]
    sizes = [3, None, 100_000] * 2
    for ds in (mine, theirs):
        assert [len(b.read()) if b is not None else None for b in ds.take_blobs("blob", indices=list(range(6)))] == sizes


def _empty_struct_table() -> pa.Table:
    return pa.table({"id": [1, 2], "e": pa.array([{}, {}], pa.struct([])),
                     "s": pa.array([{"e": {}, "x": 1}, {"e": {}, "x": 2}],
                                   pa.struct([pa.field("e", pa.struct([])), pa.field("x", pa.int32())]))})


def test_empty_struct_columns_at_2_0(impl, tmp_path):
    uri = str(tmp_path / "e")
    impl.write_dataset(_empty_struct_table(), uri, data_storage_version="2.0")
    for reader in (lance, lf):
        assert reader.dataset(uri).to_table().to_pylist() == _empty_struct_table().to_pylist()


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_empty_struct_columns_at_2_1_are_refused(tmp_path, version):
    """Deliberate difference: pylance 14 writes them at 2.1/2.2 but reads the columns after them back
    as nulls (checked below), so lance_ops refuses to write them there, before any file is written."""
    t = _empty_struct_table()
    theirs = lance.write_dataset(t, str(tmp_path / "theirs"), data_storage_version=version)
    assert theirs.to_table().column("s").to_pylist() != t.column("s").to_pylist()  # pylance's wrong data
    with pytest.raises(lf.UnsupportedFeatureError, match="empty structs cannot be written"):
        lf.write_dataset(t, str(tmp_path / "ours"), data_storage_version=version)
    assert not os.path.exists(tmp_path / "ours" / "_versions")


def test_update_config_with_update_maps(impl, tmp_path):
    uri = str(tmp_path / "ds")
    ds = impl.write_dataset(_base(), uri)
    commit = lance.LanceDataset.commit if not _is_lance_ops(impl) else lf.commit
    ops = impl.LanceOperation
    commit(uri, ops.UpdateConfig(config_updates=ops.UpdateMap({"k1": "v1", "k2": "v2"}),
                                 schema_metadata_updates=ops.UpdateMap({"owner": "me"})), read_version=ds.version)
    commit(uri, ops.UpdateConfig(config_updates=ops.UpdateMap({"k1": None})), read_version=2)
    for reader in (lance, lf):
        ds = reader.dataset(uri)
        assert ds.version == 3
        config = ds.config()  # a method in both
        assert {k: v for k, v in config.items() if k.startswith("k")} == {"k2": "v2"}
        assert ds.schema.metadata == {b"owner": b"me"}


def test_a_bad_batch_mid_stream_leaves_the_last_good_version_and_no_files(impl, tmp_path):
    uri = str(tmp_path / "ds")
    impl.write_dataset(_base(), uri)
    files = sorted(os.listdir(tmp_path / "ds" / "data"))
    good = _base().to_batches()[0]
    bad = pa.record_batch({"a": pa.array(["x"]), "b": ["z"], "c": [1.0]})
    expected = lf.CastError if _is_lance_ops(impl) else OSError
    with pytest.raises(expected, match="does not match the expected schema"):
        impl.write_dataset((b for b in (good, bad)), uri, mode="append", schema=_base().schema,
                           max_rows_per_file=1)
    assert impl.dataset(uri).version == 1 and _rows(impl, uri) == BASE_ROWS
    assert sorted(os.listdir(tmp_path / "ds" / "data")) == files


def test_scanner_with_nested_and_dict_projections(impl, tmp_path):
    ds = impl.dataset(_nested(impl, tmp_path))
    scanner = ds.scanner(columns={"sx": "s.x", "a2": "a * 2"}, filter="a > 1")
    assert scanner.projected_schema.names == ["sx", "a2"]
    assert scanner.to_table().to_pylist() == [{"sx": 2, "a2": 4}]
    assert scanner.to_reader().read_all().to_pylist() == [{"sx": 2, "a2": 4}]


def test_data_stats(impl, tmp_path, file_version):
    """Bytes on disk per field: lance_ops counts what pylance counts, on either library's files."""
    uri = str(tmp_path / "ds")
    t = pa.table({"a": pa.array([1, 2, 3], pa.int64()), "b": ["x", "y", "z"],
                  "s": pa.array([{"p": 1, "q": "u"}] * 3), "l": pa.array([[1, 2], None, [3]])})
    impl.write_dataset(t, uri, max_rows_per_file=2)
    expected = [(f.id, f.bytes_on_disk) for f in lance.dataset(uri).stats.data_stats().fields]
    assert [(f.id, f.bytes_on_disk) for f in lf.dataset(uri).stats.data_stats().fields] == expected
    assert [i for i, _ in expected] == list(range(7)) and expected[0][1] > 0
