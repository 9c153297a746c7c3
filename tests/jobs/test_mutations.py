"""append / delete / upsert jobs, checked row by row with pylance."""

import lance
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from datagen import simple_table
from helpers import data_files, referenced_files, snapshot

import lance_ops.format as lf
from lance_ops import jobs
from lance_ops.format.errors import UnsupportedFeatureError
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.table.manifest import NamingScheme
from lance_ops.format.txn.commit_loop import load_transaction


def frame(spark, table: pa.Table, parts: int = 2):
    return spark.createDataFrame(table.to_pandas()).repartition(parts)



def test_delete_predicate_is_the_format_apis(spark, uri):
    """jobs.delete takes the SQL lance_ops.format (and pylance) takes, with the same typed errors,
    and Spark reads it as pylance does (``''`` and double-quoted strings)."""
    t = pa.table({"id": pa.array([1, 2, 3, 4], pa.int64()), "val": ["it's", "a", "b", "x y"]})
    lf.write_dataset(t, uri)
    for bad, error in (("id >", lf.SQLParseError), ("nope = 1", lf.SQLUnknownColumnError),
                       ("id > 1.5", lf.SQLTypeError)):
        with pytest.raises(error) as e:
            jobs.delete(spark, uri, bad)
        assert repr(bad) in str(e.value) and uri in str(e.value)
    assert lance.dataset(uri).version == 1
    r = jobs.delete(spark, uri, "val = 'it''s' OR val = \"x y\"")
    assert r.num_deleted_rows == 2
    assert sorted(lance.dataset(uri).to_table()["id"].to_pylist()) == [2, 3]
    assert lance.dataset(uri).count_rows("val = 'it''s'") == 0

def test_append_from_files_of_every_format(spark, uri, tmp_path):
    base = simple_table(0, 40)
    pq_path, js_path, csv_path, lance_path = (str(tmp_path / n) for n in ("p", "j", "c", "l"))
    frame(spark, simple_table(100, 30)).write.parquet(pq_path)
    frame(spark, simple_table(200, 20)).write.json(js_path)
    frame(spark, simple_table(300, 10)).write.option("header", True).csv(csv_path)
    lf.write_dataset(simple_table(400, 5), lance_path)

    r0 = jobs.append(spark, uri, frame(spark, base), enable_stable_row_ids=True, max_rows_per_file=15)
    assert (r0.version, r0.rows_written, r0.fragments_added) == (1, 40, 4)
    assert jobs.append(spark, uri, pq_path, format="parquet").rows_written == 30
    # json/csv infer types: cast to the dataset's on the way in
    assert jobs.append(spark, uri, js_path, format="json").rows_written == 20
    r3 = jobs.append(spark, uri, csv_path, format="csv", options={"header": True, "inferSchema": True})
    r4 = jobs.append(spark, uri, lance_path, format="lance")
    assert (r3.version, r3.rows_written, r4.version, r4.rows_written) == (4, 10, 5, 5)
    t = snapshot(uri)
    assert sorted(t["id"].to_pylist()) == list(range(40)) + list(range(100, 130)) + list(range(200, 220)) + list(
        range(300, 310)) + list(range(400, 405))
    assert t["_rowid"].to_pylist() == list(range(105))
    by_id = {r["id"]: r for r in t.to_pylist()}
    assert by_id[305]["val"] == "v305" and by_id[305]["score"] == 152.5
    assert (by_id[120]["_row_created_at_version"], by_id[402]["_row_created_at_version"]) == (2, 5)
    empty = jobs.append(spark, uri, spark.createDataFrame([], "id long, val string, score double"))
    assert empty.version is None and lance.dataset(uri).version == 5


def test_delete_with_a_sql_predicate(spark, uri):
    lf.write_dataset(simple_table(0, 300), uri, enable_stable_row_ids=True, max_rows_per_file=100)
    before = snapshot(uri)
    r = jobs.delete(spark, uri, "id % 7 = 0 OR val LIKE 'v29%' OR (id >= 100 AND id < 200)")
    assert r.version == 2 and r.read_version == 1
    gone = {i for i in range(300) if i % 7 == 0 or str(i).startswith("29") or 100 <= i < 200}
    assert r.num_deleted_rows == len(gone)
    assert (r.fragments_updated, r.fragments_removed) == (2, 1)  # fragment 1 (ids 100..199) is gone
    after = snapshot(uri)
    assert after.to_pylist() == [row for row in before.to_pylist() if row["id"] not in gone]
    ds = lance.dataset(uri)
    assert [f.fragment_id for f in ds.get_fragments()] == [0, 2]
    assert ds.to_table(columns=["id"], filter="id = 140").num_rows == 0
    # metadata columns in the predicate, and a predicate matching nothing
    r2 = jobs.delete(spark, uri, "_rowid < 10 AND _row_created_at_version = 1")
    assert r2.num_deleted_rows == len([i for i in range(10) if i not in gone])
    assert jobs.delete(spark, uri, "id > 10000").version is None
    assert lance.dataset(uri).version == 3
    store = ObjectStore(uri)
    ops = [load_transaction(store, v, NamingScheme.V2).operation for v in (2, 3)]
    assert all(isinstance(op, lf.Delete) for op in ops)
    assert ops[0].predicate.startswith("id % 7 = 0") and ops[0].deleted_fragment_ids == [1]
    assert snapshot(uri)["id"].to_pylist() == [i for i in range(10, 300) if i not in gone]


def test_upsert_keeps_row_ids_of_matched_rows(spark, uri):
    lf.write_dataset(simple_table(0, 100), uri, enable_stable_row_ids=True, max_rows_per_file=40)
    lf.write_dataset(simple_table(100, 20), uri, mode="append")  # version 2: ids 100..119
    before = {r["id"]: r for r in snapshot(uri).to_pylist()}
    src = pa.table({
        "id": pa.array([5, 45, 110, 119, 500, 501], pa.int64()),
        "val": pa.array(["new5", "new45", "new110", None, "ins500", "ins501"]),
        "score": pa.array([-1.0, -2.0, -3.0, -4.0, 5.0, 6.0]),
    })
    r = jobs.upsert(spark, uri, frame(spark, src, 3), on=["id"])
    assert r.version == 3 and (r.num_updated_rows, r.num_inserted_rows) == (4, 2)
    t = {row["id"]: row for row in snapshot(uri).to_pylist()}
    assert len(t) == 122
    for i, val, score in [(5, "new5", -1.0), (45, "new45", -2.0), (110, "new110", -3.0), (119, None, -4.0)]:
        assert (t[i]["val"], t[i]["score"]) == (val, score)
        assert t[i]["_rowid"] == before[i]["_rowid"]
        assert t[i]["_row_created_at_version"] == before[i]["_row_created_at_version"]
        assert t[i]["_row_last_updated_at_version"] == 3
    assert sorted((t[500]["_rowid"], t[501]["_rowid"])) == [120, 121]  # new ids continue next_row_id
    assert t[500]["_row_created_at_version"] == t[500]["_row_last_updated_at_version"] == 3
    for i in set(before) - {5, 45, 110, 119}:
        assert t[i] == before[i]  # untouched rows: same values, ids and versions
    assert lance.dataset(uri).versions()[-1]["version"] == 3
    assert data_files(uri) == referenced_files(uri)

    # a target row matched by two source rows is an error, and nothing is committed
    dup = pa.table({"id": pa.array([7, 7]), "val": pa.array(["a", "b"]), "score": pa.array([0.0, 0.0])})
    with pytest.raises(Exception, match="same target row"):
        jobs.upsert(spark, uri, frame(spark, dup, 1), on="id")
    assert lance.dataset(uri).version == 3
    assert data_files(uri) == referenced_files(uri)


def test_upsert_from_a_parquet_path_on_two_keys(spark, uri, tmp_path):
    tbl = simple_table(0, 50).append_column("g", pa.array([i % 2 for i in range(50)], pa.int32()))
    lf.write_dataset(tbl, uri, enable_stable_row_ids=True)
    src = tbl.slice(10, 5).set_column(1, "val", pa.array(["x"] * 5))
    src = src.set_column(3, "g", pc.add(src["g"], pa.scalar(0, pa.int32())))
    path = str(tmp_path / "src")
    frame(spark, src.slice(0, 3), 1).write.parquet(path)
    r = jobs.upsert(spark, uri, path, on=["id", "g"], format="parquet")
    assert (r.num_updated_rows, r.num_inserted_rows) == (3, 0)
    t = {row["id"]: row for row in snapshot(uri).to_pylist()}
    assert [t[i]["val"] for i in range(9, 14)] == ["v9", "x", "x", "x", "v13"]
    assert [t[i]["_rowid"] for i in range(10, 13)] == [10, 11, 12]


def test_change_feed_requires_stable_row_ids(spark, uri):
    lf.write_dataset(simple_table(0, 10), uri)
    with pytest.raises(UnsupportedFeatureError, match="stable row ids"):
        jobs.change_feed(spark, uri, 0, 1)
