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

Two paths (Delta's VACUUM LITE and FULL, Iceberg's snapshot expiry and orphan removal):

- ``mode="lite"`` (routine, :mod:`.cleanup_lite`): the versions to remove and their files are
  derived from the manifests of the removed versions, of the first version kept after them, of
  the versions pinned among them, and from the transactions committed since; no data directory
  is listed, so its work follows the removed versions, not the table's file count.
- ``mode="full"`` (pylance's behaviour, the default): the same versions, and every file under
  ``data/``, ``_deletions/``, ``_transactions/`` and ``_indices/`` is listed and compared.
- :func:`remove_orphan_files` (the thorough sweep): no version is removed; every file that no
  manifest of any version, branch, tag or detached version names and that is older than the
  grace period goes (``dry_run`` reports files and bytes).

Every path honours reader leases (:mod:`.table.leases`): a version a live lease pins is kept
with its files, and the stats say which leases kept what.
"""

import re
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

from lance_ops.format.errors import DatasetNotFoundError, InvalidArgumentError, ObjectStoreError, TagError
from lance_ops.format.index.metadata import INDICES_DIR
from lance_ops.format.index.unreferenced import index_uuids, prune_empty_index_dirs, unreferenced_index_files
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.ops.cleanup_lite import lite_candidates, plan_lite
from lance_ops.format.table.deletion import deletion_file_path
from lance_ops.format.table.leases import Lease, list_leases, remove_expired_leases
from lance_ops.format.table.lineage import Pins, external_pins
from lance_ops.format.table.manifest import (
    VERSIONS_DIR,
    FragmentList,
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
#: files deleted at once by a cleanup with many to remove (pylance's ``delete_concurrency``)
DELETE_CONCURRENCY = 8
_PARALLEL_DELETES_FROM = 256


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
    #: ids of the live leases whose versions would otherwise have been removed
    protected_by_leases: tuple[str, ...] = ()
    #: the versions kept only because a live lease pins them
    leased_versions: tuple[int, ...] = ()
    #: lease files removed because they expired long ago (:data:`.table.leases.EXPIRED_LEASE_RETENTION`)
    expired_leases_removed: int = 0
    #: manifests put back because a lease on their version was taken while cleanup ran
    manifests_restored: int = 0


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


def _kept_files_of(m: Manifest) -> set[str]:
    """:func:`_files_of` for a kept version, read from the fragment messages when the manifest's
    fragments were not decoded (a sweep reads every version: no fragment objects are built).
    A path that is not one plain file name, or a file under another base path, takes the
    decoder's checks instead, so a manifest naming files outside ``data/`` is refused
    (``CorruptFileError``) as it is everywhere else."""
    raw = m.fragments.undecoded() if isinstance(m.fragments, FragmentList) else None
    if raw is None:
        return _files_of(m)
    if not _plain_fragments(raw):
        return _files_of(m)  # decodes and checks every fragment (raises on a corrupt one)
    files = {"data/" + df.path for f in raw for df in f.files}
    files |= {deletion_file_path(f.id, f.deletion_file) for f in raw if f.HasField("deletion_file")}
    if m.transaction_file:
        files.add(f"_transactions/{m.transaction_file}")
    return files


def _plain_fragments(raw: Any) -> bool:
    """Whether every fragment message names plain data file names in ``data/`` and no file under
    another base path (else the full decode decides).  Sizes and column lists are not checked:
    they do not change which files a version protects."""
    for f in raw:
        if f.HasField("deletion_file") and f.deletion_file.HasField("base_id"):
            return False
        for df in f.files:
            p = df.path
            if not p or p in (".", "..") or "/" in p or "\\" in p or "\0" in p or df.HasField("base_id"):
                return False
    return True


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


CleanupMode = Literal["full", "lite"]
#: the shortest grace :func:`remove_orphan_files` accepts unless ``retention_duration_check=False``
MIN_ORPHAN_GRACE = timedelta(hours=1)


def _check_retain(retain_versions: int) -> None:
    if isinstance(retain_versions, bool) or not isinstance(retain_versions, int) or retain_versions < 1:
        raise InvalidArgumentError(f"retain_versions must be an integer of at least 1, got {retain_versions!r}")


def cleanup_old_versions(
    store: ObjectStore,
    *,
    older_than: timedelta = timedelta(days=14),
    retain_versions: int = 1,
    dry_run: bool = False,
    delete_unverified: bool = False,
    orphan_grace: timedelta = DEFAULT_ORPHAN_GRACE,
    retention_duration_check: bool = True,
    mode: CleanupMode = "full",
) -> CleanupStats:
    """Remove versions older than ``older_than`` beyond the newest ``retain_versions``, and their files.

    As pylance: a version goes when it is older than ``older_than``, not among the newest
    ``retain_versions``, not tagged, not the version a branch was created from and not pinned
    by a live reader lease; so do the data, deletion and ``.txn`` files only such versions
    name -- never one another branch or a detached version still names (:mod:`.lineage`).
    ``store`` may be a branch (``<root>/tree/<name>``): tags and branches are read at the root.

    ``mode="full"`` (pylance's behaviour): files no version names (left by failed or killed
    writers) go too once older than ``orphan_grace`` (7 days, whatever ``older_than`` is), as
    do commit temp files left in ``_versions/``; files younger than the cut-off are kept.
    ``mode="lite"`` (routine): only the files of the removed versions, derived from metadata
    (:mod:`.ops.cleanup_lite`), no data directory listed; orphans are left to
    :func:`remove_orphan_files`.

    Args:
        dry_run: report what would be removed, remove nothing.
        delete_unverified: also remove unreferenced files younger than ``orphan_grace``
            (only safe when no writer is running; full mode).
        retention_duration_check: refuse ``older_than`` below :data:`MIN_RETENTION` (one hour).

    Raises:
        InvalidArgumentError: ``older_than`` negative, or below the minimum retention with the
            check on; ``retain_versions`` below 1; an unknown ``mode``.
        CorruptFileError: a manifest, tag or lease file does not decode (nothing is removed then).
    """
    _check_retain(retain_versions)
    if mode not in ("full", "lite"):
        raise InvalidArgumentError(f"mode must be 'full' or 'lite', got {mode!r}")
    check_retention(older_than, retention_duration_check=retention_duration_check)
    scheme, versions = list_versions(store)
    if not versions:
        return CleanupStats()
    assert scheme is not None
    now_ns = time.time_ns()
    cut_ns = now_ns - int(older_than.total_seconds() * 1e9)
    leases = list_leases(store, now=now_ns / 1e9)
    if mode == "lite":
        lite = plan_lite(store, scheme, versions, retain_versions, cut_ns, leases)
        if lite is None:
            return _finish(store, scheme, None, {}, {}, {}, dry_run)
        files, index_files = lite_candidates(store, lite)
        plan = _VersionPlan(lite.drop, lite.dropped, lite.retained, lite.pins, lite.protected, lite.leased)
        return _finish(store, scheme, plan, {**files, **index_files}, index_files, {}, dry_run)
    plan = _plan_versions(store, scheme, versions, retain_versions, cut_ns, leases)
    if plan is None:
        return _finish(store, scheme, None, {}, {}, {}, dry_run)  # every version vanished meanwhile
    # As pylance: a file of a removed version goes unless it is younger than the retention
    # cut-off (a commit in flight may reference it); a file no manifest names goes once older
    # than the grace period, whatever ``older_than`` says (it may be a commit in flight's).
    grace_cut = now_ns / 1e9 - (0 if delete_unverified else orphan_grace.total_seconds())
    return _full_candidates(store, scheme, plan, cut_ns / 1e9, grace_cut, dry_run)


def remove_orphan_files(
    store: ObjectStore,
    *,
    older_than: timedelta = DEFAULT_ORPHAN_GRACE,
    dry_run: bool = False,
    retention_duration_check: bool = True,
) -> CleanupStats:
    """The thorough sweep (Iceberg's ``remove_orphan_files``, Delta's VACUUM FULL): list
    ``data/``, ``_deletions/``, ``_transactions/``, ``_indices/`` and ``_versions/`` and remove
    every file older than ``older_than`` that no manifest of any version, branch, tag or
    detached version names (files of failed or killed writers).  No version is removed, so a
    leased version keeps its files.  ``dry_run`` reports the files and bytes, removes nothing.

    Raises:
        InvalidArgumentError: ``older_than`` negative, or below :data:`MIN_ORPHAN_GRACE` with
            the check on (a commit in flight may name a younger file).
        CorruptFileError: a manifest, tag or lease file does not decode (nothing is removed).
    """
    check_retention(older_than, retention_duration_check=retention_duration_check, min_retention=MIN_ORPHAN_GRACE)
    scheme, versions = list_versions(store)
    if not versions:
        return CleanupStats()
    assert scheme is not None
    plan = _plan_versions(store, scheme, versions, len(versions), 0, [])
    if plan is None:
        return CleanupStats()
    return _full_candidates(store, scheme, plan, 0.0, time.time() - older_than.total_seconds(), dry_run)


def _full_candidates(store: ObjectStore, scheme: NamingScheme, plan: "_VersionPlan", file_cut: float,
                     grace_cut: float, dry_run: bool) -> CleanupStats:
    """Full mode and the sweep: list the directories and compare with the manifests."""
    candidates = _unreferenced_files(store, plan, file_cut, grace_cut)
    index_files = unreferenced_index_files(store, plan.retained, plan.dropped, grace_cut)
    candidates.update(index_files)
    return _finish(store, scheme, plan, candidates, index_files, _stale_temps(store, grace_cut), dry_run)


def _finish(store: ObjectStore, scheme: NamingScheme, plan: "_VersionPlan | None", candidates: dict[str, int],
            index_files: dict[str, int], temps: dict[str, int], dry_run: bool) -> CleanupStats:
    """Remove (unless ``dry_run``) and report: manifests first, then the leases are read again
    (a lease taken meanwhile puts its version back), then the files."""
    plan = plan or _VersionPlan([], [], [], Pins(None), set())
    removed = [manifest_path(scheme, v) for v in plan.drop]
    sizes = {p: _size_or_zero(store, p) for p in removed}
    failed = restored = expired = 0
    if not dry_run:
        late, failed = _remove_manifests(store, scheme, plan)
        restored = len(late)
        for m in late:
            _keep_files_of(m, candidates, index_files)
            removed.remove(manifest_path(scheme, m.version))
            sizes.pop(manifest_path(scheme, m.version), None)
        failed += _remove(store, sorted(candidates) + sorted(temps), index_files)
        expired = len(remove_expired_leases(store))
    counts = _count_kinds(c for c in candidates if c not in index_files)
    protected = plan.protected
    return CleanupStats(
        bytes_removed=sum(candidates.values()) + sum(sizes.values()) + sum(temps.values()),
        old_versions=len(removed),
        data_files_removed=counts["data"],
        transaction_files_removed=counts["txn"],
        deletion_files_removed=counts["dele"],
        index_files_removed=len(index_files),
        failed_deletes=failed,
        temporary_files_removed=len(temps),
        removed_paths=tuple(removed + sorted(candidates) + sorted(temps)),
        protected_by_tags=_named(protected, "tag "),
        protected_by_branches=_named(protected, "branch "),
        protected_by_leases=_named(protected, "lease "),
        leased_versions=tuple(sorted(plan.leased)),
        expired_leases_removed=expired,
        manifests_restored=restored,
    )


def _named(protected: set[str], prefix: str) -> tuple[str, ...]:
    return tuple(sorted(p[len(prefix):] for p in protected if p.startswith(prefix)))


@dataclass
class _VersionPlan:
    """Which versions go and which stay, and what pins files beyond them."""

    drop: list[int]
    dropped: list[Manifest]
    retained: list[Manifest]
    pins: Pins
    #: tags (``"tag <name>"``), branches (``"branch <name>"``), leases (``"lease <id>"``) that kept something
    protected: set[str]
    #: versions kept because a live lease pins them
    leased: set[int] = field(default_factory=set)

    def kept_files(self) -> set[str]:
        out: set[str] = set()
        for m in self.retained:
            out |= _kept_files_of(m)
        return out

    def dropped_files(self) -> set[str]:
        return {rel for m in self.dropped for rel in _files_of(m)}


def _plan_versions(
    store: ObjectStore, scheme: NamingScheme, versions: list[int], retain_versions: int, cut_ns: int,
    leases: list[Lease],
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
    for lease in leases:
        for v in present:
            if lease.pins(v):
                pins.versions.setdefault(v, []).append(f"lease {lease.id}")
    keep = set(present[-retain_versions:])
    keep |= {v for v, m in manifests.items() if m.timestamp_ns >= cut_ns}
    pinned_versions = {v: pins.versions[v] for v in present if v in pins.versions and v not in keep}
    keep |= set(pinned_versions)
    drop = [v for v in present if v not in keep]
    protected = {who for whos in pinned_versions.values() for who in whos}
    leased = {v for v, whos in pinned_versions.items() if any(w.startswith("lease ") for w in whos)}
    retained = {**{v: manifests[v] for v in keep}, **newer}
    return _VersionPlan(drop, [manifests[v] for v in drop], list(retained.values()), pins, protected, leased)


def _remove_manifests(store: ObjectStore, scheme: NamingScheme, plan: _VersionPlan) -> tuple[list[Manifest], int]:
    """Delete the manifests of the dropped versions, then read the leases again: a version
    leased meanwhile gets its manifest back (the bytes read just before) and keeps its files.

    Returns:
        (manifests of the versions put back, number of failed deletes).
    """
    raw: dict[int, bytes] = {}
    failed = 0
    for m in plan.dropped:
        rel = manifest_path(scheme, m.version)
        try:
            raw[m.version] = store.read(rel)
            store.delete(rel)
        except FileNotFoundError:
            continue  # another cleanup removed it
        except (OSError, ObjectStoreError):
            failed += 1
    if not plan.dropped:
        return [], failed
    late = {v for lease in list_leases(store) for v in raw if lease.pins(v)}
    back = []
    for m in plan.dropped:
        if m.version in late:
            store.put_if_absent(manifest_path(scheme, m.version), raw[m.version])
            plan.leased.add(m.version)
            back.append(m)
    return back, failed


def _keep_files_of(m: Manifest, candidates: dict[str, int], index_files: dict[str, int]) -> None:
    """Take the files of version ``m`` (and their blob sidecars, index directories) off the lists."""
    files = _files_of(m)
    uuids = index_uuids(m)
    for rel in list(candidates):
        parts = rel.split("/")
        index = len(parts) > 2 and parts[0] == INDICES_DIR and parts[1] in uuids
        if index or (blob_sidecar_owner(rel) or rel) in files:
            candidates.pop(rel)
            index_files.pop(rel, None)


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
    """Delete ``paths`` (files, after the manifests are gone: a version disappears before its
    files do, so no reader sees a hole); the number of deletes that failed."""
    def one(rel: str) -> int:
        try:
            store.delete(rel)  # a file already gone (another cleanup) is not an error
        except (OSError, ObjectStoreError):
            return 1
        return 0

    if len(paths) < _PARALLEL_DELETES_FROM:
        failed = sum(map(one, paths))
    else:  # deletes wait on the store (a syscall, a request), not on Python: a few at a time
        batches = [paths[i::DELETE_CONCURRENCY] for i in range(DELETE_CONCURRENCY)]
        with ThreadPoolExecutor(DELETE_CONCURRENCY) as pool:
            failed = sum(pool.map(lambda batch: sum(map(one, batch)), batches))
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
    "CleanupMode", "CleanupStats", "TagError", "Tags", "blob_sidecar_owner", "cleanup_old_versions", "NamingScheme",
    "VERSIONS_DIR", "remove_orphan_files",
]
