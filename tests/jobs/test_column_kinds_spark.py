"""Every column kind pylance 14 writes, through the Spark paths (issue 24, item 5): the data source
reads each kind as pylance does (blob columns as their descriptions), the Spark change feed
carries blob columns, and the Spark upsert stores into a ``timestamp[ns]`` column without time
zone (read as ``timestamp_ntz``) from either Spark timestamp type, pylance continuing.

The format-level matrix (every path, every file version) is
``tests/interop/test_column_kind_matrix.py``; its table builder is reused here.
"""

import datetime as dt

import lance
import pyarrow as pa
import pytest
from datagen import kinds_table
from pyspark.sql.types import LongType, StructField, StructType, TimestampNTZType, TimestampType

from lance_ops import jobs
from lance_ops.format.errors import UnsupportedFeatureError

N = 12


def values(t: pa.Table) -> pa.Table:
    """Dictionary columns as their values."""
    cols = [c.cast(c.type.value_type) if pa.types.is_dictionary(c.type) else c for c in t.columns]
    return pa.Table.from_arrays(cols, names=t.column_names)


@pytest.mark.parametrize("version", ["2.0", "2.2"])
def test_spark_reads_every_kind(spark, tmp_path, version):
    uri = str(tmp_path / "ds")
    # (time and duration columns have no Spark type in lance_ops' data source)
    t = kinds_table(version, range(N)).drop_columns(["t32", "t64", "dur"])
    lance.write_dataset(t, uri, schema=t.schema, data_storage_version=version,
                        enable_stable_row_ids=True, max_rows_per_file=4)
    lance.dataset(uri).delete("id = 3")
    lance.dataset(uri).update({"id": "id + 100"}, where="id = 5")
    df = spark.read.format("lance").load(uri)
    assert isinstance(df.schema["ts_ns"].dataType, TimestampNTZType)
    assert isinstance(df.schema["tstz"].dataType, TimestampType)
    got = pa.Table.from_pylist([r.asDict(recursive=True) for r in df.orderBy("id").collect()])
    want = values(lance.dataset(uri).to_table()).sort_by("id")
    assert got["id"].to_pylist() == want["id"].to_pylist() == sorted([i for i in range(N) if i not in (3, 5)] + [105])
    # scalar, string, temporal, list and struct kinds value for value (Spark's Python types)
    for name in ("i8", "i16", "u32", "u64", "f16", "f64", "b", "s", "ls", "bin", "lbin", "dec", "d32", "d64",
                 "dict", "dict_int", "lst", "llst", "st", "lst_st", "vec", "nested_vec"):
        assert got[name].to_pylist() == want[name].to_pylist(), name
    assert got["ts_ns"].to_pylist() == want["ts_ns"].cast(pa.timestamp("us")).to_pylist()
    assert got["ts_us"].to_pylist() == want["ts_us"].to_pylist()
    # blob columns: their descriptions, nulls where pylance has them
    blob = "blob" if version == "2.2" else "lb_blob"
    assert [r is None for r in got[blob].to_pylist()] == [r is None for r in want[blob].to_pylist()]
    feed = jobs.change_feed(spark, uri, 1).orderBy("_commit_version", "_change_type").collect()
    assert [(r["id"], r["_change_type"]) for r in feed] == [(3, "delete"), (105, "update_postimage"),
                                                          (5, "update_preimage")]


def test_spark_upsert_timestamp_without_time_zone(spark, tmp_path):
    """Spark ``timestamp`` and ``timestamp_ntz`` sources both store into pylance's tz-less
    ``timestamp[ns]`` (the session is UTC: the wall clock is the instant's UTC time)."""
    uri = str(tmp_path / "ds")
    base = dt.datetime(2024, 1, 1)
    t = pa.table({"id": pa.array(range(4), pa.int64()),
                  "ts": pa.array([base + dt.timedelta(seconds=i) for i in range(4)], pa.timestamp("ns"))})
    lance.write_dataset(t, uri, enable_stable_row_ids=True)
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    for k, typ in enumerate((TimestampType(), TimestampNTZType())):
        src = spark.createDataFrame([(1, dt.datetime(2025, 1, 1 + k, 12)), (10 + k, dt.datetime(2025, 2, 1, 8))],
                                    StructType([StructField("id", LongType()), StructField("ts", typ)]))
        jobs.upsert(spark, uri, src, on=["id"])
    got = {r["id"]: r["ts"] for r in lance.dataset(uri).to_table().to_pylist()}
    assert lance.dataset(uri).schema.field("ts").type == pa.timestamp("ns")
    assert got == {0: base, 1: dt.datetime(2025, 1, 2, 12), 2: base + dt.timedelta(seconds=2),
                   3: base + dt.timedelta(seconds=3), 10: dt.datetime(2025, 2, 1, 8), 11: dt.datetime(2025, 2, 1, 8)}
    # an append through the data source takes a Spark timestamp the same way
    jobs.append(spark, uri, spark.createDataFrame([(20, dt.datetime(2025, 3, 1, 6))],
                                                  StructType([StructField("id", LongType()), StructField("ts", TimestampType())])))
    got[20] = dt.datetime(2025, 3, 1, 6)
    assert {r["id"]: r["ts"] for r in lance.dataset(uri).to_table().to_pylist()} == got
    # pylance keeps maintaining it
    lance.dataset(uri).delete("id = 10")
    lance.dataset(uri).optimize.compact_files()
    assert sorted(lance.dataset(uri).to_table()["id"].to_pylist()) == [0, 1, 2, 3, 11, 20]


def test_spark_upsert_into_blob_columns_is_refused(spark, tmp_path):
    """Spark reads blob columns as descriptions, so an upsert could only write descriptions back:
    refused before anything is written (the format's merge_insert takes payloads)."""
    uri = str(tmp_path / "ds")
    t = kinds_table("2.2", range(N)).select(["id", "s", "lb_blob"])
    lance.write_dataset(t, uri, schema=t.schema, enable_stable_row_ids=True)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    src = spark.read.format("lance").load(uri).where("id < 2")
    with pytest.raises(UnsupportedFeatureError, match="lb_blob"):
        jobs.upsert(spark, uri, src, on=["id"])
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
    assert values(lance.dataset(uri).to_table(columns=["id", "s"])).equals(t.select(["id", "s"]))
