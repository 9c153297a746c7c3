"""SQL filters and expressions as pylance parses them: the same strings on pylance 14 and on
lance_ops.format, on the same dataset, give the same rows (or both refuse them)."""

import datetime as dt

import lance
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_ops.format as lf

IMPLS = ["pylance", "lance_ops"]


def _table() -> pa.Table:
    return pa.table({
        "id": pa.array([1, 2, 3, 4, 5], pa.int64()),
        "a": pa.array([1, 2, 3, None, 5], pa.int64()),
        "f": pa.array([1.5, 2.0, None, 4.25, -1.0]),
        "s": pa.array(["apple", "Banana", "it's", None, "cherry%"]),
        "b": pa.array([True, False, None, True, False]),
        "d": pa.array([dt.date(2024, 1, 1), dt.date(2024, 2, 1), None, dt.date(2023, 12, 31), dt.date(2024, 1, 15)]),
        "ts": pa.array([dt.datetime(2024, 1, 1, 12), None, dt.datetime(2024, 3, 1), dt.datetime(2023, 1, 1),
                        dt.datetime(2024, 1, 1)], pa.timestamp("us")),
        "st": pa.StructArray.from_arrays([pa.array([1, 2, 3, 4, 5]), pa.array(["x", "y", "z", "x", None])], ["x", "y"]),
        "Upper Col": pa.array([10, 20, 30, 40, 50], pa.int32()),
        "i8": pa.array([1, 2, 3, 4, 5], pa.int8()),
    })


@pytest.fixture(scope="module")
def uri(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("sql") / "ds.lance")
    lance.write_dataset(_table(), path, max_rows_per_file=3)  # two fragments
    return path


def _open(impl: str, uri: str):
    return lance.dataset(uri) if impl == "pylance" else lf.dataset(uri)


# (SQL, ids of the matching rows); every row was checked against pylance 14.0.2
MATCHES = [
    ("a > 1", [2, 3, 5]),
    ("f = 2", [2]),  # integer literal on a float column
    ("a = NULL", []),
    ("a != NULL", []),
    ("a IS NULL", [4]),
    ("a IS NOT NULL", [1, 2, 3, 5]),
    ("s = 'it''s'", [3]),
    ('s = "apple"', [1]),  # double quotes are a string literal
    ("NOT b", [2, 5]),
    ("b", [1, 4]),
    ("b = true", [1, 4]),
    ("b IS TRUE", [1, 4]),
    ("b IS NOT FALSE", [1, 3, 4]),
    ("b IS NOT TRUE", [2, 3, 5]),
    ("a IN (1, 3)", [1, 3]),
    ("a NOT IN (1,3)", [2, 5]),
    ("a IN (1, NULL)", [1]),
    ("a NOT IN (1, NULL)", []),
    ("f IN (1, 2)", [2]),
    ("a BETWEEN 2 AND 3", [2, 3]),
    ("a NOT BETWEEN 2 AND 3", [1, 5]),
    ("s LIKE 'a%'", [1]),
    ("s LIKE 'a_ple'", [1]),
    ("s LIKE 'A%'", []),
    ("s NOT LIKE 'a%'", [2, 3, 5]),
    ("s ILIKE 'b%'", [2]),
    ("s LIKE 'cherry\\%'", [5]),
    ("s LIKE '%\\%' ESCAPE '\\'", [5]),
    ("CAST(a AS STRING) = '1'", [1]),
    ("CAST(f AS INT) = 2", [2]),
    ("CAST(a AS DOUBLE) > 1.5", [2, 3, 5]),
    ("CAST(a AS TINYINT) = 1", [1]),
    ("CAST(a AS DECIMAL(10,2)) > 2.5", [3, 5]),
    ("CAST('2024-01-01' AS TIMESTAMP(3)) < ts", [1, 3]),
    ("CAST('2024-01-01' AS DATE) = d", [1]),
    ("lower(s) = 'banana'", [2]),
    ("upper(s) = 'APPLE'", [1]),
    ("length(s) = 5", [1]),
    ("char_length(s) = 5", [1]),
    ("starts_with(s, 'ap')", [1]),
    ("ends_with(s, 'y%')", [5]),
    ("contains(s, 'an')", [2]),
    ("regexp_match(s, 'an')", [2]),
    ("concat(s, 'x') = 'applex'", [1]),
    ("s || 'x' = 'applex'", [1]),
    ("date_part('year', d) = 2024", [1, 2, 5]),
    ("date_part('month', ts) = 3", [3]),
    ("date_part('dow', d) = 1", [1, 5]),
    ("abs(f) = 1", [5]),
    ("coalesce(a, 0) = 0", [4]),
    ("st.x = 2", [2]),
    ("st.y = 'x'", [1, 4]),
    ("`Upper Col` = 20", [2]),
    ("A > 3", [5]),  # unquoted names are case-insensitive
    ("d = date '2024-01-01'", [1]),
    ("ts = timestamp '2024-01-01 12:00:00'", [1]),
    ("ts > date '2024-01-01'", [1, 3]),
    ("d = timestamp '2024-01-01 00:00:00'", [1]),
    ("a + 1 = 3", [2]),
    ("a * 2 > 5", [3, 5]),
    ("a % 2 = 1", [1, 3, 5]),
    ("a / 2 = 1", [2, 3]),  # integer division truncates
    ("f / 2 = 1", [2]),
    ("a - f > 0", [5]),
    ("-a < -2", [3, 5]),
    ("a > -1", [1, 2, 3, 5]),
    ("1 < a", [2, 3, 5]),
    ("a + 9223372036854775807 > 0", []),  # wraps, as DataFusion
    ("TRUE", [1, 2, 3, 4, 5]),
    ("FALSE", []),
    ("a > 1 AND b", []),
    ("a > 1 OR b", [1, 2, 3, 4, 5]),
    ("not a > 1", [1]),
    ("(a > 1) = true", [2, 3, 5]),
    ("a <> 1", [2, 3, 5]),
    ("a == 1", [1]),
    ("s > 'b'", [3, 5]),
    ("a >= 2 AND a <= 3 OR s = 'apple'", [1, 2, 3]),
    ("a > 1 AND NULL", []),
    ("a > 1 OR NULL", [2, 3, 5]),
    ("NOT NULL", []),
    ("(a > 1 AND b) AND s IS NOT NULL", []),  # AND terms applied one after the other
    ("a > 0 AND (b OR NOT b) AND st.x > 1", [2, 5]),
    ("_rowaddr < 2", [1, 2]),
    ("_rowid >= 4294967296", [4, 5]),  # second fragment
]

# SQL both refuse with a ValueError; lance_ops' typed error and the position it points at
REFUSED = [
    ("a > 1.5", lf.SQLTypeError, 4),
    ("a = 2.0", lf.SQLTypeError, 4),
    ("a IN (1, 2.5)", lf.SQLTypeError, 9),
    ("a BETWEEN 1.5 AND 3", lf.SQLTypeError, 10),
    ("i8 > 200", lf.SQLTypeError, 5),
    ("a = '2'", lf.SQLTypeError, 4),
    ("s = 1", lf.SQLTypeError, 4),
    ("d > '2024-01-10'", lf.SQLTypeError, 4),
    ("ts = '2024-01-01 12:00:00'", lf.SQLTypeError, 5),
    ("NULL", lf.SQLTypeError, 0),
    ("a IS TRUE", lf.SQLTypeError, 0),
    ("lower(a) = 'x'", lf.SQLTypeError, 6),
    ("nope > 1", lf.SQLUnknownColumnError, 0),
    ("a > 1 AND st.zz = 1", lf.SQLUnknownColumnError, 13),  # at the unknown field
    ("a >", lf.SQLParseError, 2),
    ("a = 'x", lf.SQLParseError, 4),
    ("a IN ()", lf.SQLParseError, 0),
    ("extract(year from d) = 2024", lf.SQLParseError, 0),
    ("substr(s, 1, 2) = 'ap'", lf.SQLParseError, 0),
    ("nosuchfn(a) = 1", lf.SQLParseError, 0),
    ("a in (select 1)", lf.SQLParseError, 0),
    ("s LIKE '%!%' ESCAPE '!'", lf.SQLParseError, 0),
]


def _ids(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


@pytest.mark.interop
@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize(("sql", "expected"), MATCHES, ids=[m[0] for m in MATCHES])
def test_filter_matches(uri, impl, sql, expected):
    ds = _open(impl, uri)
    assert _ids(ds.to_table(columns=["id"], filter=sql)) == expected
    assert ds.count_rows(sql) == len(expected)
    assert sum(f.count_rows(sql) for f in ds.get_fragments()) == len(expected)


@pytest.mark.interop
@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize(("sql", "error", "position"), REFUSED, ids=[r[0] for r in REFUSED])
def test_filter_refused(uri, impl, sql, error, position):
    ds = _open(impl, uri)
    with pytest.raises(ValueError) as e:
        ds.to_table(columns=["id"], filter=sql)
    if impl == "lance_ops":
        assert type(e.value) is error
        assert e.value.expression == sql and e.value.position == position
        assert repr(sql) in str(e.value) and f"position {position}" in str(e.value)


def test_unknown_column_lists_the_columns(uri):
    with pytest.raises(lf.SQLUnknownColumnError) as e:
        lf.dataset(uri).count_rows("id > 1 AND nope < 3")
    assert e.value.column == "nope" and e.value.position == 11
    for name in ("'id'", "'Upper Col'", "'_rowid'"):
        assert name in str(e.value)
    assert isinstance(e.value, lf.SchemaError) and isinstance(e.value, ValueError)


@pytest.mark.parametrize("sql", ["a > 1; drop table t", "a > 1 b"])
def test_trailing_text_refused(uri, sql):
    """pylance ignores what follows a complete predicate; lance_ops refuses it (documented)."""
    with pytest.raises(lf.SQLParseError):
        lf.dataset(uri).to_table(filter=sql)


def test_sql_equals_expression(uri):
    ds = lf.dataset(uri)
    sql = ds.to_table(filter="a >= 2 AND s IS NOT NULL", with_row_id=True)
    expr = ds.to_table(filter=(pc.field("a") >= 2) & pc.field("s").is_valid(), with_row_id=True)
    assert sql.equals(expr) and sql.num_rows == 3


# --------------------------------------------------------------------------- entry points

@pytest.mark.interop
@pytest.mark.parametrize("impl", IMPLS)
def test_read_entry_points(uri, impl):
    ds = _open(impl, uri)
    sql = "a > 1 AND st.y != 'y'"
    assert _ids(pa.Table.from_batches(list(ds.to_batches(columns=["id"], filter=sql)))) == [3]
    assert _ids(ds.scanner(columns=["id"], filter=sql).to_table()) == [3]
    assert ds.scanner(filter=sql).count_rows() == 1
    frag = ds.get_fragments()[0]
    assert _ids(frag.to_table(columns=["id"], filter=sql)) == [3]
    assert frag.count_rows(sql) == 1 and frag.count_rows("a > 100") == 0


@pytest.mark.interop
@pytest.mark.parametrize("impl", IMPLS)
def test_count_rows_with_a_filter_is_exact(tmp_path, impl):
    """lance_ops returned 0 for every count_rows(filter): a scan projecting no columns lost its rows."""
    path = str(tmp_path / "c.lance")
    lance.write_dataset(pa.table({"id": pa.array(range(10_000), pa.int64())}), path, max_rows_per_file=3000)
    lance.dataset(path).delete("id % 10 = 0")
    ds = _open(impl, path)
    assert ds.count_rows() == 9000
    assert ds.count_rows("id < 5000") == 4500
    assert ds.count_rows(filter="id >= 0") == 9000
    assert ds.count_rows("_rowaddr < 100") == 90  # metadata-only filter: data files untouched
    assert [f.count_rows("id < 5000") for f in ds.get_fragments()] == [2700, 1800, 0, 0]
    assert ds.to_table(columns=[]).num_rows == 9000
    assert ds.to_table(columns=[], filter="id < 10").num_rows == 9
    if impl == "lance_ops":
        assert ds.count_rows(pc.field("id") < 5000) == 4500
        assert sum(b.num_rows for b in ds.to_batches(columns=[], filter="id < 5000")) == 4500


@pytest.mark.interop
@pytest.mark.parametrize("impl", IMPLS)
def test_delete_and_update_take_sql(tmp_path, impl):
    path = str(tmp_path / "m.lance")
    lance.write_dataset(_table(), path)
    ds = _open(impl, path)
    ds.delete("s LIKE 'c%' OR a IS NULL")  # the handle moves, as pylance's
    assert _ids(ds.to_table()) == [1, 2, 3]
    ds.update({"a": "a * 10 + 1", "s": "upper(s)", "f": "NULL"}, where="id >= 2")
    t = ds.to_table(columns=["id", "a", "s", "f"]).sort_by("id")
    assert t.to_pydict() == {"id": [1, 2, 3], "a": [1, 21, 31], "s": ["apple", "BANANA", "IT'S"], "f": [1.5, None, None]}
    ds.update({"s": "'it''s new'"})
    assert set(ds.to_table(columns=["s"]).column("s").to_pylist()) == {"it's new"}
    assert lance.dataset(path).count_rows("s = 'it''s new'") == 3  # pylance reads what we wrote


def test_update_value_errors_are_typed(tmp_path):
    path = str(tmp_path / "u.lance")
    lance.write_dataset(_table(), path)
    ds = lf.dataset(path)
    with pytest.raises(lf.SQLUnknownColumnError, match="update value of 'a'"):
        ds.update({"a": "nope + 1"})
    with pytest.raises(lf.SQLParseError, match="position"):
        ds.update({"a": "a +"}, where="id = 1")
    with pytest.raises(lf.SQLParseError):
        ds.update({"a": "1"}, where="id =")
    assert lf.dataset(path).version == 1


@pytest.mark.interop
@pytest.mark.parametrize("impl", IMPLS)
def test_merge_insert_sql_conditions(tmp_path, impl):
    path = str(tmp_path / "mi.lance")
    target = pa.table({"id": pa.array([1, 2, 3, 4], pa.int64()), "x": pa.array([10, 20, 30, 40], pa.int64())})
    lance.write_dataset(target, path)
    source = pa.table({"id": pa.array([1, 2, 5], pa.int64()), "x": pa.array([5, 25, 50], pa.int64())})
    ds = _open(impl, path)
    (ds.merge_insert("id").when_matched_update_all(condition="target.x < source.x")
       .when_not_matched_insert_all().when_not_matched_by_source_delete("x > 35").execute(source))
    got = lance.dataset(path).to_table().sort_by("id").to_pydict()
    assert got == {"id": [1, 2, 3, 5], "x": [10, 25, 30, 50]}


def test_jobs_and_configs_validate_with_the_same_parser(tmp_path):
    """What jobs.delete and the Dagster delete config run first: the format API's check."""
    path = str(tmp_path / "j.lance")
    lance.write_dataset(_table(), path)
    schema = lf.dataset(path).lance_schema
    assert isinstance(lf.resolve_filter(schema, "a > 1 AND s = \"x\""), pc.Expression)
    with pytest.raises(lf.SQLUnknownColumnError):
        lf.resolve_filter(schema, "nope = 1", "delete predicate")
    assert lf.transpile_sql("s = 'it''s' AND t = \"x\"", "spark") == "s = 'it\\'s' AND t = 'x'"


def test_sql_filters_keep_pruning(uri):
    """A SQL filter plans like the Expression it becomes: only the columns it reads are decoded,
    and one over metadata columns only runs before any data file is opened."""
    from lance_ops.format.read.scan import plan_scan

    schema = lf.dataset(uri).lance_schema
    plan = plan_scan(schema, [], "a > 1 AND `Upper Col` < 40", False, False)
    assert plan.data_columns == ("a", "Upper Col") and plan.output == ()
    assert len(plan.filter_chain) == 2  # the AND terms, applied one after the other
    meta = plan_scan(schema, ["id"], "_row_created_at_version >= 1 AND _rowaddr < 2", False, False)
    assert meta.filter_is_metadata_only and set(meta.filter_columns) == {"_row_created_at_version", "_rowaddr"}
    assert meta.data_columns == ("id",)
    ds = lf.dataset(uri)
    assert ds.count_rows("_row_created_at_version > 1") == 0
    assert ds.count_rows("_rowaddr >= 4294967296 AND _rowaddr < 4294967297") == 1
