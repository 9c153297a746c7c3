"""Commit handlers: how versions are listed, read and atomically created (docs/FORMAT.md §12).

The commit loop and dataset opening talk to a :class:`CommitHandler` and never to the
mechanism behind it:

* :class:`ConditionalPutCommitHandler` -- the object store's put-if-absent creates
  ``_versions/*.manifest`` (local filesystems, GCS, S3, memory; §12.1-12.2);
* :class:`ExternalManifestCommitHandler` -- a KV :class:`.manifest_store.ManifestStore` decides
  who gets a version, for object stores without conditional put (spec "External Manifest Store";
  §12.3).  Listing and reading finalize a commit whose writer stopped after the KV put.

Every writer of one dataset must use the same mechanism (spec "Committing Datasets").
"""

import logging
import os
from collections.abc import Callable
from typing import Any, Protocol

from lance_ops.format._proto import transaction_pb2
from lance_ops.format.errors import (
    ArgumentTypeError,
    CommitError,
    CommitFailedError,
    CorruptFileError,
    DatasetNotFoundError,
    ManifestStoreRequiredError,
)
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.table import manifest as _m
from lance_ops.format.table.file_versions import require_readable
from lance_ops.format.table.manifest import Manifest, ManifestFile, NamingScheme, manifest_path
from lance_ops.format.txn.manifest_store import (
    ManifestStore,
    commit_external,
    open_manifest_store,
    read_marker,
    resolve_latest,
    resolve_latest_location,
    resolve_version,
    scheme_of_path,
    write_marker,
)

log = logging.getLogger(__name__)

#: listings tried when the latest version listed vanishes before it is read (concurrent cleanup)
LATEST_ATTEMPTS = 3


class CommitHandler(Protocol):
    """Versions of one dataset: list, read, and create one atomically.

    Attributes:
        store: the dataset's object store.
        manifest_store: the KV store commits go through, or None (conditional put).
    """

    store: ObjectStore
    manifest_store: ManifestStore | None

    def list_versions(self) -> tuple[NamingScheme | None, list[int]]:
        """Naming scheme (None when there is no dataset) and the readable versions, ascending."""
        ...

    def latest_version(self) -> int:
        """The latest version, 0 when there is no dataset."""
        ...

    def read_manifest(self, version: int) -> ManifestFile:
        """The manifest file of ``version``.

        Raises:
            DatasetNotFoundError: no such version.
            CorruptFileError: the manifest does not decode or cannot be finalized.
        """
        ...

    def put_manifest_if_absent(
        self, manifest: Manifest, transaction: transaction_pb2.Transaction | None, scheme: NamingScheme
    ) -> bool:
        """Atomically create ``manifest.version``; False if another writer has that version."""
        ...

    def cached_scheme(self) -> NamingScheme | None:
        """The naming scheme seen by this handler's last listing or commit (None: not yet)."""
        ...

    def check_writable(self) -> None:
        """Raise :class:`ManifestStoreRequiredError` if this handler must not write the dataset."""
        ...


class ConditionalPutCommitHandler:
    """Commits by the object store's put-if-absent on the final ``_versions/`` path (§12.1-12.2)."""

    manifest_store: ManifestStore | None = None

    def __init__(self, store: ObjectStore) -> None:
        self.store = store
        self._scheme: NamingScheme | None = None  # fixed once the dataset has one version

    def __repr__(self) -> str:
        return f"ConditionalPutCommitHandler({self.store.uri!r})"

    def list_versions(self) -> tuple[NamingScheme | None, list[int]]:
        scheme, versions = _m.list_versions(self.store)
        if scheme is not None:
            self._scheme = scheme
        return scheme, versions

    def latest_version(self) -> int:
        versions = self.list_versions()[1]
        return versions[-1] if versions else 0

    def read_manifest(self, version: int) -> ManifestFile:
        if self._scheme is None:
            self.list_versions()
        return _m.read_manifest(self.store, version, self._scheme or NamingScheme.V2)

    def put_manifest_if_absent(
        self, manifest: Manifest, transaction: transaction_pb2.Transaction | None, scheme: NamingScheme
    ) -> bool:
        self.check_writable()  # defence in depth: the writer checked when it opened the dataset
        if not _m.write_manifest_if_absent(self.store, manifest, transaction, scheme):
            return False
        self._scheme = scheme
        return True

    def cached_scheme(self) -> NamingScheme | None:
        return self._scheme

    def check_writable(self) -> None:
        """Refuse a dataset whose marker says it commits through an external manifest store.

        Raises:
            ManifestStoreRequiredError: the marker is there; names the dataset and the store.
        """
        recorded = read_marker(self.store)
        if recorded is None:
            return
        where = f"{recorded.get('kind', '?')} store at {recorded.get('location', '?')}"
        raise ManifestStoreRequiredError(
            f"{self.store.uri}: this dataset commits through an external manifest store ({where}); "
            "pass manifest_store= (or the manifest_store option / --manifest-store) to write it. "
            "A commit straight to _versions/ would be invisible to its readers and break their next open",
            dataset=self.store.uri,
            recorded=recorded,
        )


class ExternalManifestCommitHandler:
    """Commits through a :class:`ManifestStore` (staged manifest, KV put, finalize; §12.3).

    The KV store is the authority on the latest version once it holds the dataset; before that
    (a dataset created by conditional put, or copied to a new URI) the ``_versions/`` listing is.
    Versions are listed from ``_versions/`` after finalizing the latest, so versions removed by
    cleanup disappear as they do for the other handler.
    """

    def __init__(self, store: ObjectStore, manifest_store: ManifestStore) -> None:
        self.store = store
        self.manifest_store: ManifestStore | None = manifest_store
        self._mstore = manifest_store
        self._scheme: NamingScheme | None = None
        self._marked = False

    def __repr__(self) -> str:
        return f"ExternalManifestCommitHandler({self.store.uri!r}, {self._mstore!r})"

    def list_versions(self) -> tuple[NamingScheme | None, list[int]]:
        latest = resolve_latest_location(self.store, self._mstore)  # finalizes a stopped commit
        scheme, versions = _m.list_versions(self.store)
        if latest is None:
            if scheme is not None:
                self._scheme = scheme
            return scheme, versions
        kv_scheme = scheme_of_path(latest.path, latest.version)
        if scheme is not None and scheme is not kv_scheme:
            raise CorruptFileError(
                self.store.full_path(_m.VERSIONS_DIR),
                f"manifests use the {scheme.name} naming scheme, the manifest store the {kv_scheme.name} one",
            )
        if versions and versions[-1] > latest.version:
            log.warning(
                "%s: _versions/ has versions up to %d beyond the manifest store's latest %d "
                "(written without the manifest store?); they are ignored",
                self.store.uri,
                versions[-1],
                latest.version,
            )
        versions = [v for v in versions if v <= latest.version]
        if not versions or versions[-1] != latest.version:
            versions.append(latest.version)
        self._scheme = kv_scheme
        return kv_scheme, versions

    def latest_version(self) -> int:
        return resolve_latest(self.store, self._mstore) or 0

    def read_manifest(self, version: int) -> ManifestFile:
        rel = resolve_version(self.store, self._mstore, version, self._scheme)
        return _m.read_manifest(self.store, version, scheme_of_path(rel, version))

    def put_manifest_if_absent(
        self, manifest: Manifest, transaction: transaction_pb2.Transaction | None, scheme: NamingScheme
    ) -> bool:
        if not self._marked:
            write_marker(self.store, self._mstore)  # before the first commit: writers unaware refuse
            self._marked = True
        data = _m.encode_manifest_file(manifest, transaction)
        if not commit_external(self.store, self._mstore, manifest.version, data, scheme):
            return False
        self._scheme = scheme
        return True

    def cached_scheme(self) -> NamingScheme | None:
        return self._scheme

    def check_writable(self) -> None:
        """Always writable: this handler commits through the store."""


class LockedCommitHandler:
    """A handler whose manifest writes run inside ``commit_lock(version)``, pylance's
    ``commit_lock`` (a context manager factory taking the version being committed); everything
    else is ``inner``'s."""

    def __init__(self, inner: CommitHandler, commit_lock: Callable[[int], Any]) -> None:
        self._inner, self._lock = inner, commit_lock
        self.store = inner.store
        self.manifest_store = inner.manifest_store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __repr__(self) -> str:
        return f"LockedCommitHandler({self._inner!r})"

    def put_manifest_if_absent(
        self, manifest: Manifest, transaction: transaction_pb2.Transaction | None, scheme: NamingScheme
    ) -> bool:
        """The inner put, inside the lock.

        Raises:
            CommitFailedError: the lock could not be taken (nothing was committed).
            CommitError: the version was committed but releasing the lock failed.
        """
        v, path = manifest.version, self.store.full_path(manifest_path(scheme, manifest.version))
        try:
            ctx = self._lock(v)
            ctx.__enter__()
        except Exception as e:
            raise CommitFailedError(f"{path}: the commit lock for version {v} was not taken "
                                    f"({type(e).__name__}: {e}); nothing was committed", path=path, version=v) from e
        try:
            done = self._inner.put_manifest_if_absent(manifest, transaction, scheme)
        except BaseException as e:
            ctx.__exit__(type(e), e, e.__traceback__)
            raise
        try:
            ctx.__exit__(None, None, None)
        except Exception as e:
            raise CommitError(f"{path}: version {v} was {'committed' if done else 'not created'}, then releasing "
                              f"the commit lock failed ({type(e).__name__}: {e})", path=path, version=v) from e
        return done


def commit_handler_for(
    store: ObjectStore, manifest_store: "ManifestStore | str | os.PathLike[str] | None" = None
) -> CommitHandler:
    """The handler for a dataset: conditional put, or the given KV store.

    Args:
        manifest_store: None (conditional put), a :class:`ManifestStore`, or a SQLite file path /
            ``sqlite:///`` URL for :class:`.manifest_store.SQLiteManifestStore`.
    """
    if manifest_store is None:
        return ConditionalPutCommitHandler(store)
    return ExternalManifestCommitHandler(store, open_manifest_store(manifest_store))


def with_commit_lock(handler: CommitHandler, commit_lock: Callable[[int], Any] | None) -> CommitHandler:
    """``handler`` committing inside pylance's ``commit_lock`` (None: ``handler`` itself)."""
    return handler if commit_lock is None else LockedCommitHandler(handler, commit_lock)  # type: ignore[return-value]


def try_open_latest(
    store: ObjectStore, handler: CommitHandler | None = None, *, check_writable: bool = True
) -> Manifest | None:
    """The latest manifest for writing, or None when there is no dataset at the store's root.

    ``check_writable=False`` only for a caller that commits nothing (uncommitted fragments).

    Raises:
        ManifestStoreRequiredError: the dataset commits through an external manifest store and
            ``handler`` does not (checked before the writer writes anything).
    """
    handler = handler or ConditionalPutCommitHandler(store)
    if check_writable:
        handler.check_writable()
    for _ in range(LATEST_ATTEMPTS - 1):
        latest = handler.latest_version()
        if not latest:
            return None
        try:
            return handler.read_manifest(latest).manifest
        except DatasetNotFoundError:
            continue  # removed by a cleanup that saw newer versions: list again
    latest = handler.latest_version()
    return handler.read_manifest(latest).manifest if latest else None


def open_for_write(store: ObjectStore, handler: CommitHandler | None = None) -> tuple[Manifest, NamingScheme]:
    """:func:`checkout_manifest` of the latest version, for a writer: refuses first when ``handler``
    may not write the dataset.

    Raises:
        ManifestStoreRequiredError: the dataset commits through an external manifest store and
            ``handler`` does not.
        DatasetNotFoundError: no dataset.
    """
    handler = handler or ConditionalPutCommitHandler(store)
    handler.check_writable()
    return checkout_manifest(store, None, handler)


def checkout_manifest(
    store: ObjectStore, version: int | None = None, handler: CommitHandler | None = None
) -> tuple[Manifest, NamingScheme]:
    """The manifest of ``version`` (latest if None) for reading, and the dataset's naming scheme.

    Raises:
        DatasetNotFoundError: no dataset at the store's root, or no such version.
        UnsupportedFeatureError: the version needs features or a file format lance_ops cannot read.
    """
    handler = handler or ConditionalPutCommitHandler(store)
    if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
        raise ArgumentTypeError(f"version must be an integer version number, got {type(version).__name__} {version!r}")
    if version is not None and _m.is_detached_version(int(version)):
        # a detached commit: never listed, never in a manifest store, always ``d{version}.manifest``
        manifest = _m.read_manifest(store, int(version), NamingScheme.V2).manifest
        _m.check_flags(manifest.reader_feature_flags, manifest.writer_feature_flags, path=store.uri, for_write=False)
        require_readable(manifest.data_storage_version, f"{store.uri}: detached version {version}")
        return manifest, handler.list_versions()[0] or NamingScheme.V2
    for attempt in range(LATEST_ATTEMPTS):
        scheme, versions = handler.list_versions()
        if not versions or scheme is None:
            raise DatasetNotFoundError(f"{store.uri}: no Lance dataset here (no manifests in _versions/)")
        target = versions[-1] if version is None else int(version)
        if target not in versions:
            raise DatasetNotFoundError(
                f"{store.uri}: version {target} does not exist (versions {versions[0]}..{versions[-1]})"
            )
        try:
            manifest = handler.read_manifest(target).manifest
            break
        except DatasetNotFoundError:
            # the latest listed was removed by a cleanup that saw newer versions: list again
            if version is not None or attempt == LATEST_ATTEMPTS - 1:
                raise
    _m.check_flags(manifest.reader_feature_flags, manifest.writer_feature_flags, path=store.uri, for_write=False)
    require_readable(manifest.data_storage_version, f"{store.uri}: version {target}")
    return manifest, scheme
