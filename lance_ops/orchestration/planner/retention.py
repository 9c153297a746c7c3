"""Cleanup of old versions, and the orphan-file sweep proposal.

Cleanup: what ``cleanup_old_versions`` would remove with the policy's retention
(``cleanup_older_than_days``, ``cleanup_retain_versions``; tags and branches keep theirs), from
its own dry run; proposed when it removes at least ``cleanup_min_versions`` versions.  The dry
run only runs when the version listing holds that many versions beyond the retained ones.

Orphan sweep: data files under ``data/`` that no version's manifest names, older than
``orphan_min_age_hours`` (younger ones may belong to a commit in flight); proposed at
``orphan_min_files``.  The listing of ``data/`` is compared with the latest manifest first; the
other manifests are read only when it holds more files.  A table with branches (which share the
files they were created from) is left to cleanup.  The sweep itself is not run by ``maintain``.
"""

import time
from datetime import timedelta

import lance_ops.format as lf
from lance_ops.orchestration.planner.context import TableContext
from lance_ops.orchestration.planner.model import Action, Estimate, Reason

GIB = 1 << 30


def cleanup_actions(ctx: TableContext) -> tuple[tuple[Action, ...], tuple[str, ...]]:
    """The cleanup the retention allows (at most one action), and notes."""
    p = ctx.policy
    if len(ctx.versions) - p.cleanup_retain_versions < p.cleanup_min_versions:
        return (), ()
    params = {"older_than_days": p.cleanup_older_than_days, "retain_versions": p.cleanup_retain_versions,
              "retention_duration_check": p.cleanup_retention_duration_check}
    try:
        stats = ctx.ds.cleanup_old_versions(timedelta(days=p.cleanup_older_than_days), p.cleanup_retain_versions,
                                            dry_run=True, retention_duration_check=p.cleanup_retention_duration_check)
    except lf.InvalidArgumentError as e:
        return (), (f"cleanup not planned: {e}",)
    if stats.old_versions < p.cleanup_min_versions:
        return (), ()
    files = (stats.data_files_removed + stats.deletion_files_removed + stats.transaction_files_removed
             + stats.index_files_removed)
    reasons = [Reason("removable_versions", stats.old_versions, p.cleanup_min_versions,
                      f"{stats.old_versions} versions older than {p.cleanup_older_than_days} days beyond the newest "
                      f"{p.cleanup_retain_versions} >= {p.cleanup_min_versions}"),
               Reason("bytes_removable", stats.bytes_removed, None, f"{stats.bytes_removed} bytes removable")]
    est = Estimate(files_removed=files + stats.old_versions, bytes_removed=stats.bytes_removed,
                   versions_removed=stats.old_versions)
    return (Action(
        table=ctx.ref.label, operation="cleanup_old_versions", version=ctx.version, parameters=params,
        reasons=tuple(reasons), estimate=est, priority=round(stats.old_versions / 10 + stats.bytes_removed / GIB, 3),
        details={"protected_by_tags": list(stats.protected_by_tags),
                 "protected_by_branches": list(stats.protected_by_branches)},
    ),), ()


def _referenced(ctx: TableContext, latest_only: bool) -> set[str]:
    manifests = [ctx.manifest] if latest_only else [ctx.handler.read_manifest(v).manifest for v in ctx.versions]
    return {df.path for m in manifests for f in m.fragments for df in f.files if df.base_id is None}


def orphan_actions(ctx: TableContext) -> tuple[tuple[Action, ...], tuple[str, ...]]:
    """The orphan sweep proposal (at most one action), and notes."""
    p = ctx.policy
    listed = set(ctx.store.list_dir("data"))
    if not listed - _referenced(ctx, latest_only=True):
        return (), ()
    if ctx.ds.branches.list():
        return (), ("orphan sweep not planned: the table has branches sharing its files (cleanup handles them)",)
    unreferenced = listed - _referenced(ctx, latest_only=False)
    cut = time.time() - p.orphan_min_age_hours * 3600
    found = {rel: size for rel, size, mtime in ctx.store.list_files("data")
             if rel.removeprefix("data/") in unreferenced and (mtime is None or mtime <= cut)}
    if len(found) < p.orphan_min_files:
        return (), ()
    size = sum(found.values())
    reason = Reason("orphan_files", len(found), p.orphan_min_files,
                    f"{len(found)} data files ({size} bytes) no version references, older than "
                    f"{p.orphan_min_age_hours} h")
    return (Action(
        table=ctx.ref.label, operation="orphan_sweep", version=ctx.version,
        parameters={"min_age_hours": p.orphan_min_age_hours}, reasons=(reason,),
        estimate=Estimate(files_removed=len(found), bytes_removed=size),
        priority=round(len(found) / 100 + size / GIB, 3), details={"paths": sorted(found)},
    ),), ()
