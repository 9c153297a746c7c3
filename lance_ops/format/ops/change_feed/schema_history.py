"""Schema evolution across a version range, for the change feed.

pylance evolves a schema in place (verified with pylance 14):

- ``add_columns`` (SQL or UDF) and ``merge`` add fields with new ids (a new data file per
  fragment) and set every row's ``_row_last_updated_at_version`` to the new version;
- ``alter_columns`` renames or relaxes nullability keeping the field id (no row changes);
- ``alter_columns`` with a ``data_type`` (a cast) replaces the field by a new id of the same name
  and position (a Merge transaction; every row counts as updated);
- ``drop_columns`` removes fields (a Project transaction; no row changes).

Rows read from an earlier version are mapped onto the end version's columns by field id; a
field replaced by a cast is followed to its replacement (same name or position in the version
that replaced it).  A column the earlier version does not have is null; a column it has under
another name takes the end version's name; a dropped column is absent; values of a column
whose type changed are cast to the end version's type.
"""

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import pyarrow as pa

from lance_ops.format.errors import SchemaChangeError, SchemaError
from lance_ops.format.file.blob_columns import scan_schema
from lance_ops.format.schema import LanceSchema
from lance_ops.format.table.manifest import Manifest

__all__ = ["ColumnMap", "column_map", "conform", "schema_changes"]


@dataclass(frozen=True)
class ColumnMap:
    """How an earlier version's top-level columns become the end version's.

    ``sources[i]`` is the name in the earlier version of end column ``i`` (None: absent there).
    """

    target: pa.Schema  # the end version's user columns
    sources: tuple[str | None, ...]

    @property
    def read_columns(self) -> list[str]:
        """Columns to read from the earlier version."""
        return [s for s in self.sources if s is not None]

    @property
    def identity(self) -> bool:
        """The earlier version has exactly the end version's columns, under the same names."""
        return all(s == f.name for s, f in zip(self.sources, self.target, strict=True))


def _top(schema: LanceSchema) -> list[tuple[int, str]]:
    return [(f.id, f.name) for f in schema.top_level()]


def _replacements(older: LanceSchema, newer: LanceSchema) -> dict[int, int]:
    """Top-level fields of ``older`` replaced by a new id in ``newer`` (casts): paired by name,
    else by position when exactly one field went and one came."""
    old, new = _top(older), _top(newer)
    new_ids = {i for i, _ in new}
    old_ids = {i for i, _ in old}
    gone = [(i, n) for i, n in old if i not in new_ids]
    came = [(i, n) for i, n in new if i not in old_ids]
    out: dict[int, int] = {}
    by_name = {n: i for i, n in came}
    for i, n in gone:
        if n in by_name:
            out[i] = by_name.pop(n)
    left_gone = [(i, n) for i, n in gone if i not in out]
    left_came = [(i, n) for i, n in came if i in by_name.values()]
    if len(left_gone) == 1 and len(left_came) == 1:
        (gi, _), (ci, _) = left_gone[0], left_came[0]
        if [i for i, _ in old].index(gi) == [i for i, _ in new].index(ci):
            out[gi] = ci
    return out


def _lineage(schemas: Sequence[LanceSchema]) -> dict[int, int]:
    """For every top-level field id of ``schemas[0]``: the id it became in ``schemas[-1]``."""
    current = {i: i for i, _ in _top(schemas[0])}
    for older, newer in zip(schemas[:-1], schemas[1:], strict=True):
        rep = _replacements(older, newer)
        current = {k: rep.get(v, v) for k, v in current.items()}
    return current


def column_map(begin: LanceSchema, end: LanceSchema, between: Sequence[LanceSchema] = ()) -> ColumnMap:
    """The :class:`ColumnMap` from ``begin``'s columns onto ``end``'s.

    Args:
        between: the schemas of the versions strictly between (to follow casts that replaced a
            field id); without them fields are matched by id alone.
    """
    became = _lineage([begin, *between, end])
    end_top = _top(end)
    begin_name = dict(_top(begin))
    source_of: dict[int, str] = {}
    for old_id, new_id in became.items():
        if new_id in dict(end_top):
            source_of[new_id] = begin_name[old_id]
    target = scan_schema(end.to_arrow())  # blob columns as scans return them: descriptions
    return ColumnMap(target, tuple(source_of.get(i) for i, _ in end_top))


def conform(batch: pa.RecordBatch, cmap: ColumnMap, extra: Sequence[str] = ()) -> pa.RecordBatch:
    """``batch`` (columns of an earlier version, named as there) as the end version's columns,
    followed by the ``extra`` columns of ``batch`` unchanged.

    Raises:
        SchemaError: values that do not cast to the end version's type.
    """
    n = batch.num_rows
    cols, fields = [], []
    for f, src in zip(cmap.target, cmap.sources, strict=True):
        if src is None:
            col = pa.nulls(n, type=f.type)
        else:
            col = batch.column(src)
            if col.type != f.type:
                try:
                    col = col.cast(f.type)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                    raise SchemaError(
                        f"column {f.name!r} (was {src!r}, {col.type}) does not cast to {f.type}: {e}"
                    ) from e
        cols.append(col)
        fields.append(f)
    for name in extra:
        cols.append(batch.column(name))
        fields.append(batch.schema.field(name))
    return pa.RecordBatch.from_arrays(cols, schema=pa.schema(fields, metadata=cmap.target.metadata))


def _describe(older: LanceSchema, newer: LanceSchema) -> list[str]:
    """What changed between two schemas, in words."""
    old, new = dict(_top(older)), dict(_top(newer))
    rep = _replacements(older, newer)
    out = []
    for i, n in new.items():
        if i not in old and i not in rep.values():
            out.append(f"column {n!r} added")
    for i, n in old.items():
        if i in rep:
            out.append(f"column {n!r} changed type ({older.arrow_field(i).type} -> {newer.arrow_field(rep[i]).type})")
        elif i not in new:
            out.append(f"column {n!r} dropped")
        elif new[i] != n:
            out.append(f"column {n!r} renamed to {new[i]!r}")
        elif older.arrow_field(i) != newer.arrow_field(i):
            a, b = older.arrow_field(i), newer.arrow_field(i)
            what = "nullability" if a.type == b.type else "type"
            out.append(f"column {n!r} changed {what}")
    if not out and older.to_arrow() != newer.to_arrow():
        out.append("schema changed")
    return out


def schema_changes(manifests: Iterable[Manifest]) -> list[tuple[int, list[str]]]:
    """``(version, changes)`` for every version whose schema differs from the one before it."""
    out = []
    prev: Manifest | None = None
    for m in manifests:
        if prev is not None and (
            prev.schema.to_proto() != m.schema.to_proto() or prev.schema.metadata != m.schema.metadata
        ):
            out.append((m.version, _describe(prev.schema, m.schema)))
        prev = m
    return out


def refuse_schema_changes(uri: str, begin: int, end: int, at: Callable[[int], Manifest], versions: Iterable[int]) -> None:
    """Raise :class:`SchemaChangeError` when a version in ``(begin, end]`` changed the schema."""
    present = [v for v in versions if begin <= v <= end]
    changes = schema_changes(at(v) for v in present)
    if changes:
        v, what = changes[0]
        raise SchemaChangeError(
            f"{uri}: the change feed of ({begin}, {end}] crosses a schema change at version {v} "
            f"({'; '.join(what)}); pass on_schema_change='evolve' to map earlier rows onto the end "
            "version's columns",
            version=v,
            changes=tuple(what),
        )
