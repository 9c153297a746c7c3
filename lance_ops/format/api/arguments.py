"""Arguments of the handle's methods checked as pylance checks them, and pylance options lance_ops
accepts and ignores (tuning knobs of pylance's engine)."""

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lance_ops.format.errors import ArgumentTypeError, InvalidArgumentError
from lance_ops.format.ops.inputs import coerce_batches


def sql_translator() -> Any:
    """``add_columns``' translator of SQL strings (``lance_ops.format.sql``)."""
    from lance_ops.format import sql

    def translate(text: str, schema: pa.Schema) -> pc.Expression:
        return sql.sql_expression(text, schema, what="add_columns expression")

    return translate


def pop_ignored(options: dict[str, Any], names: Sequence[str]) -> None:
    """Remove pylance tuning options lance_ops accepts and ignores (positive integers or None)."""
    for name in names:
        value = options.pop(name, None)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
            raise InvalidArgumentError(f"{name} must be a positive integer, got {value!r}")


def check_readahead(*values: object) -> None:
    """pylance's read-ahead depths: accepted (lance_ops reads fragments in order, one at a time)."""
    pop_ignored(dict(zip(("batch_readahead", "fragment_readahead"), values, strict=True)),
                 ("batch_readahead", "fragment_readahead"))


def check_scan_args(limit: object, offset: object, batch_size: object) -> None:
    for name, value, low in (("limit", limit, 0), ("offset", offset, 0), ("batch_size", batch_size, 1)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise ArgumentTypeError(f"{name} must be an integer, got {type(value).__name__} {value!r}")
        if value < low:  # pylance's messages (ValueError there too)
            raise InvalidArgumentError(f"{name.capitalize()} must be non-negative ({name}={value})" if low == 0 else
                                       f"{name} must be between 1 and 4294967295, got {value}")


def read_all(data: Any, schema: pa.Schema | None = None) -> pa.Table:
    """Any input pylance's ``merge`` takes (its ``ReaderLike``: a Table, reader, dataset, scanner,
    DataFrame, batches with ``schema``) read into one Table."""
    schema, batches = coerce_batches(data, schema)
    return pa.Table.from_batches(list(batches), schema=schema)
