"""The ``lance`` data source: reads (partitions, pruning, pushdown, metadata columns) and writes."""

import datetime as dt

import lance
import numpy as np
import pyarrow as pa
import pytest
from datagen import META, rich_table, simple_table
from helpers import data_files, referenced_files, rows, snapshot
from pyspark.sql import functions as F

import lance_ops.format as lf
from lance_ops.jobs._options import storage_options
from lance_ops.jobs._types import arrow_target, cast_batch, spark_schema


def frame(spark, table: pa.Table):
    return spark.createDataFrame(table.to_pandas())


def test_write_creates_then_appends_then_overwrites_with_history(spark, uri):
    df = frame(spark, simple_table(0, 250)).repartition(2)
    df.write.format("lance").mode("append").option("max_rows_per_file", 100).option(
        "enable_stable_row_ids", True
    ).save(uri)
    v1 = lance.dataset(uri)
    assert v1.version == 1
    t = snapshot(uri)
    assert t.num_rows == 250
    assert sorted(t["id"].to_pylist()) == list(range(250))
    assert t["_rowid"].to_pylist() == list(range(250))  # stable ids 0..n-1, assigned at commit
    assert set(t["_row_created_at_version"].to_pylist()) == {1}
    assert len(v1.get_fragments()) == 4  # two tasks of 125 rows, at most 100 rows per file

    frame(spark, simple_table(250, 50)).coalesce(1).write.format("lance").mode("append").save(uri)
    t = snapshot(uri)
    assert lance.dataset(uri).version == 2
    assert t["_rowid"].to_pylist() == list(range(300))
    assert rows(t.filter(pa.compute.field("id") >= 250), ("id",))[0]["_row_created_at_version"] == 2

    frame(spark, simple_table(1000, 10)).coalesce(1).write.format("lance").mode("overwrite").save(uri)
    ds = lance.dataset(uri)
    assert ds.version == 3
    assert sorted(ds.to_table()["id"].to_pylist()) == list(range(1000, 1010))
    assert lance.dataset(uri, version=2).count_rows() == 300  # history kept
    assert snapshot(uri)["_rowid"].to_pylist() == list(range(300, 310))  # next_row_id continues


def test_read_rich_types_metadata_and_time_travel(spark, uri):
    tbl = rich_table(120)
    lf.write_dataset(tbl, uri, enable_stable_row_ids=True, max_rows_per_file=50)
    lf.dataset(uri).delete(pa.compute.field("i64") > 900)
    lf.write_dataset(rich_table(10, seed=1), uri, mode="append")
    expected = lance.dataset(uri).to_table(columns=tbl.schema.names + META + ["_rowaddr"])
    df = spark.read.format("lance").option("with_metadata", True).load(uri)
    assert df.columns == tbl.schema.names + ["_rowid", "_rowaddr", "_row_created_at_version",
                                             "_row_last_updated_at_version"]
    got = df.toArrow().sort_by("_rowid")
    target = arrow_target(spark_schema(expected.schema.remove_metadata()))
    want = pa.Table.from_batches([cast_batch(b, target) for b in expected.to_batches()], schema=target)
    assert got.num_rows == expected.num_rows == lf.dataset(uri).count_rows() < 130
    assert got.to_pylist() == want.sort_by("_rowid").select(got.column_names).to_pylist()
    # time travel and a user schema that prunes columns (metadata only: no data file read)
    v1 = spark.read.format("lance").option("version", 1).schema("i64 long, _rowid long").load(uri)
    assert sorted(r["_rowid"] for r in v1.collect()) == list(range(120))
    only_ids = spark.read.format("lance").schema("_rowid long, _row_last_updated_at_version long").load(uri)
    assert sorted(r[0] for r in only_ids.collect()) == sorted(expected["_rowid"].to_pylist())


def test_fragments_split_into_row_ranges(spark, uri):
    lf.write_dataset(simple_table(0, 100), uri, enable_stable_row_ids=True, max_rows_per_file=60)
    lf.dataset(uri).delete(pa.compute.field("id").isin([0, 1, 59, 60, 99]))
    df = spark.read.format("lance").option("rows_per_partition", 7).option("batch_size", 3).option(
        "with_metadata", True
    ).load(uri)
    assert df.rdd.getNumPartitions() == 9 + 6  # 60 rows -> 9 ranges of <=7, 40 rows -> 6
    got = sorted((r["id"], r["_rowid"], r["_rowaddr"]) for r in df.collect())
    want = snapshot(uri, columns=["id"]).append_column("a", lance.dataset(uri).to_table(
        columns=["_rowaddr"]).sort_by("_rowaddr")["_rowaddr"])
    assert [g[0] for g in got] == sorted(want["id"].to_pylist())
    assert [(g[1], g[2]) for g in got] == [(i, (i // 60 << 32) | (i % 60)) for i in sorted(want["id"].to_pylist())]


PREDICATES = [
    "id > 30 AND id <= 70",
    "id IN (1, 5, 99, 1000)",
    "NOT id IN (1, 5) AND k IS NOT NULL",
    "k IS NULL",
    "NOT (k = 'k3')",
    "k <=> 'k1' OR id < 3",
    "NOT (k <=> 'k1')",
    "k LIKE 'k1%'",
    "flag",
    "d >= DATE'2024-01-20'",
    "_row_created_at_version > 1 AND _rowid < 90",
    "x > 2.5",
    "u < 10",
]


def test_filters_pushed_down_match_spark(spark, uri):
    n = 100
    ids = np.arange(n)
    tbl = pa.table(
        {
            "id": ids,
            "k": pa.array([None if i % 9 == 0 else f"k{i % 4}" for i in ids]),
            "flag": pa.array([bool(i % 3) if i % 11 else None for i in ids]),
            "d": pa.array([dt.date(2024, 1, 1) + dt.timedelta(days=int(i)) for i in ids]),
            "x": pa.array([float("nan") if i % 10 == 0 else i / 10 for i in ids]),
            "u": pa.array(ids.astype(np.uint32)),
        }
    )
    lf.write_dataset(tbl.slice(0, 60), uri, enable_stable_row_ids=True, max_rows_per_file=25)
    lf.write_dataset(tbl.slice(60), uri, mode="append")

    def load(pushdown: bool):
        return spark.read.format("lance").option("with_metadata", True).option("pushdown", pushdown).load(uri)

    # Spark evaluates every predicate itself (no pushdown) in one pass ...
    plain = load(False).select("id", *[F.expr(w).alias(f"p{i}") for i, w in enumerate(PREDICATES)]).collect()
    # ... and each pushed-down scan must return exactly the rows Spark keeps (one job for all of them).
    pushed = [load(True).where(w).select(F.lit(i).alias("p"), "id") for i, w in enumerate(PREDICATES)]
    union = pushed[0]
    for p in pushed[1:]:
        union = union.unionByName(p)
    got = union.collect()
    for i, w in enumerate(PREDICATES):
        want = sorted(r["id"] for r in plain if r[f"p{i}"] is True)
        assert sorted(r["id"] for r in got if r["p"] == i) == want, w
        assert 0 < len(want) < n, w


def test_append_casts_to_the_dataset_types_and_checks_columns(spark, uri):
    tbl = pa.table({"id": pa.array([1, 2], pa.uint32()), "s": pa.array(["a", "b"], pa.large_string()),
                    "v": pa.array([[1.0, 2.0], [3.0, 4.0]], pa.list_(pa.float32(), 2))})
    lf.write_dataset(tbl, uri)
    df = spark.createDataFrame([(3, "c", [5.0, 6.0])], "id long, s string, v array<float>")
    df.write.format("lance").mode("append").save(uri)
    got = lance.dataset(uri).to_table()
    assert got.schema == tbl.schema
    assert got.sort_by("id").to_pylist()[-1] == {"id": 3, "s": "c", "v": [5.0, 6.0]}
    bad = spark.createDataFrame([(4, "d")], "id long, s string")
    with pytest.raises(Exception, match="missing"):
        bad.write.format("lance").mode("append").save(uri)
    with pytest.raises(Exception, match="reserved"):
        spark.createDataFrame([(1,)], "_rowid long").write.format("lance").mode("append").save(uri + "2")
    assert lance.dataset(uri).version == 2
    assert data_files(uri) == referenced_files(uri)


def test_read_and_write_through_gcs(spark, tmp_path):
    from _gcs_emulator import start_emulator

    emu = start_emulator()
    try:
        bucket = emu.make_bucket("spark-lance")
        uri = f"{bucket}/events"
        so = emu.storage_options
        df = frame(spark, simple_table(0, 500)).repartition(2)
        opts = {f"storage.{k}": v for k, v in so.items()}
        df.write.format("lance").mode("append").options(**opts).option("enable_stable_row_ids", True).save(uri)
        back = spark.read.format("lance").options(**opts).option("with_metadata", True).load(uri)
        assert sorted(r["_rowid"] for r in back.select("_rowid").collect()) == list(range(500))
        ds = lf.dataset(uri, storage_options=so)
        assert ds.count_rows() == 500 and ds.has_stable_row_ids
    finally:
        emu.stop()


def test_storage_options_parsing():
    opts = {"storage_options": '{"token": "anon", "timeout": 5}', "storage.endpoint_url": "http://h:1"}
    assert storage_options(opts) == {"token": "anon", "timeout": 5, "endpoint_url": "http://h:1"}
    with pytest.raises(ValueError):
        storage_options({"storage_options": "[1]"})
