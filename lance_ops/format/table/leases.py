"""Reader leases: a version pinned for a holder until the lease expires.

A lease is one small JSON object per holder beside the table, ``_leases/<id>.json`` (in the
branch's directory for a branch), created with the store's create-if-absent and renewed with a
whole-object put: no service beyond the object store.  ``cleanup_old_versions`` and
``remove_orphan_files`` keep every version a live lease pins (``first_version`` through
``version``) and so every file those versions name; an expired lease pins nothing, so a
crashed holder never pins forever.  Expiry is judged by the cleaning process' clock: hosts
that hold leases and clean must keep their clocks in sync (NTP), and holders renew well before
expiry (the context manager renews every third of the ttl).

Acquire and cleanup are ordered so that a lease whose acquire succeeded is never lost to a
cleanup running at the same time: acquire writes the lease, then checks the versions' manifests
still exist (:class:`VersionRemovedError` otherwise); cleanup removes manifests, then reads the
leases again and puts back the manifest of any version leased meanwhile, keeping its files.

pylance knows nothing of leases: its ``cleanup_old_versions`` removes leased versions.  Tag the
version for as long as pylance's cleanup may run (``ds.tags.create``), or clean with lance_ops.
"""

import json
import os
import socket
import threading
import time
import uuid
from dataclasses import asdict, dataclass, replace
from datetime import timedelta
from typing import Any

from lance_ops.format.errors import (
    ArgumentTypeError,
    CorruptFileError,
    InvalidArgumentError,
    LeaseExpiredError,
    LeaseNotFoundError,
    VersionRemovedError,
)
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.table.manifest import NamingScheme, manifest_path

LEASES_DIR = "_leases"
#: the ttl of a lease when none is given
DEFAULT_LEASE_TTL = timedelta(minutes=10)
#: lease files expired for longer than this are removed by cleanup (expired ones pin nothing)
EXPIRED_LEASE_RETENTION = timedelta(hours=1)

__all__ = [
    "DEFAULT_LEASE_TTL", "EXPIRED_LEASE_RETENTION", "LEASES_DIR", "Lease", "LeaseHandle", "acquire_lease",
    "list_leases", "release_lease", "remove_expired_leases", "renew_lease", "version_exists",
]


@dataclass(frozen=True)
class Lease:
    """One lease: versions ``first_version..version`` pinned for ``holder`` until ``expires_at``."""

    id: str
    version: int
    first_version: int
    holder: str
    acquired_at: float  # epoch seconds
    expires_at: float  # epoch seconds

    def pins(self, version: int) -> bool:
        return self.first_version <= version <= self.version

    def is_live(self, now: float | None = None) -> bool:
        return self.expires_at > (time.time() if now is None else now)

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes, path: str) -> "Lease":
        try:
            raw = json.loads(data)
            lease = cls(str(raw["id"]), int(raw["version"]), int(raw["first_version"]), str(raw["holder"]),
                        float(raw["acquired_at"]), float(raw["expires_at"]))
        except (ValueError, KeyError, TypeError) as e:
            raise CorruptFileError(path, f"lease file does not decode ({type(e).__name__}: {e}); remove it if "
                                   "it is not a lease") from None
        if lease.first_version > lease.version or lease.first_version < 0:
            raise CorruptFileError(path, f"lease pins versions {lease.first_version}..{lease.version}")
        return lease


def _seconds(ttl: timedelta | float | int) -> float:
    if isinstance(ttl, timedelta):
        seconds = ttl.total_seconds()
    elif isinstance(ttl, int | float) and not isinstance(ttl, bool):
        seconds = float(ttl)
    else:
        raise ArgumentTypeError(f"ttl must be a datetime.timedelta or seconds, got {type(ttl).__name__} {ttl!r}")
    if not seconds > 0:
        raise InvalidArgumentError(f"ttl must be positive, got {ttl!r}")
    return seconds


def _path(lease_id: str) -> str:
    if not lease_id or "/" in lease_id or lease_id.startswith("."):
        raise InvalidArgumentError(f"lease id {lease_id!r} is not a plain name")
    return f"{LEASES_DIR}/{lease_id}.json"


def version_exists(store: ObjectStore, version: int) -> bool:
    """Whether the manifest of ``version`` is in ``_versions/`` (either naming scheme)."""
    return any(store.exists(manifest_path(s, version)) for s in (NamingScheme.V2, NamingScheme.V1))


def acquire_lease(
    store: ObjectStore,
    version: int,
    *,
    ttl: timedelta | float = DEFAULT_LEASE_TTL,
    first_version: int | None = None,
    holder: str | None = None,
) -> Lease:
    """Pin ``version`` (and with ``first_version`` every version from it) until ``now + ttl``.

    Raises:
        InvalidArgumentError: ttl not positive, or ``first_version`` after ``version``.
        VersionRemovedError: ``version`` (or ``first_version``, when > 0) is not there any more
            (removed by cleanup); no lease is left behind.
    """
    seconds = _seconds(ttl)
    first = version if first_version is None else int(first_version)
    if not 0 <= first <= version:
        raise InvalidArgumentError(f"{store.uri}: a lease pins first_version..version, got {first}..{version}")
    now = time.time()
    lease = Lease(uuid.uuid4().hex, int(version), first, holder or f"{socket.gethostname()}:{os.getpid()}",
                  now, now + seconds)
    store.put_if_absent(_path(lease.id), lease.to_json())
    # after the lease is visible: a cleanup that removed one of these manifests before now
    # did not see the lease; one that removes them later sees it and puts them back
    for v in {first, lease.version} - {0}:
        if not version_exists(store, v):
            store.delete(_path(lease.id))
            raise VersionRemovedError(f"{store.uri}: version {v} was removed (cleanup); it cannot be leased",
                                      uri=store.uri, version=v)
    return lease


def _read(store: ObjectStore, lease_id: str) -> Lease:
    rel = _path(lease_id)
    try:
        data = store.read(rel)
    except FileNotFoundError:
        raise LeaseNotFoundError(f"{store.uri}: no lease {lease_id!r} (released, or removed after it expired)",
                                 uri=store.uri, lease_id=lease_id) from None
    return Lease.from_json(data, store.full_path(rel))


def renew_lease(store: ObjectStore, lease_id: str, *, ttl: timedelta | float = DEFAULT_LEASE_TTL) -> Lease:
    """Extend a live lease to ``now + ttl``.

    Raises:
        LeaseNotFoundError: no such lease.
        LeaseExpiredError: it expired already (its files may be gone: acquire a new one).
    """
    seconds = _seconds(ttl)
    lease = _read(store, lease_id)
    now = time.time()
    if not lease.is_live(now):
        raise LeaseExpiredError(
            f"{store.uri}: lease {lease_id} on version {lease.version} expired {now - lease.expires_at:.1f} s ago; "
            "cleanup may have removed its files: acquire a new lease", uri=store.uri, lease_id=lease_id)
    renewed = replace(lease, expires_at=now + seconds)
    store.put(_path(lease_id), renewed.to_json())
    return renewed


def release_lease(store: ObjectStore, lease_id: str) -> None:
    """Remove the lease (an unknown or already released one is not an error)."""
    store.delete(_path(lease_id))


def list_leases(store: ObjectStore, *, include_expired: bool = False, now: float | None = None) -> list[Lease]:
    """Leases of the table (or branch) at ``store``, live ones only unless ``include_expired``.

    Raises:
        CorruptFileError: a file in ``_leases/`` is not a lease (cleanup must not guess).
    """
    now = time.time() if now is None else now
    out = []
    for name in store.list_dir(LEASES_DIR):
        if not name.endswith(".json"):
            continue  # a temp file of a put in progress
        try:
            lease = Lease.from_json(store.read(f"{LEASES_DIR}/{name}"), store.full_path(f"{LEASES_DIR}/{name}"))
        except FileNotFoundError:
            continue  # released meanwhile
        if include_expired or lease.is_live(now):
            out.append(lease)
    return sorted(out, key=lambda lease: (lease.acquired_at, lease.id))


def remove_expired_leases(store: ObjectStore, *, older_than: timedelta = EXPIRED_LEASE_RETENTION,
                          dry_run: bool = False) -> list[str]:
    """Remove lease files expired for longer than ``older_than``; their ids."""
    cut = time.time() - older_than.total_seconds()
    gone = [lease.id for lease in list_leases(store, include_expired=True) if lease.expires_at < cut]
    if not dry_run:
        for lease_id in gone:
            release_lease(store, lease_id)
    return gone


class LeaseHandle:
    """A held lease as a context manager (``with ds.lease(ttl=...) as lease``): renewed in the
    background every third of the ttl while held, released on exit.  A killed process stops
    renewing, and its lease expires ``ttl`` after the last renewal."""

    def __init__(self, store: ObjectStore, lease: Lease, ttl: timedelta | float, *, auto_renew: bool = True) -> None:
        self.store = store
        self.lease = lease
        self.ttl = _seconds(ttl)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.renew_error: BaseException | None = None
        if auto_renew:
            self._thread = threading.Thread(target=self._renew_loop, name=f"lease-{lease.id[:8]}", daemon=True)
            self._thread.start()

    @property
    def id(self) -> str:
        return self.lease.id

    @property
    def version(self) -> int:
        return self.lease.version

    def renew(self) -> Lease:
        self.lease = renew_lease(self.store, self.lease.id, ttl=self.ttl)
        return self.lease

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.ttl / 3):
            try:
                self.renew()
            except Exception as e:  # noqa: BLE001 - kept for the holder to see; the lease lapses
                self.renew_error = e
                return

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        release_lease(self.store, self.lease.id)

    def __enter__(self) -> "LeaseHandle":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"LeaseHandle(id={self.lease.id!r}, versions={self.lease.first_version}..{self.lease.version})"
