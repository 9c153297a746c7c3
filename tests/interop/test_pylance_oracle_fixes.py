"""Regression tests for what pylance's own test files found (issue 34, docs/PYLANCE_TESTS.md).

Each test runs the same calls on ``lance`` (pylance 14) and ``lance_ops.format`` and compares
the results, or the builtin exception type and message pylance code matches on.
"""

from datetime import timedelta

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_ops.format as lf

pytestmark = pytest.mark.interop

IMPLS = {"pylance": lance, "lance_ops": lf}


def both(tmp_path, fn):
    """``fn(impl, uri)`` on both libraries (own directories); the two results."""
    return [fn(impl, str(tmp_path / name)) for name, impl in IMPLS.items()]


def raised(fn):
    """``(builtin types, message)`` of what ``fn()`` raises, for pylance-style ``pytest.raises``."""
    with pytest.raises(Exception) as info:
        fn()
    return info.value


def _table() -> pa.Table:
    return pa.table({
        "i": pa.array([1, 2, 3, 4, 5], pa.int64()),
        "x": pa.array([1.0, float("nan"), -1.0, None, 0.0]),
        "b": pa.array([b"abc", b"\x0a\x1b", None, b"", b"abc"], pa.binary()),
        "lb": pa.array([b"abc", None, b"z", b"", b"q"], pa.large_binary()),
        "g": pa.array([["a", "b"], ["c"], None, [], ["b", "c"]]),
        "v": pa.array([[1.0, 2.0]] * 5, pa.list_(pa.float32(), 2)),
        "ls": pa.array([[{"x": 1}], [{"x": 2}, {"x": 3}], [], None, [{"x": 5}]]),
        "s": pa.array([{"y": 1}, {"y": 2}, {"y": None}, {"y": 4}, {"y": 5}]),  # no null struct: 2.0 refuses one
    })


FILTERS = [
    # NaN sorts above every number (DataFusion), equals itself
    "x > 0", "x >= 0", "x < 0", "x <= 0", "x = x", "x <> 1", "x != x", "0 < x", "x BETWEEN -1 AND 2",
    "NOT (x > 0)", "x > -1",
    # binary literals
    "b = X'616263'", "b = x'0a1b'", "lb = X'616263'", "b <> X''",
    # list functions and literals
    "array_has_any(g, ['a', 'c'])", "array_has_any(g, Array['a', 'zz'])", "array_has_all(g, ['b', 'c'])",
    "array_contains(g, 'c')", "array_has(g, 'a')",
    # list and struct indexing
    "ls[1]['x'] = 1", "ls[2].x = 3", "ls[1].x >= 2", "s['y'] > 1",
    # arrow_cast
    "arrow_cast(i, 'Int8') = 2", "arrow_cast(i, 'Float32') > 2.5",
]


@pytest.mark.parametrize("sql", FILTERS)
def test_sql_filters_match_pylance(tmp_path, sql):
    got = both(tmp_path, lambda impl, uri: impl.write_dataset(_table(), uri).to_table(filter=sql)["i"].to_pylist())
    assert got[0] == got[1]


@pytest.mark.parametrize("expr", ["ls[1]['x']", "ls[2]", "s['y']", "arrow_cast(i, 'Int16')", "g[1]"])
def test_sql_projections_match_pylance(tmp_path, expr):
    got = both(tmp_path, lambda impl, uri: impl.write_dataset(_table(), uri).to_table(columns={"out": expr}))
    assert got[0].schema.field("out").type == got[1].schema.field("out").type
    assert got[0]["out"].to_pylist() == got[1]["out"].to_pylist()


@pytest.mark.parametrize("values", [{"b": "X'0102'"}, {"v": "[3.0, 4.5]"}, {"lb": "x'ff'"}])
def test_update_with_binary_and_array_literals(tmp_path, values):
    def run(impl, uri):
        ds = impl.write_dataset(_table(), uri)
        ds.update(updates=values, where="i > 3")
        return impl.dataset(uri).to_table(columns=["i", *values]).to_pydict()
    got = both(tmp_path, run)
    assert got[0] == got[1]


@pytest.mark.parametrize("sql, message", [
    ("i BETWEEN 'a' AND 'b'", "Invalid user input: "),
    ("i AN", "Invalid user input: "),
    ("foo = 7", "No field named foo"),
])
def test_bad_predicates_raise_what_pylance_code_matches(tmp_path, sql, message):
    errors = both(tmp_path, lambda impl, uri: raised(lambda: impl.write_dataset(_table(), uri).to_table(filter=sql)))
    for e in errors:
        assert isinstance(e, ValueError) and message in str(e)


def _indexed(impl, uri):
    ds = impl.write_dataset(pa.table({"a": list(range(50)), "b": list(range(50)), "c": [str(i) for i in range(50)]}),
                            uri)
    for col, kind in (("a", "BTREE"), ("b", "BTREE"), ("c", "BITMAP")):
        ds.create_scalar_index(col, kind)
    return ds


def _indices(uri):
    """Index names and field ids as pylance reads them."""
    return sorted((d.name, tuple(d.fields)) for d in lance.dataset(uri).describe_indices())


def test_drop_rename_and_cast_of_indexed_columns(tmp_path):
    def run(impl, uri):
        ds = _indexed(impl, uri)
        ds.drop_columns(["a"])
        cast = raised(lambda: ds.alter_columns({"path": "b", "data_type": pa.int32()}))
        ds.alter_columns({"path": "c", "name": "cc"})
        reader = lance.dataset(uri)
        return (_indices(uri), isinstance(cast, OSError), "index(es) attached: [b_idx]" in str(cast),
                reader.to_table(filter="cc = '7'")["b"].to_pylist(), reader.version)
    got = both(tmp_path, run)
    assert got[0] == got[1]
    assert got[0][0] == [("b_idx", (1,)), ("c_idx", (2,))]


def test_lancedb_reads_the_indices_after_schema_changes(tmp_path):
    """lancedb (Lance core 13) as the reader: the index list and indexed filters after a drop and
    a rename by lance_ops are those after the same calls by pylance."""
    import lancedb

    def run(impl, uri):
        ds = _indexed(impl, f"{uri}/t.lance")
        ds.drop_columns(["a"])
        ds.alter_columns({"path": "c", "name": "cc"})
        tbl = lancedb.connect(uri).open_table("t")
        return (sorted(i.name for i in tbl.list_indices()),
                tbl.search().where("cc = '7'").select(["b"]).limit(100).to_arrow()["b"].to_pylist(),
                tbl.search().where("b > 45").select(["b"]).limit(100).to_arrow()["b"].to_pylist())
    got = both(tmp_path, run)
    assert got[0] == got[1] == (["b_idx", "c_idx"], [7], [46, 47, 48, 49])


def test_alter_columns_errors_as_pylance(tmp_path):
    alts = [{"path": "x", "data_type": pa.int8()}, {"path": "x", "data_type": pa.string()},
            {"path": "q", "name": "z"}, {"path": "x", "type": "string"}, {"path": "x"}]

    def run(impl, uri):
        ds = impl.write_dataset(pa.table({"x": pa.array([1, 2, 1024], pa.int32())}), uri)
        out = []
        for alt in alts:
            e = raised(lambda alt=alt: ds.alter_columns(alt))
            out.append((isinstance(e, OSError), isinstance(e, ValueError) or isinstance(e, OSError)))
        return out, [str(raised(lambda alt=alt: ds.alter_columns(alt))) for alt in alts]

    (types_p, msgs_p), (types_o, msgs_o) = both(tmp_path, run)
    assert [t[0] for t in types_p] == [t[0] for t in types_o]
    expected = ["Can't cast value 1024 to type Int8", 'Cannot cast column "x" from Int32 to Utf8',
                'Column "q" does not exist', "Unknown key: type", "At least one of name, nullable, or data_type"]
    for want, p, o in zip(expected, msgs_p, msgs_o, strict=True):
        assert want in p and want in o


def test_add_all_null_sql_column_is_metadata_only(tmp_path):
    def run(impl, uri):
        ds = impl.write_dataset(pa.table({"a": list(range(100))}), uri, max_rows_per_file=50)
        before = [[f.path for f in fr.data_files()] for fr in ds.get_fragments()]
        ds.add_columns({"b": "CAST(NULL AS INT)"})
        after = [[f.path for f in fr.data_files()] for fr in ds.get_fragments()]
        r = lance.dataset(uri)
        return before == after, r.schema, r.to_table()["b"].null_count
    got = both(tmp_path, run)
    assert got[0] == got[1] and got[0][0] is True


def test_add_columns_from_a_reader(tmp_path):
    schema = pa.schema([pa.field("c", pa.int64()), pa.field("d", pa.int64())])
    more = pa.schema([pa.field("e", pa.int64()), pa.field("f", pa.int64())])

    def batches(sizes, schema=schema):
        for n in sizes:
            yield pa.record_batch([pa.array(range(n)), pa.array(range(n))], schema=schema)

    def run(impl, uri):
        ds = impl.write_dataset(pa.table({"a": list(range(100))}), uri, max_rows_per_file=25)
        ds.delete("a = 30")
        ds = impl.dataset(uri)
        ds.add_columns(pa.RecordBatchReader.from_batches(schema, batches([3] * 33)))
        short = raised(lambda: ds.add_columns(batches([50], more), reader_schema=more))
        long = raised(lambda: ds.add_columns(batches([100], more), reader_schema=more))
        return (lance.dataset(uri).to_table().to_pydict(), isinstance(short, OSError), isinstance(long, OSError),
                "Stream ended before producing values for all rows" in str(short),
                "Stream produced more values than expected" in str(long))
    got = both(tmp_path, run)
    assert got[0] == got[1]


def test_signatures(tmp_path):
    def run(impl, uri):
        ds = impl.write_dataset(pa.table({"a": [1, 2, 3]}), uri, None, "create")  # positional schema, mode
        ds = impl.write_dataset(pa.table({"a": [4]}), uri, None, "append")
        out = [ds.to_table(scan_in_order=True)["a"].to_pylist(),
               [b.num_rows for b in ds.to_batches(scan_in_order=False)],
               ds.scanner(scan_in_order=True).to_table().num_rows]
        r = ds.update(updates={"a": "a * 10"}, where="a > 3")
        out.append(r["num_rows_updated"])
        vec = impl.write_dataset(pa.table({"v": pa.array([[float(i), 1.0] for i in range(300)],
                                                         pa.list_(pa.float32(), 2))}), uri + "_v")
        out.append(type(vec.create_index("v", "IVF_FLAT", num_partitions=2)).__name__)
        b = ds.merge_insert("a").when_matched_fail().when_not_matched_insert_all()
        b = b.retry_timeout(timedelta(seconds=5)).conflict_retries(0)
        out.append(dict(b.execute(pa.table({"a": [7, 8]}))))
        e = raised(lambda: ds.merge_insert("a").when_matched_fail().when_not_matched_insert_all()
                   .execute(pa.table({"a": [7, 9]})))
        out.append((isinstance(e, OSError), "Merge insert failed: found matching row" in str(e)))
        out.append(impl.dataset(uri).to_table()["a"].to_pylist())
        out.append([t.operation.__class__.__name__ != "" for t in impl.dataset(uri).get_transactions(3)])
        return out
    got = both(tmp_path, run)
    assert got[0] == got[1]


def test_take_take_rows_and_head(tmp_path):
    def run(impl, uri):
        out = []
        for stable in (False, True):
            ds = impl.write_dataset(pa.table({"a": list(range(30))}), f"{uri}_{stable}", max_rows_per_file=10,
                                    enable_stable_row_ids=stable)
            ds.delete("a % 7 = 3")
            ds = impl.dataset(f"{uri}_{stable}")
            ids = ds.to_table(columns=["_rowid" if stable else "_rowaddr"]).column(0).to_pylist()
            out += [ds.take([5, 0, 20, 5], columns=["a"]).to_pydict(),
                    ds._take_rows([ids[3], ids[0], ids[10]], columns=["a"]).to_pydict(),
                    ds.get_fragments()[1].head(3).to_pydict(),
                    ds.take([2, 0], columns={"a2": "a * 2"}).to_pydict(),
                    ds._take_rows([ids[1]], columns={"a2": "a * 2"}).to_pydict(),
                    ds.get_fragments()[0].take([0, 4]).to_pydict(), len(ds)]
        return out
    got = both(tmp_path, run)
    assert got[0] == got[1]


def test_vec_to_table(tmp_path):
    from lance.vector import vec_to_table
    data = [np.arange(12, dtype=np.float64).reshape(3, 4), [[1, 2], [3, 4]], {"a": [1.0, 2.0], "b": [3.0, 4.0]}]
    for d in data:
        assert lf.vec_to_table(d) == vec_to_table(d)
    assert lf.vec_to_table([[1, 2]], names="emb") == vec_to_table([[1, 2]], names="emb")
    with pytest.raises(ValueError):
        lf.vec_to_table([[1, 2], [3]])


def test_memory_datasets_are_fresh_on_create():
    t = pa.table({"a": [1, 2]})
    for impl in IMPLS.values():
        impl.write_dataset(t, "memory://oracle-fresh")
        again = impl.write_dataset(t, "memory://oracle-fresh")
        assert (again.version, again.count_rows()) == (1, 2)
        a, b = impl.write_dataset(t, "memory://"), impl.write_dataset(t, "memory://")
        assert (a.count_rows(), b.count_rows(), b.version) == (2, 2, 1)


def test_detached_commits(tmp_path, file_version):
    def run(impl, uri):
        ds = impl.write_dataset(pa.table({"x": [0]}), uri)
        frag = impl.LanceFragment.create(uri, pa.table({"x": [1]}), data_storage_version=file_version)
        det = impl.LanceDataset.commit(ds, impl.LanceOperation.Append([frag]), read_version=ds.version, detached=True)
        frag = impl.LanceFragment.create(uri, pa.table({"x": [2]}), data_storage_version=file_version)
        det2 = impl.LanceDataset.commit(uri, impl.LanceOperation.Append([frag]), read_version=det.version,
                                        detached=True)
        other = lf if impl is lance else lance  # the other library reads the detached versions
        return (det.version >> 63, det.to_table()["x"].to_pylist(), det2.to_table()["x"].to_pylist(),
                impl.dataset(uri).to_table()["x"].to_pylist(), impl.dataset(uri).version,
                other.dataset(uri, version=det2.version).to_table()["x"].to_pylist())
    got = both(tmp_path, run)
    assert got[0] == got[1] == (1, [0, 1], [0, 1, 2], [0], 1, [0, 1, 2])


def test_create_index_refusals_as_pylance(tmp_path):
    def run(impl, uri):
        ds = impl.write_dataset(lf.vec_to_table(np.random.default_rng(0).normal(size=(300, 8))), uri)
        calls = [lambda: ds.create_index("vector", "IVF_PQ"), lambda: ds.create_index("vector", "IVF_PQ", num_partitions=2),
                 lambda: ds.create_index("foo", "IVF_PQ", num_partitions=2, num_sub_vectors=2),
                 lambda: ds.create_index("vector", "foo", num_partitions=2, num_sub_vectors=2)]
        errors = [raised(c) for c in calls]
        return [isinstance(e, ValueError) for e in errors[:2]] + [isinstance(errors[2], KeyError),
                                                                  isinstance(errors[3], NotImplementedError)]
    got = both(tmp_path, run)
    assert got[0] == got[1] == [True, True, True, True]


def test_fragment_json_passes_between_the_libraries(tmp_path):
    import json
    for stable in (False, True):
        uri = str(tmp_path / f"ds{stable}")
        ds = lance.write_dataset(pa.table({"a": list(range(10))}), uri, enable_stable_row_ids=stable)
        ds.delete("a = 3")
        theirs = lance.dataset(uri).get_fragments()[0].metadata
        ours = lf.dataset(uri).get_fragments()[0].metadata
        assert ours.to_json() == theirs.to_json()
        assert (ours.row_id_meta is None) == (theirs.row_id_meta is None) == (not stable)
        assert ours.deletion_file.asdict() == theirs.deletion_file.asdict()
        assert lf.FragmentMetadata.from_json(json.dumps(theirs.to_json())) == ours
        assert lance.FragmentMetadata.from_json(json.dumps(ours.to_json())).to_json() == theirs.to_json()


def test_schema_helpers_and_write_options(tmp_path):
    from lance.schema import LanceSchema
    schemas = {lance: LanceSchema, lf: lf.LanceSchema}

    def run(impl, uri):
        ds = impl.write_dataset(pa.table({"a": [1, 2], "b": [3, 4]}), uri, max_rows_per_group=3)
        ds.update_schema_metadata({"k": "v"})
        meta = dict(impl.dataset(uri).schema_metadata)
        project = impl.LanceOperation.Project(schemas[impl].from_pyarrow(pa.schema([("a", pa.int64())])))
        after = impl.LanceDataset.commit(ds, project, read_version=impl.dataset(uri).version)
        return meta, after.to_table().to_pydict(), schemas[impl].from_pyarrow(ds.schema).to_pyarrow() == ds.schema
    got = both(tmp_path, run)
    assert got[0] == got[1] == ({"k": "v"}, {"a": [1, 2]}, True)


def test_take_blobs_of_a_deleted_row(tmp_path, file_version):
    # neither library writes blob columns at 2.1 (pylance refuses 2.1 blob v2): 2.2 there
    version = "2.2" if file_version == "2.1" else file_version
    schema = pa.schema([pa.field("blobs", pa.large_binary(), metadata={"lance-encoding:blob": "true"}),
                        pa.field("idx", pa.uint64())])

    def run(impl, uri):
        ds = impl.write_dataset(pa.table([pa.array([b"foo", b"bar", b"baz"], pa.large_binary()),
                                          pa.array([0, 1, 2], pa.uint64())], schema=schema), uri,
                                data_storage_version=version)
        ids = ds.to_table(columns=[], with_row_id=True).column("_rowid").to_pylist()
        ds.delete("idx = 1")
        e = raised(lambda: impl.dataset(uri).take_blobs("blobs", ids=ids))
        return isinstance(e, NotImplementedError), "must not target deleted" in str(e)
    got = both(tmp_path, run)
    assert got[0] == got[1] == (True, True)


NAN_FILTERS = ["x > 0", "x < 5", "x >= 0", "x <= 5", "x = x", "x <> x", "x != 1", "x = CAST('NaN' AS DOUBLE)",
               "x > CAST('NaN' AS DOUBLE)", "x < CAST('NaN' AS DOUBLE)", "x BETWEEN -10 AND 10", "x > y", "x = y",
               "x < y", "x <> y", "y > 0", "NOT (x > 0)"]


def test_float_order_is_datafusions_total_order(tmp_path):
    """Positive NaN above every number, negative NaN below (IEEE totalOrder), as DataFusion."""
    t = pa.table({"x": [1.0, float("-nan"), float("inf"), float("-inf"), 2.0, float("nan"), 3.0, None],
                  "y": pa.array([float("nan"), float("-nan"), 1, 2, None, float("nan"), -1, 0], pa.float32()),
                  "i": list(range(8))})
    def run(impl, uri):
        ds = impl.write_dataset(t, uri)
        return [sorted(ds.to_table(filter=f)["i"].to_pylist()) for f in NAN_FILTERS]
    got = both(tmp_path, run)
    assert got[0] == got[1]
    assert got[0][0] == [0, 2, 4, 5, 6]  # x > 0: the positive NaN matches, the negative one does not


def test_drop_index(tmp_path):
    def run(impl, uri):
        ds = _indexed(impl, uri)
        missing = raised(lambda: ds.drop_index("nope"))
        ds.drop_index("a_idx")
        ds.alter_columns({"path": "a", "data_type": pa.int32()})  # no index left on it: the cast is allowed
        return (isinstance(missing, RuntimeError), "Lance index not found" in str(missing), _indices(uri),
                lance.dataset(uri).schema.field("a").type, lance.dataset(uri).to_table(filter="a = 3").num_rows)
    got = both(tmp_path, run)
    assert got[0] == got[1] and got[0][2] == [("b_idx", (1,)), ("c_idx", (2,))]


def test_batch_udf_returning_a_dataframe(tmp_path):
    def run(impl, uri):
        ds = impl.write_dataset(pa.table({"a": [1, 2, 3]}), uri)

        @impl.batch_udf(output_schema=pa.schema([("b", pa.int64())]))
        def double(batch):
            return batch.to_pandas().assign(b=lambda x: x.a * 2)[["b"]]

        ds.add_columns(double)
        return impl.dataset(uri).to_table().to_pydict()
    got = both(tmp_path, run)
    assert got[0] == got[1] == {"a": [1, 2, 3], "b": [2, 4, 6]}


def test_scanner_over_lance_fragments_and_arrow_cast_lists(tmp_path):
    def run(impl, uri):
        for _ in range(3):
            impl.write_dataset(pa.table({"a": range(100)}), uri, mode="append")
        ds = impl.dataset(uri)
        frags = list(ds.get_fragments())
        counts = (ds.scanner(fragments=frags[0:2]).to_table().num_rows,
                  ds.scanner(fragments=iter(frags[0:2]), scan_in_order=False).to_table().num_rows)
        ds.add_columns({"v": "arrow_cast(NULL, 'FixedSizeList(4, Float32)')"})
        r = impl.dataset(uri)
        return counts, r.schema.field("v").type, r.to_table()["v"].null_count
    got = both(tmp_path, run)
    assert got[0] == got[1] == ((200, 200), pa.list_(pa.float32(), 4), 300)
