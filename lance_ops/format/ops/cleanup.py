"""Tags and cleanup of old versions (spec "Dataset cleanup"; pylance ``cleanup_old_versions``).

Tags live in ``_refs/tags/{name}.json`` as pylance writes them.  Cleanup removes manifests older
than the cut, and the ``.txn``, data, deletion and index files (``_indices/<uuid>/``, see
:mod:`.index.cleanup`) that only removed versions reference; never a file a retained or tagged
version uses.  Files no version references at all (left by
failed or killed writers) are removed once older than a grace period.

Cleanup never fails because others work (concurrent writers, pylance, another cleanup): files
and manifests that vanish between listing and use are skipped, versions committed while it
runs are found by a second listing and kept, and, as pylance does, files of removed versions
go only when older than the retention cut-off (``now - older_than``) and unreferenced files
only after the grace period, so a commit in flight never loses a file it references.
A retention guard like Delta's VACUUM check refuses ``older_than`` below
:data:`MIN_RETENTION` unless ``retention_duration_check=False``; a negative one is always refused.
"""

import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta

from lance_ops.format.errors import DatasetNotFoundError, InvalidArgumentError, ObjectStoreError, TagError
from lance_ops.format.index.unreferenced import prune_empty_index_dirs, unreferenced_index_files
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.table.deletion import deletion_file_path
from lance_ops.format.table.lineage import Pins, external_pins
from lance_ops.format.table.manifest import (
    VERSIONS_DIR,
    Manifest,
    NamingScheme,
    list_versions,
    manifest_path,
    parse_manifest_name,
    read_manifest,
)
from lance_ops.format.table.refs import Tags

HINT_FILE = "latest_version_hint.json"
_DETACHED = re.compile(r"d\d+\.manifest")
DEFAULT_ORPHAN_GRACE = timedelta(days=7)
#: the shortest ``older_than`` cleanup accepts unless ``retention_duration_check=False``: readers
#: and commits in flight may still need versions younger than this (Delta's VACUUM check)
MIN_RETENTION = timedelta(hours=1)


@dataclass(frozen=True)
class CleanupStats:
    bytes_removed: int = 0
    old_versions: int = 0
    data_files_removed: int = 0
    transaction_files_removed: int = 0
    deletion_files_removed: int = 0
    index_files_removed: int = 0
    failed_deletes: int = 0
    temporary_files_removed: int = 0  # commit temp files left in _versions/ by killed writers
    removed_paths: tuple[str, ...] = ()
    #: tags whose version would otherwise have been removed
    protected_by_tags: tuple[str, ...] = ()
    #: branches (``"main"`` for main) whose versions or files would otherwise have been removed
    #: (a branch is a shallow clone: it keeps using the files of the version it came from)
    protected_by_branches: tuple[str, ...] = ()


_SIDECAR = re.compile(r"data/([^/]+)/[^/]+\.blob")


def blob_sidecar_owner(rel: str) -> str | None:
    """``data/<stem>.lance`` for a blob sidecar ``data/<stem>/<blob id>.blob`` (packed or
    dedicated blob v2 payloads, written beside their data file), else None."""
    m = _SIDECAR.fullmatch(rel)
    return f"data/{m.group(1)}.lance" if m else None


def _files_of(m: Manifest) -> set[str]:
    """Files of the dataset's (branch's) own directory that ``m`` names; files under other base
    paths (a branch's shared files) are the business of :mod:`.lineage`."""
    files = {f"data/{df.path}" for f in m.fragments for df in f.files if df.base_id is None}
    files |= {
        deletion_file_path(f.id, f.deletion_file.to_proto())
        for f in m.fragments
        if f.deletion_file and f.deletion_file.base_id is None
    }
    if m.transaction_file:
        files.add(f"_transactions/{m.transaction_file}")
    return files


def check_retention(older_than: timedelta, *, retention_duration_check: bool = True,
                    min_retention: timedelta = MIN_RETENTION) -> None:
    """Refuse a negative ``older_than``, and one below ``min_retention`` unless the check is off.

    Raises:
        InvalidArgumentError: naming the value and how to override the check.
    """
    if not isinstance(older_than, timedelta):
        raise InvalidArgumentError(f"older_than must be a datetime.timedelta, got {type(older_than).__name__} {older_than!r}")
    if older_than < timedelta(0):
        raise InvalidArgumentError(f"older_than must not be negative, got {older_than}")
    if retention_duration_check and older_than < min_retention:
        raise InvalidArgumentError(
            f"older_than={older_than} is shorter than the minimum retention {min_retention}: readers and "
            "commits in flight may still need those versions. Pass retention_duration_check=False if no "
            "other process reads or writes the dataset (Delta: retentionDurationCheck)"
        )


def cleanup_old_versions(
    store: ObjectStore,
    *,
    older_than: timedelta = timedelta(days=14),
    retain_versions: int = 1,
    dry_run: bool = False,
    delete_unverified: bool = False,
    orphan_grace: timedelta = DEFAULT_ORPHAN_GRACE,
    retention_duration_check: bool = True,
) -> CleanupStats:
    """Remove versions older than ``older_than`` beyond the newest ``retain_versions``, and their files.

    As pylance: a version goes when it is older than ``older_than``, not among the newest
    ``retain_versions``, not tagged and not the version a branch was created from; so do the
    data, deletion and ``.txn`` files only such versions name -- never one another branch or a
    detached version still names (:mod:`.lineage`).  ``store`` may be a branch
    (``<root>/tree/<name>``): tags and branches are read at the root.  Files no version names (left by failed or killed writers) go once older
    than ``orphan_grace`` (7 days, whatever ``older_than`` is), as do commit temp files left
    in ``_versions/``.  Files younger than the cut-off (``now - older_than``) are kept.

    Args:
        dry_run: report what would be removed, remove nothing.
        delete_unverified: also remove unreferenced files younger than ``orphan_grace``
            (only safe when no writer is running).
        retention_duration_check: refuse ``older_than`` below :data:`MIN_RETENTION` (one hour).

    Raises:
        InvalidArgumentError: ``older_than`` negative, or below the minimum retention with the
            check on; ``retain_versions`` below 1.
        CorruptFileError: a manifest or tag file does not decode (nothing is removed then).
    """
    if isinstance(retain_versions, bool) or not isinstance(retain_versions, int) or retain_versions < 1:
        raise InvalidArgumentError(f"retain_versions must be an integer of at least 1, got {retain_versions!r}")
    check_retention(older_than, retention_duration_check=retention_duration_check)
    scheme, versions = list_versions(store)
    if not versions:
        return CleanupStats()
    assert scheme is not None
    now_ns = time.time_ns()
    cut_ns = now_ns - int(older_than.total_seconds() * 1e9)
    plan = _plan_versions(store, scheme, versions, retain_versions, cut_ns)
    if plan is None:
        return CleanupStats()  # every version vanished meanwhile: another cleanup's business
    # As pylance: a file of a removed version goes unless it is younger than the retention
    # cut-off (a commit in flight may reference it); a file no manifest names goes once older
    # than the grace period, whatever ``older_than`` says (it may be a commit in flight's).
    grace_cut = now_ns / 1e9 - (0 if delete_unverified else orphan_grace.total_seconds())
    candidates = _unreferenced_files(store, plan, cut_ns / 1e9, grace_cut)
    index_files = unreferenced_index_files(store, plan.retained, plan.dropped, grace_cut)
    candidates.update(index_files)
    temps = _stale_temps(store, grace_cut)
    removed = [manifest_path(scheme, v) for v in plan.drop]
    sizes = {p: _size_or_zero(store, p) for p in removed}
    failed = 0 if dry_run else _remove(store, removed + sorted(candidates) + sorted(temps), index_files)
    counts = _count_kinds(c for c in candidates if c not in index_files)
    protected = plan.protected
    return CleanupStats(
        bytes_removed=sum(candidates.values()) + sum(sizes.values()) + sum(temps.values()),
        old_versions=len(plan.drop),
        data_files_removed=counts["data"],
        transaction_files_removed=counts["txn"],
        deletion_files_removed=counts["dele"],
        index_files_removed=len(index_files),
        failed_deletes=failed,
        temporary_files_removed=len(temps),
        removed_paths=tuple(removed + sorted(candidates) + sorted(temps)),
        protected_by_tags=tuple(sorted(p[len("tag "):] for p in protected if p.startswith("tag "))),
        protected_by_branches=tuple(sorted(p[len("branch "):] for p in protected if p.startswith("branch "))),
    )


@dataclass
class _VersionPlan:
    """Which versions go and which stay, and what pins files beyond them."""

    drop: list[int]
    dropped: list[Manifest]
    retained: list[Manifest]
    pins: Pins
    #: tags (``"tag <name>"``) and branches (``"branch <name>"``) that kept something
    protected: set[str]

    def kept_files(self) -> set[str]:
        return {rel for m in self.retained for rel in _files_of(m)}

    def dropped_files(self) -> set[str]:
        return {rel for m in self.dropped for rel in _files_of(m)}


def _plan_versions(
    store: ObjectStore, scheme: NamingScheme, versions: list[int], retain_versions: int, cut_ns: int
) -> _VersionPlan | None:
    """Versions to remove: older than the cut, beyond the newest ``retain_versions``, unpinned.

    None when every listed version vanished meanwhile (another cleanup).
    """
    manifests = _read_present(store, versions, scheme)
    # Versions committed while we read (or whose manifests another cleanup removed, which only
    # happens once newer ones exist): a second listing, and everything new is kept.
    _, again = list_versions(store)
    newer = _read_present(store, [v for v in again if v > versions[-1]], scheme)
    present = sorted(manifests)
    if not present and not newer:
        return None
    latest = newer[max(newer)] if newer else manifests[present[-1]]
    # tags, branches created from this one, other branches' and detached versions' files
    pins = external_pins(store, latest.branch)
    keep = set(present[-retain_versions:])
    keep |= {v for v, m in manifests.items() if m.timestamp_ns >= cut_ns}
    pinned_versions = {v: pins.versions[v] for v in present if v in pins.versions and v not in keep}
    keep |= set(pinned_versions)
    drop = [v for v in present if v not in keep]
    protected = {who for whos in pinned_versions.values() for who in whos}
    retained = {**{v: manifests[v] for v in keep}, **newer}
    return _VersionPlan(drop, [manifests[v] for v in drop], list(retained.values()), pins, protected)


def _unreferenced_files(store: ObjectStore, plan: _VersionPlan, file_cut: float, grace_cut: float) -> dict[str, int]:
    """Data, deletion and ``.txn`` files to remove (path -> size); adds to ``plan.protected``
    the tags and branches that kept one."""
    kept_files, dropped_files = plan.kept_files(), plan.dropped_files()
    candidates: dict[str, int] = {}
    for prefix in ("data", "_deletions", "_transactions"):
        for rel, size, mtime in store.list_files(prefix):
            # a blob sidecar (``data/<stem>/<id>.blob``, blob v2 payloads) lives and dies with
            # its data file ``data/<stem>.lance``
            owner = blob_sidecar_owner(rel) or rel
            if owner in kept_files:
                continue
            if owner in dropped_files:
                if mtime is not None and mtime >= file_cut:
                    continue  # younger than the retention cut-off: a commit in flight may name it
            elif mtime is None or mtime >= grace_cut:
                continue
            needed_by = plan.pins.file_pinned_by(store, owner)
            if needed_by:
                plan.protected |= needed_by
                continue
            candidates[rel] = size
    return candidates


def _stale_temps(store: ObjectStore, grace_cut: float) -> dict[str, int]:
    """Temp files a killed committer left in _versions/ (``<manifest>#<hex>.tmp``, hint temps)."""
    temps: dict[str, int] = {}
    for rel, size, mtime in store.list_files(VERSIONS_DIR):
        name = rel.rsplit("/", 1)[-1]
        if "/" in rel[len(VERSIONS_DIR) + 1 :] or parse_manifest_name(name) is not None or name == HINT_FILE:
            continue
        if _DETACHED.fullmatch(name):
            continue  # a detached version (pylance keeps them; only a version number reaches them)
        if ".manifest-" in name:
            # an external manifest store's staging copy: possibly the only copy of a committed
            # version not finalized yet (manifest_store.py); never ours to remove
            continue
        if mtime is not None and mtime < grace_cut:
            temps[rel] = size
    return temps


def _remove(store: ObjectStore, paths: list[str], index_files: dict[str, int]) -> int:
    """Delete ``paths`` in order (manifests first); the number of deletes that failed."""
    failed = 0
    # Manifests first: a version disappears before its files do, so no reader sees a hole.
    for rel in paths:
        try:
            store.delete(rel)  # a file already gone (another cleanup) is not an error
        except (OSError, ObjectStoreError):
            failed += 1
    prune_empty_index_dirs(store, index_files)
    return failed


def _count_kinds(paths: Iterable[str]) -> dict[str, int]:
    """Data, ``.txn`` and deletion files among ``paths``."""
    counts = dict(data=0, txn=0, dele=0)
    for rel in paths:
        counts["data" if rel.startswith("data/") else "txn" if rel.startswith("_transactions/") else "dele"] += 1
    return counts


def _read_present(store: ObjectStore, versions: list[int], scheme: NamingScheme) -> dict[int, Manifest]:
    """Manifests of ``versions``; those removed since the listing (another cleanup) are skipped."""
    out: dict[int, Manifest] = {}
    for v in versions:
        try:
            out[v] = read_manifest(store, v, scheme).manifest
        except DatasetNotFoundError:
            continue
    return out


def _size_or_zero(store: ObjectStore, rel: str) -> int:
    try:
        return store.size(rel)
    except FileNotFoundError:
        return 0  # removed meanwhile by another cleanup


__all__ = [
    "CleanupStats", "TagError", "Tags", "blob_sidecar_owner", "cleanup_old_versions", "NamingScheme", "VERSIONS_DIR",
]
