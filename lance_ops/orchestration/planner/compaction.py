"""Compaction and deletion materialisation: the bins are format's own compaction plan
(``plan_compaction`` with the options ``compact_files`` resolves), so the plan names exactly
the fragments the run rewrites.

Compaction is due when ``min_small_fragments`` fragments have fewer physical rows than
``target_rows_per_fragment`` (or fewer live rows once their deletions are materialised) or ``max_versions_since_compaction`` data versions were committed
since the last one; deletion materialisation (fragments rewritten alone) when only the deleted
ratio reaches ``deleted_ratio_threshold``.  Either is proposed only when its plan has bins.
"""

from collections.abc import Mapping, Sequence
from typing import Any

import lance_ops.format as lf
from lance_ops.format.distributed import CompactionPlan, bin_bytes, bin_value, plan_compaction
from lance_ops.orchestration.planner.context import TableContext
from lance_ops.orchestration.planner.model import Action, Estimate, Reason


def _budget(ctx: TableContext) -> dict[str, Any]:
    p = ctx.policy
    limits = {"max_source_fragments": p.max_source_fragments, "max_source_rows": p.max_source_rows,
              "max_source_bytes": p.max_source_bytes}
    if ctx.max_bytes is not None:
        have = limits["max_source_bytes"]
        limits["max_source_bytes"] = ctx.max_bytes if have is None else min(have, ctx.max_bytes)
    out: dict[str, Any] = {k: v for k, v in limits.items() if v is not None}
    if out:
        out["bin_order"] = "value"  # the most valuable bins first (pylance's order stops at the first misfit)
    return out


def _plan(ctx: TableContext, options: Mapping[str, Any]) -> CompactionPlan | str:
    """format's compaction plan for ``options`` (as ``compact_files`` resolves them), or why not."""
    try:
        opts = lf.CompactionOptions.resolve(ctx.manifest.config, **options)
        return plan_compaction(ctx.manifest, ctx.ds.uri, opts, storage_options=dict(ctx.ref.storage_options),
                               manifest_store=ctx.ref.manifest_store)
    except (lf.UnsupportedFeatureError, lf.InvalidArgumentError) as e:
        return f"compaction cannot run: {e}"


def _estimate(bins: Sequence[Sequence[lf.FragmentMetadata]], target: int) -> Estimate:
    rows_read = bytes_read = rows_written = bytes_written = removed = added = 0
    for b in bins:
        physical = sum(f.physical_rows for f in b)
        live = sum(f.num_rows for f in b)
        size = bin_bytes(b)
        rows_read += physical
        bytes_read += size
        rows_written += live
        bytes_written += size * live // physical if physical else 0
        removed += sum(len(f.files) + (f.deletion_file is not None) for f in b)
        added += max(1, live // target) if live else 0
    return Estimate(rows_read=rows_read, bytes_read=bytes_read, rows_written=rows_written,
                    bytes_written=bytes_written, files_removed=removed, files_added=added)


def _action(ctx: TableContext, operation: str, parameters: dict[str, Any], plan: CompactionPlan,
            reasons: list[Reason]) -> Action:
    bins = [t.fragments for t in plan.tasks]
    target = plan.options.target_rows_per_fragment
    dropped = sum(f.num_deleted_rows for b in bins for f in b)
    physical = ctx.fragment_stats["physical_rows"] or 1
    if dropped:
        reasons = reasons + [Reason("deleted_rows_dropped", dropped, None,
                                    f"{dropped} deleted rows dropped ({dropped / physical:.1%} of the rows read by a scan)")]
    score = sum(bin_value(b, target) for b in bins) + 100 * dropped / physical
    return Action(
        table=ctx.ref.label, operation=operation, version=ctx.version, parameters=parameters,
        reasons=tuple(reasons), estimate=_estimate(bins, target), priority=round(score, 3),
        details={"bins": [[f.id for f in b] for b in bins], "fragments_skipped": list(plan.skipped),
                 "index_coverage_dropped": list(plan.coverage_dropped)},
    )


def _small_fragments(ctx: TableContext) -> int:
    """Fragments with fewer physical rows than the target, and fragments whose deletions would be
    materialised into fewer live rows than that (they would be small right after)."""
    p = ctx.policy
    target, threshold = p.target_rows_per_fragment, p.deleted_ratio_threshold
    return sum(1 for f in ctx.manifest.fragments if f.physical_rows < target or (
        f.num_deleted_rows > threshold * f.physical_rows and f.num_rows < target))


def compaction_actions(ctx: TableContext) -> tuple[tuple[Action, ...], tuple[str, ...]]:
    """The compaction or deletion-materialisation action the table needs (at most one), and notes."""
    p, stats = ctx.policy, ctx.fragment_stats
    reasons: list[Reason] = []
    small = _small_fragments(ctx)
    if small >= p.min_small_fragments:
        reasons.append(Reason("small_fragments", small, p.min_small_fragments,
                              f"{small} small fragments (< {p.target_rows_per_fragment} rows, after deletions) "
                              f">= {p.min_small_fragments}"))
    if len(ctx.versions) > 1:
        since = ctx.versions_since_compaction(p.max_versions_since_compaction)
        if since >= p.max_versions_since_compaction:
            reasons.append(Reason("versions_since_compaction", since, p.max_versions_since_compaction,
                                  f"{since} versions since the last compaction >= {p.max_versions_since_compaction}"))
    deleted = stats["deleted_rows"] > 0 and stats["deleted_ratio"] >= p.deleted_ratio_threshold
    common = {"materialize_deletions_threshold": p.deleted_ratio_threshold, **_budget(ctx)}
    if reasons:
        params = {"target_rows_per_fragment": p.target_rows_per_fragment,
                  "max_rows_per_group": p.max_rows_per_group, **common}
        plan = _plan(ctx, params)
        if isinstance(plan, str):
            return (), (plan,)
        if plan.tasks:
            return (_action(ctx, "compact", params, plan, reasons),), plan.skipped
        if not deleted:
            return (), plan.skipped
    if not deleted:
        return (), ()
    ratio = Reason("deleted_ratio", stats["deleted_ratio"], p.deleted_ratio_threshold,
                   f"deleted ratio {stats['deleted_ratio']:.3f} >= {p.deleted_ratio_threshold}")
    params = {"threshold": p.deleted_ratio_threshold, **_budget(ctx)}
    plan = _plan(ctx, {"only_deletions": True, "materialize_deletions_threshold": p.deleted_ratio_threshold,
                       **_budget(ctx)})
    if isinstance(plan, str):
        return (), (plan,)
    if not plan.tasks:
        return (), plan.skipped
    return (_action(ctx, "materialize_deletions", params, plan, [ratio]),), plan.skipped
