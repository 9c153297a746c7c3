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

import logging
import random
import time
from collections.abc import Callable
from functools import singledispatch

from lance_ops.format.errors import (
    CommitConflictError,
    CommitFailedError,
    CommitStateUnknownError,
    ConditionalPutError,
    DatasetAlreadyExistsError,
    DatasetNotFoundError,
    InvalidArgumentError,
    ObjectStoreError,
    RetryableCommitConflictError,
)
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.table.manifest import (
    Manifest,
    NamingScheme,
    check_flags,
    manifest_path,
    read_manifest,
    write_version_hint,
)
from lance_ops.format.txn.apply import build_manifest
from lance_ops.format.txn.conflict import check
from lance_ops.format.txn.handlers import CommitHandler, ConditionalPutCommitHandler
from lance_ops.format.txn.idempotency import DEFAULT_LOOKBACK_VERSIONS, find_committed, idempotency_key
from lance_ops.format.txn.operations import Delete, Overwrite, UpdateConfig
from lance_ops.format.txn.orphans import remove_unreferenced
from lance_ops.format.txn.rebase import RebaseState, rebase
from lance_ops.format.txn.transaction import (
    TRANSACTIONS_DIR,
    Transaction,
    decode_transaction,
    read_transaction_file,
    validate_operation,
    write_transaction_file,
)

log = logging.getLogger(__name__)

DEFAULT_MAX_RETRIES = 20
#: transactions read at once when searching an object store's history (idempotent writes)
REMOTE_PARALLEL_READS = 16


#: called as ``hook(store, transaction, new_manifest)`` after each version a commit created (not
#: after finding an earlier commit of the same idempotency key); ops registers pylance's auto
#: cleanup here (:mod:`..ops.auto_cleanup`).  A hook must not raise.
_POST_COMMIT_HOOKS: list[Callable[[ObjectStore, Transaction, Manifest], None]] = []


def register_post_commit_hook(hook: Callable[[ObjectStore, Transaction, Manifest], None]) -> None:
    """Run ``hook`` after every version :func:`commit_transaction` creates (once per hook)."""
    if hook not in _POST_COMMIT_HOOKS:
        _POST_COMMIT_HOOKS.append(hook)


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

    When the transaction can never land (a conflict, a failed create, any error before the
    manifest create was sent) or a write already committed under the same key is found, every
    file it references that no manifest references is removed (:mod:`.orphans`): its ``.txn``,
    data files with their blob sidecars, deletion files (its planner's and its rebases'), new
    index directories.  After :class:`CommitStateUnknownError` nothing is removed.

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
        DatasetAlreadyExistsError: ``create`` and a dataset exists (the transaction's files
            are kept: a caller may commit them as an append instead).
    """
    if isinstance(txn.read_version, bool) or not isinstance(txn.read_version, int) or txn.read_version < 0:
        raise InvalidArgumentError(f"read_version must be a non-negative integer, got {txn.read_version!r}")
    validate_operation(txn.operation)  # before anything is written
    handler = handler or ConditionalPutCommitHandler(store)
    handler.check_writable()  # a dataset committing through a manifest store refuses other writers
    loop = _CommitLoop(store, handler, txn, known, idempotency_lookback)
    try:
        return loop.run(create, enable_stable_row_ids, data_storage_version, max_retries)
    except CommitStateUnknownError:
        raise
    except DatasetAlreadyExistsError:
        _discard(store, loop.txn_files)
        raise
    except BaseException as e:
        if not loop.putting or isinstance(e, CommitFailedError):
            loop.discard()  # this transaction will never be committed: no manifest references its files
        raise


class _CommitLoop:
    """The state of one :func:`commit_transaction`: the transaction as rebased so far, what was
    checked and loaded, and every version of it written (for :meth:`discard`)."""

    def __init__(
        self, store: ObjectStore, handler: CommitHandler, txn: Transaction, known: Manifest | None, lookback: int
    ) -> None:
        self.store, self.handler, self.txn, self.known, self.lookback = store, handler, txn, known, lookback
        self.key = idempotency_key(txn.properties)
        self.versions: list[Transaction] = [txn]  # the planned transaction and each rebase of it
        self.written: Transaction | None = None  # the version whose .txn file is on storage
        self.txn_files: set[str] = set()
        self.rebase_state: RebaseState | None = None
        self.checked_up_to = txn.read_version
        self.loaded: dict[int, Transaction] = {}
        self.idem_checked: int | None = None
        self.latest: Manifest | None = None  # the latest manifest seen
        self.putting = False  # a manifest create is in flight: its outcome is not known

    def run(
        self, create: bool, enable_stable_row_ids: bool, data_storage_version: str | None, max_retries: int
    ) -> Manifest:
        attempt = 0
        while True:
            # Listed every time, never assumed from ``known``: a cleanup may have removed
            # ``known.version + 1`` while newer versions exist (put-if-absent would then recreate
            # a version in the past; test_cleanup_concurrency).  pylance lists here too.
            scheme, versions = self.handler.list_versions()
            latest = versions[-1] if versions else 0
            done = self.find_duplicate(scheme, versions)
            if done is not None:
                return done
            scheme = scheme or NamingScheme.V2
            prev = self.latest_manifest(latest, create)
            _check_strict_overwrite(self.store.uri, self.txn, latest, max_retries)
            if prev is not None:
                self.absorb(latest, scheme)
            self.write_transaction_file()
            new = build_manifest(
                prev,
                self.txn,
                latest + 1,
                enable_stable_row_ids=enable_stable_row_ids,
                data_storage_version=data_storage_version,
                load_version=lambda v: self.handler.read_manifest(v).manifest,
            )
            if self.put(new, scheme):
                write_version_hint(self.store, new.version)
                self.remove_superseded(new)
                for hook in _POST_COMMIT_HOOKS:
                    hook(self.store, self.txn, new)
                return new.with_changes(source=self.store.full_path(manifest_path(scheme, new.version)))
            attempt += 1
            _back_off(self.store, self.txn, attempt, max_retries, latest)

    def find_duplicate(self, scheme: NamingScheme | None, versions: list[int]) -> Manifest | None:
        """The manifest of an earlier commit of the same ``txnAppId``/``txnVersion``, or None."""
        latest = versions[-1] if versions else 0
        if self.key is None or latest == 0:
            return None
        # Before anything else: a retried create must find its own first attempt.
        low = latest - self.lookback if self.idem_checked is None else self.idem_checked
        done = find_committed(
            self.key, [v for v in versions if v > low],
            lambda v, s=scheme or NamingScheme.V2: _load_cached(self.store, v, s, self.handler, self.loaded),
            parallel=1 if self.store.is_local else REMOTE_PARALLEL_READS,
        )
        self.idem_checked = latest
        if done is None:
            return None
        found = self.handler.read_manifest(done).manifest
        self.discard(found)  # this attempt's files duplicate the committed write's
        return found

    def latest_manifest(self, latest: int, create: bool) -> Manifest | None:
        """The manifest of ``latest`` (None: no dataset yet), checked as a base for this commit."""
        txn = self.txn
        if create and latest > 0:
            raise DatasetAlreadyExistsError(f"{self.store.uri}: a dataset already exists (version {latest})")
        if latest == 0 and not isinstance(txn.operation, Overwrite):
            raise DatasetNotFoundError(f"{self.store.uri}: no dataset to apply a {txn.operation.name} to")
        if latest == 0:
            return None
        if self.known is not None and self.known.version == latest:
            prev = self.known
        else:
            prev = self.handler.read_manifest(latest).manifest
        self.latest = prev
        check_flags(prev.reader_feature_flags, prev.writer_feature_flags, path=self.store.uri, for_write=True)
        if txn.read_version > latest:
            raise CommitConflictError(
                f"{self.store.uri}: read_version {txn.read_version} is newer than the latest version {latest}"
            )
        return prev

    def absorb(self, latest: int, scheme: NamingScheme) -> None:
        """Check every version committed since the last check against the transaction; rebase
        it over those touching the same fragments compatibly (conflicts raise)."""
        txn, store, handler = self.txn, self.store, self.handler
        if txn.read_version == 0 and isinstance(txn.operation, Overwrite):
            return  # a create (Overwrite at read_version 0) replaces whatever is there
        for v in range(max(self.checked_up_to, txn.read_version) + 1, latest + 1):
            try:
                other = _removed_is_retryable(
                    store, txn, v, lambda v=v: _load_cached(store, v, scheme, handler, self.loaded)
                )
            except RetryableCommitConflictError:
                if not _config_only(txn.operation):
                    raise
                # as pylance, which checks the versions still listed: a config change of
                # keys only lands on the latest version whatever a cleanup removed before it
                self.checked_up_to = v
                continue
            common = check(txn, other, v)
            if common:
                if self.rebase_state is None:
                    self.rebase_state = RebaseState(_removed_is_retryable(
                        store, txn, txn.read_version, lambda r=txn.read_version: handler.read_manifest(r).manifest,
                    ))
                theirs = _removed_is_retryable(store, txn, v, lambda v=v: handler.read_manifest(v).manifest)
                txn = rebase(
                    store, txn, common, theirs, self.rebase_state,
                    stable_row_ids=theirs.uses_stable_row_ids, other=other.operation,
                )
                self.txn = txn
                self.versions.append(txn)
            self.checked_up_to = v

    def write_transaction_file(self) -> None:
        """Write the ``.txn`` on the first attempt and after each rebase (it matches the inline copy)."""
        if self.written is not self.txn:
            write_transaction_file(self.store, self.txn)
            self.txn_files.add(self.txn.file_name)
            self.written = self.txn

    def put(self, new: Manifest, scheme: NamingScheme) -> bool:
        """Create the manifest; while it is in flight a failure leaves the outcome unknown."""
        self.putting = True
        created = _put(self.store, self.handler, new, self.txn, scheme)
        self.putting = False
        return created

    def discard(self, committed: Manifest | None = None) -> None:
        """Remove this transaction's ``.txn`` files and every file it references that no manifest
        seen (read version, latest, ``committed``) nor a transaction committed meanwhile references."""
        _discard(self.store, self.txn_files)
        try:
            keep = [self.latest, committed]
            if self.txn.read_version > 0:
                keep.append(self.handler.read_manifest(self.txn.read_version).manifest)
            remove_unreferenced(self.store, self._all_versions(), keep=keep, keep_transactions=self.loaded.values())
        except Exception as e:  # noqa: BLE001 - never hide the outcome; cleanup_old_versions removes orphans
            log.warning("%s: could not remove the files of uncommitted transaction %s: %s",
                        self.store.uri, self.txn.uuid, e)

    def _all_versions(self) -> list[Transaction]:
        """Every version of the transaction, plus what rebases wrote (also those that then failed)."""
        extra = self.rebase_state.written if self.rebase_state is not None else []
        return [*self.versions, Transaction(self.txn.read_version, Delete(list(extra), []))] if extra else self.versions

    def remove_superseded(self, new: Manifest) -> None:
        """After a rebased commit: remove the files earlier versions of the transaction wrote that
        the committed one no longer references (deletion files replaced by merged ones)."""
        if len(self.versions) == 1:
            return
        try:
            remove_unreferenced(self.store, self._all_versions(), keep=[new], keep_transactions=[self.txn])
        except Exception as e:  # noqa: BLE001 - the commit stands; cleanup_old_versions removes orphans
            log.warning("%s: could not remove files superseded by rebasing %s: %s", self.store.uri, self.txn.uuid, e)


def _check_strict_overwrite(uri: str, txn: Transaction, latest: int, max_retries: int) -> None:
    """pylance's strict overwrite: an Overwrite with ``max_retries=0`` on a read version is not
    rebased; a version committed after it is a conflict."""
    if max_retries == 0 and _replaces_all(txn.operation) and 0 < txn.read_version < latest:
        raise RetryableCommitConflictError(
            f"{uri}: Commit conflict for version {txn.read_version + 1}: a strict overwrite (max_retries=0) "
            f"read version {txn.read_version}, but version {latest} is the latest",
            read_version=txn.read_version, conflicting_version=txn.read_version + 1, operation=txn.operation)


def _back_off(store: ObjectStore, txn: Transaction, attempt: int, max_retries: int, latest: int) -> None:
    """Sleep with jitter before the next attempt, so racing writers spread out; give up after
    ``max_retries`` lost races."""
    if attempt > max_retries:
        raise CommitConflictError(
            f"{store.uri}: gave up after {max_retries} lost races committing {txn.operation.name} "
            f"(read version {txn.read_version})",
            read_version=txn.read_version,
            conflicting_version=latest + 1,
            operation=txn.operation,
        )
    time.sleep(random.uniform(0, min(0.5, 0.005 * 2**attempt)))


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


@singledispatch
def _config_only(op: object) -> bool:
    """An UpdateConfig of table config keys only (no schema, field or table metadata)."""
    return False


@_config_only.register
def _(op: UpdateConfig) -> bool:
    return op.schema_metadata_updates is None and op.table_metadata_updates is None and not op.field_metadata_updates


@singledispatch
def _replaces_all(op: object) -> bool:
    """Whether ``op`` replaces the whole dataset (an Overwrite: pylance's strict overwrite applies)."""
    return False


@_replaces_all.register
def _(op: Overwrite) -> bool:
    return True


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
