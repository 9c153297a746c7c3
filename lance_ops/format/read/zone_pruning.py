"""Fragment pruning by ZONEMAP indices: which fragments a SQL filter may match.

A ZONEMAP segment holds, per zone of up to 8192 live rows of one fragment, the column's
``min``, ``max``, ``null_count`` and ``nan_count`` (:mod:`lance_ops.format.index.build.zonemap`,
docs/FORMAT.md §14).  A fragment is read only if one of its zones may satisfy the filter, or if
no zone map covers it.  The filter is judged on its sqlglot tree, conservatively: comparisons
(``= < <= > >=``), ``BETWEEN``, ``IN`` and ``IS [NOT] NULL`` of a zone-mapped column against
literals, combined by ``AND`` / ``OR``; anything else (``!=``, ``NOT``, functions, other
columns) may match every zone.  Rows are still filtered exactly after pruning: pruning only
decides which fragments are opened, never which rows are returned.
"""

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from sqlglot import exp

from lance_ops.format.errors import LanceOpsError
from lance_ops.format.file.reader import DataFileReader
from lance_ops.format.index.metadata import IndexMetadata, decode_index_section, user_indices
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.sql import parse_sql
from lance_ops.format.table.fragment import FragmentMetadata
from lance_ops.format.table.manifest import Manifest

ZONEMAP_FILE = "zonemap.lance"


@dataclass(frozen=True)
class Zone:
    fragment_id: int
    lo: Any  # None when the zone holds no non-null value
    hi: Any  # NaN (a float) when the zone holds a NaN
    null_count: int


def _zones_of(store: ObjectStore, index: IndexMetadata) -> list[Zone]:
    size = next((f.size_bytes for f in index.files or () if f.path == ZONEMAP_FILE), None)
    t = DataFileReader(store, f"{index.directory}/{ZONEMAP_FILE}", file_size=size).read_table()
    cols = [t.column(n).to_pylist() for n in ("fragment_id", "min", "max", "null_count")]
    return [Zone(int(f), lo, hi, int(n)) for f, lo, hi, n in zip(*cols, strict=True)]


def zone_maps(store: ObjectStore, manifest: Manifest) -> dict[str, dict[int, list[Zone]]]:
    """Column name -> fragment id -> zones, from every ZONEMAP segment of ``manifest``."""
    if not manifest.index_section:
        return {}
    out: dict[str, dict[int, list[Zone]]] = {}
    live = {f.id for f in manifest.fragments}
    for idx in user_indices(decode_index_section(manifest.index_section, store.uri)):
        if idx.kind != "ZONEMAP" or len(idx.fields) != 1 or idx.fragment_ids is None:
            continue
        top = {f.id: f.name for f in manifest.schema.top_level()}
        if idx.fields[0] not in top:  # a nested or dropped field (e.g. cast to a new id): no pruning by it
            continue
        name = top[idx.fields[0]]
        per = out.setdefault(name, {})
        covered = idx.fragment_ids & live
        for z in _zones_of(store, idx):
            if z.fragment_id in covered:
                per.setdefault(z.fragment_id, []).append(z)
        for fid in covered:  # a covered fragment without zones holds no live rows
            per.setdefault(fid, [])
    return out


def _literal(node: exp.Expr) -> tuple[bool, Any]:
    if isinstance(node, exp.Paren):
        return _literal(node.this)
    if isinstance(node, exp.Neg):
        ok, v = _literal(node.this)
        return (ok and isinstance(v, int | float)), (-v if ok and isinstance(v, int | float) else None)
    if isinstance(node, exp.Literal):
        if node.is_string:
            return True, node.this
        try:
            return True, int(node.this)
        except ValueError:
            return True, float(node.this)
    if isinstance(node, exp.Cast) and isinstance(node.this, exp.Literal) and node.this.is_string:
        return _temporal(node.to.this, node.this.this)
    return False, None


def _temporal(to: Any, text: str) -> tuple[bool, Any]:
    """``TIMESTAMP '...'`` / ``DATE '...'`` as a naive datetime / a date (a zone of an aware
    timestamp column does not compare with it: no pruning)."""
    try:
        if to == exp.DataType.Type.TIMESTAMP:
            return True, datetime.fromisoformat(text)
        if to == exp.DataType.Type.DATE:
            return True, date.fromisoformat(text)
    except ValueError:
        pass
    return False, None


def _column(node: exp.Expr) -> str | None:
    if isinstance(node, exp.Paren):
        return _column(node.this)
    if isinstance(node, exp.Column) and not node.table:
        return node.name
    return None


def _nan(v: Any) -> bool:
    return isinstance(v, float) and v != v


def _cmp(op: str, z: Zone, v: Any) -> bool:
    """May a row of zone ``z`` satisfy ``column <op> v``?"""
    if z.lo is None:  # only nulls: no comparison is true
        return False
    lo, hi = z.lo, z.hi
    if _nan(lo):  # only NaN (and nulls): no bound to judge by
        return True
    if _nan(hi):  # the zone holds a NaN, which sorts last: no upper bound
        hi = None
    if op == "=":
        return lo <= v and (hi is None or v <= hi)
    if op == "<":
        return lo < v
    if op == "<=":
        return lo <= v
    if op == ">":
        return hi is None or hi > v
    return hi is None or hi >= v  # ">="


_OPS = {exp.EQ: "=", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}
_FLIP = {"=": "=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}

Judge = Callable[[Zone], bool]


def judge_leaf(node: exp.Expr, maps: dict[str, Any]) -> tuple[str, Judge] | None:
    """(column, zone -> may match) for a prunable predicate on one column, else None."""
    if isinstance(node, exp.Paren):
        return judge_leaf(node.this, maps)
    op = next((o for cls, o in _OPS.items() if type(node) is cls), None)
    if op is not None:
        col, (ok, v) = _column(node.left), _literal(node.right)
        if col is None:
            col, (ok, v), op = _column(node.right), _literal(node.left), _FLIP[op]
        if col in maps and ok and v is not None:
            return col, lambda z, op=op, v=v: _cmp(op, z, v)
        return None
    if isinstance(node, exp.Between):
        col, (ok1, lo), (ok2, hi) = _column(node.this), _literal(node.args["low"]), _literal(node.args["high"])
        if col in maps and ok1 and ok2:
            return col, lambda z: _cmp(">=", z, lo) and _cmp("<=", z, hi)
        return None
    if isinstance(node, exp.In) and not node.args.get("query"):
        col = _column(node.this)
        values = [_literal(e) for e in node.expressions]
        if col in maps and values and all(ok for ok, _ in values):
            return col, lambda z: any(_cmp("=", z, v) for _, v in values)
        return None
    if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
        col = _column(node.this)
        return (col, lambda z: z.null_count > 0) if col in maps else None
    return None


def _may_match(node: exp.Expr, maps: dict[str, dict[int, list[Zone]]], fid: int) -> bool:
    if isinstance(node, exp.Paren):
        return _may_match(node.this, maps, fid)
    if isinstance(node, exp.And):
        return _may_match(node.left, maps, fid) and _may_match(node.right, maps, fid)
    if isinstance(node, exp.Or):
        return _may_match(node.left, maps, fid) or _may_match(node.right, maps, fid)
    judged = judge_leaf(node, maps)
    if judged is None:
        return True
    col, judge = judged
    zones = maps[col].get(fid)
    if zones is None:  # not covered by the zone map
        return True
    try:
        return any(judge(z) for z in zones)
    except TypeError:  # a literal of another type than the column's: no pruning
        return True


def prune_fragments(
    store: ObjectStore, manifest: Manifest, filter_text: str, fragments: Iterable[FragmentMetadata]
) -> list[FragmentMetadata]:
    """The fragments of ``fragments`` whose zones may match ``filter_text`` (all when the
    dataset has no zone map on a column the filter constrains)."""
    frags = list(fragments)
    try:
        maps = zone_maps(store, manifest)
        if not maps:
            return frags
        tree = parse_sql(filter_text)
    except LanceOpsError:  # pruning only saves reads: a zone map it cannot use reads everything
        return frags
    return [f for f in frags if _may_match(tree, maps, f.id)]


def query_text(node: exp.Expr, maps: dict[str, Any]) -> str | None:
    """The part of ``node`` zone maps prune by, as pylance prints an index query (None: none)."""
    if isinstance(node, exp.Paren):
        return query_text(node.this, maps)
    if isinstance(node, exp.And | exp.Or):
        left, right = query_text(node.left, maps), query_text(node.right, maps)
        if isinstance(node, exp.Or):  # an OR prunes only when both sides do
            return f"{left} || {right}" if left and right else None
        return " && ".join(t for t in (left, right) if t) or None
    if judge_leaf(node, maps) is None:
        return None
    if isinstance(node, exp.Between):
        col = _column(node.this)
        return f"{col} >= {_literal(node.args['low'])[1]} && {col} <= {_literal(node.args['high'])[1]}"
    op = next((o for cls, o in _OPS.items() if type(node) is cls), None)
    if op is not None:
        col, v = _column(node.left), _literal(node.right)[1]
        if col is None:
            col, v, op = _column(node.right), _literal(node.left)[1], _FLIP[op]
        return f"{col} {op} {v}"
    return node.sql()


def zone_map_query(store: ObjectStore, manifest: Manifest, filter_text: str) -> tuple[str, str] | None:
    """``(query, index names)`` of the ZONEMAP indices :func:`prune_fragments` consults for
    ``filter_text`` (those covering a live fragment of a column it constrains), or None."""
    try:
        maps = {c: per for c, per in zone_maps(store, manifest).items() if per}
        if not maps:
            return None
        tree = parse_sql(filter_text)
    except LanceOpsError:
        return None
    text = query_text(tree, maps)
    if text is None:
        return None
    top = {f.id: f.name for f in manifest.schema.top_level()}
    names = [i.name for i in user_indices(decode_index_section(manifest.index_section, store.uri))
             if i.kind == "ZONEMAP" and len(i.fields) == 1 and top.get(i.fields[0]) in maps
             and re.search(rf"(?<![\w.]){re.escape(top[i.fields[0]])}(?![\w])", text)]
    return text, ",".join(dict.fromkeys(names))
