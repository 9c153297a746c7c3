"""Strict appends: Spark's ANSI store assignment narrowed to safe widening, refused on the driver
before any task writes; nulls into non-nullable columns refused by the task; nothing committed."""

import decimal

import lance
import pyarrow as pa
import pytest
from helpers import data_files, referenced_files
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    ByteType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from lance_ops import jobs
from lance_ops.format.errors import SchemaError
from lance_ops.jobs._compat import check_store_assignment

SCHEMA = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    pa.field("s", pa.string()),
    pa.field("x", pa.float64()),
    pa.field("d", pa.decimal128(12, 2)),
])


@pytest.fixture
def dataset(uri):
    """Built by pylance (its default file format), as users' datasets are."""
    t = pa.table({"id": [1, 2], "s": ["a", "b"], "x": [0.5, 1.5],
                  "d": [decimal.Decimal("1.25"), decimal.Decimal("2.50")]}, schema=SCHEMA)
    lance.write_dataset(t, uri)
    return uri


def unchanged(uri: str) -> bool:
    """Still at version 1, with no file besides what version 1 references."""
    return lance.dataset(uri).version == 1 and data_files(uri) == referenced_files(uri)


def test_coercions_are_refused_before_any_task_writes(spark, dataset):
    # the two cases: '123' into int64, 42 into string
    df = spark.createDataFrame([("123", "c", 1.0, decimal.Decimal("1.00"))], "id string, s string, x double, d decimal(12,2)")
    with pytest.raises(SchemaError) as e:
        jobs.append(spark, dataset, df)
    assert "column 'id' of type string cannot be stored into the dataset's column of type bigint" in str(e.value)
    df = spark.createDataFrame([(3, 42, 1.0, decimal.Decimal("1.00"))], "id long, s int, x double, d decimal(12,2)")
    with pytest.raises(SchemaError, match="column 's' of type int cannot be stored into the dataset's column of type string"):
        jobs.append(spark, dataset, df)
    # the data source itself refuses too (in the planner, before tasks): the error names the column
    with pytest.raises(Exception, match=r"SchemaError: .*column 's' of type int cannot be stored .* type string"):
        df.write.format("lance").mode("append").save(dataset)
    narrowing = spark.createDataFrame([(3, "c", 1.0, decimal.Decimal("1.005"))],
                                      "id long, s string, x double, d decimal(12,3)")
    with pytest.raises(SchemaError, match=r"column 'd' of type decimal\(12,3\) cannot be stored .*decimal\(12,2\)"):
        jobs.append(spark, dataset, narrowing)
    with pytest.raises(SchemaError, match=r"missing \['d'\], unexpected \['e'\]"):
        jobs.append(spark, dataset, df.withColumnRenamed("d", "e"))
    assert unchanged(dataset)


def test_safe_widening_is_stored_exactly(spark, dataset):
    df = spark.createDataFrame([(3, "c", 2.5, 7)], "id int, s string, x float, d int").select(
        F.col("id").cast("tinyint").alias("id"), "s", "x", "d")
    assert [f.dataType for f in df.schema.fields] == [ByteType(), StringType(), FloatType(), IntegerType()]
    res = jobs.append(spark, dataset, df)
    assert res.version == 2 and res.rows_written == 1
    t = lance.dataset(dataset).to_table()
    assert t.schema == SCHEMA  # the dataset's types are kept
    assert t.sort_by("id").to_pylist()[-1] == {"id": 3, "s": "c", "x": 2.5, "d": decimal.Decimal("7.00")}


def test_nulls_into_a_non_nullable_column_fail_the_task_and_commit_nothing(spark, dataset):
    df = spark.createDataFrame([(3, "c", 1.0, decimal.Decimal("1")), (None, "d", 2.0, None)],
                               "id long, s string, x double, d decimal(12,2)").repartition(2)
    assert df.schema["id"].nullable
    with pytest.raises(SchemaError, match="column 'id' is not nullable but the data has 1 nulls"):
        jobs.append(spark, dataset, df)
    assert unchanged(dataset)
    # a nullable column without nulls is fine (checked on the data, as Delta's NOT NULL)
    jobs.append(spark, dataset, df.where("id IS NOT NULL"))
    assert lance.dataset(dataset).count_rows() == 3


def test_store_assignment_rules():
    dst = pa.schema([
        pa.field("l", pa.int64()), pa.field("u", pa.uint32()), pa.field("f", pa.float64()),
        pa.field("dt", pa.timestamp("us")), pa.field("tz", pa.timestamp("ns", "UTC")),
        pa.field("a", pa.list_(pa.field("item", pa.int64(), nullable=False))),
        pa.field("m", pa.map_(pa.string(), pa.float64())),
        pa.field("st", pa.struct([pa.field("x", pa.int64(), nullable=False), pa.field("y", pa.string())])),
    ])

    def ok(**types):
        base = {"l": LongType(), "u": LongType(), "f": DoubleType(), "dt": TimestampNTZType(),
                "tz": TimestampType(), "a": ArrayType(LongType(), False), "m": MapType(StringType(), DoubleType()),
                "st": StructType([StructField("y", StringType()), StructField("x", LongType(), False)])}
        base.update(types)
        check_store_assignment(StructType([StructField(k, v) for k, v in base.items()]), dst, "ds")

    ok()
    ok(l=IntegerType(), f=IntegerType(), dt=DateType(), a=ArrayType(IntegerType(), False),
       m=MapType(StringType(), FloatType()))
    ok(dt=TimestampType())  # a Spark timestamp into a column without time zone: its session wall-clock
    for bad, culprit in [
        ({"l": DoubleType()}, "'l' of type double"),
        ({"f": LongType()}, "'f' of type bigint"),  # long -> double loses precision
        ({"l": DecimalType(10, 1)}, "'l' of type decimal"),
        ({"tz": TimestampNTZType()}, "'tz' of type timestamp_ntz"),
        ({"a": ArrayType(LongType(), True)}, "a: nullable elements"),
        ({"st": StructType([StructField("x", LongType(), True), StructField("y", StringType())])}, "st.x: nullable"),
        ({"st": StructType([StructField("x", LongType(), False)])}, r"st: struct fields \['x'\]"),
        ({"m": MapType(StringType(), StringType())}, "m.value: not a widening"),
    ]:
        with pytest.raises(SchemaError, match=culprit):
            ok(**bad)


def test_merge_schema_adds_the_new_columns_in_one_commit(spark, dataset):
    df = spark.createDataFrame([(3, "c", 2.5, decimal.Decimal("3.75"), "new", [1, 2])],
                               "id long, s string, x double, d decimal(12,2), e string, f array<int>")
    # without mergeSchema the strict-append rule stays
    with pytest.raises(Exception, match=r"unexpected \['e', 'f'\]"):
        df.write.format("lance").mode("append").save(dataset)
    assert unchanged(dataset)
    df.write.format("lance").mode("append").option("mergeSchema", "true").save(dataset)
    ds = lance.dataset(dataset)
    assert ds.version == 2
    assert ds.schema.names == ["id", "s", "x", "d", "e", "f"]
    assert ds.schema.field("e").nullable and ds.schema.field("f").type == pa.list_(pa.int32())
    got = ds.to_table(columns=["id", "e", "f"]).sort_by("id").to_pydict()
    assert got == {"id": [1, 2, 3], "e": [None, None, "new"], "f": [None, None, [1, 2]]}
    assert data_files(dataset) == referenced_files(dataset)
    # the evolved dataset takes strict appends of its new columns, and pylance keeps evolving it
    spark.createDataFrame([(4, "d", 1.0, decimal.Decimal("1.00"), "x", None)],
                          "id long, s string, x double, d decimal(12,2), e string, f array<int>"
                          ).write.format("lance").mode("append").save(dataset)
    # mergeSchema with nothing new is a plain append
    df.write.format("lance").mode("append").option("mergeSchema", "true").save(dataset)
    assert lance.dataset(dataset).count_rows() == 5 and lance.dataset(dataset).version == 4
    lance.dataset(dataset).add_columns({"g": "id * 10"})
    assert lance.dataset(dataset).to_table(columns=["id", "e", "g"]).sort_by("id").to_pydict() == {
        "id": [1, 2, 3, 3, 4], "e": [None, None, "new", "new", "x"], "g": [10, 20, 30, 30, 40]}
