"""The commit loop: write the .txn, build the manifest on the latest version, create it atomically.

On a lost race, every transaction committed since ``read_version`` is loaded (inline section
first, else the ``.txn`` file; a version with neither is a conflict) and checked against ours
(:mod:`.conflict`); compatible ones are rebased over, otherwise a typed
:class:`CommitConflictError` is raised.  Retries back off with jitter.
"""

import random
import time

from .build import build_manifest
from .commit_handler import CommitHandler, ConditionalPutCommitHandler
from .conflict import check
from .errors import (
    CommitConflictError,
    DatasetAlreadyExistsError,
    DatasetNotFoundError,
    RetryableCommitConflictError,
)
from .manifest import (
    Manifest,
    NamingScheme,
    check_flags,
    read_manifest,
    write_version_hint,
)
from .operations import Overwrite
from .rebase import RebaseState, rebase
from .store import ObjectStore
from .transaction import (
    TRANSACTIONS_DIR,
    Transaction,
    decode_transaction,
    read_transaction_file,
    validate_operation,
    write_transaction_file,
)

DEFAULT_MAX_RETRIES = 20


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
) -> Manifest:
    """Commit ``txn``; return the manifest of the version it became.

    Args:
        create: the dataset must not exist yet (``mode="create"``).
        enable_stable_row_ids, data_storage_version: settings of a new dataset.
        max_retries: lost races to retry before giving up with CommitConflictError.
        handler: lists, reads and creates versions (default: conditional put on ``store``).
        known: a manifest the caller already holds; reused when it is still the latest.
    """
    if handler is None:
        handler = ConditionalPutCommitHandler(store)
    validate_operation(txn.operation)  # before anything is written
    written: Transaction | None = None
    rebase_state: RebaseState | None = None
    checked_up_to = txn.read_version
    attempt = 0
    txn_files: set[str] = set()
    try:
        while True:
            scheme, versions = handler.list_versions()
            latest = versions[-1] if versions else 0
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
                    other = load_transaction(store, v, scheme, handler=handler)
                    common = check(txn, other, v)
                    if common:
                        if rebase_state is None:
                            rebase_state = RebaseState(handler.read_manifest(txn.read_version).manifest)
                        theirs = handler.read_manifest(v).manifest
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
            if handler.put_manifest_if_absent(new, txn.to_proto(), scheme):
                write_version_hint(store, new.version)
                return new
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
    except CommitConflictError:
        # this transaction will never be committed: no manifest references its .txn
        for name in txn_files:
            try:
                store.delete(f"{TRANSACTIONS_DIR}/{name}")
            except Exception:  # pragma: no cover - best effort; cleanup removes orphans anyway
                pass
        raise

