"""A scan's filter checked against a dataset's columns before any data is read: a SQL string
(pylance's dialect, :mod:`lance_ops.format.sql`) translated over the dataset's and the metadata
columns, an Expression bound to an empty table of them; what is wrong is named."""

import re

import pyarrow as pa
import pyarrow.compute as pc

from lance_ops.format.errors import ArgumentTypeError, SchemaError
from lance_ops.format.read.metadata_columns import META_COLUMNS, filter_table
from lance_ops.format.schema import LanceSchema
from lance_ops.format.sql import sql_filter

__all__ = ["check_filter", "filter_schema", "resolve_filter"]

_UNKNOWN_FIELD = re.compile(r"No match for FieldRef\.Name\((.*?)\)")


def filter_schema(schema: LanceSchema) -> pa.Schema:
    """The columns a filter may name: the dataset's and the metadata columns (uint64)."""
    arrow = schema.to_arrow()
    return pa.schema([*arrow, *(pa.field(m, pa.uint64()) for m in META_COLUMNS)])


def resolve_filter(schema: LanceSchema, expr: object, what: str = "filter") -> pc.Expression | None:
    """A filter as a checked ``pyarrow.compute.Expression``: a SQL string (pylance's dialect,
    :mod:`.sql`) is translated over the dataset's columns; an Expression is checked as is.

    Raises:
        SQLParseError: a SQL string that does not parse (a ``ValueError``; names the position).
        SQLUnknownColumnError, SQLTypeError: a SQL string naming an unknown column or mixing types.
        ArgumentTypeError, SchemaError: as :func:`check_filter`.
    """
    if expr is None:
        return None
    if isinstance(expr, str):
        expr = sql_filter(expr, filter_schema(schema), what=what, metadata_columns=META_COLUMNS)
    check_filter(schema, expr, what)
    return expr  # type: ignore[return-value]


def check_filter(schema: LanceSchema, expr: object, what: str = "filter") -> None:
    """Refuse a filter that cannot run on this schema, naming the column or the mismatch.

    The expression is bound to an empty table of the dataset's columns (and the metadata
    columns) before any data is read.

    Raises:
        ArgumentTypeError: not a ``pyarrow.compute.Expression`` (SQL strings go through
            :func:`resolve_filter`).
        SchemaError: an unknown column (the dataset's columns are listed), operands whose types
            do not match (e.g. int64 compared with a string), or a non-boolean expression.
    """
    if not isinstance(expr, pc.Expression):
        raise ArgumentTypeError(f"{what} must be a SQL string or a pyarrow.compute.Expression, "
                                f"got {type(expr).__name__} {expr!r}")
    arrow = schema.to_arrow()
    names = [f.name for f in schema.top_level()]
    empty = pa.table(
        [pa.array([], type=f.type) for f in arrow] + [pa.array([], type=pa.uint64()) for _ in META_COLUMNS],
        names=[*arrow.names, *META_COLUMNS],
    )
    try:
        filter_table(empty, expr)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, TypeError) as e:
        msg = str(e).split("\n", 1)[0]
        unknown = _UNKNOWN_FIELD.search(msg)
        if unknown:
            raise SchemaError(
                f"{what} {expr}: column {unknown.group(1)!r} is not in the dataset; its columns are {names} "
                f"(and {list(META_COLUMNS)})"
            ) from None
        text = str(expr)
        tokens = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))
        types = ", ".join(f"{f.name}: {f.type}" for f in arrow if f.name in tokens or f'"{f.name}"' in text)
        raise SchemaError(
            f"{what} {expr} cannot be evaluated on the dataset's columns ({types or 'none referenced'}): {msg}"
        ) from None
