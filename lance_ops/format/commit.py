"""The commit loop: write the .txn, build the manifest on the latest version, create it atomically.

On a lost race, every transaction committed since ``read_version`` is loaded (inline section
first, else the ``.txn`` file; a version with neither is a conflict) and checked against ours
(:mod:`.conflict`); compatible ones are rebased over, otherwise a typed
:class:`CommitConflictError` is raised.  Retries back off with jitter.

Outcomes are never left unknown silently: when creating the manifest fails in the storage
layer the object store reads it back (:meth:`.store.ObjectStore.put_if_absent`); if it did not
land the commit raises :class:`CommitFailedError` (``retry_safe``), if that cannot be told
:class:`CommitStateUnknownError`.  A transaction carrying ``txnAppId``/``txnVersion``
(:mod:`.idempotency`) that already committed returns that version instead of committing twice.
"""

import random
import time

from .build import build_manifest
from .commit_handler import CommitHandler, ConditionalPutCommitHandler
from .conflict import check
from .errors import (
    CommitConflictError,
    CommitFailedError,
    CommitStateUnknownError,
    DatasetAlreadyExistsError,
    DatasetNotFoundError,
    InvalidArgumentError,
    ManifestStoreRequiredError,
    RetryableCommitConflictError,
)
from .idempotency import DEFAULT_LOOKBACK_VERSIONS, find_committed, idempotency_key
from .manifest import (
    Manifest,
    NamingScheme,
    check_flags,
    manifest_path,
    read_manifest,
    write_version_hint,
)
from .operations import Overwrite
from .rebase import RebaseState, rebase
from .store import ConditionalPutError, ObjectStore, ObjectStoreError
from .transaction import (
    TRANSACTIONS_DIR,
    Transaction,
    decode_transaction,
    read_transaction_file,
    validate_operation,
    write_transaction_file,
)

DEFAULT_MAX_RETRIES = 20
#: transactions read at once when searching an object store's history (idempotent writes)
REMOTE_PARALLEL_READS = 16


def load_transaction(
    store: ObjectStore, version: int, scheme: NamingScheme, *, handler: CommitHandler | None = None
) -> Transaction:
    """The transaction that produced ``version`` (inline copy preferred; read through ``handler``)."""
    mf = handler.read_manifest(version) if handler is not None else read_manifest(store, version, scheme)
    if mf.transaction is not None:
        return decode_transaction(mf.transaction, store.full_path(f"_versions/{scheme.file_name(version)}"))
    if mf.manifest.transaction_file:
        return read_transaction_file(store, mf.manifest.transaction_file)
    raise RetryableCommitConflictError(
        f"{store.uri}: version {version} has no transaction (inline or file); cannot check for conflicts",
        conflicting_version=version,
    )


def commit_transaction(
    store: ObjectStore,
    txn: Transaction,
    *,
    create: bool = False,
    enable_stable_row_ids: bool = False,
    data_storage_version: str | None = None,
    max_retries: int = DEFAULT_MAX_RETRIES,
    handler: CommitHandler | None = None,
    known: Manifest | None = None,
    idempotency_lookback: int = DEFAULT_LOOKBACK_VERSIONS,
) -> Manifest:
    """Commit ``txn``; return the manifest of the version it became.

    Args:
        create: the dataset must not exist yet (``mode="create"``).
        enable_stable_row_ids, data_storage_version: settings of a new dataset.
        max_retries: lost races to retry before giving up with CommitConflictError.
        handler: lists, reads and creates versions (default: conditional put on ``store``).
        known: a manifest the caller already holds; reused when it is still the latest.
        idempotency_lookback: versions before the latest searched for an earlier commit of
            the same ``txnAppId``/``txnVersion`` (when the transaction carries them).

    Returns:
        The new version's manifest; for a write already committed under the same
        ``txnAppId``/``txnVersion``, the manifest of that earlier version
        (:func:`.idempotency.committed_by` tells them apart).

    Raises:
        CommitConflictError: lost to a concurrent transaction (``retry_safe`` says whether
            redoing the work on the latest version can succeed).
        CommitFailedError: the storage layer failed and the version was not created.
        CommitStateUnknownError: the storage layer failed and whether the version was created
            could not be read back; retry only with ``txnAppId``/``txnVersion``.
    """
    if handler is None:
        handler = ConditionalPutCommitHandler(store)
    if isinstance(txn.read_version, bool) or not isinstance(txn.read_version, int) or txn.read_version < 0:
        raise InvalidArgumentError(f"read_version must be a non-negative integer, got {txn.read_version!r}")
    validate_operation(txn.operation)  # before anything is written
    handler.check_writable()  # a dataset committing through a manifest store refuses other writers
    key = idempotency_key(txn.properties)
    written: Transaction | None = None
    rebase_state: RebaseState | None = None
    checked_up_to = txn.read_version
    attempt = 0
    txn_files: set[str] = set()
    loaded: dict[int, Transaction] = {}
    idem_checked: int | None = None
    try:
        while True:
            # Listed every time, never assumed from ``known``: a cleanup may have removed
            # ``known.version + 1`` while newer versions exist (put-if-absent would then recreate
            # a version in the past; test_cleanup_concurrency).  pylance lists here too.
            scheme, versions = handler.list_versions()
            latest = versions[-1] if versions else 0
            if key is not None and latest > 0:
                # Before anything else: a retried create must find its own first attempt.
                low = latest - idempotency_lookback if idem_checked is None else idem_checked
                done = find_committed(
                    key, [v for v in versions if v > low],
                    lambda v, s=scheme or NamingScheme.V2: _load_cached(store, v, s, handler, loaded),
                    parallel=1 if store.is_local else REMOTE_PARALLEL_READS,
                )
                idem_checked = latest
                if done is not None:
                    _discard(store, txn_files)
                    return handler.read_manifest(done).manifest
            if create and latest > 0:
                raise DatasetAlreadyExistsError(f"{store.uri}: a dataset already exists (version {latest})")
            if latest == 0 and not isinstance(txn.operation, Overwrite):
                raise DatasetNotFoundError(f"{store.uri}: no dataset to apply a {txn.operation.name} to")
            scheme = scheme or NamingScheme.V2
            prev = None
            if latest > 0:
                if known is not None and known.version == latest:
                    prev = known
                else:
                    prev = handler.read_manifest(latest).manifest
                check_flags(prev.reader_feature_flags, prev.writer_feature_flags, path=store.uri, for_write=True)
                if txn.read_version > latest:
                    raise CommitConflictError(
                        f"{store.uri}: read_version {txn.read_version} is newer than the latest version {latest}"
                    )
                # A create (Overwrite at read_version 0) replaces whatever is there.
                for v in range(max(checked_up_to, txn.read_version) + 1, latest + 1):
                    if txn.read_version == 0 and isinstance(txn.operation, Overwrite):
                        break
                    other = _removed_is_retryable(
                        store, txn, v, lambda v=v, s=scheme: _load_cached(store, v, s, handler, loaded)
                    )
                    common = check(txn, other, v)
                    if common:
                        if rebase_state is None:
                            rebase_state = RebaseState(_removed_is_retryable(
                                store, txn, txn.read_version,
                                lambda t=txn: handler.read_manifest(t.read_version).manifest,
                            ))
                        theirs = _removed_is_retryable(store, txn, v, lambda v=v: handler.read_manifest(v).manifest)
                        txn = rebase(
                            store, txn, common, theirs, rebase_state,
                            stable_row_ids=theirs.uses_stable_row_ids, other=other.operation,
                        )
                    checked_up_to = v
            if written is not txn:  # first attempt, or rebased since: the .txn matches the inline copy
                write_transaction_file(store, txn)
                txn_files.add(txn.file_name)
                written = txn

            def load(v: int, handler: CommitHandler = handler) -> Manifest:
                return handler.read_manifest(v).manifest

            new = build_manifest(
                prev,
                txn,
                latest + 1,
                enable_stable_row_ids=enable_stable_row_ids,
                data_storage_version=data_storage_version,
                load_version=load,
            )
            if _put(store, handler, new, txn, scheme):
                write_version_hint(store, new.version)
                return new.with_changes(source=store.full_path(manifest_path(scheme, new.version)))
            attempt += 1
            if attempt > max_retries:
                raise CommitConflictError(
                    f"{store.uri}: gave up after {max_retries} lost races committing {txn.operation.name} "
                    f"(read version {txn.read_version})",
                    read_version=txn.read_version,
                    conflicting_version=latest + 1,
                    operation=txn.operation,
                )
            # Back off with jitter so racing writers spread out.
            time.sleep(random.uniform(0, min(0.5, 0.005 * 2**attempt)))
    except (CommitConflictError, CommitFailedError, ManifestStoreRequiredError):
        # this transaction will never be committed: no manifest references its .txn
        _discard(store, txn_files)
        raise


def find_earlier_commit(
    store: ObjectStore,
    properties: "dict[str, str] | None",
    *,
    handler: CommitHandler | None = None,
    lookback: int = DEFAULT_LOOKBACK_VERSIONS,
) -> Manifest | None:
    """The manifest of the version that already committed the write keyed by ``properties``
    (``txnAppId``/``txnVersion``), or None (no key, or not committed in recent history)."""
    key = idempotency_key(properties or {})
    if key is None:
        return None
    handler = handler or ConditionalPutCommitHandler(store)
    scheme, versions = handler.list_versions()
    if not versions:
        return None
    s = scheme or NamingScheme.V2
    done = find_committed(
        key, [v for v in versions if v > versions[-1] - lookback],
        lambda v: load_transaction(store, v, s, handler=handler),
        parallel=1 if store.is_local else REMOTE_PARALLEL_READS,
    )
    return handler.read_manifest(done).manifest if done is not None else None


def _load_cached(
    store: ObjectStore, version: int, scheme: NamingScheme, handler: CommitHandler, cache: dict[int, Transaction]
) -> Transaction:
    """:func:`load_transaction`, once per version per commit (idempotency and conflict checks share it)."""
    if version not in cache:
        cache[version] = load_transaction(store, version, scheme, handler=handler)
    return cache[version]


def _removed_is_retryable(store: ObjectStore, txn: Transaction, version: int, fn):  # type: ignore[no-untyped-def]
    """``fn()``; a version removed meanwhile (a concurrent cleanup) makes the commit retryable."""
    try:
        return fn()
    except DatasetNotFoundError as e:
        raise RetryableCommitConflictError(
            f"{store.uri}: version {version} was removed (cleanup_old_versions) while a "
            f"{txn.operation.name} planned on version {txn.read_version} was checking for conflicts; "
            "redo it on the latest version",
            read_version=txn.read_version,
            conflicting_version=version,
            operation=txn.operation,
        ) from e


def _put(store: ObjectStore, handler: CommitHandler, new: Manifest, txn: Transaction, scheme: NamingScheme) -> bool:
    """Create the manifest of ``new.version``; a storage failure becomes a typed, settled outcome."""
    path = store.full_path(manifest_path(scheme, new.version))
    try:
        return handler.put_manifest_if_absent(new, txn.to_proto(), scheme)
    except ConditionalPutError as e:
        if e.applied is False:
            raise CommitFailedError(
                f"{path}: version {new.version} was not created ({e}); nothing was committed, retrying is safe",
                path=path, version=new.version,
            ) from e
        raise CommitStateUnknownError(
            f"{path}: version {new.version} may or may not have been committed ({e}). Before retrying, "
            f"check whether version {new.version}'s transaction uuid is {txn.uuid}, or retry with the "
            "txnAppId/txnVersion transaction properties (a retry with them commits at most once)",
            path=path, version=new.version,
        ) from e
    except ObjectStoreError as e:
        # failed before the create was sent (staging the bytes): nothing can have landed
        raise CommitFailedError(
            f"{path}: version {new.version} was not created ({e}); nothing was committed, retrying is safe",
            path=path, version=new.version,
        ) from e


def _discard(store: ObjectStore, txn_files: set[str]) -> None:
    for name in txn_files:
        try:
            store.delete(f"{TRANSACTIONS_DIR}/{name}")
        except Exception:  # pragma: no cover - best effort; cleanup removes orphans anyway
            pass
    txn_files.clear()
