"""Path-backed SQL tables, and URIs as Spark and Hadoop write them (file:/, relative, unknown schemes)."""

import os

import lance
import pyarrow as pa
import pytest
from datagen import simple_table
from helpers import data_files, referenced_files

import lance_ops.format as lf
from lance_ops import jobs


@pytest.fixture
def table_name(spark):
    name = "lance_sql_t"
    yield name
    spark.sql(f"DROP TABLE IF EXISTS {name}")


def test_create_table_using_lance_location_then_insert_and_read(spark, uri, table_name):
    lance.write_dataset(simple_table(0, 3), uri)  # pylance built, its default file format
    spark.sql(f"CREATE TABLE {table_name} USING lance LOCATION 'file:{uri}'")  # Hadoop's URI form
    assert sorted(r["id"] for r in spark.sql(f"SELECT id FROM {table_name}").collect()) == [0, 1, 2]
    spark.sql(f"INSERT INTO {table_name} VALUES (3, 'v3', 1.5)")
    spark.sql(f"INSERT INTO {table_name} SELECT id + 10, val, score FROM {table_name} WHERE id < 2")
    ds = lance.dataset(uri)
    assert ds.version == 3
    assert sorted(ds.to_table().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 0, "val": "v0", "score": 0.0}, {"id": 1, "val": "v1", "score": 0.5}, {"id": 2, "val": "v2", "score": 1.0},
        {"id": 3, "val": "v3", "score": 1.5}, {"id": 10, "val": "v0", "score": 0.0}, {"id": 11, "val": "v1", "score": 0.5},
    ]
    assert spark.table(table_name).count() == 6
    # Spark itself refuses a string into the bigint column of a table (its ANSI store assignment)
    with pytest.raises(Exception, match="CANNOT_SAFELY_CAST"):
        spark.sql(f"INSERT INTO {table_name} VALUES ('x', 'v', 1.0)")
    spark.sql(f"INSERT OVERWRITE {table_name} VALUES (99, 'new', 9.0)")
    assert lance.dataset(uri).to_table().to_pylist() == [{"id": 99, "val": "new", "score": 9.0}]
    assert lance.dataset(uri, version=3).count_rows() == 6  # history kept
    assert [r.asDict() for r in spark.table(table_name).collect()] == [{"id": 99, "val": "new", "score": 9.0}]
    assert data_files(uri) == referenced_files(uri)


def test_tables_that_cannot_work_are_refused_with_the_reason(spark, uri, table_name):
    lance.write_dataset(simple_table(0, 3), uri)
    with pytest.raises(Exception, match="InvalidOptionError: CREATE TABLE ... USING lance: option 'versionasof'"):
        spark.sql(f"CREATE TABLE {table_name} USING lance OPTIONS (versionAsOf 1) LOCATION '{uri}'")
    # with a column list Spark never shows the data source the location: say so, on first use
    spark.sql(f"CREATE TABLE {table_name} (id BIGINT, val STRING, score DOUBLE) USING lance LOCATION '{uri}'")
    with pytest.raises(Exception, match="got no path: .*no column list"):
        spark.table(table_name).collect()


def test_spark_writes_file_uris_where_they_point(spark, tmp_path):
    target = tmp_path / "b"
    df = spark.createDataFrame(simple_table(0, 5).to_pandas())
    df.write.format("lance").mode("append").save(f"file:{target}")
    df.write.format("lance").mode("append").save(f"file://localhost{target}")
    assert not os.path.exists("file:") and sorted(os.listdir(target)) == ["_transactions", "_versions", "data"]
    assert lance.dataset(str(target)).count_rows() == 10
    assert spark.read.format("lance").load(f"file://{target}").count() == 10


def test_relative_paths_are_resolved_once_on_the_driver(spark, tmp_path, monkeypatch):
    """The JVM (and its planner workers) started elsewhere; the job resolves against this
    process's directory, and executors get the absolute path."""
    monkeypatch.chdir(tmp_path)
    df = spark.createDataFrame(simple_table(0, 20).to_pandas()).repartition(2)
    res = jobs.append(spark, "rel/ds", df, max_rows_per_file=5, enable_stable_row_ids=True)
    assert res.uri == "rel/ds" and res.version == 1 and res.fragments_added == 4
    assert lance.dataset(str(tmp_path / "rel" / "ds")).count_rows() == 20
    comp = jobs.compact(spark, "rel/ds")
    assert comp.version == 3 and comp.fragments_removed == 4 and comp.fragments_added == 1
    assert sorted(lf.dataset(str(tmp_path / "rel" / "ds")).to_table()["id"].to_pylist()) == list(range(20))
    assert os.listdir(tmp_path) == ["rel"]


def test_unknown_schemes_are_refused_naming_the_uri(spark, tmp_path):
    df = spark.createDataFrame(pa.table({"id": [1]}).to_pandas())
    with pytest.raises(lf.InvalidURIError, match="'s3://bucket/ds': unsupported scheme 's3'"):
        jobs.append(spark, "s3://bucket/ds", df)
    with pytest.raises(Exception, match="InvalidURIError: dataset URI 'hdfs://nn/ds'"):
        spark.read.format("lance").load("hdfs://nn/ds").collect()
    with pytest.raises(lf.InvalidURIError, match="names host 'otherhost'"):
        jobs.compact(spark, "file://otherhost/data/ds")
