"""Projections beyond a list of top-level names, as pylance's ``columns=`` takes them.

- a nested field by its dotted path, ``columns=["s.x"]``: an output column named ``"s.x"``
  holding the struct child (pylance 14 names it so);
- a dict of output name -> column name, dotted path, SQL value expression in pylance's dialect
  (``"a + 1"``, :mod:`.sql`) or ``pyarrow.compute.Expression`` (which pylance does not take).

:func:`plan_projection` turns such a request into the top-level columns to scan (so the scan's
column pruning and filter pushdown are unchanged) and a vectorised function applied to each
scanned batch (struct child extraction with ``pc.struct_field``; expressions projected by Acero).
"""

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads

from lance_ops.format.errors import ArgumentTypeError, SchemaError
from lance_ops.format.sql import sql_expression

Finish = Callable[[pa.RecordBatch], pa.RecordBatch]


def plan_projection(
    schema: pa.Schema, columns: Sequence[str] | Mapping[str, Any] | None, meta_columns: Sequence[str]
) -> tuple[Sequence[str] | None, Finish | None]:
    """``(columns to scan, finish)`` for ``columns``; ``finish`` is None when the scan's own output
    is the answer (None or a list of top-level and metadata column names).

    Raises:
        SchemaError: a name or path not in ``schema``.
        SQLParseError, SQLUnknownColumnError, SQLTypeError: a bad SQL projection (:mod:`.sql`).
        ArgumentTypeError: a projection value that is neither a string nor an Expression.
    """
    if columns is None:
        return None, None
    plain = set(schema.names) | set(meta_columns)
    if not isinstance(columns, Mapping):
        if isinstance(columns, str) or not all(isinstance(c, str) for c in columns) or \
                all(c in plain for c in columns):
            return columns, None  # type: ignore[return-value]  # plan_scan judges (and refuses) the rest
        items = [(c, c) for c in columns]
    else:
        items = list(columns.items())
    needed: list[str] = []
    steps: list[tuple[str, str, Any]] = []
    for name, spec in items:
        if isinstance(spec, pc.Expression):
            text = str(spec)
            tokens = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))
            needed += [n for n in (*schema.names, *meta_columns) if n in tokens or f'"{n}"' in text]
            steps.append((name, "expr", spec))
        elif not isinstance(spec, str):
            raise ArgumentTypeError(f"projection of {name!r} must be a column name or a pyarrow.compute.Expression, "
                                    f"got {type(spec).__name__} {spec!r}")
        elif spec in plain:
            needed.append(spec)
            steps.append((name, "column", spec))
        elif _is_path(schema, spec):
            root, path = _resolve_path(schema, spec)
            needed.append(root)
            steps.append((name, "path", (root, path)))
        else:  # a SQL value expression in pylance's dialect ("a + 1", "lower(b)")
            expr = sql_expression(spec, schema, what=f"projection of {name!r}")
            text = str(expr)
            tokens = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))
            needed += [n for n in schema.names if n in tokens or f'"{n}"' in text]
            steps.append((name, "expr", expr))
    scan_columns = list(dict.fromkeys(needed)) or [schema.names[0]]
    return scan_columns, lambda batch: _finish(batch, steps, meta_columns)


def _is_path(schema: pa.Schema, spec: str) -> bool:
    """A column name or dotted path (``"s.x"``), as opposed to a SQL expression."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*", spec):
        return False
    return spec.split(".")[0] in schema.names or "." not in spec


def _resolve_path(schema: pa.Schema, spec: str) -> tuple[str, list[int]]:
    """``(top-level column, child indices)`` of a dotted path such as ``"s.x"``."""
    parts = spec.split(".")
    if len(parts) < 2 or parts[0] not in schema.names:
        raise SchemaError(f"column {spec!r} is not in the dataset schema {schema.names}")
    typ, path = schema.field(parts[0]).type, []
    for i, part in enumerate(parts[1:], start=1):
        index = typ.get_field_index(part) if pa.types.is_struct(typ) else -1
        if index < 0:
            raise SchemaError(f"column {spec!r} is not in the dataset schema: {'.'.join(parts[:i])} has no "
                              f"field {part!r} (type {typ})")
        path.append(index)
        typ = typ.field(index).type
    return parts[0], path


def _finish(batch: pa.RecordBatch, steps: list[tuple[str, str, Any]], meta_columns: Sequence[str]) -> pa.RecordBatch:
    names, arrays = [], []
    exprs = {name: spec for name, kind, spec in steps if kind == "expr"}
    computed = pads.dataset(pa.Table.from_batches([batch])).to_table(columns=exprs) if exprs else None
    for name, kind, spec in steps:
        if kind == "column":
            arrays.append(batch.column(spec))
        elif kind == "path":
            root, path = spec
            arrays.append(pc.struct_field(batch.column(root), path))
        else:
            assert computed is not None
            arrays.append(computed.column(name).combine_chunks())
        names.append(name)
    for meta in meta_columns:  # with_row_id / with_row_address ask for these after the projection
        if meta in batch.schema.names and meta not in names:
            names.append(meta)
            arrays.append(batch.column(meta))
    return pa.RecordBatch.from_arrays(arrays, names=names)
