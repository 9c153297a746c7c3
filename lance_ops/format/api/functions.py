"""pylance's module-level functions: ``dataset`` (open), ``write_dataset``, ``commit`` (an
operation or transaction built elsewhere) and ``resolve_version``; each returns a
:class:`.dataset.LanceDataset`."""

import dataclasses
import uuid
import warnings
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa

from lance_ops.format.api.arguments import pop_ignored
from lance_ops.format.api.lance_dataset import LanceDataset
from lance_ops.format.errors import (
    ArgumentTypeError,
    DatasetNotFoundError,
    InvalidArgumentError,
    UnsupportedFeatureError,
)
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.ops.auto_cleanup import AutoCleanupConfig
from lance_ops.format.ops.index_staging import with_index_details
from lance_ops.format.ops.write import (
    DEFAULT_MAX_ROWS_PER_FILE,
    WriteMode,
)
from lance_ops.format.ops.write_and_commit import COMMIT_MESSAGE_KEY, write_and_commit
from lance_ops.format.table import leases as _leases
from lance_ops.format.table.leases import DEFAULT_LEASE_TTL, Lease, LeaseHandle
from lance_ops.format.table.refs import (
    VersionRef,
)
from lance_ops.format.txn.commit_loop import DEFAULT_MAX_RETRIES, commit_transaction
from lance_ops.format.txn.detached import commit_detached
from lance_ops.format.txn.handlers import (
    commit_handler_for,
    try_open_latest,
)
from lance_ops.format.txn.manifest_store import ManifestStore
from lance_ops.format.txn.operations import Append, Operation
from lance_ops.format.txn.transaction import Transaction


def dataset(
    uri: str,
    *,
    version: VersionRef = None,
    branch: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    manifest_store: "ManifestStore | str | None" = None,
    asof: datetime | str | None = None,
    default_scan_options: Mapping[str, Any] | None = None,
    commit_lock: Any = None,
    index_cache_size: int | None = None,
    index_cache_size_bytes: int | None = None,
    metadata_cache_size_bytes: int | None = None,
) -> LanceDataset:
    """Open the dataset at ``uri`` (latest version, or ``version``).

    ``default_scan_options``: pylance's scan keywords (and ``columns`` / ``filter``) every scan of
    the handle starts from; ``with_row_id`` / ``with_row_address`` there add ``_rowid`` /
    ``_rowaddr`` to ``schema``, as pylance's.  ``commit_lock``: as :func:`write_dataset`'s, for every
    commit of the handle.  pylance's cache sizes (``index_cache_size_bytes``,
    ``metadata_cache_size_bytes``) are accepted and have no effect (lance_ops keeps no such caches);
    ``index_cache_size`` is deprecated as in pylance (a ``DeprecationWarning``).

    ``asof``: the latest version committed at or before this time (a datetime, naive = UTC, or
    an ISO 8601 string), as pylance; not together with ``version``.

    ``version``: a version number, a tag name (``"gold"``), or ``(branch, version)``
    (``("dev", 2)``; ``("dev", None)`` = the latest of ``dev``; ``"main"`` = the main branch).
    ``branch``: open that branch (its latest version, or ``version`` of it).  A branch can also
    be opened by its own URI, ``<uri>/tree/<branch>``, as in pylance; detached versions open by
    their number.
    ``manifest_store``: the external manifest store the dataset commits through (a ManifestStore,
    or a SQLite path / ``sqlite:///`` URL); None = the object store's conditional put.
    """
    if index_cache_size is not None:
        warnings.warn("The 'index_cache_size' parameter is deprecated; use 'index_cache_size_bytes' instead",
                      DeprecationWarning, stacklevel=2)
    if asof is not None:
        if version is not None:
            raise InvalidArgumentError(f"{uri}: pass either version={version!r} or asof={asof!r}, not both")
        latest = LanceDataset(uri, branch=branch, storage_options=storage_options, manifest_store=manifest_store)
        version = _version_asof(latest, asof)
    return LanceDataset(
        uri, version=version, branch=branch, storage_options=storage_options, manifest_store=manifest_store,
        default_scan_options=default_scan_options, commit_lock=commit_lock,
    )


def resolve_version(
    uri: str,
    version: VersionRef = None,
    *,
    branch: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    manifest_store: "ManifestStore | str | None" = None,
) -> tuple[str, int]:
    """Where ``version`` lives: ``(uri of its branch, version number)``.

    Resolves tag names, ``(branch, version)`` and ``branch=`` exactly as :func:`dataset` does, for
    callers that pass a location and a number on (Spark tasks, CLIs, Dagster configs).

    Raises:
        DatasetNotFoundError: no such dataset or version.  TagError: no such tag.
    """
    ds = LanceDataset(uri, version=version, branch=branch, storage_options=storage_options,
                      manifest_store=manifest_store)
    return ds.uri, ds.version


def write_dataset(
    data_obj: Any,
    uri: str,
    schema: pa.Schema | None = None,
    mode: WriteMode = "create",
    *,
    max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
    enable_stable_row_ids: bool = False,
    data_storage_version: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    transaction_properties: Mapping[str, str] | None = None,
    manifest_store: "ManifestStore | str | None" = None,
    commit_message: str | None = None,
    enable_v2_manifest_paths: bool | None = None,
    max_rows_per_group: int | None = None,
    max_bytes_per_file: int | None = None,
    progress: Any = None,
    commit_lock: Any = None,
    auto_cleanup_options: AutoCleanupConfig | None = None,
) -> LanceDataset:
    """Write ``data_obj`` (pylance's argument name) as a new dataset, or append to / overwrite an existing one.

    ``data_obj``: anything pylance's ``write_dataset`` takes (:mod:`.inputs`: Arrow tables, readers,
    datasets and scanners, pandas/polars frames, dicts of columns, lists of row dicts, iterables
    of batches with ``schema=``).  An append may omit nullable columns (written as nulls) and
    bring types that widen losslessly to the dataset's.
    Appending to or overwriting a path with no dataset creates it.  Data is streamed: memory
    stays bounded by one batch plus one page per column.  ``manifest_store`` commits through an
    external manifest store (a ManifestStore, or a SQLite path / ``sqlite:///`` URL) instead of
    the object store's conditional put; every writer of the dataset must use the same one.
    ``mode="create"`` on a ``memory://`` URI starts from an empty store (pylance gives each new
    in-memory dataset its own), replacing what an earlier write left there; a bare ``memory://``
    gets a unique name.
    ``commit_message`` is stored in the transaction's properties under pylance's key
    ``__lance_commit_message``.  ``enable_v2_manifest_paths``: lance_ops always names new
    manifests with the V2 scheme (pylance 14's default); ``False`` is refused.
    ``max_rows_per_group`` (a layout knob of pylance's writer) is checked and ignored.
    ``max_bytes_per_file`` closes a file after the input batch that brings its Arrow bytes to the
    limit (pylance counts flushed encoder bytes, which lag for small compressible columns); ``progress``: pylance's ``FragmentWriteProgress`` (:mod:`.progress`).  ``commit_lock``: pylance's
    context manager factory the manifest write of each version runs in (``commit_lock(version)``).
    ``auto_cleanup_options``: pylance's ``AutoCleanupConfig``; a new dataset gets its table config
    (:mod:`.auto_cleanup`), an existing one is left as it is.
    """
    if isinstance(uri, LanceDataset):  # pylance accepts a dataset (e.g. a branch) as the target
        uri = uri.uri
    pop_ignored({"max_rows_per_group": max_rows_per_group}, ("max_rows_per_group",))
    if mode == "create" and str(uri).startswith("memory://"):  # a fresh in-memory store, as pylance
        uri = _fresh_memory_uri(str(uri), storage_options)
    return LanceDataset._from_manifest(*write_and_commit(
        data_obj, uri, mode=mode, schema=schema, max_rows_per_file=max_rows_per_file,
        enable_stable_row_ids=enable_stable_row_ids, data_storage_version=data_storage_version,
        storage_options=storage_options, transaction_properties=transaction_properties, manifest_store=manifest_store,
        commit_message=commit_message, enable_v2_manifest_paths=enable_v2_manifest_paths,
        max_bytes_per_file=max_bytes_per_file, progress=progress, commit_lock=commit_lock,
        auto_cleanup_options=auto_cleanup_options,
    ))


def _fresh_memory_uri(uri: str, storage_options: Mapping[str, Any] | None) -> str:
    """``memory://name`` emptied for a new dataset; a bare ``memory://`` (no name, the whole
    in-memory filesystem) becomes a new unique ``memory://lance_ops-<uuid>`` instead."""
    if not uri[len("memory://"):].strip("/"):
        return f"memory://lance_ops-{uuid.uuid4().hex}"
    ObjectStore(uri, storage_options).clear_memory()
    return uri


def commit(
    uri: str,
    operation: Operation | Transaction,
    *,
    read_version: int | None = None,
    storage_options: Mapping[str, Any] | None = None,
    max_retries: int = DEFAULT_MAX_RETRIES,
    enable_stable_row_ids: bool = False,
    transaction_properties: Mapping[str, str] | None = None,
    manifest_store: ManifestStore | str | None = None,
    create: bool = False,
    data_storage_version: str | None = None,
    detached: bool = False,
    commit_message: str | None = None,
) -> LanceDataset:
    """Commit an operation built elsewhere (e.g. by Spark executors), or a ``Transaction`` (as
    ``merge_insert(...).execute_uncommitted`` returns, its read version used); returns the new
    LanceDataset.

    ``create``: the dataset must not exist yet; ``enable_stable_row_ids`` and
    ``data_storage_version`` apply to a dataset this commit creates.
    ``manifest_store``: commit through this external manifest store (a ManifestStore, or a SQLite
    path / ``sqlite:///`` URL) instead of the object store's conditional put.
    ``detached``: write a detached version (outside the lineage, never the latest; pylance's
    ``detached=True``) on ``read_version``, which may itself be detached.  ``uri`` may be a
    LanceDataset (its URI is used), and ``commit_message`` is stored as by ``write_dataset``.
    """
    if isinstance(uri, LanceDataset):
        uri = uri.uri
    if commit_message is not None:
        transaction_properties = {**dict(transaction_properties or {}), COMMIT_MESSAGE_KEY: commit_message}
    store = ObjectStore(uri, storage_options)
    handler = commit_handler_for(store, manifest_store)
    operation = with_index_details(operation, store)  # a distributed full-text build's segment
    if isinstance(operation, Transaction):
        props = {**operation.properties, **dict(transaction_properties or {})}
        txn = dataclasses.replace(operation, properties=props)
    elif read_version is None and getattr(operation, "name", "") not in ("overwrite", "restore"):
        raise InvalidArgumentError(f"{uri}: read_version is required for all operations except Overwrite and "
                                   f"Restore (got a {type(operation).__name__})")
    elif read_version is None:  # pylance: an Overwrite or Restore commits on top of whatever is latest
        latest = try_open_latest(store, handler, check_writable=False)
        txn = Transaction(read_version=latest.version if latest is not None else 0, operation=operation,
                          properties=dict(transaction_properties or {}))
    else:
        txn = Transaction(read_version=read_version, operation=operation, properties=dict(transaction_properties or {}))
    if detached:
        return LanceDataset._from_manifest(store, commit_detached(store, handler, txn), handler)
    manifest = commit_transaction(
        store,
        txn,
        create=create,
        enable_stable_row_ids=enable_stable_row_ids,
        data_storage_version=data_storage_version,
        max_retries=max_retries,
        handler=handler,
    )
    return LanceDataset._from_manifest(store, manifest, handler)


def commit_batch(
    dest: Any,
    transactions: Sequence[Transaction],
    commit_lock: Any = None,
    storage_options: Mapping[str, Any] | None = None,
    enable_v2_manifest_paths: bool | None = None,
    detached: bool = False,
    max_retries: int = DEFAULT_MAX_RETRIES,
) -> dict[str, Any]:
    """pylance's ``LanceDataset.commit_batch``: the transactions merged into one, committed as one
    version on the read version of the first.  ``dest``: a URI or a LanceDataset.

    Returns:
        ``{"dataset": the new LanceDataset, "merged": the Transaction committed}``.

    Raises:
        InvalidArgumentError: no transaction.
        UnsupportedFeatureError: a transaction other than an ``Append`` (the ones pylance 14 merges).
    """
    txns = list(transactions)
    if not txns:
        raise InvalidArgumentError("commit_batch: no transaction to commit")
    others = sorted({type(t.operation).__name__ for t in txns if getattr(t.operation, "name", "") != "append"})
    if others:
        raise UnsupportedFeatureError(f"commit_batch: lance_ops merges Append transactions only, got {others}")
    if commit_lock is not None or enable_v2_manifest_paths is False:
        raise UnsupportedFeatureError("commit_batch: commit_lock and V1 manifest paths are not supported by lance_ops")
    fragments = [f for t in txns for f in t.operation.fragments]  # type: ignore[union-attr]
    merged = Transaction(read_version=txns[0].read_version, operation=Append(fragments))
    ds = commit(dest, merged, storage_options=storage_options, max_retries=max_retries, detached=detached)
    return {"dataset": ds, "merged": merged}


#: pylance's ``LanceDataset.commit`` / ``commit_batch`` are static methods (set here: the handle
#: module cannot import this one)
LanceDataset.commit = staticmethod(commit)  # type: ignore[attr-defined]
LanceDataset.commit_batch = staticmethod(commit_batch)  # type: ignore[attr-defined]


def _version_asof(ds: LanceDataset, asof: datetime | str) -> int:
    """The newest version of ``ds``'s branch committed at or before ``asof``.

    Raises:
        DatasetNotFoundError: every version is newer than ``asof``.
    """
    when = datetime.fromisoformat(asof) if isinstance(asof, str) else asof
    if not isinstance(when, datetime):
        raise ArgumentTypeError(f"asof must be a datetime or an ISO 8601 string, got {type(asof).__name__}")
    if when.tzinfo is not None:
        when = when.astimezone(UTC).replace(tzinfo=None)
    older = [v["version"] for v in ds.versions() if v["timestamp"] <= when]
    if not older:
        raise DatasetNotFoundError(f"{ds.uri}: no version was committed at or before {when.isoformat()} (UTC)")
    return max(older)


# ------------------------------------------------------------------ reader leases
def _lease_store(uri: str, storage_options: Mapping[str, Any] | None, branch: str | None) -> ObjectStore:
    if branch is None:
        return ObjectStore(uri, storage_options)
    return LanceDataset(uri, branch=branch, storage_options=storage_options)._store


def lease(
    uri: str,
    version: int | None = None,
    *,
    ttl: "timedelta | float" = DEFAULT_LEASE_TTL,
    first_version: int | None = None,
    holder: str | None = None,
    branch: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    manifest_store: "ManifestStore | str | None" = None,
    auto_renew: bool = True,
) -> LeaseHandle:
    """A held lease on ``version`` (default: the latest) as a context manager, renewed in the
    background while held: ``with lf.lease(uri, 7, ttl=600) as held: ...``."""
    store = _lease_store(uri, storage_options, branch)
    if version is None:
        version = commit_handler_for(store, manifest_store).latest_version()
    got = _leases.acquire_lease(store, version, ttl=ttl, first_version=first_version, holder=holder)
    return LeaseHandle(store, got, ttl, auto_renew=auto_renew)


def acquire_lease(
    uri: str,
    version: int,
    *,
    ttl: "timedelta | float" = DEFAULT_LEASE_TTL,
    first_version: int | None = None,
    holder: str | None = None,
    branch: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> Lease:
    """Pin ``first_version..version`` (default: ``version`` alone) until now + ``ttl``, for a
    holder that renews (:func:`renew_lease`) and releases (:func:`release_lease`) it itself, from any process.

    Raises:
        VersionRemovedError: a pinned end version was removed by cleanup.
    """
    return _leases.acquire_lease(_lease_store(uri, storage_options, branch), version, ttl=ttl,
                         first_version=first_version, holder=holder)


def renew_lease(uri: str, lease_id: str, *, ttl: "timedelta | float" = DEFAULT_LEASE_TTL, branch: str | None = None,
          storage_options: Mapping[str, Any] | None = None) -> Lease:
    """Extend a live lease to now + ``ttl`` (``LeaseExpiredError`` once it expired)."""
    return _leases.renew_lease(_lease_store(uri, storage_options, branch), lease_id, ttl=ttl)


def release_lease(uri: str, lease_id: str, *, branch: str | None = None,
            storage_options: Mapping[str, Any] | None = None) -> None:
    """Remove a lease (an unknown one is not an error)."""
    _leases.release_lease(_lease_store(uri, storage_options, branch), lease_id)


def list_leases(uri: str, *, include_expired: bool = False, branch: str | None = None,
           storage_options: Mapping[str, Any] | None = None) -> list[Lease]:
    """The live leases of the dataset (or branch), oldest first; expired ones too if asked."""
    return _leases.list_leases(_lease_store(uri, storage_options, branch), include_expired=include_expired)
