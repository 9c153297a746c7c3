"""SQL over lists, structs and Arrow types: ``xs[1]``, ``s['x']``, ``array_has_any(xs, [..])``,
``make_array(..)``, ``arrow_cast(v, 'Int32')``; registered in the translator's dispatch tables."""

import re

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from lance_ops.format.sql_kernels import list_kernel
from lance_ops.format.sql_parse import LanceSQL
from lance_ops.format.sql_translator import (
    FUNCTIONS,
    HANDLERS,
    Handler,
    Translator,
    Typed,
    call_args,
    is_list,
    struct_field,
)


def _bracket(t: Translator, node: exp.Bracket) -> Typed:
    """``xs[1]`` (1-based list element, null out of range, as DataFusion) or ``s['x']``."""
    if len(node.expressions) != 1:
        raise t.parse_error("an index takes one key", node)
    key = node.expressions[0]
    base = t.visit(node.this)
    if isinstance(key, exp.Literal) and key.is_string:
        return struct_field(t, base, key, node)
    typ = t.type_of(base)
    index = t.visit(key)
    if not is_list(typ) or index.kind != "int":
        raise t.type_error(f"{node.sql(dialect=LanceSQL)}: a list takes an integer literal index, "
                           f"{node.this.sql(dialect=LanceSQL)} is {typ}", node)
    fn = list_kernel("list_get", typ, pa.int64())
    return Typed(pc.Expression._call(fn, [base.expr, pc.scalar(index.literal)]), node)


def _array_has(kind: str) -> Handler:
    """array_has_any / array_has_all (list, [values]) and array_has / array_contains (list, value)."""
    def go(t: Translator, node: exp.Expr) -> Typed:
        args = call_args(node)
        if len(args) != 2:
            raise t.parse_error(f"{kind}(list, values) takes two arguments", node)
        lst, needle = t.visit(args[0]), t.visit(args[1])
        typ = t.type_of(lst)
        if not is_list(typ) or needle.kind is None:
            raise t.type_error(f"{node.sql(dialect=LanceSQL)}: needs a list column and literal values, "
                               f"{args[0].sql(dialect=LanceSQL)} is {typ}", node)
        want = pa.list_(typ.value_type)
        if needle.kind == "list":
            try:
                scalar = needle.literal.cast(want)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                raise t.type_error(f"{args[1].sql(dialect=LanceSQL)} does not fit {typ}: {e}", args[1]) from None
        else:
            scalar = pa.scalar([t.fit(needle, typ.value_type).as_py()], want)
        fn = list_kernel("array_has_all" if kind == "all" else "array_has_any", typ, want)
        return Typed(pc.Expression._call(fn, [lst.expr, pc.scalar(scalar)]), node)
    return go


_ARROW_TYPES: dict[str, pa.DataType] = {
    "Null": pa.null(), "Boolean": pa.bool_(), "Int8": pa.int8(), "Int16": pa.int16(), "Int32": pa.int32(),
    "Int64": pa.int64(), "UInt8": pa.uint8(), "UInt16": pa.uint16(), "UInt32": pa.uint32(),
    "UInt64": pa.uint64(), "Float16": pa.float16(), "Float32": pa.float32(), "Float64": pa.float64(),
    "Utf8": pa.string(), "LargeUtf8": pa.large_string(), "Utf8View": pa.string_view(),
    "Binary": pa.binary(), "LargeBinary": pa.large_binary(), "BinaryView": pa.binary_view(),
    "Date32": pa.date32(), "Date64": pa.date64(),
}
_ARROW_UNITS = {"Second": "s", "Millisecond": "ms", "Microsecond": "us", "Nanosecond": "ns"}


def _arrow_type(t: Translator, text: str, node: exp.Expr) -> pa.DataType:
    """An Arrow type named as DataFusion's ``arrow_cast`` names it (``Int32``, ``Timestamp(Microsecond, None)``)."""
    name = text.strip()
    if name in _ARROW_TYPES:
        return _ARROW_TYPES[name]
    m = re.fullmatch(r"Timestamp\((\w+),\s*(None|Some\(\"([^\"]+)\"\))\)", name)
    if m and m.group(1) in _ARROW_UNITS:
        return pa.timestamp(_ARROW_UNITS[m.group(1)], m.group(3))
    m = re.fullmatch(r"Decimal(128|256)\((\d+),\s*(-?\d+)\)", name)
    if m:
        return (pa.decimal128 if m.group(1) == "128" else pa.decimal256)(int(m.group(2)), int(m.group(3)))
    m = re.fullmatch(r"FixedSizeBinary\((\d+)\)", name)
    if m:
        return pa.binary(int(m.group(1)))
    m = re.fullmatch(r"FixedSizeList\((\d+),\s*(.+)\)", name)
    if m:
        return pa.list_(_arrow_type(t, m.group(2), node), int(m.group(1)))
    m = re.fullmatch(r"(Large)?List\((.+)\)", name)
    if m:
        return (pa.large_list if m.group(1) else pa.list_)(_arrow_type(t, m.group(2), node))
    raise t.type_error(f"arrow_cast: unsupported type {text!r}; known: {sorted(_ARROW_TYPES)}, "
                       "Timestamp(unit, None), Decimal128(p, s), FixedSizeBinary(n), FixedSizeList(n, T), List(T)", node)


def _arrow_cast(t: Translator, node: exp.Expr) -> Typed:
    """``arrow_cast(value, 'Int32')``: a cast to an Arrow type named by its DataFusion name."""
    args = call_args(node)
    if len(args) != 2 or not (isinstance(args[1], exp.Literal) and args[1].is_string):
        raise t.parse_error("arrow_cast(value, 'Type') needs a string literal type name", node)
    to = _arrow_type(t, args[1].this, args[1])
    x = t.visit(args[0])
    if x.kind is not None:
        try:
            v = x.literal.cast(to)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise t.type_error(f"arrow_cast: {args[0].sql(dialect=LanceSQL)} to {to}: {e}", node) from None
        return Typed(pc.scalar(v), node)
    return Typed(x.expr.cast(to), node)



HANDLERS.update({
    exp.Bracket: _bracket,
    exp.ArrayContainsAll: _array_has("all"),
    exp.ArrayContains: _array_has("one"),
})

FUNCTIONS.update({
    "array_has_any": _array_has("any"),
    "array_has_all": _array_has("all"),
    "array_has": _array_has("one"),
    "array_contains": _array_has("one"),
    "list_has": _array_has("one"),
    "list_has_any": _array_has("any"),
    "list_has_all": _array_has("all"),
    "arrow_cast": _arrow_cast,
    "make_array": lambda t, n: t.list_literal(n),
})
