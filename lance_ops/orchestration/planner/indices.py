"""``optimize_indices`` per index: catch up unindexed rows, merge segments.

Per index lance_ops extends (``lf.optimizable_index_names``):

- catch-up when ``min_unindexed_rows`` live rows are in no segment, or fewer than
  ``min_index_coverage`` of the live rows are indexed, with ``num_indices_to_merge`` from the
  policy (pylance's default 1: the newest segment rebuilt with the new fragments);
- a merge of every segment into one (``num_indices_to_merge`` = the segment count) when the
  index has more than ``max_index_segments`` segments, or when its segments block compaction:
  compaction never bins fragments covered by different segments, so small fragments of
  segments that each hold fewer than ``target_rows_per_fragment`` small rows stay small; when
  ``min_small_fragments`` fragments are held so, the segments are merged first.

The estimate is format's own ``plan_optimize_indices`` for those parameters: the fragments the
tasks read (rows exact; bytes: the data files holding the column, an upper bound) and the
segments they replace.
"""

from typing import Any

import lance_ops.format as lf
from lance_ops.orchestration.planner.context import TableContext
from lance_ops.orchestration.planner.model import Action, Estimate, Reason


def _blocked_small_fragments(ctx: TableContext, desc: Any) -> int:
    """Small fragments of ``desc`` that compaction cannot bin into a full fragment because
    each segment holds fewer than ``target_rows_per_fragment`` small rows (0 for one segment)."""
    segments = desc.segments
    if len(segments) < 2:
        return 0
    target = ctx.policy.target_rows_per_fragment
    rows = {f.id: f.physical_rows for f in ctx.manifest.fragments}
    blocked = 0
    for seg in segments:
        small = [rows[f] for f in seg.fragment_ids if f in rows and rows[f] < target]
        if len(small) >= 1 and sum(small) < target:
            blocked += len(small)
    return blocked


def _estimate(ctx: TableContext, name: str, merge: int) -> tuple[Estimate, dict[str, object]]:
    plan = lf.plan_optimize_indices(ctx.manifest, num_indices_to_merge=merge, index_names=[name])
    frags = {f.id: f for f in ctx.manifest.fragments}
    read = sorted({fid for t in plan.tasks for fid in t.fragment_ids if fid in frags})
    field_ids = {t.field_id for t in plan.tasks}
    rows = sum(frags[f].physical_rows for f in read)
    size = sum(df.file_size_bytes or 0 for f in read for df in frags[f].files if field_ids & set(df.fields))
    old = sum(sum(x.size_bytes for x in (s.files or ())) for s in plan.removed)
    old_files = sum(len(s.files or ()) for s in plan.removed)
    new_rows = sum(frags[f].physical_rows for t in plan.tasks for f in (t.new_fragment_ids or ()) if f in frags)
    est = Estimate(rows_read=rows, bytes_read=size, rows_written=rows, bytes_written=old + new_rows * 8,
                   files_removed=old_files, files_added=len(plan.tasks))
    return est, {"fragments": read, "segments_removed": [s.uuid for s in plan.removed],
                 "segments_added": len(plan.tasks)}


def _reasons(ctx: TableContext, desc: Any) -> tuple[list[Reason], int | None]:
    """Why ``desc`` needs optimizing, and the merge width when its segments must be merged."""
    p = ctx.policy
    name, unindexed, coverage, segments = desc.name, desc.num_rows_unindexed, desc.coverage, len(desc.segments)
    reasons: list[Reason] = []
    if unindexed >= p.min_unindexed_rows or (unindexed and coverage < p.min_index_coverage):
        reasons.append(Reason("unindexed_rows", unindexed, p.min_unindexed_rows,
                              f"index {name!r}: {unindexed} unindexed rows (coverage {coverage:.1%}; thresholds "
                              f"{p.min_unindexed_rows} rows, {p.min_index_coverage:.0%} coverage)"))
    merge = None
    if segments > p.max_index_segments:
        merge = segments
        reasons.append(Reason("index_segments", segments, p.max_index_segments,
                              f"index {name!r}: {segments} segments > {p.max_index_segments}"))
    blocked = _blocked_small_fragments(ctx, desc)
    if merge is None and blocked >= p.min_small_fragments:
        merge = segments
        reasons.append(Reason("fragments_blocked_by_segments", blocked, p.min_small_fragments,
                              f"index {name!r}: {blocked} small fragments in {segments} segments that compaction "
                              "cannot bin together"))
    return reasons, merge


def index_actions(ctx: TableContext) -> tuple[tuple[Action, ...], tuple[str, ...]]:
    """One ``optimize_indices`` action per index that needs it, and notes on the others."""
    if not ctx.manifest.index_section:
        return (), ()
    optimizable = set(lf.optimizable_index_names(ctx.manifest))
    actions, notes = [], []
    live = ctx.fragment_stats["rows"] or 1
    for desc in ctx.ds.describe_indices():
        if desc.name not in optimizable:
            if not desc.name.startswith("__"):
                notes.append(f"index {desc.name!r} ({desc.index_type}): lance_ops does not extend this kind")
            continue
        reasons, merge = _reasons(ctx, desc)
        if not reasons:
            continue
        width = merge if merge is not None else ctx.policy.num_indices_to_merge
        est, details = _estimate(ctx, desc.name, width)
        if not details["fragments"] and merge is None:
            continue
        merged = len(details["segments_removed"])  # type: ignore[arg-type]
        score = 100 * desc.num_rows_unindexed / live + max(0, merged - 1)
        actions.append(Action(
            table=ctx.ref.label, operation="optimize_indices", version=ctx.version,
            parameters={"index_names": [desc.name], "num_indices_to_merge": width},
            reasons=tuple(reasons), estimate=est, priority=round(score, 3),
            details={"index_type": desc.index_type, "segments": len(desc.segments), **details},
        ))
    return tuple(actions), tuple(notes)
