"""Cleanup of old versions, and the orphan-file sweep proposal.

Cleanup: what ``cleanup_old_versions`` would remove with the policy's retention
(``cleanup_older_than_days``, ``cleanup_retain_versions``; tags and branches keep theirs), from
its own dry run; proposed when it removes at least ``cleanup_min_versions`` versions.  The dry
run only runs when the version listing holds that many versions beyond the retained ones.

Orphan sweep: data files under ``data/`` that no version's manifest names, older than
``orphan_min_age_hours`` (younger ones may belong to a commit in flight); proposed at
``orphan_min_files``.  The listing of ``data/`` is compared with the latest manifest first; the
sweep's own dry run (``remove_orphan_files``: every version, branch and tag read) runs only when
it holds more files, and gives the exact files and bytes.  ``maintain`` runs it.
"""

from datetime import timedelta

import lance_ops.format as lf
from lance_ops.orchestration.planner.context import TableContext
from lance_ops.orchestration.planner.model import Action, Estimate, Reason

GIB = 1 << 30
#: the orphan paths an action lists in its details (the count is always there)
MAX_PATHS = 100


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


def _maybe_orphans(ctx: TableContext) -> bool:
    """The cheap pre-check: does ``data/`` hold a file the latest manifest does not name?"""
    listed = set(ctx.store.list_dir("data"))
    named = {df.path for f in ctx.manifest.fragments for df in f.files if df.base_id is None}
    return bool(listed - named)


def orphan_actions(ctx: TableContext) -> tuple[tuple[Action, ...], tuple[str, ...]]:
    """The orphan sweep (``remove_orphan_files``, at most one action), and notes: its own dry run
    (every version, branch, tag and detached version read), run only when the pre-check finds a
    file in ``data/`` the latest manifest does not name."""
    p = ctx.policy
    if not _maybe_orphans(ctx):
        return (), ()
    params = {"older_than_hours": p.orphan_min_age_hours, "retention_duration_check": p.cleanup_retention_duration_check}
    try:
        stats = ctx.ds.remove_orphan_files(timedelta(hours=p.orphan_min_age_hours), dry_run=True,
                                           retention_duration_check=p.cleanup_retention_duration_check)
    except lf.InvalidArgumentError as e:
        return (), (f"orphan sweep not planned: {e}",)
    found = [x for x in stats.removed_paths if not x.startswith("_versions/")]
    if len(found) < p.orphan_min_files:
        return (), ()
    size = stats.bytes_removed
    reason = Reason("orphan_files", len(found), p.orphan_min_files,
                    f"{len(found)} files ({size} bytes) no version, branch or tag references, older than "
                    f"{p.orphan_min_age_hours} h")
    return (Action(
        table=ctx.ref.label, operation="remove_orphan_files", version=ctx.version, parameters=params,
        reasons=(reason,), estimate=Estimate(files_removed=len(found), bytes_removed=size),
        priority=round(len(found) / 100 + size / GIB, 3),
        details={"paths": sorted(found)[:MAX_PATHS], "paths_total": len(found)},  # run config carries details
    ),), ()
