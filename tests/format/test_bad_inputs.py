"""Every bad user input is a typed error naming the column, value or argument; nothing commits.

The cases of issue 14 (duplicate columns, predicates on unknown columns or with mismatched
types, incompatible update values, non-table data, unsupported URI schemes, negative
retention, ``update_config`` with None) and their relatives across the public API.
"""

import os
from datetime import timedelta

import lance
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from datagen import simple_table

import lance_ops.format as lf


@pytest.fixture
def ds(tmp_path):
    uri = str(tmp_path / "ds")
    lf.write_dataset(simple_table(0, 10), uri, enable_stable_row_ids=True)
    return lf.dataset(uri)


def snapshot(uri: str) -> dict[str, list[str]]:
    return {d: sorted(os.listdir(os.path.join(uri, d))) for d in os.listdir(uri) if os.path.isdir(os.path.join(uri, d))}


DUP = pa.Table.from_arrays([pa.array([1]), pa.array([2])], names=["a", "a"])

# (name, call(ds, tmp_path), exception type, every fragment that must appear in the message)
CASES = [
    ("duplicate columns", lambda ds, p: lf.write_dataset(DUP, str(p / "dup")), lf.SchemaError, ["duplicate", "'a'"]),
    ("duplicate columns on append", lambda ds, p: lf.write_dataset(
        pa.Table.from_arrays([pa.array([1])] * 4, names=["id", "val", "score", "id"]), ds.uri, mode="append"),
        lf.SchemaError, ["duplicate", "'id'"]),
    ("no columns", lambda ds, p: lf.write_dataset(pa.table({}), str(p / "e")), lf.SchemaError, ["at least one column"]),
    ("delete on unknown column", lambda ds, p: ds.delete(pc.field("nope") == 1), lf.SchemaError,
     ["'nope'", "'id'", "'val'", "'score'"]),
    ("delete int64 vs string", lambda ds, p: ds.delete(pc.field("id") == "x"), lf.SchemaError, ["id", '"x"', "int64"]),
    ("delete without predicate", lambda ds, p: ds.delete(None), lf.InvalidArgumentError, ["predicate"]),
    ("delete bad SQL", lambda ds, p: ds.delete("id <"), lf.SQLParseError, ["'id <'", "position 3"]),
    ("delete SQL unknown column", lambda ds, p: ds.delete("nope < 3"), lf.SQLUnknownColumnError,
     ["'nope'", "'id'", "'val'"]),
    ("delete not a predicate", lambda ds, p: ds.delete(3), lf.ArgumentTypeError, ["SQL string", "Expression", "int"]),
    ("update incompatible value", lambda ds, p: ds.update({"id": "'abc'"}), lf.SchemaError, ["'abc'", "'id'", "int64"]),
    ("update overflowing value", lambda ds, p: ds.update({"id": 2**70}), lf.SchemaError, ["'id'", str(2**70)]),
    ("update unknown column", lambda ds, p: ds.update({"nope": 1}), lf.SchemaError, ["'nope'", "'id'"]),
    ("update metadata column", lambda ds, p: ds.update({"_rowid": 1}), lf.SchemaError, ["'_rowid'"]),
    ("update expression on unknown column", lambda ds, p: ds.update({"val": pc.field("nope")}), lf.SchemaError,
     ["nope"]),
    ("update where unknown column", lambda ds, p: ds.update({"val": "'x'"}, where=pc.field("nope") == 1),
     lf.SchemaError, ["'nope'"]),
    ("update values not a mapping", lambda ds, p: ds.update([("val", "x")]), lf.ArgumentTypeError, ["mapping", "list"]),
    ("update nothing", lambda ds, p: ds.update({}), lf.InvalidArgumentError, ["at least one column"]),
    ("write a string", lambda ds, p: lf.write_dataset("str", str(p / "s")), lf.ArgumentTypeError, ["str"]),
    ("write None", lambda ds, p: lf.write_dataset(None, str(p / "s")), lf.ArgumentTypeError, ["NoneType"]),
    ("write an int", lambda ds, p: lf.write_dataset(42, str(p / "s")), lf.ArgumentTypeError, ["int"]),
    ("write a list of ints", lambda ds, p: lf.write_dataset([1, 2], str(p / "s")), lf.ArgumentTypeError, ["int"]),
    ("bad write mode", lambda ds, p: lf.write_dataset(simple_table(0, 1), ds.uri, mode="upsert"),
     lf.InvalidArgumentError, ["'upsert'"]),
    ("max_rows_per_file 0", lambda ds, p: lf.write_dataset(simple_table(0, 1), ds.uri, mode="append",
                                                           max_rows_per_file=0), lf.InvalidArgumentError,
     ["max_rows_per_file", "0"]),
    ("http uri", lambda ds, p: lf.dataset("http://example.com/x"), lf.UnsupportedFeatureError, ["'http'", "gs://"]),
    ("s3 uri", lambda ds, p: lf.write_dataset(simple_table(0, 1), "s3://b/x"), lf.UnsupportedFeatureError, ["'s3'"]),
    ("uri None", lambda ds, p: lf.dataset(None), lf.ArgumentTypeError, ["uri", "NoneType"]),
    ("uri empty", lambda ds, p: lf.dataset(""), lf.InvalidURIError, ["URI", "empty"]),
    ("storage_options not a mapping", lambda ds, p: lf.dataset(ds.uri, storage_options="x"), lf.ArgumentTypeError,
     ["storage_options", "'x'"]),
    ("version not an int", lambda ds, p: lf.dataset(ds.uri, version=1.5), lf.ArgumentTypeError, ["version", "1.5"]),
    ("version names no tag", lambda ds, p: lf.dataset(ds.uri, version="abc"), lf.TagError, ["tag", "'abc'"]),
    ("version missing", lambda ds, p: lf.dataset(ds.uri, version=99), lf.DatasetNotFoundError, ["99"]),
    ("columns a string", lambda ds, p: ds.to_table(columns="id"), lf.ArgumentTypeError, ["columns", "'id'"]),
    ("unknown column", lambda ds, p: ds.to_table(columns=["nope"]), lf.SchemaError, ["'nope'", "'id'"]),
    ("filter on unknown column", lambda ds, p: ds.to_table(filter=pc.field("nope") > 1), lf.SchemaError,
     ["'nope'", "'val'"]),
    ("filter int vs string", lambda ds, p: ds.count_rows(pc.field("id") > "a"), lf.SchemaError, ["id", "int64"]),
    ("filter not boolean", lambda ds, p: ds.to_table(filter=pc.field("id")), lf.SchemaError, ["bool"]),
    ("filter SQL literal does not fit", lambda ds, p: ds.to_table(filter="id > 1.5"), lf.SQLTypeError,
     ["1.5", "int64", "position 5"]),
    ("filter SQL not boolean", lambda ds, p: ds.count_rows("id + 1"), lf.SQLTypeError, ["boolean"]),
    ("batch_size 0", lambda ds, p: list(ds.to_batches(batch_size=0)), lf.InvalidArgumentError, ["batch_size", "0"]),
    ("limit negative", lambda ds, p: ds.to_table(limit=-1), lf.InvalidArgumentError, ["limit", "-1"]),
    ("offset negative", lambda ds, p: ds.to_table(offset=-1), lf.InvalidArgumentError, ["offset", "-1"]),
    ("limit not an int", lambda ds, p: ds.to_table(limit="3"), lf.ArgumentTypeError, ["limit", "'3'"]),
    ("negative retention", lambda ds, p: ds.cleanup_old_versions(older_than=timedelta(days=-1)),
     lf.InvalidArgumentError, ["older_than", "negative"]),
    ("short retention", lambda ds, p: ds.cleanup_old_versions(older_than=timedelta(minutes=5)),
     lf.InvalidArgumentError, ["0:05:00", "retention_duration_check"]),
    ("retain_versions 0", lambda ds, p: ds.cleanup_old_versions(retain_versions=0), lf.InvalidArgumentError,
     ["retain_versions", "0"]),
    ("update_config not a mapping", lambda ds, p: ds.update_config("abc"), lf.ArgumentTypeError, ["str"]),
    ("update_config int value", lambda ds, p: ds.update_config({"a": 1}), lf.ArgumentTypeError, ["'a'", "int"]),
    ("update_config int key", lambda ds, p: ds.update_config({1: "a"}), lf.ArgumentTypeError, ["1"]),
    ("compaction target 0", lambda ds, p: ds.optimize.compact_files(target_rows_per_fragment=0),
     lf.InvalidArgumentError, ["target_rows_per_fragment", "0"]),
    ("materialize threshold 2", lambda ds, p: ds.materialize_deletions(threshold=2.0), lf.InvalidArgumentError,
     ["2.0"]),
    ("change feed reversed", lambda ds, p: ds.change_feed(5, 2), lf.InvalidArgumentError, ["5", "2"]),
    ("commit read_version negative", lambda ds, p: lf.commit(ds.uri, lf.Append([]), read_version=-1),
     lf.InvalidArgumentError, ["read_version", "-1"]),
    ("idempotency key half given", lambda ds, p: lf.write_dataset(simple_table(0, 1), ds.uri, mode="append",
                                                                 transaction_properties={"txnAppId": "x"}),
     lf.InvalidArgumentError, ["txnAppId", "txnVersion"]),
]


@pytest.mark.parametrize(("name", "call", "exc", "says"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_a_typed_error_naming_the_culprit(ds, tmp_path, name, call, exc, says):
    before = snapshot(ds.uri)
    with pytest.raises(exc) as info:
        call(ds, tmp_path)
    assert isinstance(info.value, lf.LanceOpsError)
    for fragment in says:
        assert fragment in str(info.value), f"{name}: {fragment!r} not in {info.value}"
    assert snapshot(ds.uri) == before, "a refused input changed the dataset"
    assert lf.dataset(ds.uri).version == 1


def test_value_and_type_errors_stay_catchable_as_builtins(ds):
    with pytest.raises(ValueError):
        ds.to_table(limit=-1)
    with pytest.raises(TypeError):
        lf.write_dataset("str", ds.uri + "-x")


def test_update_config_none_removes_the_key_as_pylance(ds, tmp_path):
    assert ds.update_config({"a": "1", "b": "2"}) == {"a": "1", "b": "2"}
    assert ds.update_config({"a": None, "c": "3"}) == {"b": "2", "c": "3"}
    assert ds.config() == {"b": "2", "c": "3"}
    assert lance.dataset(ds.uri).config() == {"b": "2", "c": "3"}
    # pylance's own behaviour on a copy of the dataset, for the record
    theirs = lance.write_dataset(simple_table(0, 1), str(tmp_path / "theirs"))
    theirs.update_config({"a": "1", "b": "2"})
    theirs.update_config({"a": None, "c": "3"})
    assert lance.dataset(str(tmp_path / "theirs")).config() == {"b": "2", "c": "3"}
