"""Guarded restore: roll a table back to a version, a time or a tag, undoably.

1. The target is resolved (a version number, a tag name, or a time: the newest version
   committed at or before it) and leased for the duration, so a cleanup running meanwhile
   cannot remove it between the check and the commit.
2. A target whose manifest cleanup removed is refused with :class:`VersionRemovedError`,
   naming the oldest version still there; nothing is written.
3. The current version is tagged ``restore-before-<version>-<UTC time>`` first, so the restore
   can be undone (restore to that tag) and cleanup keeps what it needs.
4. One ``Restore`` commit, stamped with the caller's transaction properties plus
   ``lance_ops.operation=restore``, ``lance_ops.restore.target`` and ``lance_ops.restore.undo_tag``.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from lance_ops.format.errors import VersionRemovedError
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.table.leases import acquire_lease, release_lease, version_exists
from lance_ops.format.table.manifest import list_versions
from lance_ops.format.table.refs import Tags

RESTORE_TAG_PREFIX = "restore-before-"

__all__ = ["RESTORE_TAG_PREFIX", "RestoreResult", "guarded_restore", "undo_tag_name"]


@dataclass(frozen=True)
class RestoreResult:
    """What a guarded restore did."""

    uri: str
    previous_version: int  # the latest version before the restore (tagged ``undo_tag``)
    restored_version: int  # the target
    version: int  # the new version (same data as the target)
    undo_tag: str | None

    def to_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


def undo_tag_name(version: int, when: datetime | None = None) -> str:
    """``restore-before-<version>-<YYYYmmddTHHMMSSffffffZ>``."""
    when = when or datetime.now(UTC)
    return f"{RESTORE_TAG_PREFIX}{version}-{when.strftime('%Y%m%dT%H%M%S%fZ')}"


def check_target(store: ObjectStore, target: int, asked: object) -> None:
    """Refuse a target version cleanup removed, naming the oldest version still there.

    Raises:
        VersionRemovedError: no manifest for ``target``.
    """
    if version_exists(store, target):
        return
    _, present = list_versions(store)
    oldest = f"the oldest version kept is {present[0]}" if present else "no version is left"
    raise VersionRemovedError(
        f"{store.uri}: cannot restore {asked!r}: version {target} was removed by cleanup ({oldest}); "
        "restore to a tag or a retained version", uri=store.uri, version=target)


def guarded_restore(
    store: ObjectStore,
    root: ObjectStore,
    branch: str | None,
    target: int,
    latest: int,
    commit_restore: Callable[[int, Mapping[str, str]], int],
    *,
    asked: object = None,
    tag_current: bool = True,
    transaction_properties: Mapping[str, str] | None = None,
) -> RestoreResult:
    """Restore ``target`` through ``commit_restore(target, properties) -> new version``.

    ``store`` is the branch's directory, ``root`` the dataset root (tags live there).
    """
    check_target(store, target, target if asked is None else asked)
    lease = acquire_lease(store, target, ttl=600, holder="restore")
    try:
        tag = None
        if tag_current:
            tag = undo_tag_name(latest)
            Tags(root, branch, latest).create(tag, latest)
        props = {**dict(transaction_properties or {}), "lance_ops.operation": "restore",
                 "lance_ops.restore.target": str(target), "lance_ops.restore.previous": str(latest)}
        if tag is not None:
            props["lance_ops.restore.undo_tag"] = tag
        version = commit_restore(target, props)
    finally:
        release_lease(store, lease.id)
    return RestoreResult(store.uri, latest, target, version, tag)
