"""Strict appends: which Spark column may be stored into which Lance column.

Spark's ANSI store assignment, narrowed to what never changes a value (as Delta Lake's type
widening; pylance refuses any other difference): the same type, widening of integers
(byte < short < int < long), float to double, byte/short/int to double, integers and decimals
to a decimal with at least as many integer and fraction digits, date to timestamp_ntz, and
timestamp to timestamp_ntz (a Lance timestamp without time zone reads as ``timestamp_ntz``; a
Spark ``timestamp`` is stored as its wall-clock time in the session time zone, as Spark's
cast makes it); arrays, maps and structs element by element (structs by field name).
Everything else (string to int, int to string, long to int, double to float, timestamp_ntz to
timestamp, ...) is a
:class:`SchemaError` naming the column and both types, raised on the driver before any task
writes.  The Lance column is compared through the Spark type it reads as (``_types.spark_type``).

Nullability: a non-nullable element, value or struct field cannot take a nullable one (checked
here, from the schemas).  A nullable top-level column into a non-nullable Lance column is
checked on the data, as Delta's NOT NULL constraint: the writing task refuses the first batch
holding a null (a ``SchemaError`` naming the column), before it writes that batch, and nothing
is committed.
"""


import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    ShortType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from lance_ops.format.errors import SchemaError
from lance_ops.jobs._types import spark_type

_INT_RANK = {ByteType: 0, ShortType: 1, IntegerType: 2, LongType: 3}
_INT_DIGITS = {ByteType: 3, ShortType: 5, IntegerType: 10, LongType: 20}


def _problem(src: DataType, dst: DataType, path: str) -> str | None:
    """Why ``src`` cannot be stored into ``dst`` (None if it can); ``path`` names the field."""
    if isinstance(src, NullType):
        return None
    if type(src) in _INT_RANK and type(dst) in _INT_RANK:
        return None if _INT_RANK[type(src)] <= _INT_RANK[type(dst)] else f"{path}: {src.simpleString()} would be narrowed"
    if isinstance(dst, DoubleType) and isinstance(src, FloatType | ByteType | ShortType | IntegerType):
        return None
    if isinstance(dst, DecimalType) and type(src) in _INT_DIGITS:
        ok = dst.precision - dst.scale >= _INT_DIGITS[type(src)]
        return None if ok else f"{path}: {src.simpleString()} does not fit {dst.simpleString()}"
    if isinstance(dst, DecimalType) and isinstance(src, DecimalType):
        ok = dst.scale >= src.scale and dst.precision - dst.scale >= src.precision - src.scale
        return None if ok else f"{path}: {src.simpleString()} does not fit {dst.simpleString()}"
    if isinstance(src, DateType | TimestampType) and isinstance(dst, TimestampNTZType):
        return None
    if isinstance(src, ArrayType) and isinstance(dst, ArrayType):
        if src.containsNull and not dst.containsNull:
            return f"{path}: nullable elements into non-nullable elements"
        return _problem(src.elementType, dst.elementType, f"{path}[]")
    if isinstance(src, MapType) and isinstance(dst, MapType):
        if src.valueContainsNull and not dst.valueContainsNull:
            return f"{path}: nullable map values into non-nullable map values"
        return _problem(src.keyType, dst.keyType, f"{path}.key") or _problem(src.valueType, dst.valueType, f"{path}.value")
    if isinstance(src, StructType) and isinstance(dst, StructType):
        theirs = {f.name: f for f in dst.fields}
        mine = {f.name: f for f in src.fields}
        if set(mine) != set(theirs):
            return (f"{path}: struct fields {sorted(mine)} do not match {sorted(theirs)} "
                    f"(missing {sorted(set(theirs) - set(mine))}, unexpected {sorted(set(mine) - set(theirs))})")
        for name, f in mine.items():
            if f.nullable and not theirs[name].nullable:
                return f"{path}.{name}: nullable field into a non-nullable field"
            p = _problem(f.dataType, theirs[name].dataType, f"{path}.{name}")
            if p:
                return p
        return None
    if src == dst:
        return None
    return f"{path}: not a widening"


def check_store_assignment(incoming: StructType, dataset: pa.Schema, where: str) -> None:
    """Raise :class:`SchemaError` unless every column of ``incoming`` may be stored into the
    column of the same name of ``dataset`` (same set of columns; see the module docstring).

    Args:
        incoming: the Spark schema of the data being written.
        dataset: the Arrow schema of the dataset's user columns.
        where: the dataset URI, for messages.
    """
    mine = [f.name for f in incoming.fields]
    theirs = list(dataset.names)
    dupes = sorted({n for n in mine if mine.count(n) > 1})
    if dupes:
        raise SchemaError(f"{where}: the data has duplicate column(s) {dupes}")
    if set(mine) != set(theirs):
        raise SchemaError(
            f"{where}: the data has columns {sorted(mine)}, the dataset has {sorted(theirs)} "
            f"(missing {sorted(set(theirs) - set(mine))}, unexpected {sorted(set(mine) - set(theirs))})"
        )
    by_name: dict[str, StructField] = {f.name: f for f in incoming.fields}
    for field in dataset:
        src = by_name[field.name]
        dst = spark_type(field.type, name=field.name)
        problem = _problem(src.dataType, dst, field.name)
        if problem:
            raise SchemaError(
                f"{where}: column {field.name!r} of type {src.dataType.simpleString()} cannot be stored into the "
                f"dataset's column of type {dst.simpleString()} (Lance {field.type}): {problem}; "
                "cast it explicitly if that is what you want"
            )
