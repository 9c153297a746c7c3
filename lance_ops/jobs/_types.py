"""Spark <-> Arrow types for the Lance data source.

Spark has no unsigned integers, no large/fixed-size variants and microsecond timestamps only, so
a Lance column is shown to Spark as the closest Spark type and every batch is cast, by name,
to exactly the Arrow schema Spark expects (``to_arrow_schema(schema, timezone="UTC")``: the
Python data source compares names, order, types *and* nullability of the first batch).
Metadata columns (uint64 in Lance) are ``long`` in Spark.
"""

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from lance_ops.format import META_COLUMNS
from lance_ops.format.errors import UnsupportedFeatureError

__all__ = ["META_COLUMNS", "arrow_target", "cast_batch", "spark_schema", "spark_type"]


def spark_type(t: pa.DataType, *, name: str = "") -> DataType:
    """The Spark type a Lance (Arrow) column is read as."""
    if pa.types.is_dictionary(t):
        return spark_type(t.value_type, name=name)
    if pa.types.is_boolean(t):
        return BooleanType()
    if pa.types.is_int8(t):
        return ByteType()
    if pa.types.is_int16(t) or pa.types.is_uint8(t):
        return ShortType()
    if pa.types.is_int32(t) or pa.types.is_uint16(t):
        return IntegerType()
    if pa.types.is_int64(t) or pa.types.is_uint32(t) or pa.types.is_uint64(t):
        return LongType()  # uint64 beyond 2**63-1 fails the (safe) cast at read time
    if pa.types.is_float16(t) or pa.types.is_float32(t):
        return FloatType()
    if pa.types.is_float64(t):
        return DoubleType()
    if pa.types.is_decimal128(t):
        return DecimalType(t.precision, t.scale)
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return StringType()
    if (
        pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_fixed_size_binary(t)
        or pa.types.is_binary_view(t)
    ):
        return BinaryType()
    if pa.types.is_date32(t) or pa.types.is_date64(t):
        return DateType()
    if pa.types.is_timestamp(t):
        return TimestampType() if t.tz is not None else TimestampNTZType()
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return ArrayType(spark_type(t.value_type, name=name), containsNull=t.value_field.nullable)
    if pa.types.is_map(t):
        return MapType(
            spark_type(t.key_type, name=name), spark_type(t.item_type, name=name), valueContainsNull=t.item_field.nullable
        )
    if pa.types.is_struct(t):
        return StructType([StructField(f.name, spark_type(f.type, name=name), f.nullable) for f in t])
    raise UnsupportedFeatureError(f"column {name!r}: Lance type {t} has no Spark equivalent in lance_ops")


def spark_schema(arrow: pa.Schema, meta: Sequence[str] = ()) -> StructType:
    """Spark schema of the user columns of ``arrow`` plus the metadata columns ``meta``."""
    fields = [StructField(f.name, spark_type(f.type, name=f.name), f.nullable) for f in arrow]
    fields += [StructField(m, LongType(), False) for m in meta]
    return StructType(fields)


def arrow_target(schema: StructType) -> pa.Schema:
    """The exact Arrow schema Spark checks data source batches against."""
    return to_arrow_schema(schema, timezone="UTC")


def _needs_unsafe(t: pa.DataType) -> bool:
    """Timestamps finer than microseconds are truncated on purpose (Spark stores microseconds)."""
    if pa.types.is_timestamp(t):
        return t.unit == "ns"
    if pa.types.is_nested(t):
        return any(_needs_unsafe(t.field(i).type) for i in range(t.num_fields))
    return False


def cast_column(arr: pa.Array, target: pa.DataType, name: str) -> pa.Array:
    if arr.type == target:
        return arr
    if len(arr) and arr.null_count == len(arr):
        # all null: Spark hands nested all-null columns without child buffers, which pyarrow's
        # cast of lists to fixed-size or large lists dereferences (a crash of the Python worker)
        return pa.nulls(len(arr), type=target)
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    if pa.types.is_timestamp(arr.type) and arr.type.tz is not None and pa.types.is_timestamp(target) and target.tz is None:
        # Spark ``timestamp`` into a column without time zone: the wall-clock time in the batch's
        # (the session's) time zone, as Spark's cast to timestamp_ntz gives it
        arr = pc.local_timestamp(arr)
    try:
        return arr.cast(target, safe=not _needs_unsafe(arr.type))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise TypeError(f"column {name!r}: cannot convert {arr.type} to {target}: {e}") from e


def cast_batch(batch: pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
    """``batch``'s columns named by ``target``, in its order, cast to exactly its types."""
    cols = [cast_column(batch.column(f.name), f.type, f.name) for f in target]
    return pa.RecordBatch.from_arrays(cols, schema=target)
