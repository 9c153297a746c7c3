"""Writing data as a new version: the data files, then one Append or Overwrite commit (below
the handle: ``top_level.write_dataset`` and ``LanceDataset.insert`` both call it)."""

from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa

from lance_ops.format.errors import (
    ArgumentTypeError,
    DatasetAlreadyExistsError,
    InvalidArgumentError,
    UnsupportedFeatureError,
)
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.ops.auto_cleanup import AutoCleanupConfig, config_values
from lance_ops.format.ops.inputs import blobs_as_v2, check_fits
from lance_ops.format.ops.write import (
    DEFAULT_MAX_ROWS_PER_FILE,
    WriteMode,
    WriteProgress,
    conform_batch,
    iter_batches,
    new_schema,
    write_fragment_files,
)
from lance_ops.format.table.file_versions import normalize_storage_version, require_writable
from lance_ops.format.table.manifest import Manifest, check_flags
from lance_ops.format.txn.commit_loop import commit_transaction, find_earlier_commit
from lance_ops.format.txn.handlers import CommitHandler, commit_handler_for, try_open_latest, with_commit_lock
from lance_ops.format.txn.idempotency import idempotency_key
from lance_ops.format.txn.manifest_store import ManifestStore
from lance_ops.format.txn.operations import Append, Overwrite
from lance_ops.format.txn.transaction import Transaction

#: the transaction property pylance stores ``commit_message`` under
COMMIT_MESSAGE_KEY = "__lance_commit_message"


def write_and_commit(
    data: Any,
    uri: str,
    *,
    mode: WriteMode = "create",
    schema: pa.Schema | None = None,
    max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
    enable_stable_row_ids: bool = False,
    data_storage_version: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    transaction_properties: Mapping[str, str] | None = None,
    manifest_store: "ManifestStore | str | None" = None,
    commit_message: str | None = None,
    enable_v2_manifest_paths: bool | None = None,
    max_bytes_per_file: int | None = None,
    progress: WriteProgress | None = None,
    commit_lock: Callable[[int], Any] | None = None,
    auto_cleanup_options: AutoCleanupConfig | None = None,
) -> tuple[ObjectStore, Manifest, CommitHandler]:
    """Write ``data`` and commit it as a new version of the dataset at ``uri`` (what
    ``write_dataset`` and ``LanceDataset.insert`` do; see :func:`.top_level.write_dataset` for the
    arguments); returns the store, the committed manifest and the store's commit handler."""
    if mode not in ("create", "append", "overwrite"):
        raise InvalidArgumentError(f"mode must be 'create', 'append' or 'overwrite', got {mode!r}")
    if enable_v2_manifest_paths is False:
        raise UnsupportedFeatureError(f"{uri}: enable_v2_manifest_paths=False (V1 manifest names) is not written "
                                      "by lance_ops; new datasets use V2 manifest paths")
    transaction_properties = _with_commit_message(transaction_properties, commit_message)
    store = ObjectStore(uri, storage_options)
    handler = with_commit_lock(commit_handler_for(store, manifest_store), commit_lock)
    existing = try_open_latest(store, handler)
    if existing is not None and mode == "create":
        done = find_earlier_commit(store, dict(transaction_properties or {}), handler=handler)
        if done is not None:  # a retried create whose first attempt committed
            return store, done, handler
        raise DatasetAlreadyExistsError(f"{uri}: a dataset already exists (version {existing.version}); use mode='append' or 'overwrite'")
    data_schema, batches = iter_batches(data, schema)
    props = dict(transaction_properties or {})
    idempotency_key(props)  # refused before any file is written
    if existing is not None and mode == "append":
        check_flags(existing.reader_feature_flags, existing.writer_feature_flags, path=uri, for_write=True)
        file_version = require_writable(existing.data_storage_version, uri)
        lance_schema = existing.schema
        check_fits(data_schema, lance_schema.to_arrow(), uri)
        frags = write_fragment_files(store, batches, lance_schema, version=file_version,
                                     max_rows_per_file=max_rows_per_file, max_bytes_per_file=max_bytes_per_file,
                                     progress=progress)
        txn = Transaction(existing.version, Append(frags), properties=props)
        manifest = commit_transaction(store, txn, handler=handler, known=existing)
        return store, manifest, handler
    version = (
        require_writable(existing.data_storage_version, uri)
        if existing is not None and data_storage_version is None
        else normalize_storage_version(data_storage_version)
    )
    target = blobs_as_v2(schema or data_schema, version)
    lance_schema = new_schema(target)
    frags = write_fragment_files(store, (conform_batch(b, target, uri) for b in batches), lance_schema,
                                 version=version, max_rows_per_file=max_rows_per_file,
                                 max_bytes_per_file=max_bytes_per_file, progress=progress)
    read_version = existing.version if existing is not None else 0
    # pylance: auto cleanup options configure a new dataset only
    config = config_values(auto_cleanup_options) if existing is None and auto_cleanup_options else None
    txn = Transaction(read_version, Overwrite(frags, lance_schema, config), properties=props)
    manifest = commit_transaction(
        store,
        txn,
        create=existing is None and mode == "create",
        enable_stable_row_ids=enable_stable_row_ids,
        data_storage_version=version,
        handler=handler,
    )
    return store, manifest, handler



def _with_commit_message(properties: Mapping[str, str] | None, message: str | None) -> Mapping[str, str] | None:
    """``properties`` with ``commit_message`` under pylance's key (the message wins a clash)."""
    if message is None:
        return properties
    if not isinstance(message, str):
        raise ArgumentTypeError(f"commit_message must be a string, got {type(message).__name__} {message!r}")
    return {**dict(properties or {}), COMMIT_MESSAGE_KEY: message}
