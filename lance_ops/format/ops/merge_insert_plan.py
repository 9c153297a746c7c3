"""pylance's ``MergeInsertBuilder.explain_plan`` / ``analyze_plan`` as lance_ops' own text.

The first line is pylance's (``MergeInsert: on=[...], when_matched=..., when_not_matched=...,
when_not_matched_by_source=...``); the steps under it are lance_ops' (a scan of the key columns,
a hash join with the source), not DataFusion's operators.  As pylance's, a merge whose join
pylance answers from a scalar index (one key column with an index, no
``when_not_matched_by_source`` clause, ``use_index`` not turned off) has no plan to explain.
"""

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import pyarrow as pa

from lance_ops.format.errors import MergeInsertPlanError
from lance_ops.format.index.describe import describe_indices
from lance_ops.format.table.manifest import Manifest


class MergeInsertParams(Protocol):
    """What the plan text reads of :class:`.merge_insert.MergeInsertParams`."""

    on: Sequence[str]
    update_matched: bool
    matched_condition: Any
    insert_not_matched: bool
    delete_not_matched_by_source: bool
    delete_condition: Any
    fail_matched: bool

__all__ = ["explain_merge_insert", "merge_insert_metrics"]


def _clauses(p: MergeInsertParams) -> str:
    matched = "UpdateAll" if p.matched_condition is None else "UpdateIf"
    matched = "Fail" if p.fail_matched else (matched if p.update_matched else "DoNothing")
    not_matched = "InsertAll" if p.insert_not_matched else "DoNothing"
    by_source = "Keep"
    if p.delete_not_matched_by_source:
        by_source = "Delete" if p.delete_condition is None else "DeleteIf"
    on = ", ".join(p.on)
    return f"on=[{on}], when_matched={matched}, when_not_matched={not_matched}, when_not_matched_by_source={by_source}"


def _index_join(manifest: Manifest, params: MergeInsertParams, use_index: bool) -> bool:
    on = tuple(params.on)
    if not use_index or len(on) != 1 or params.delete_not_matched_by_source or not manifest.index_section:
        return False
    return any(tuple(d.field_names) == on for d in describe_indices(manifest))


def explain_merge_insert(manifest: Manifest, params: MergeInsertParams, source_schema: pa.Schema | None, *,
                         use_index: bool = True, verbose: bool = False) -> str:
    """The plan text of a merge on ``manifest`` (``source_schema``: the dataset's when None).

    Raises:
        MergeInsertPlanError: the join would be answered from a scalar index (an ``OSError``
            with pylance's message).
    """
    if _index_join(manifest, params, use_index):
        raise MergeInsertPlanError(
            "Not supported: This merge insert configuration does not support explain_plan: either the source "
            "schema is not one the plan path accepts, or the join takes the scalar-index execution path "
            "(pass use_index(False) to explain the hash join)")
    source = source_schema if source_schema is not None else manifest.schema.to_arrow()
    on = list(params.on)
    lines = [f"MergeInsert: {_clauses(params)}",
             f"  HashJoin: source rows joined to the dataset's rows on {on}",
             f"    LanceScan: version={manifest.version}, projection={on}, num_fragments={len(manifest.fragments)}, "
             "with _rowid and _rowaddr",
             f"    Source: projection={source.names}"]
    if verbose:
        lines.append(f"    SourceSchema: {', '.join(f'{f.name}: {f.type}' for f in source)}")
    return "\n".join(lines)


def merge_insert_metrics(manifest: Manifest, params: MergeInsertParams, stats: Mapping[str, int], written: Mapping[str, int]) -> str:
    """:func:`explain_merge_insert`'s first line with the merge's ``metrics=[...]`` (pylance's
    names: ``bytes_written``, ``num_files_written``, the row counts) and its steps."""
    counts = {**written, **stats}
    metrics = ", ".join(f"{k}={v}" for k, v in sorted(counts.items()))
    on = list(params.on)
    return "\n".join([f"MergeInsert: {_clauses(params)}, metrics=[{metrics}]",
                      f"  HashJoin: source rows joined to the dataset's rows on {on}",
                      f"    LanceScan: version={manifest.version}, projection={on}, num_fragments={len(manifest.fragments)}"])
