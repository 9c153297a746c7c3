"""pylance's ``dataset(..., default_scan_options=...)`` and ``MergeInsertBuilder.use_index`` /
``explain_plan`` / ``analyze_plan`` on both libraries (issue 34, docs/PYLANCE_TESTS.md).

The same calls run on ``lance`` (pylance 14) and ``lance_ops.format``; plan texts are compared on
what pylance code checks (the ``MergeInsert: ...`` line, a join, the metric names), not verbatim:
lance_ops' steps are its own.
"""

import lance
import pyarrow as pa
import pytest

import lance_ops.format as lf

pytestmark = pytest.mark.interop

IMPLS = {"pylance": lance, "lance_ops": lf}


def _data() -> pa.Table:
    return pa.table({"a": pa.array(range(20), pa.int64()), "b": pa.array(range(100, 120), pa.int64())})


@pytest.mark.parametrize("opts", [
    {"with_row_id": True},
    {"with_row_address": True},
    {"with_row_id": True, "with_row_address": True},
    {"with_row_id": True, "columns": ["b"], "filter": "a > 15"},
    {"limit": 3},
    {"filter": "a < 4"},
])
def test_default_scan_options(tmp_path, opts):
    out = []
    for name, impl in IMPLS.items():
        uri = str(tmp_path / name)
        impl.write_dataset(_data(), uri, max_rows_per_file=8)
        ds = impl.dataset(uri, default_scan_options=opts)
        out.append((ds.schema, ds.to_table(), ds.scanner().to_table(), ds.to_table(columns=["a"], limit=2),
                    ds.count_rows(), list(ds.to_batches())[0].schema.names))
    assert out[0] == out[1]


def test_merge_insert_explain_and_analyze_plan(tmp_path):
    src = pa.table({"a": pa.array([1, 50], pa.int64()), "b": pa.array([7, 8], pa.int64())})
    for name, impl in IMPLS.items():
        ds = impl.write_dataset(_data(), str(tmp_path / name))
        builder = ds.merge_insert("a").when_matched_update_all().when_not_matched_insert_all()
        for plan in (builder.explain_plan(), builder.explain_plan(src.schema, verbose=False),
                     builder.explain_plan(verbose=True)):
            assert plan.startswith("MergeInsert: on=[a], when_matched=UpdateAll, when_not_matched=InsertAll, "
                                   "when_not_matched_by_source=Keep"), name
            assert "Join" in plan, name
        analysis = builder.analyze_plan(src)
        assert "MergeInsert" in analysis and "metrics" in analysis, name
        for metric in ("bytes_written", "num_files_written=1", "num_inserted_rows=1", "num_updated_rows=1"):
            assert metric in analysis, (name, metric)
        assert ds.version == 1 and impl.dataset(ds.uri).version == 1 and ds.count_rows() == 20, name  # not committed


def test_merge_insert_use_index(tmp_path):
    src = pa.table({"a": pa.array([1, 2, 101], pa.int64()), "b": pa.array([999] * 3, pa.int64())})
    for name, impl in IMPLS.items():
        ds = impl.write_dataset(_data(), str(tmp_path / name))
        ds.create_scalar_index("a", "BTREE")
        with_index = ds.merge_insert("a").when_matched_update_all().when_not_matched_insert_all().use_index(True)
        with pytest.raises(OSError, match="does not support explain_plan"):
            with_index.explain_plan()
        by_source = ds.merge_insert("a").when_matched_update_all().when_not_matched_by_source_delete()
        assert "when_not_matched_by_source=Delete" in by_source.explain_plan(), name
        no_index = ds.merge_insert("a").when_matched_update_all().when_not_matched_insert_all().use_index(False)
        assert "MergeInsert" in no_index.explain_plan() and "Join" in no_index.explain_plan(), name
        assert no_index.execute(src) == {"num_inserted_rows": 1, "num_updated_rows": 2, "num_deleted_rows": 0}, name
        assert ds.to_table(filter="b = 999").num_rows == 3, name


SCHEMA = pa.schema([
    pa.field("embedding", pa.list_(pa.float32(), 32), False),
    pa.field("id", pa.int64(), True, metadata={"k": "v"}),
    pa.field("s", pa.struct([("x", pa.int32()), ("y", pa.large_string())])),
    pa.field("l", pa.list_(pa.timestamp("us", tz="UTC"))), pa.field("ll", pa.large_list(pa.date32())),
    pa.field("d", pa.dictionary(pa.int32(), pa.string())), pa.field("dec", pa.decimal128(10, 2)),
    pa.field("fsb", pa.binary(4)), pa.field("h", pa.float16()), pa.field("ts", pa.timestamp("ns")),
    pa.field("t", pa.time64("us")), pa.field("dur", pa.duration("ms")), pa.field("lb", pa.large_binary()),
], metadata={"sk": "sv"})


def test_schema_to_json_and_back():
    ours, theirs = lf.schema_to_json(SCHEMA), lance.schema_to_json(SCHEMA)
    assert ours == theirs
    assert lf.json_to_schema(theirs) == lance.json_to_schema(ours) == SCHEMA
    assert lf.json_to_schema(theirs).metadata == {b"sk": b"sv"}
    maps = pa.schema([pa.field("m", pa.map_(pa.string(), pa.int32()))])
    for impl in IMPLS.values():
        with pytest.raises(Exception, match="Unsupported type"):
            impl.schema_to_json(maps)


@pytest.mark.parametrize("opts", [{"limit": 3}, {"with_row_id": True}, {"filter": "i > 10"}])
def test_default_scan_options_with_search_and_take(tmp_path, opts):
    """A search takes the defaults as scan keywords (limit = k, post-filter); take does not."""
    import numpy as np

    table = lf.vec_to_table(np.random.default_rng(0).standard_normal((50, 4)).astype(np.float32))
    table = table.append_column("i", pa.array(range(50), pa.int64()))
    out = []
    for name, impl in IMPLS.items():
        impl.write_dataset(table, str(tmp_path / name))
        ds = impl.dataset(str(tmp_path / name), default_scan_options=opts)
        found = ds.to_table(nearest={"column": "vector", "q": np.zeros(4), "k": 5})
        out.append((found.column_names, found["i"].to_pylist(), ds.take([0, 20]), ds.sample(4).num_rows))
    assert out[0] == out[1]
