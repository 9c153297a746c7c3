"""External manifest store: commits through a KV store when the object store lacks conditional put.

Spec "External Manifest Store"; docs/FORMAT.md §12.3 (lance ``external_manifest.rs``).  The KV
store maps ``(base_uri, version)`` to the manifest's path; its put-if-not-exists is the atomic
step of a commit.  Protocol:

1. write the manifest bytes to a staging path ``"{final_manifest_path}-{uuid4}"``;
2. ``put_if_not_exists(base_uri, version, staging_path, size)`` -- the commit point: a lost
   race raises :class:`ManifestStoreConflict`, a win is durable from here on;
3. finalize: write the same bytes to the final ``_versions/*.manifest`` path,
   ``put_if_exists(base_uri, version, final_path, size)``, delete the staging object.

Any reader that finds a staging path in the KV store finishes step 3 itself (reader-side repair),
so the ``_versions/`` directory always becomes a complete dataset that readers unaware of the KV
store (pylance) can open; until the repair they see it one version behind.  Staging names end in
a UUID, not ``.manifest``, so :func:`.manifest.parse_manifest_name` ignores them.

Paths in the KV store are relative to the dataset root (``_versions/...``); ``base_uri`` is the
normalised dataset URI (:func:`base_uri_of`), so a dataset copied elsewhere starts with an empty
KV history and is read from its ``_versions/`` listing.

Mixing mechanisms on one dataset is unsupported (spec): a writer that commits straight to
``_versions/`` beside the KV store is not seen by :func:`resolve_latest` once the KV store holds
the dataset, and a final manifest whose bytes differ from the committed staged ones makes the
repair fail with :class:`CorruptFileError` (the reader refuses to load rather than guess).

:class:`SQLiteManifestStore` is the embedded default: safe across threads and processes on one
host (Spark ``local[*]``, one Dagster host, tests).  SQLite must not live on a network
filesystem; for writers on several hosts implement :class:`ManifestStore` over a shared SQL
database (the same three statements: ``INSERT`` with the primary key as the condition,
``UPDATE ... WHERE base_uri = ? AND version = ?`` checking the row count, ``SELECT ... ORDER BY
version DESC LIMIT 1``) or DynamoDB with the conditions of §12.3 -- that is the production path.
"""

import json
import logging
import os
import posixpath
import re
import socket
import sqlite3
import time
import uuid
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from lance_ops.format.errors import (
    ArgumentTypeError,
    CorruptFileError,
    DatasetNotFoundError,
    InvalidArgumentError,
    ManifestStoreConflict,
    ManifestStoreError,
    ManifestStoreNotFoundError,
    ObjectStoreError,
)
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.table.manifest import (
    VERSIONS_DIR,
    NamingScheme,
    list_versions,
    manifest_path,
    parse_manifest_name,
)

log = logging.getLogger(__name__)

MANIFEST_SUFFIX = ".manifest"
_STAGING_MARK = MANIFEST_SUFFIX + "-"
# SQLite INTEGER is a signed 64-bit value; Lance versions are u64 but never get near 2**63.
_MAX_VERSION = 2**63 - 1
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclass(frozen=True)
class ManifestLocation:
    """Where the KV store says a version's manifest is.

    Attributes:
        version: dataset version.
        path: manifest path relative to the dataset root; a staging path until finalized.
        size: manifest size in bytes.
        e_tag: the object store's ETag of the manifest, when the store reports one.
    """

    version: int
    path: str
    size: int
    e_tag: str | None = None

    @property
    def is_staging(self) -> bool:
        return is_staging_path(self.path)


@runtime_checkable
class ManifestStore(Protocol):
    """A KV store with put-if-not-exists, keyed ``(base_uri, version)`` (docs/FORMAT.md §12.3).

    Rows hold ``path``, ``committer``, ``size`` and ``e_tag`` as the DynamoDB table of lance does.
    Implementations must be picklable (they are shipped to Spark executors).
    """

    def put_if_not_exists(
        self, base_uri: str, version: int, path: str, size: int, e_tag: str | None = None
    ) -> None:
        """Record ``version``; raise :class:`ManifestStoreConflict` if it is already recorded."""
        ...

    def put_if_exists(
        self, base_uri: str, version: int, path: str, size: int, e_tag: str | None = None
    ) -> None:
        """Repoint ``version``; raise :class:`ManifestStoreNotFoundError` if it is not recorded."""
        ...

    def get(self, base_uri: str, version: int) -> ManifestLocation | None:
        """The location of ``version``, or None."""
        ...

    def latest(self, base_uri: str) -> ManifestLocation | None:
        """The location of the highest recorded version, or None when nothing is recorded."""
        ...

    def list_versions(self, base_uri: str) -> list[int]:
        """Every recorded version, ascending."""
        ...


# ------------------------------------------------------------------ names
def base_uri_of(store: ObjectStore) -> str:
    """The KV key of a dataset: ``file:///abs/path``, ``memory:///root``, ``gs://bucket/path``."""
    return f"{store.protocol}://{store.root}"


def staging_path_for(final_path: str) -> str:
    """``"{final_path}-{uuid4}"`` (spec step 1); the name does not end in ``.manifest``."""
    return f"{final_path}-{uuid.uuid4()}"


def is_staging_path(path: str) -> bool:
    name = posixpath.basename(path)
    return not name.endswith(MANIFEST_SUFFIX) and _STAGING_MARK in name


def final_path_of(path: str, version: int) -> str:
    """The final manifest path a KV path (staging or final) stands for; checked against ``version``."""
    name = posixpath.basename(path)
    cut = name.find(_STAGING_MARK)
    final_name = name[: cut + len(MANIFEST_SUFFIX)] if cut >= 0 else name
    parsed = parse_manifest_name(final_name)
    if parsed is None or parsed[1] != version:
        found = "no manifest name" if parsed is None else f"version {parsed[1]}"
        raise CorruptFileError(path, f"manifest store path for version {version} names {found}")
    final = posixpath.join(posixpath.dirname(path), final_name)
    if final != manifest_path(parsed[0], version):
        raise CorruptFileError(path, f"manifest store path is not under {VERSIONS_DIR}/")
    return final


def scheme_of_path(path: str, version: int) -> NamingScheme:
    parsed = parse_manifest_name(posixpath.basename(final_path_of(path, version)))
    assert parsed is not None  # final_path_of checked it
    return parsed[0]


# ------------------------------------------------------------------ SQLite
def _default_committer() -> str:
    return f"lance_ops@{socket.gethostname()}:{os.getpid()}"


def _check_version(version: int) -> int:
    if isinstance(version, bool) or not isinstance(version, int):
        raise ArgumentTypeError(f"version must be an int, got {type(version).__name__}")
    if not 0 <= version <= _MAX_VERSION:
        raise InvalidArgumentError(f"version must be in [0, 2**63), got {version}")
    return version


def _sqlite_path(path_or_url: "str | os.PathLike[str]") -> str:
    """A database file path from a path or a SQLAlchemy-style ``sqlite:///`` URL.

    As SQLAlchemy: ``sqlite:///rel/x.db`` is relative, ``sqlite:////abs/x.db`` absolute.
    """
    if not isinstance(path_or_url, str | os.PathLike):
        raise ArgumentTypeError(f"path_or_url must be a str or os.PathLike, got {type(path_or_url).__name__}")
    raw = os.fspath(path_or_url)
    if "://" in raw:
        scheme, rest = raw.split("://", 1)
        if scheme.lower() != "sqlite":
            raise InvalidArgumentError(
                f"manifest store URL {raw!r}: only sqlite:/// URLs are built in; "
                "pass a ManifestStore implementation for other databases"
            )
        if rest and (not rest.startswith("/") or "?" in rest):
            raise InvalidArgumentError(
                f"manifest store URL {raw!r}: expected sqlite:///relative.db or sqlite:////abs.db"
            )
        raw = rest[1:]  # "sqlite://" alone is SQLAlchemy's in-memory database: refused below
    if raw in ("", ":memory:") or raw.startswith("file:"):
        raise InvalidArgumentError(
            f"manifest store {path_or_url!r}: an in-memory SQLite database is private to one "
            "connection; give a file path"
        )
    return os.path.abspath(raw)


class SQLiteManifestStore:
    """The embedded :class:`ManifestStore`: one SQLite table keyed ``(base_uri, version)``.

    Every call opens its own connection (autocommit, WAL journal, busy timeout), so one instance
    is safe to use from threads, forked or spawned processes, and pickles by path.  One host
    only: SQLite locking is not reliable on network filesystems.

    Args:
        path_or_url: database file path, or ``sqlite:///relative.db`` / ``sqlite:////abs.db``.
            Relative paths are made absolute now, so unpickled copies open the same file.
        table: table name (created if missing).
        busy_timeout: seconds a call waits for another connection's write lock.
        committer: recorded in the ``committer`` column; default ``lance_ops@host:pid``.
    """

    def __init__(
        self,
        path_or_url: str | os.PathLike[str],
        *,
        table: str = "lance_manifests",
        busy_timeout: float = 30.0,
        committer: str | None = None,
    ) -> None:
        if not _IDENTIFIER.match(table):
            raise InvalidArgumentError(f"table must be a SQL identifier, got {table!r}")
        if busy_timeout <= 0:
            raise InvalidArgumentError(f"busy_timeout must be positive, got {busy_timeout}")
        self.path = _sqlite_path(path_or_url)
        self.table = table
        self.busy_timeout = float(busy_timeout)
        self.committer = committer
        self._ready_pid: int | None = None  # schema ensured by this process

    def __getstate__(self) -> dict[str, object]:
        # Only the location and settings travel; the unpickling process ensures the schema itself.
        return {**self.__dict__, "_ready_pid": None}

    def __repr__(self) -> str:
        return f"SQLiteManifestStore({self.path!r}, table={self.table!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SQLiteManifestStore) and (self.path, self.table) == (other.path, other.table)

    def __hash__(self) -> int:
        return hash((self.path, self.table))

    # ------------------------------------------------------------ plumbing
    def _connect(self) -> sqlite3.Connection:
        # isolation_level=None: every statement is its own transaction (the INSERT is the commit).
        conn = sqlite3.connect(self.path, timeout=self.busy_timeout, isolation_level=None)
        # synchronous stays FULL (the default): a KV put is a commit and must survive power loss.
        return conn

    def _ensure_schema(self, conn: sqlite3.Connection) -> None:
        if self._ready_pid == os.getpid():
            return
        deadline = time.monotonic() + self.busy_timeout
        while True:
            try:
                # WAL lets readers run beside the one writer; the mode is stored in the file.
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute(
                    f"CREATE TABLE IF NOT EXISTS {self.table} ("
                    " base_uri TEXT NOT NULL,"
                    " version INTEGER NOT NULL,"
                    " path TEXT NOT NULL,"
                    " committer TEXT,"
                    " size INTEGER NOT NULL,"
                    " e_tag TEXT,"
                    " PRIMARY KEY (base_uri, version)"
                    ") WITHOUT ROWID"
                )
                break
            except sqlite3.OperationalError as e:
                # Switching the journal mode can report "locked" without waiting on the busy handler.
                if "locked" not in str(e) or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)
        self._ready_pid = os.getpid()

    @contextmanager
    def _conn(self, what: str) -> Iterator[sqlite3.Connection]:
        try:
            with closing(self._connect()) as conn:
                self._ensure_schema(conn)
                yield conn
        except sqlite3.IntegrityError:
            raise
        except sqlite3.Error as e:
            raise ManifestStoreError(f"{self.path}: manifest store {what} failed: {e}") from e

    # --------------------------------------------------------------- API
    def put_if_not_exists(
        self, base_uri: str, version: int, path: str, size: int, e_tag: str | None = None
    ) -> None:
        _check_version(version)
        try:
            with self._conn("insert") as conn:
                conn.execute(
                    f"INSERT INTO {self.table} (base_uri, version, path, committer, size, e_tag)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    (base_uri, version, path, self.committer or _default_committer(), int(size), e_tag),
                )
        except sqlite3.IntegrityError:
            raise ManifestStoreConflict(
                f"{base_uri}: version {version} is already committed in the manifest store {self.path}",
                conflicting_version=version,
            ) from None

    def put_if_exists(
        self, base_uri: str, version: int, path: str, size: int, e_tag: str | None = None
    ) -> None:
        _check_version(version)
        # committer is left alone: a reader that finalizes someone's commit did not commit it.
        with self._conn("update") as conn:
            cur = conn.execute(
                f"UPDATE {self.table} SET path = ?, size = ?, e_tag = ? WHERE base_uri = ? AND version = ?",
                (path, int(size), e_tag, base_uri, version),
            )
            updated = cur.rowcount
        if updated != 1:
            raise ManifestStoreNotFoundError(
                f"{base_uri}: version {version} is not in the manifest store {self.path}; cannot repoint it"
            )

    def get(self, base_uri: str, version: int) -> ManifestLocation | None:
        _check_version(version)
        with self._conn("get") as conn:
            row = conn.execute(
                f"SELECT version, path, size, e_tag FROM {self.table} WHERE base_uri = ? AND version = ?",
                (base_uri, version),
            ).fetchone()
        return ManifestLocation(*row) if row is not None else None

    def latest(self, base_uri: str) -> ManifestLocation | None:
        with self._conn("latest") as conn:
            row = conn.execute(
                f"SELECT version, path, size, e_tag FROM {self.table} WHERE base_uri = ?"
                " ORDER BY version DESC LIMIT 1",
                (base_uri,),
            ).fetchone()
        return ManifestLocation(*row) if row is not None else None

    def list_versions(self, base_uri: str) -> list[int]:
        with self._conn("list") as conn:
            rows = conn.execute(
                f"SELECT version FROM {self.table} WHERE base_uri = ? ORDER BY version", (base_uri,)
            ).fetchall()
        return [int(r[0]) for r in rows]


def open_manifest_store(spec: "ManifestStore | str | os.PathLike[str]") -> ManifestStore:
    """A :class:`ManifestStore` from an instance (returned as is), a SQLite path or ``sqlite:///`` URL."""
    if isinstance(spec, str | os.PathLike):
        return SQLiteManifestStore(spec)
    if isinstance(spec, ManifestStore):
        return spec
    raise ArgumentTypeError(
        f"manifest_store must be a ManifestStore, a path or a sqlite:/// URL, got {type(spec).__name__}"
    )


# ------------------------------------------------------------------ marker
#: A small JSON object at the dataset root naming the manifest store the dataset commits through
#: (``{"kind": "sqlite", "location": "/abs/path.db"}``).  Written once, put-if-absent, by the first
#: commit through the store; writers not given a store refuse a dataset that has it.  pylance's
#: readers and ``cleanup_old_versions`` only look under ``_versions/``, ``data/``,
#: ``_deletions/``, ``_transactions/`` and ``_indices/``, so they ignore it (docs/ARCHITECTURE.md).
MARKER_FILE = "_manifest_store.json"


def describe_store(mstore: ManifestStore) -> dict[str, str]:
    """``{"kind", "location"}`` of a manifest store, as the marker records it."""
    if isinstance(mstore, SQLiteManifestStore):
        return {"kind": "sqlite", "location": mstore.path}
    location = getattr(mstore, "uri", None) or getattr(mstore, "path", None) or repr(mstore)
    return {"kind": type(mstore).__name__, "location": str(location)}


def write_marker(store: ObjectStore, mstore: ManifestStore) -> None:
    """Record ``mstore`` at the dataset root unless a marker is there already (put-if-absent)."""
    data = json.dumps({**describe_store(mstore), "format": 1}, sort_keys=True).encode()
    store.put_if_absent(MARKER_FILE, data)


def read_marker(store: ObjectStore) -> dict[str, Any] | None:
    """The marker at the dataset root, or None when the dataset was never committed through a store.

    Raises:
        CorruptFileError: the marker is not a JSON object.
    """
    try:
        raw = store.read(MARKER_FILE)
    except FileNotFoundError:
        return None
    try:
        parsed = json.loads(raw)
    except ValueError as e:
        raise CorruptFileError(store.full_path(MARKER_FILE), f"manifest store marker is not JSON: {e}") from None
    if not isinstance(parsed, dict):
        raise CorruptFileError(store.full_path(MARKER_FILE), "manifest store marker is not a JSON object")
    return parsed


# ------------------------------------------------------- commit and repair
def _materialize(store: ObjectStore, final: str, data: bytes) -> None:
    """Make ``final`` hold ``data``.  Finalizers may race; they all write the same bytes.

    ``put_if_absent`` is used for its write-then-link on local disks (the KV store will point at
    this file, and the staging copy is deleted next), not for its atomicity: on a backend whose
    "conditional" put were a plain put this stays correct, as every finalizer writes these bytes.
    """
    if store.put_if_absent(final, data):
        return
    existing = store.read(final)
    if existing != data:
        raise CorruptFileError(
            store.full_path(final),
            f"final manifest ({len(existing)} bytes) differs from the staged manifest the manifest store "
            f"committed ({len(data)} bytes); was this version written without the manifest store?",
        )


def _finalize(
    store: ObjectStore, mstore: ManifestStore, base_uri: str, loc: ManifestLocation
) -> ManifestLocation:
    """Steps 3-5 for a KV entry that points at a staging manifest; idempotent and race-safe."""
    final = final_path_of(loc.path, loc.version)
    try:
        data = store.read(loc.path)
    except FileNotFoundError:
        # Finalizers delete the staging object last, after repointing the KV entry: re-read it.
        current = mstore.get(base_uri, loc.version)
        if current is not None and not current.is_staging:
            return current
        try:
            size = store.size(final)
        except FileNotFoundError:
            size = -1
        if size != loc.size:
            raise CorruptFileError(
                store.full_path(loc.path),
                f"version {loc.version} is committed in the manifest store but its staged manifest is gone "
                f"and {final} is {'absent' if size < 0 else f'{size} bytes, expected {loc.size}'}",
            ) from None
        mstore.put_if_exists(base_uri, loc.version, final, loc.size, loc.e_tag)
        return ManifestLocation(loc.version, final, loc.size, loc.e_tag)
    if len(data) != loc.size:
        raise CorruptFileError(
            store.full_path(loc.path),
            f"staged manifest is {len(data)} bytes, the manifest store recorded {loc.size}",
        )
    return _finish(store, mstore, base_uri, loc.version, loc.path, data, loc.e_tag)


def _finish(
    store: ObjectStore,
    mstore: ManifestStore,
    base_uri: str,
    version: int,
    staging: str,
    data: bytes,
    e_tag: str | None,
) -> ManifestLocation:
    final = final_path_of(staging, version)
    _materialize(store, final, data)
    mstore.put_if_exists(base_uri, version, final, len(data), e_tag)
    store.delete(staging)
    return ManifestLocation(version, final, len(data), e_tag)


def commit_external(
    store: ObjectStore, mstore: ManifestStore, version: int, data: bytes, scheme: NamingScheme
) -> bool:
    """Commit manifest bytes as ``version`` through the KV store; False if another writer has it.

    The commit is durable once the KV put succeeds: a failure while finalizing is logged, not
    raised, and the next reader completes it (:func:`resolve_latest`, :func:`resolve_version`).

    Raises:
        ManifestStoreError, OSError: the staging put or the KV put failed with an unknown
            outcome; the staging object is left in place (the KV store may point at it).
    """
    _check_version(version)
    base_uri = base_uri_of(store)
    staging = staging_path_for(manifest_path(scheme, version))
    # Whole before the KV put makes it the commit (put_if_absent links a complete file); the
    # name is unique, so "already exists" cannot happen.
    if not store.put_if_absent(staging, data):
        raise ObjectStoreError(f"{store.full_path(staging)}: staging manifest name already taken")
    try:
        mstore.put_if_not_exists(base_uri, version, staging, len(data))
    except ManifestStoreConflict:
        store.delete(staging)  # outcome known: lost, nobody points at our staging object
        return False
    try:
        _finish(store, mstore, base_uri, version, staging, data, None)
    except Exception as e:  # the commit stands; readers repair
        log.warning(
            "%s: version %d committed, finalizing %s failed (readers will repair): %s",
            store.uri,
            version,
            staging,
            e,
        )
    return True


def resolve_latest_location(store: ObjectStore, mstore: ManifestStore) -> ManifestLocation | None:
    """The KV store's latest version, finalized; None when the KV store has no entry for the dataset."""
    base_uri = base_uri_of(store)
    loc = mstore.latest(base_uri)
    if loc is None or not loc.is_staging:
        return loc
    return _finalize(store, mstore, base_uri, loc)


def resolve_latest(
    store: ObjectStore, mstore: ManifestStore, scheme: NamingScheme | None = None
) -> int | None:
    """The latest version; finalizes it if its committer stopped after the KV put.

    The KV store is the authority once it holds the dataset; with no entry the ``_versions/``
    listing answers (a dataset that never used the KV store, or a copy at a new URI).

    Args:
        scheme: the naming scheme the caller expects; a KV path in the other one is an error.

    Returns:
        The version, or None when there is no dataset.

    Raises:
        CorruptFileError: the staged manifest cannot be finalized (the reader must not load).
    """
    loc = resolve_latest_location(store, mstore)
    if loc is None:
        listed_scheme, versions = list_versions(store)
        _check_scheme(store, scheme, listed_scheme)
        return versions[-1] if versions else None
    _check_scheme(store, scheme, scheme_of_path(loc.path, loc.version))
    return loc.version


def _check_scheme(store: ObjectStore, expected: NamingScheme | None, found: NamingScheme | None) -> None:
    if expected is not None and found is not None and expected is not found:
        raise CorruptFileError(
            store.full_path(VERSIONS_DIR), f"expected {expected.name} manifest names, found {found.name}"
        )


def resolve_version(
    store: ObjectStore, mstore: ManifestStore, version: int, scheme: NamingScheme | None = None
) -> str:
    """The finalized manifest path (relative to the root) to read for ``version``.

    KV entry -> its path (a staging entry is finalized first).  No entry -> the object store's
    ``_versions/`` path under ``scheme`` (None: detected by listing, V2 if empty), backfilled into
    the KV store -- only below its latest version, so a read of an old version of a dataset that
    the KV store does not hold yet never makes that version the KV "latest".  Backfill errors are
    only logged.

    Raises:
        DatasetNotFoundError: neither store has the version.
        CorruptFileError: a staged manifest cannot be finalized.
    """
    _check_version(version)
    base_uri = base_uri_of(store)
    loc = mstore.get(base_uri, version)
    if loc is not None:
        if loc.is_staging:
            loc = _finalize(store, mstore, base_uri, loc)
        return final_path_of(loc.path, version)
    if scheme is None:
        scheme = list_versions(store)[0] or NamingScheme.V2
    rel = manifest_path(scheme, version)
    try:
        size = store.size(rel)
    except FileNotFoundError:
        raise DatasetNotFoundError(
            f"{store.uri}: version {version} does not exist (not in the manifest store, no {rel})"
        ) from None
    try:
        latest = mstore.latest(base_uri)
        if latest is not None and latest.version > version:
            mstore.put_if_not_exists(base_uri, version, rel, size)
    except Exception as e:
        log.warning("%s: could not backfill version %d into the manifest store: %s", store.uri, version, e)
    return rel
