"""pylance's method forms and small dataset calls on both libraries (issue 34; docs/PYLANCE_TESTS.md):
``LanceSchema.fields()`` / ``LanceField.name()``, ``DataFile.path()`` (deprecated),
``LanceDataset.drop`` and the ``prefilter`` scan keyword.

Each test runs the same calls on ``lance`` (pylance 14) and ``lance_ops.format`` and compares the
results; what lance_ops writes then opens in pylance and lancedb 0.40 as pylance's own does.
"""

import os
import pickle
import warnings
from pathlib import Path

import lance
import lance.optimize
import lancedb
import pyarrow as pa
import pytest

import lance_ops.format as lf

pytestmark = pytest.mark.interop

IMPLS = {"pylance": lance, "lance_ops": lf}
DATA = pa.table({"a": pa.array([1, 2, 3]), "s": pa.array([{"x": 1, "y": "p"}, {"x": 2, "y": "q"}, {"x": 3, "y": None}]),
                 "t": pa.array(["u", None, "w"])})


def both(tmp_path, fn):
    """``fn(impl, uri)`` on both libraries (own directories ``<name>/t.lance``); the two results."""
    return [fn(impl, str(tmp_path / name / "t.lance")) for name, impl in IMPLS.items()]


def _schema_view(impl, uri):
    ds = impl.write_dataset(DATA, uri)
    ds.update_field_metadata({"a": {"k1": "v1", "k2": "v2"}, "s.x": {"inner": "yes"}})
    ds = impl.dataset(uri)

    def walk(f):
        return (f.name(), f.id(), f.metadata, f.to_arrow().name, [walk(c) for c in f.children()])

    fields = ds.lance_schema.fields()
    return [walk(f) for f in fields], type(fields) is list


def test_lance_schema_fields_method_form(tmp_path):
    mine, theirs = both(tmp_path, _schema_view)[::-1]
    assert mine == theirs
    assert mine[0][0] == ("a", 0, {"k1": "v1", "k2": "v2"}, "a", [])
    assert [c[0] for c in mine[0][1][4]] == ["x", "y"] and mine[0][1][4][0][2] == {"inner": "yes"}
    assert mine[1] is True
    # what lance_ops wrote opens as pylance's own: pylance's method forms and lancedb read the same
    uri = str(tmp_path / "lance_ops" / "t.lance")
    assert [
        (f.name(), f.metadata) for f in lance.dataset(uri).lance_schema.fields()
    ] == [("a", {"k1": "v1", "k2": "v2"}), ("s", {}), ("t", {})]
    assert lancedb.connect(str(tmp_path / "lance_ops")).open_table("t").to_arrow() == lance.dataset(uri).to_table()


def test_lance_schema_attribute_forms_stay():
    schema = lf.LanceSchema.from_pyarrow(DATA.schema)
    # the attribute forms lance_ops code uses: every field depth-first, names as plain strings
    assert [f.name for f in schema.fields] == ["a", "s", "x", "y", "t"]
    assert schema.fields == tuple(schema.fields) and schema.field("s").name == "s"
    assert schema.field("s").name() == "s"
    assert [f.name() for f in schema.fields()] == ["a", "s", "t"]
    assert pickle.loads(pickle.dumps(schema)) == schema


def _data_file_path(impl, uri):
    ds = impl.write_dataset(DATA, uri)
    meta = ds.get_fragments()[0].metadata
    df = meta.files[0]
    with pytest.warns(DeprecationWarning, match=r"DataFile.path\(\) is deprecated"):
        called = df.path()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the attribute form does not warn
        attr = df.path
    unpickled = pickle.loads(pickle.dumps(meta))
    with pytest.warns(DeprecationWarning):
        again = unpickled.files[0].path()
    return called == attr == again, isinstance(attr, str), len(str(attr).removesuffix(".lance")), unpickled == meta


def test_data_file_path_deprecated_call(tmp_path):
    mine, theirs = both(tmp_path, _data_file_path)[::-1]
    assert mine == theirs == (True, True, 50, True)


def _drop(impl, uri):
    out = []
    impl.write_dataset(DATA, uri)
    impl.LanceDataset.drop(uri)
    out.append(os.path.exists(uri))
    impl.LanceDataset.drop(uri, ignore_not_found=True)
    for kwargs in ({}, {"ignore_not_found": False}):
        with pytest.raises(OSError, match="Not found"):
            impl.LanceDataset.drop(uri, **kwargs)
    Path(uri).mkdir(parents=True)
    (Path(uri) / "notes.txt").write_text("not a dataset")
    with pytest.raises(ValueError, match="Refusing to drop"):
        impl.LanceDataset.drop(uri)
    out.append(os.path.exists(uri))
    # a dropped path takes a new dataset
    ds = impl.write_dataset(DATA.slice(0, 1), uri, mode="overwrite")
    out.append((ds.version, ds.count_rows()))
    return out


def test_dataset_drop(tmp_path):
    mine, theirs = both(tmp_path, _drop)[::-1]
    assert mine == theirs == [False, True, (1, 1)]
    uri = str(tmp_path / "lance_ops" / "t.lance")
    assert lance.dataset(uri).to_table() == DATA.slice(0, 1)


def _prefilter(impl, uri):
    ds = impl.write_dataset(pa.table({"s": pa.array([None if i % 2 == 0 else f"s-{i}" for i in range(3000)])}), uri)
    ds.create_scalar_index("s", index_type="BTREE")
    return (ds.scanner(prefilter=True, filter="s = 's-501'").to_table().to_pylist(),
            ds.to_table(prefilter=False, filter="s IS NULL").num_rows)


def test_prefilter_keyword_without_nearest(tmp_path):
    mine, theirs = both(tmp_path, _prefilter)[::-1]
    assert mine == theirs == ([{"s": "s-501"}], 1500)


def _env_batch_size(impl, uri, monkeypatch):
    ds = impl.write_dataset(pa.table({"a": range(10000)}), uri, max_rows_per_file=5000)
    monkeypatch.setenv("LANCE_DEFAULT_BATCH_SIZE", "12")
    out = [sorted({b.num_rows for b in ds.to_batches()}), sorted({b.num_rows for b in ds.to_batches(batch_size=100)}),
           sorted({b.num_rows for b in ds.get_fragments()[0].to_batches()}),
           [b["a"][0].as_py() for b in ds.scanner(scan_in_order=True).to_batches()][:3]]
    monkeypatch.setenv("LANCE_DEFAULT_BATCH_SIZE", "abc")  # not a number: the default, with a warning
    out.append(sorted({b.num_rows for b in ds.to_batches()}))
    monkeypatch.delenv("LANCE_DEFAULT_BATCH_SIZE")
    out.append(sorted({b.num_rows for b in ds.to_batches()}))
    return out


def test_default_batch_size_environment_variable(tmp_path, monkeypatch):
    mine, theirs = (_env_batch_size(impl, str(tmp_path / name / "t.lance"), monkeypatch)
                    for name, impl in reversed(IMPLS.items()))
    # files of 5000 rows: batches of 12 and the 8 left at each file's end; unset or invalid, the
    # default (pylance's 8192, lance_ops' 65536) is above a file's rows
    assert mine == theirs == [[8, 12], [100], [8, 12], [0, 12, 24], [5000], [5000]]


def _schema_errors(impl, uri):
    impl.write_dataset(pa.table({"colA": [1, 2], "colB": [3, 4]}), uri)
    for data in (pa.table({"COLUMN-C": [1], "colB": [2]}), pa.table({"colA": ["x"]})):
        with pytest.raises(OSError):
            impl.write_dataset(data, uri, mode="append")
    with pytest.raises(OSError, match="Cannot write with an empty schema"):
        impl.LanceFragment.create(uri + "-frag", pa.table({}))
    # a nullable column the data lacks is written as nulls, as pylance
    ds = impl.write_dataset(pa.table({"colA": [5]}), uri, mode="append")
    return ds.version, ds.to_table().to_pylist()[-1]


def test_append_schema_mismatch_is_an_oserror(tmp_path):
    mine, theirs = both(tmp_path, _schema_errors)[::-1]
    assert mine == theirs == (2, {"colA": 5, "colB": None})
    assert issubclass(lf.AppendSchemaError, lf.SchemaError) and issubclass(lf.EmptySchemaError, lf.SchemaError)
    uri = str(tmp_path / "lance_ops" / "t.lance")
    assert lance.dataset(uri).count_rows() == 3


def _strict_batches(impl, uri):
    ds = impl.write_dataset(pa.table({"f": range(1024), "v": range(1024)}), uri, max_rows_per_file=300)
    strict = list(ds.to_batches(batch_size=32, strict_batch_size=True))
    filtered = list(ds.scanner(batch_size=32, filter="f % 3 = 0", strict_batch_size=True).to_batches())
    scanner = ds.scanner(columns=["v"])
    return ([b.num_rows for b in strict], pa.Table.from_batches(strict) == ds.to_table(),
            [b.num_rows for b in filtered], pa.Table.from_batches(filtered)["f"].to_pylist()[-2:],
            scanner.dataset_schema == ds.schema, scanner.projected_schema)


def test_strict_batch_size_and_scanner_schemas(tmp_path):
    mine, theirs = both(tmp_path, _strict_batches)[::-1]
    assert mine == theirs
    assert mine[:4] == ([32] * 32, True, [32] * 10 + [22], [1020, 1023])
    assert mine[4:] == (True, pa.schema([pa.field("v", pa.int64())]))


def _compaction(impl):
    """pylance's ``lance.optimize.Compaction`` / lance_ops' ``lf.Compaction``."""
    return lance.optimize.Compaction if impl is lance else impl.Compaction


def _distributed_compaction(impl, uri):
    ds = impl.write_dataset(pa.table({"a": range(800), "b": range(800)}), uri, max_rows_per_file=200)
    frags = ds.get_fragments()
    plan = _compaction(impl).plan(ds, options=dict(target_rows_per_fragment=400, num_threads=1))
    shape = (plan.read_version, plan.num_tasks(), repr(plan), pickle.loads(pickle.dumps(plan)) == plan,
             [t.fragments == [f.metadata for f in frags[2 * i:2 * i + 2]] for i, t in enumerate(plan.tasks)])
    result = pickle.loads(pickle.dumps(plan.tasks[0])).execute(ds)
    again = pickle.loads(pickle.dumps(result))
    per_task = (result.metrics.fragments_removed, result.metrics.fragments_added, again == result,
                repr(result).startswith("RewriteResult(read_version=1, new_fragments=[FragmentMetadata("))
    metrics = _compaction(impl).commit(ds, [result])
    return (shape, per_task, (metrics.fragments_removed, metrics.fragments_added, metrics.files_removed,
                              metrics.files_added), ds.version, [f.count_rows() for f in ds.get_fragments()],
            ds.to_table().sort_by("a") == impl.dataset(uri).to_table().sort_by("a"))


def test_compaction_plan_execute_commit_on_a_handle(tmp_path):
    mine, theirs = both(tmp_path, _distributed_compaction)[::-1]
    assert mine == theirs
    assert mine[0][:2] == (1, 2) and mine[0][2] == "CompactionPlan(read_version=1, tasks=<2 compaction tasks>)"
    assert mine[1:5] == ((2, 1, True, True), (2, 1, 2, 1), 3, [200, 200, 400])
    uri = str(tmp_path / "lance_ops" / "t.lance")
    assert lance.dataset(uri).to_table().sort_by("a") == pa.table({"a": range(800), "b": range(800)})
    assert lancedb.connect(str(tmp_path / "lance_ops")).open_table("t").count_rows() == 800
