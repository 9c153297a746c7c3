"""Migrating a dataset from row addresses to stable row ids in place (docs/FORMAT.md §19).

No data file is written: one ``Overwrite`` commit lists the same data and deletion files as
the version it read, now with feature flag 2 and, per fragment, a row-id sequence and both
version sequences.  Row ids are handed out as for a new dataset: in manifest order, every
physical row (deleted ones too, hidden by their deletion vector) gets the next id from 0, so a
row's ``_rowid`` after the migration is its position among all physical rows.  Fragments keep
their ids (an Overwrite would renumber them, but deletion files are found by fragment id), so
``_rowaddr`` is unchanged; ``_row_created_at_version`` and ``_row_last_updated_at_version`` of
every row are the migration's version (no earlier version tracked them).

Refused (``UnsupportedFeatureError``, before anything is written): datasets with indices (their
files hold row addresses, which would be read as row ids afterwards: drop them and build them
again after the migration), with pylance's fragment reuse index, and detached or older versions
(migrate the latest).  Already stable: nothing to do.
"""

from lance_ops.format.errors import UnsupportedFeatureError
from lance_ops.format.index.metadata import decode_index_section
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.table.manifest import Manifest
from lance_ops.format.txn.commit_loop import commit_transaction
from lance_ops.format.txn.handlers import CommitHandler
from lance_ops.format.txn.operations import Overwrite
from lance_ops.format.txn.transaction import Transaction


def check_migratable(store: ObjectStore, manifest: Manifest) -> None:
    """Raise for what cannot be migrated safely (see the module docstring)."""
    indices = decode_index_section(manifest.index_section, f"{store.uri} version {manifest.version}")
    if indices:
        names = ", ".join(sorted({f"{i.name!r} ({i.kind})" for i in indices}))
        raise UnsupportedFeatureError(
            f"{store.uri} version {manifest.version}: cannot migrate to stable row ids with indices {names}: "
            "their files hold row addresses, which would be read as row ids afterwards; drop them "
            "(pylance's ds.drop_index) and build them again after the migration"
        )


def migrate_to_stable_row_ids(
    store: ObjectStore,
    manifest: Manifest,
    handler: CommitHandler,
    *,
    transaction_properties: dict[str, str] | None = None,
) -> Manifest | None:
    """Commit the migration of ``manifest`` (the latest version); None if it has stable row ids."""
    if manifest.uses_stable_row_ids:
        return None
    check_migratable(store, manifest)
    fragments = [f.with_changes(row_ids=None, created_at_versions=None, last_updated_at_versions=None)
                 for f in manifest.fragments]
    op = Overwrite(fragments, manifest.schema, enable_stable_row_ids=True)
    txn = Transaction(manifest.version, op, properties=dict(transaction_properties or {}))
    return commit_transaction(store, txn, handler=handler, max_retries=0)
