"""Typed errors from Spark executors to the driver (issue 31, item 3): a lance_ops error raised in
an executor task arrives on the driver as the same class with its fields (the note
``lance_ops.jobs._error_transport.carried`` adds), not as a class guessed from the message."""

import glob

import pyarrow as pa
import pytest

import lance_ops.format as lf
from lance_ops import jobs
from lance_ops.format.errors import CorruptFileError, LanceOpsError, SchemaError, SQLParseError
from lance_ops.jobs._common import lance_error_in
from lance_ops.jobs._error_transport import NOTE_PREFIX, add_transport_note, carried_error_in

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])


def _dataset(tmp_path) -> str:
    uri = str(tmp_path / "ds")
    lf.write_dataset(pa.table({"id": list(range(10)), "v": ["a"] * 10}, schema=SCHEMA), uri)
    return uri


def _spark_cause(e: BaseException) -> str:
    """The Spark exception the typed error was rebuilt from (proof it crossed from an executor)."""
    assert e.__cause__ is not None
    return type(e.__cause__).__module__


def test_schema_error_on_an_executor_arrives_as_schema_error(spark, tmp_path):
    uri = _dataset(tmp_path)
    # a null key is an inserted row; the executor writing it refuses the null in the non-nullable id
    src = spark.createDataFrame([(None, "x"), (3, "y")], "id long, v string")
    with pytest.raises(SchemaError) as info:
        jobs.upsert(spark, uri, src, on=["id"])
    assert type(info.value) is SchemaError
    assert str(info.value) == f"{uri}: column 'id' is not nullable but the data has 1 nulls"
    assert _spark_cause(info.value).startswith(("pyspark", "py4j"))
    assert lf.dataset(uri).version == 1  # nothing committed


def test_an_error_with_fields_keeps_them(spark, tmp_path):
    uri = _dataset(tmp_path)
    path = glob.glob(f"{uri}/data/*.lance")[0]
    data = open(path, "rb").read()
    with open(path, "wb") as f:  # the fault: a truncated data file, found by the executor reading it
        f.write(data[: len(data) // 2] + data[-40:])
    with pytest.raises(CorruptFileError) as info:
        jobs.delete(spark, uri, "id < 5")
    e = info.value
    assert (e.path, e.problem) == (path, f"expected {len(data)} bytes at offset 0, got {len(data) // 2 + 40} (truncated?)")
    assert str(e) == f"{path}: {e.problem}"
    assert _spark_cause(e).startswith(("pyspark", "py4j"))
    # the message-only fallback could not have built it (CorruptFileError takes path and problem)
    assert type(lance_error_in(Exception(f"lance_ops.format.errors.CorruptFileError: {e}"))) is LanceOpsError


def test_the_note_round_trips_keyword_fields_and_the_fallback_stays():
    err = SQLParseError("bad predicate", "id <", 4, column="id")
    add_transport_note(err)
    add_transport_note(err)  # once
    assert sum(n.startswith(NOTE_PREFIX) for n in err.__notes__) == 1
    text = f"Traceback ...\nlance_ops.format.errors.SQLParseError: {err}\n{err.__notes__[0]}\n"
    back = carried_error_in(text)
    assert type(back) is SQLParseError
    assert (back.expression, back.position, back.column, str(back)) == ("id <", 4, "id", str(err))
    # a foreign traceback (no note): the class named on its last line, from its message
    fallback = lance_error_in(Exception("Traceback ...\nlance_ops.format.errors.SchemaError: column 'x' is missing"))
    assert type(fallback) is SchemaError and str(fallback) == "column 'x' is missing"
    assert lance_error_in(Exception("ValueError: not ours")) is None
