"""Cleanup, the orphan sweep and the guarded restore as jobs (driver-only: metadata and deletes).

They take the same arguments as the other jobs (``spark`` first, ``storage_options``,
``manifest_store``, ``transaction_properties`` / ``commit``) so the orchestrators call them the
same way; none needs executors (``spark`` may be None).

- :func:`cleanup_old_versions`: ``mode="lite"`` (routine, the default here: files derived from
  the removed versions' metadata, no data listing) or ``"full"`` (pylance's: also lists and
  removes unreferenced files older than the 7-day grace).
- :func:`remove_orphan_files`: the thorough sweep, ``dry_run`` reports files and bytes.
- :func:`restore`: to a version, a tag or a time; the current version is tagged first.

Every path keeps the versions live reader leases pin and reports them.
"""

import dataclasses
import time
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

import lance_ops.format as lf
from lance_ops.format import CommitOptions
from lance_ops.jobs.results import CleanupResult, RestoreResult

_PROPS = {"lance_ops.writer": "spark"}


def _result(uri: str, mode: str, dry_run: bool, stats: Any, t0: float) -> CleanupResult:
    files = (stats.data_files_removed + stats.deletion_files_removed + stats.transaction_files_removed
             + stats.index_files_removed + stats.temporary_files_removed)
    return CleanupResult(uri, mode, dry_run, stats.old_versions, files, stats.bytes_removed, stats.failed_deletes,
                         stats.protected_by_tags, stats.protected_by_branches, stats.protected_by_leases,
                         stats.leased_versions, stats.removed_paths, time.perf_counter() - t0)


def cleanup_old_versions(
    spark: Any,
    uri: str,
    *,
    older_than: timedelta = timedelta(days=14),
    retain_versions: int = 1,
    mode: str = "lite",
    dry_run: bool = False,
    retention_duration_check: bool = True,
    storage_options: Mapping[str, Any] | None = None,
    manifest_store: Any = None,
) -> CleanupResult:
    """Remove versions older than ``older_than`` (beyond the newest ``retain_versions``, not
    tagged, not leased) and the files only they name."""
    t0 = time.perf_counter()
    ds = lf.dataset(uri, storage_options=storage_options, manifest_store=manifest_store)
    stats = ds.cleanup_old_versions(older_than, retain_versions, dry_run=dry_run, mode=mode,  # type: ignore[arg-type]
                                    retention_duration_check=retention_duration_check)
    return _result(uri, mode, dry_run, stats, t0)


def remove_orphan_files(
    spark: Any,
    uri: str,
    *,
    older_than: timedelta = timedelta(days=7),
    dry_run: bool = False,
    retention_duration_check: bool = True,
    storage_options: Mapping[str, Any] | None = None,
    manifest_store: Any = None,
) -> CleanupResult:
    """The thorough sweep: files no version, branch, tag or detached version names, older than
    ``older_than``."""
    t0 = time.perf_counter()
    ds = lf.dataset(uri, storage_options=storage_options, manifest_store=manifest_store)
    stats = ds.remove_orphan_files(older_than, dry_run=dry_run, retention_duration_check=retention_duration_check)
    return _result(uri, "orphans", dry_run, stats, t0)


def restore(
    spark: Any,
    uri: str,
    target: "int | str | datetime",
    *,
    tag_current: bool = True,
    storage_options: Mapping[str, Any] | None = None,
    manifest_store: Any = None,
    transaction_properties: Mapping[str, str] | None = None,
    commit: CommitOptions | None = None,
) -> RestoreResult:
    """Guarded restore of ``target`` (a version, a tag, or a time: the version current then).

    Raises:
        VersionRemovedError: cleanup removed the target; nothing is written.
    """
    t0 = time.perf_counter()
    opts = commit or CommitOptions()
    if manifest_store is not None:
        opts = dataclasses.replace(opts, manifest_store=manifest_store)
    props = {**opts.properties(transaction_properties), **_PROPS}
    ds = lf.dataset(uri, storage_options=storage_options, manifest_store=opts.manifest_store)
    out = ds.restore_to(target, tag_current=tag_current, transaction_properties=props)
    return RestoreResult(uri, out.previous_version, out.restored_version, out.version, out.undo_tag,
                         time.perf_counter() - t0)
