"""Map columns in 2.2 files: stored as the list of ``entries`` structs they are physically.

pylance 14 writes ``map<k, v>`` (2.2 only; 2.0 and 2.1 refuse it) as a list layer over a
non-nullable ``entries`` struct of ``key`` (non-nullable) and ``value``: the schema has the
fields ``v`` (logical type ``map``), ``entries`` (struct), ``key`` and ``value``, and the leaf
columns are ``key`` and ``value`` with the rep/def levels of ``list<struct<key, value>>``.
A Map array and that list array share one memory layout, so lance_ops reads and writes the list
type and views the arrays as maps (``pa.Array.view``), at any depth.
"""

from typing import Any

import pyarrow as pa

__all__ = ["MapView", "contains_map", "map_as_list"]


def contains_map(t: pa.DataType) -> bool:
    if pa.types.is_map(t):
        return True
    if pa.types.is_struct(t):
        return any(contains_map(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return contains_map(t.value_type)
    return False


def _field(f: pa.Field) -> pa.Field:
    return pa.field(f.name, map_as_list(f.type), f.nullable, f.metadata)


def map_as_list(t: pa.DataType) -> pa.DataType:
    """``t`` with every ``map<k, v>`` replaced by ``list<entries: struct<key, value> not null>``."""
    if pa.types.is_map(t):
        entries = pa.struct([_field(t.key_field), _field(t.item_field)])
        return pa.list_(pa.field("entries", entries, nullable=False))
    if pa.types.is_struct(t):
        return pa.struct([_field(t.field(i)) for i in range(t.num_fields)])
    if pa.types.is_list(t):
        return pa.list_(_field(t.value_field))
    if pa.types.is_large_list(t):
        return pa.large_list(_field(t.value_field))
    if pa.types.is_fixed_size_list(t):
        return pa.list_(_field(t.value_field), t.list_size)
    return t


class MapView:
    """A column reader of the list type, whose arrays are handed out as the map type."""

    def __init__(self, inner: Any, dtype: pa.DataType) -> None:
        self.inner = inner
        self.dtype = dtype

    def expect_rows(self, n: int) -> None:
        self.inner.expect_rows(n)

    def read_chunks(self, start: int, end: int) -> list[pa.Array]:
        return [c.view(self.dtype) for c in self.inner.read_chunks(start, end)]

    def read(self, start: int, end: int) -> pa.Array:
        return self.inner.read(start, end).view(self.dtype)
