"""The translation of one sqlglot tree into a ``pyarrow.compute.Expression``: names bound to
a schema, literals converted to the type they meet (as pylance converts them), comparisons in
DataFusion's float order, and the registries of node and function handlers that ``sql.py`` and
``sql_collections.py`` fill (``Translator.visit`` dispatches through them)."""

import datetime as _dt
import decimal as _decimal
import functools
import re
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.acero as acero
import pyarrow.compute as pc
from sqlglot import exp

from lance_ops.format.errors import SQLParseError, SQLTypeError, SQLUnknownColumnError
from lance_ops.format.sql_kernels import nan_rank_kernel
from lance_ops.format.sql_parse import LanceSQL, node_position

__all__ = ["FUNCTIONS", "HANDLERS", "Handler", "Translator", "Typed", "bound_type", "call_args", "find_field",
           "is_list", "is_text", "struct_field"]

_NUMERIC = (pa.types.is_integer, pa.types.is_floating, pa.types.is_decimal)


class Typed:
    """A translated sub-expression, with its literal value when it is one."""

    __slots__ = ("expr", "literal", "kind", "node")

    def __init__(self, expr: pc.Expression, node: exp.Expr, literal: Any = None, kind: str | None = None):
        self.expr, self.node, self.literal, self.kind = expr, node, literal, kind


class Translator:
    """One translation: the SQL text, the schema it binds to, and the empty table for types."""

    def __init__(self, text: str, schema: pa.Schema, what: str, hidden: Sequence[str] = ()) -> None:
        self.text, self.schema, self.what, self.hidden = text, schema, what, tuple(hidden)

    # ------------------------------------------------------------------ errors
    def parse_error(self, msg: str, node: exp.Expr | None) -> SQLParseError:
        return SQLParseError(f"{self.what}: {msg}", self.text, node_position(node, self.text))

    def type_error(self, msg: str, node: exp.Expr | None) -> SQLTypeError:
        return SQLTypeError(f"{self.what}: {msg}", self.text, node_position(node, self.text))

    # ------------------------------------------------------------------ types
    def type_of(self, t: Typed) -> pa.DataType:
        if t.kind is not None:
            return t.literal.type
        return bound_type(self.schema, t.expr, self.text, t.node, self.what)

    # ------------------------------------------------------------------ columns
    def column(self, node: exp.Expr) -> Typed:
        if isinstance(node, exp.Dot) and not isinstance(node.this, exp.Column | exp.Dot | exp.Identifier):
            return struct_field(self, self.visit(node.this), node.expression, node)
        parts = _column_parts(node)
        fields = list(self.schema)
        path: list[str] = []
        typ: pa.DataType | None = None
        for i, (name, quoted) in enumerate(parts):
            field = find_field(fields, name, quoted)
            if field is None:
                if i == 0:
                    user = [n for n in self.schema.names if n not in self.hidden]
                    also = f" (and metadata columns {list(self.hidden)})" if self.hidden else ""
                    raise SQLUnknownColumnError(
                        f"{self.what}: No field named {name}: no column named {name!r}; the columns are {user}{also}",
                        self.text, node_position(node, self.text), column=name)
                raise SQLUnknownColumnError(
                    f"{self.what}: {'.'.join(path)!r} has no field {name!r}; its fields are {[f.name for f in fields]}",
                    self.text, node_position(node, self.text), column=".".join([*path, name]))
            path.append(field.name)
            typ = field.type
            fields = list(typ) if pa.types.is_struct(typ) else []
        return Typed(pc.field(*path), node)

    # ------------------------------------------------------------------ literals
    def literal(self, node: exp.Expr) -> Typed:
        if isinstance(node, exp.HexString):
            try:
                v = pa.scalar(bytes.fromhex(node.this), pa.binary())
            except ValueError as e:
                raise self.parse_error(f"bad binary literal X'{node.this}': {e}", node) from None
            return Typed(pc.scalar(v), node, v, "binary")
        if isinstance(node, exp.Array):
            return self.list_literal(node)
        if isinstance(node, exp.Null):
            return Typed(pc.scalar(None), node, pa.scalar(None), "null")
        if isinstance(node, exp.Boolean):
            v = pa.scalar(bool(node.this))
            return Typed(pc.scalar(v), node, v, "bool")
        assert isinstance(node, exp.Literal)
        if node.is_string:
            v = pa.scalar(node.this, pa.string())
            return Typed(pc.scalar(v), node, v, "string")
        text = node.this
        try:
            v = pa.scalar(int(text), pa.int64()) if re.fullmatch(r"\d+", text) else pa.scalar(float(text))
        except (ValueError, OverflowError, pa.ArrowInvalid) as e:
            raise self.parse_error(f"bad number {text!r}: {e}", node) from None
        return Typed(pc.scalar(v), node, v, "int" if pa.types.is_integer(v.type) else "float")

    def list_literal(self, node: exp.Expr) -> Typed:
        """``[1.0, 2.0]`` / ``Array['a', 'b']`` / ``make_array(...)``: a list scalar (its items must
        be literals)."""
        items = [self.visit(i) for i in node.expressions]
        if any(i.kind is None for i in items):
            raise self.parse_error("an array literal takes literal items only", node)
        try:
            v = pa.scalar([i.literal.as_py() for i in items])
        except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
            raise self.type_error(f"array literal {node.sql(dialect=LanceSQL)}: {e}", node) from None
        return Typed(pc.scalar(v), node, v, "list")

    def typed_literal(self, node: exp.Cast) -> Typed:
        """``date '2024-01-01'``, ``timestamp '2024-01-01 12:00:00'`` (a cast of a string literal)."""
        text = node.this.this
        to = node.to.this
        try:
            if to == exp.DataType.Type.DATE:
                v = pa.scalar(_dt.date.fromisoformat(text), pa.date32())
                return Typed(pc.scalar(v), node, v, "date")
            if to in (exp.DataType.Type.TIMESTAMP, exp.DataType.Type.DATETIME):
                when = _dt.datetime.fromisoformat(text)
                if when.tzinfo is not None:
                    when = when.astimezone(_dt.UTC).replace(tzinfo=None)
                v = pa.scalar(when, pa.timestamp("us")).cast(pa.timestamp("ns"))
                return Typed(pc.scalar(v), node, v, "timestamp")
        except ValueError as e:
            raise self.type_error(f"bad {node.to.sql()} literal {text!r}: {e}", node) from None
        return HANDLERS[exp.Cast](self, node)

    def fit(self, lit: Typed, target: pa.DataType) -> pa.Scalar:
        """A literal as a scalar of ``target``, as pylance converts one (no loss, else refused)."""
        v, kind = lit.literal, lit.kind
        ok = {
            "null": True,
            "bool": pa.types.is_boolean(target),
            "int": any(p(target) for p in _NUMERIC),
            "float": pa.types.is_floating(target) or pa.types.is_decimal(target),
            "string": is_text(target),
            "date": pa.types.is_date(target) or pa.types.is_timestamp(target),
            "timestamp": pa.types.is_timestamp(target) or pa.types.is_date(target),
            "binary": _is_binary(target),
            "list": is_list(target),
        }[kind or ""]
        if kind == "null":
            return pa.scalar(None, target)
        if ok:
            to = target.value_type if pa.types.is_dictionary(target) else target
            if kind == "timestamp" and pa.types.is_date(target):
                return v  # the column is cast to the literal's type instead (see compare)
            try:
                if kind == "int" and pa.types.is_decimal(to):  # exact, whatever the column's precision allows
                    return _int_to_decimal(v, to)
                return v.cast(to, safe=True)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OverflowError):
                pass
        raise self.type_error(f"literal {lit.node.sql(dialect=LanceSQL)} cannot be converted to {target} without loss",
                              lit.node)

    # ------------------------------------------------------------------ dispatch
    def visit(self, node: exp.Expr) -> Typed:
        if isinstance(node, exp.Paren):
            return self.visit(node.this)
        if isinstance(node, exp.Column | exp.Dot):
            return self.column(node)
        if isinstance(node, exp.Literal | exp.Boolean | exp.Null | exp.HexString | exp.Array):
            return self.literal(node)
        if isinstance(node, exp.Cast) and isinstance(node.this, exp.Literal) and node.this.is_string \
                and node.to.this in (exp.DataType.Type.DATE, exp.DataType.Type.TIMESTAMP, exp.DataType.Type.DATETIME):
            return self.typed_literal(node)
        handler = HANDLERS.get(type(node))
        if handler is None:
            name = node.sql_name() if isinstance(node, exp.Func) else node.key
            if isinstance(node, exp.Anonymous) or isinstance(node, exp.Func):
                fn = FUNCTIONS.get((node.name if isinstance(node, exp.Anonymous) else name).lower())
                if fn is not None:
                    return fn(self, node)
            raise self.parse_error(f"{node.sql(dialect=LanceSQL)!r} is not supported SQL in lance", node)
        return handler(self, node)

    def value(self, node: exp.Expr) -> pc.Expression:
        return self.visit(node).expr

    # ------------------------------------------------------------------ operators
    def pair(self, left: exp.Expr, right: exp.Expr) -> tuple[pc.Expression, pc.Expression]:
        """Two operands of a comparison: a literal is converted to the other side's type."""
        a, b = self.visit(left), self.visit(right)
        if a.kind is not None and b.kind is not None:
            return a.expr, b.expr
        if a.kind is not None:
            b_expr, a_expr = self._coerce(b, a)
            return a_expr, b_expr
        if b.kind is not None:
            return self._coerce(a, b)
        return a.expr, b.expr

    def compare(self, fn: str, left: exp.Expr, right: exp.Expr) -> pc.Expression:
        """``left <fn> right`` in DataFusion's float order (IEEE ``totalOrder``): a NaN equals a
        NaN of its sign, a positive NaN sorts above every number and a negative one below
        (``x > 0`` holds for NaN), where Arrow's comparisons are false on any NaN."""
        a, b = self.pair(left, right)
        out = pc.Expression._call(fn, [a, b])
        ra, rb = self.nan_of(left, a), self.nan_of(right, b)
        if ra is None and rb is None:
            return out
        zero = pc.scalar(pa.scalar(0, pa.int8()))
        ra, rb = ra if ra is not None else zero, rb if rb is not None else zero
        call = pc.Expression._call
        same_nan = call("and_kleene", [call("equal", [ra, rb]), call("not_equal", [ra, zero])])
        gt, lt = call("greater", [ra, rb]), call("less", [ra, rb])
        extra = {
            "greater": gt, "less": lt, "equal": same_nan,
            "greater_equal": call("or_kleene", [gt, same_nan]), "less_equal": call("or_kleene", [lt, same_nan]),
        }.get(fn)
        if extra is None:  # not_equal: a NaN is not unequal to a NaN of its sign
            return call("and_kleene", [out, call("invert", [same_nan])])
        # a null operand keeps the comparison null (``null <= NaN`` is not true)
        valid = call("and", [call("is_valid", [a]), call("is_valid", [b])])
        return call("or_kleene", [out, call("and_kleene", [extra, valid])])

    def nan_of(self, node: exp.Expr, expr: pc.Expression) -> pc.Expression | None:
        """The NaN rank (1 positive NaN, -1 negative NaN, 0 number) of a floating-point operand,
        None for other types and plain number literals."""
        if isinstance(node, exp.Literal | exp.Null | exp.Boolean | exp.HexString | exp.Array) \
                or (isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal)):
            return None
        try:
            typ = bound_type(self.schema, expr, self.text, node, self.what)
        except SQLTypeError:
            return None
        if not pa.types.is_floating(typ):
            return None
        return pc.Expression._call(nan_rank_kernel(typ), [expr])

    def _coerce(self, col: Typed, lit: Typed) -> tuple[pc.Expression, pc.Expression]:
        typ = self.type_of(col)
        if lit.kind == "float" and pa.types.is_decimal(typ) and isinstance(col.node, exp.Column | exp.Dot):
            # pylance converts a literal compared with a column to the column's type and has no
            # float -> decimal conversion (``dc > 1.2`` is refused; ``CAST(x AS DECIMAL) > 1.2`` is not)
            raise self.type_error(f"literal {lit.node.sql(dialect=LanceSQL)} (a float) cannot be converted to "
                                  f"{typ}; write CAST({lit.node.sql(dialect=LanceSQL)} AS DECIMAL(p, s))", lit.node)
        scalar = self.fit(lit, typ)
        if pa.types.is_date(typ) and lit.kind == "timestamp":
            return col.expr.cast(scalar.type), pc.scalar(scalar)
        return col.expr, pc.scalar(scalar)


def _column_parts(node: exp.Expr) -> list[tuple[str, bool]]:
    """The dotted path of a column reference: ``st.x.y`` -> [st, x, y] (with quoting)."""
    if isinstance(node, exp.Dot):
        return [*_column_parts(node.this), *_column_parts(node.expression)]
    if isinstance(node, exp.Column):
        return [(p.name, bool(p.args.get("quoted"))) for p in node.parts]
    if isinstance(node, exp.Identifier):
        return [(node.name, bool(node.args.get("quoted")))]
    raise SQLParseError(f"not a column reference: {node.sql()}", node.sql(), 0)


def find_field(fields: list[pa.Field], name: str, quoted: bool) -> pa.Field | None:
    """Exact name first; an unquoted name also matches case-insensitively (as pylance)."""
    for f in fields:
        if f.name == name:
            return f
    if not quoted:
        hits = [f for f in fields if f.name.lower() == name.lower()]
        if len(hits) == 1:
            return hits[0]
    return None


@functools.lru_cache(maxsize=64)
def _empty_table(schema: pa.Schema) -> pa.Table:
    return schema.empty_table()


def bound_type(schema: pa.Schema, expr: pc.Expression, text: str, node: exp.Expr, what: str) -> pa.DataType:
    """The type ``expr`` evaluates to on ``schema`` (projected on an empty table)."""
    try:
        out = acero.Declaration.from_sequence([
            acero.Declaration("table_source", acero.TableSourceNodeOptions(_empty_table(schema))),
            acero.Declaration("project", acero.ProjectNodeOptions([expr], ["x"])),
        ]).to_table(use_threads=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, TypeError) as e:
        raise SQLTypeError(f"{what}: {node.sql(dialect=LanceSQL)!r} cannot be evaluated: "
                           f"{str(e).splitlines()[0]}", text, node_position(node, text)) from None
    return out.schema.field(0).type



def call_args(node: exp.Expr) -> list[exp.Expr]:
    if isinstance(node, exp.Anonymous):
        return list(node.expressions)
    out = [node.this] if node.this is not None else []
    if isinstance(node.args.get("expression"), exp.Expr):
        out.append(node.args["expression"])
    return out + list(node.expressions)



def _int_to_decimal(v: pa.Scalar, to: pa.DataType) -> pa.Scalar:
    """An integer literal as a decimal of the column's type (Arrow's int64 -> decimal(10, 2) cast
    wants precision for any int64); raises ArrowInvalid when the value does not fit."""
    return pa.scalar(_decimal.Decimal(v.as_py()).scaleb(0), to)


def is_text(t: pa.DataType) -> bool:
    """A string type (plain, large, view, or dictionary-encoded strings)."""
    return (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)
            or (pa.types.is_dictionary(t) and pa.types.is_string(t.value_type)))


def _is_binary(t: pa.DataType) -> bool:
    return (pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t)
            or pa.types.is_binary_view(t))


def is_list(t: pa.DataType) -> bool:
    return pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)


def struct_field(t: Translator, base: Typed, key: exp.Expr, node: exp.Expr) -> Typed:
    """``s['x']`` / ``xs[1].x``: field ``x`` of a struct-valued expression (names as columns)."""
    typ = t.type_of(base)
    if not pa.types.is_struct(typ):
        raise t.type_error(f"{base.node.sql(dialect=LanceSQL)} is {typ}, not a struct", node)
    name = key.this if isinstance(key, exp.Literal) else key.name
    field = find_field(list(typ), name, bool(key.args.get("quoted")) or isinstance(key, exp.Literal))
    if field is None:
        raise SQLUnknownColumnError(
            f"{t.what}: No field named {name}: {base.node.sql(dialect=LanceSQL)!r} has fields {[f.name for f in typ]}",
            t.text, node_position(node, t.text), column=name)
    return Typed(pc.Expression._call("struct_field", [base.expr], pc.StructFieldOptions([field.name])), node)



#: a node's translation (or a function's, by its SQL name)
Handler = Callable[[Translator, Any], Typed]

#: node handlers by sqlglot node class, filled by ``sql.py`` and ``sql_collections.py``
HANDLERS: dict[type, Handler] = {}

#: functions sqlglot leaves anonymous (or names differently), by lower-case SQL name; filled as HANDLERS
FUNCTIONS: dict[str, Handler] = {}
