"""Filters pushed into the lance reader: as Arrow expressions (rows) and against fragment metadata.

``filter_expression`` turns a pushed Spark filter into a pyarrow expression with Spark's
three-valued semantics; tasks apply it to decoded rows (metadata-column filters before any data
page is decoded).  ``may_match`` decides on the driver, from fragment metadata alone, whether a
fragment (range) can hold a row a conjunction of filters accepts: ``_rowaddr`` from the fragment id
and row offsets, ``_rowid`` from the row id sequence (the row addresses without stable row ids),
and the version columns from their run-length sequences.  Input partitions that cannot match are
not planned, so their files are never opened.
"""

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringEndsWith,
    StringStartsWith,
)
from pyspark.sql.types import (
    BooleanType,
    ByteType,
    DataType,
    DateType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
)

from lance_ops.format import CREATED_AT, META_COLUMNS, ROW_ADDR, ROW_ID, UPDATED_AT, FragmentMetadata
from lance_ops.format.distributed import Manifest, decode_row_ids, decode_version_runs

_PUSHABLE = (ByteType, ShortType, IntegerType, LongType, StringType, BooleanType, DateType)
_CMP = {
    EqualTo: lambda c, v: c == v,
    GreaterThan: lambda c, v: c > v,
    GreaterThanOrEqual: lambda c, v: c >= v,
    LessThan: lambda c, v: c < v,
    LessThanOrEqual: lambda c, v: c <= v,
}


def filter_expression(f: Filter, types: dict[str, DataType], literal_type: Any) -> pc.Expression | None:
    """``f`` as a pyarrow expression with Spark's three-valued semantics, or None if not pushable.

    Floating-point columns are never pushed (Spark orders NaN above every number and equates
    NaN with NaN; Arrow comparisons with NaN are false).  ``literal_type(name)`` is the Arrow type
    literals are built with.
    """

    def column(attr: tuple[str, ...]) -> str | None:
        if len(attr) != 1 or attr[0] not in types or not isinstance(types[attr[0]], _PUSHABLE):
            return None
        return attr[0]

    def lit(name: str, value: Any) -> pa.Scalar | None:
        if value is None or isinstance(value, float | dt.datetime | list | tuple | dict):
            return None
        try:
            return pa.scalar(value, type=literal_type(name))
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError):
            return None

    if isinstance(f, Not):
        inner = f.child
        if isinstance(inner, In):
            name = column(inner.attribute)
            e = filter_expression(inner, types, literal_type)
            return None if e is None or name is None else ~e & pc.field(name).is_valid()
        e = filter_expression(inner, types, literal_type)
        return None if e is None else ~e
    if isinstance(f, IsNull | IsNotNull):
        name = column(f.attribute)
        if name is None:
            return None
        return pc.field(name).is_null() if isinstance(f, IsNull) else pc.field(name).is_valid()
    if isinstance(f, EqualNullSafe):
        name = column(f.attribute)
        if name is None:
            return None
        if f.value is None:
            return pc.field(name).is_null()
        v = lit(name, f.value)
        return None if v is None else pc.coalesce(pc.field(name) == v, pa.scalar(False))
    if type(f) in _CMP:
        cmp: Any = f
        name = column(cmp.attribute)
        v = lit(name, cmp.value) if name is not None else None
        return None if v is None or name is None else _CMP[type(f)](pc.field(name), v)
    if isinstance(f, In):
        name = column(f.attribute)
        if name is None or any(x is None for x in f.value):
            return None
        values = [lit(name, x) for x in f.value]
        if any(v is None for v in values):
            return None
        return pc.field(name).isin(pa.array([v.as_py() for v in values if v is not None], type=literal_type(name)))
    if isinstance(f, StringStartsWith | StringEndsWith | StringContains):
        name = column(f.attribute)
        if name is None or not isinstance(types[name], StringType) or not isinstance(f.value, str):
            return None
        fn = {StringStartsWith: pc.starts_with, StringEndsWith: pc.ends_with, StringContains: pc.match_substring}
        return fn[type(f)](pc.field(name), pattern=f.value)
    return None


def changed_rows(begin: int, end: int) -> pc.Expression:
    """Rows inserted or updated in ``(begin, end]`` (over the uint64 version columns)."""
    b, e = pa.scalar(begin, pa.uint64()), pa.scalar(end, pa.uint64())
    c, u = pc.field(CREATED_AT), pc.field(UPDATED_AT)
    return ((c > b) & (c <= e)) | ((c <= b) & (u > b) & (u <= e))


def _and(exprs: Sequence[pc.Expression | None]) -> pc.Expression | None:
    out = None
    for e in exprs:
        out = e if out is None else out & e
    return out


def _referenced(f: Filter) -> set[str]:
    if isinstance(f, Not):
        return _referenced(f.child)
    attr: tuple[str, ...] = tuple(getattr(f, "attribute", ()))
    return {attr[0]} if len(attr) == 1 else set()


# --------------------------------------------------------------------------- fragment pruning


@dataclass(frozen=True)
class FragmentRange:
    """One input partition: physical rows ``[offset, offset+length)`` of a fragment."""

    fragment: FragmentMetadata
    offset: int
    length: int


def _bounds_of_runs(data: bytes | None, n: int, offset: int, length: int) -> tuple[int, int]:
    """(min, max) version of rows ``[offset, offset+length)`` of a version sequence (1 if absent)."""
    if data is None:
        return 1, 1
    versions, lens = decode_version_runs(data, expected_len=n)
    ends = np.cumsum(lens)
    starts = ends - lens
    hit = (starts < offset + length) & (ends > offset)
    v = versions[hit]
    return (int(v.min()), int(v.max())) if v.size else (1, 1)


def meta_bounds(manifest: Manifest, part: FragmentRange, names: set[str]) -> dict[str, tuple[int, int]]:
    """``(min, max)`` of each metadata column in ``names`` over the rows of ``part`` (deleted rows
    included, so the bounds are conservative); from the manifest alone."""
    f, off, n = part.fragment, part.offset, part.length
    base = int(f.id) << 32
    out: dict[str, tuple[int, int]] = {}
    if ROW_ADDR in names or (ROW_ID in names and not manifest.uses_stable_row_ids):
        addr = (base + off, base + off + n - 1)
        out[ROW_ADDR] = addr
        if not manifest.uses_stable_row_ids:
            out[ROW_ID] = addr
    if ROW_ID in names and manifest.uses_stable_row_ids and f.row_ids is not None:
        ids = decode_row_ids(f.row_ids, expected_len=f.physical_rows)[off : off + n]
        if ids.size:
            out[ROW_ID] = (int(ids.min()), int(ids.max()))
    if CREATED_AT in names:
        out[CREATED_AT] = _bounds_of_runs(f.created_at_versions, f.physical_rows, off, n)
    if UPDATED_AT in names:
        out[UPDATED_AT] = _bounds_of_runs(f.last_updated_at_versions, f.physical_rows, off, n)
    return out


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _interval_may_match(f: Filter, lo: int, hi: int) -> bool:
    """False only if no value in ``[lo, hi]`` (never null) can satisfy ``f``."""
    if isinstance(f, Not):
        c = f.child
        v = _int(getattr(c, "value", None))
        if isinstance(c, EqualTo | EqualNullSafe) and v is not None:
            return not (lo == hi == v)
        if isinstance(c, GreaterThan) and v is not None:
            return lo <= v
        if isinstance(c, GreaterThanOrEqual) and v is not None:
            return lo < v
        if isinstance(c, LessThan) and v is not None:
            return hi >= v
        if isinstance(c, LessThanOrEqual) and v is not None:
            return hi > v
        if isinstance(c, IsNotNull):
            return False
        if isinstance(c, IsNull):
            return True
        return True
    if isinstance(f, IsNull):
        return False
    if isinstance(f, IsNotNull):
        return True
    if isinstance(f, In):
        values = [_int(x) for x in f.value]
        if any(x is None for x in values):
            return True
        return any(lo <= x <= hi for x in values if x is not None)
    raw = getattr(f, "value", None)
    v = _int(raw)
    if v is None:
        return not (isinstance(f, EqualNullSafe) and raw is None)  # <=> NULL: never, nothing is null
    if isinstance(f, EqualTo | EqualNullSafe):
        return lo <= v <= hi
    if isinstance(f, GreaterThan):
        return hi > v
    if isinstance(f, GreaterThanOrEqual):
        return hi >= v
    if isinstance(f, LessThan):
        return lo < v
    if isinstance(f, LessThanOrEqual):
        return lo <= v
    return True


def meta_filters(filters: Sequence[Filter]) -> list[tuple[str, Filter]]:
    """The pushed filters over one metadata column, with that column."""
    out = []
    for f in filters:
        cols = _referenced(f)
        if len(cols) == 1 and next(iter(cols)) in META_COLUMNS:
            out.append((next(iter(cols)), f))
    return out


def may_match(
    manifest: Manifest,
    part: FragmentRange,
    filters: Sequence[tuple[str, Filter]],
    changed_between: tuple[int, int] | None = None,
) -> bool:
    """False if the metadata of ``part`` proves one of the (ANDed) metadata ``filters`` false, or
    proves that no row of it was inserted or updated in versions ``changed_between = (b, e]``."""
    names = {c for c, _ in filters}
    if changed_between is not None:
        names |= {CREATED_AT, UPDATED_AT}
    if not names:
        return True
    bounds = meta_bounds(manifest, part, names)
    for col, f in filters:
        if col in bounds and not _interval_may_match(f, *bounds[col]):
            return False
    if changed_between is not None:
        b, e = changed_between
        (c_lo, c_hi), (u_lo, u_hi) = bounds[CREATED_AT], bounds[UPDATED_AT]
        inserted = c_hi > b and c_lo <= e
        updated = c_lo <= b and u_hi > b and u_lo <= e
        return inserted or updated
    return True


# --------------------------------------------------------------------------- zone-map pruning

_SQL_OPS = {EqualTo: "=", EqualNullSafe: "=", GreaterThan: ">", GreaterThanOrEqual: ">=", LessThan: "<",
            LessThanOrEqual: "<="}


def _sql_literal(v: Any) -> str | None:
    """An integer or string literal in pylance's SQL dialect (None for other values: not used)."""
    if isinstance(v, bool) or not isinstance(v, int | str):
        return None
    return str(v) if isinstance(v, int) else "'" + v.replace("'", "''") + "'"


def _zone_sql(f: Filter, columns: set[str]) -> str | None:
    attr = tuple(getattr(f, "attribute", ()))
    if len(attr) != 1 or attr[0] not in columns or "`" in attr[0]:
        return None
    col = f"`{attr[0]}`"
    if isinstance(f, IsNull) or (isinstance(f, EqualNullSafe) and f.value is None):
        return f"{col} IS NULL"
    if type(f) in _SQL_OPS:
        v = _sql_literal(getattr(f, "value", None))
        return None if v is None else f"{col} {_SQL_OPS[type(f)]} {v}"
    if isinstance(f, In):
        values = [_sql_literal(x) for x in f.value]
        if not values or any(v is None for v in values):
            return None
        return f"{col} IN ({', '.join(v for v in values if v is not None)})"
    return None


def zone_filter_sql(filters: Sequence[Filter], columns: set[str]) -> str | None:
    """The conjunction of the pushed ``filters`` a ZONEMAP index can judge (comparisons, ``IN``
    and ``IS NULL`` of a user column in ``columns`` against integer or string literals) as SQL
    for :func:`lance_ops.format.distributed.prune_fragments`; None when there is none.  Leaving
    a conjunct out only prunes less."""
    parts = [s for s in (_zone_sql(f, columns) for f in filters) if s is not None]
    return " AND ".join(parts) if parts else None
