"""Migrating a dataset from row addresses to stable row ids in place (docs/FORMAT.md §19).

No data file is written: one ``Overwrite`` commit lists the same data and deletion files as
the version it read, now with feature flag 2 and, per fragment, a row-id sequence and both
version sequences.  Row ids are handed out as for a new dataset: in manifest order, every
physical row (deleted ones too, hidden by their deletion vector) gets the next id from 0, so a
row's ``_rowid`` after the migration is its position among all physical rows.  Fragments keep
their ids (an Overwrite would renumber them, but deletion files are found by fragment id), so
``_rowaddr`` is unchanged; ``_row_created_at_version`` and ``_row_last_updated_at_version`` of
every row are the migration's version (no earlier version tracked them).

Indices are carried in the same commit, each as pylance 14 keeps that kind with stable row ids
(:mod:`lance_ops.format.index.handling`): BTREE files hold row addresses either way (only
``index_version`` becomes 1); ZONEMAP and BLOOMFILTER stay address-based; BITMAP, LABEL_LIST,
NGRAM, INVERTED and IVF_* hold row ids with stable row ids, so a copy with every address
replaced by its row id is written under a new uuid.  Refused (``UnsupportedFeatureError``,
before anything is committed): indices of a kind lance_ops cannot rewrite, pylance's fragment
reuse index.  Already stable: nothing to do.
"""

import dataclasses
from collections.abc import Callable

import numpy as np

from lance_ops.format.errors import UnsupportedFeatureError
from lance_ops.format.index.handling import IndexAction, handling, index_action
from lance_ops.format.index.metadata import IndexMetadata, decode_index_section, encode_index_section
from lance_ops.format.index.remap import RemappedIndex, remap_index
from lance_ops.format.index.rowaddr import AddressMap
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.ops.compaction.index_remap import IndexRemap
from lance_ops.format.table.manifest import Manifest
from lance_ops.format.txn.commit_loop import commit_transaction
from lance_ops.format.txn.handlers import CommitHandler
from lance_ops.format.txn.operations import Overwrite
from lance_ops.format.txn.transaction import Transaction


def _row_id_map(manifest: Manifest) -> AddressMap:
    """Every physical row's address -> its row id (position among all physical rows)."""
    parts = [(np.uint64(f.id) << np.uint64(32)) | np.arange(f.physical_rows, dtype=np.uint64)
             for f in manifest.fragments]
    old = np.concatenate(parts) if parts else np.empty(0, np.uint64)
    new = np.arange(old.size, dtype=np.uint64)
    order = np.argsort(old, kind="stable")
    return AddressMap(old[order], new[order], frozenset(), frozenset())


def _carry(store: ObjectStore, idx: IndexMetadata, amap: AddressMap | None) -> IndexMetadata | RemappedIndex:
    where = f"{store.uri}: index {idx.name!r} ({idx.kind}, index_version {idx.index_version})"
    if idx.is_system:
        raise UnsupportedFeatureError(f"{where}: cannot migrate a dataset with pylance's fragment reuse index")
    before = handling(idx, stable=False).action
    after = index_action(idx.kind, idx.index_version, stable=True)
    if idx.kind == "BTREE" and idx.index_version == 0 and before is IndexAction.REMAP:
        return dataclasses.replace(idx, index_version=1)  # row addresses, as pylance's stable BTREE
    if before is IndexAction.DROP:
        return idx  # zone maps, bloom filters: by fragment and address in both modes
    if before is IndexAction.REMAP and after is IndexAction.FOLLOW and amap is not None:
        return remap_index(store, idx, amap, stable=False)
    raise UnsupportedFeatureError(f"{where}: lance_ops cannot carry it to stable row ids; drop it first")


def migrated_indices(store: ObjectStore, manifest: Manifest) -> tuple[list[IndexMetadata], IndexRemap]:
    """The indices of the migrated version, and the copies written for them (to discard if the
    commit fails)."""
    indices = decode_index_section(manifest.index_section, f"{store.uri} version {manifest.version}")
    if not indices:
        return [], IndexRemap()
    amap = _row_id_map(manifest)
    out: list[IndexMetadata] = []
    written: list[RemappedIndex] = []
    try:
        for idx in indices:
            carried = _carry(store, idx, amap)
            if isinstance(carried, RemappedIndex):
                written.append(carried)
                carried = dataclasses.replace(idx, uuid=carried.new_uuid, files=carried.files)
            out.append(carried)
    except BaseException:
        IndexRemap(remapped=tuple(written)).discard(store)
        raise
    return out, IndexRemap(remapped=tuple(written))


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
    indices, written = migrated_indices(store, manifest)
    fragments = [f.with_changes(row_ids=None, created_at_versions=None, last_updated_at_versions=None)
                 for f in manifest.fragments]
    section = encode_index_section(tuple(indices)) if indices else None
    op = Overwrite(fragments, manifest.schema, enable_stable_row_ids=True, index_section=section)
    txn = Transaction(manifest.version, op, properties=dict(transaction_properties or {}))
    try:
        return commit_transaction(store, txn, handler=handler, max_retries=0)
    except BaseException:
        written.discard(store)
        raise


def is_migration(before: Manifest, after: Manifest) -> bool:
    """Whether ``after`` is ``before`` migrated to stable row ids (same fragments, same files)."""
    if before.uses_stable_row_ids or not after.uses_stable_row_ids or len(before.fragments) != len(after.fragments):
        return False
    return all(
        a.id == b.id and a.files == b.files and a.deletion_file == b.deletion_file
        for a, b in zip(before.fragments, after.fragments, strict=True)
    )


def feed_begin(uri: str, begin_version: int, read: Callable[[int], Manifest]) -> int:
    """The version a change feed of ``(begin_version, ...]`` starts from: ``begin_version``, or
    the migration right after it (which changed no row).

    Raises:
        UnsupportedFeatureError: ``begin_version`` has no stable row ids and is not the version
            a migration read.
    """
    if begin_version == 0:
        return 0
    begin = read(begin_version)
    if begin.uses_stable_row_ids:
        return begin_version
    if is_migration(begin, read(begin_version + 1)):  # (begin < end, and end has stable row ids)
        return begin_version + 1
    raise UnsupportedFeatureError(
        f"{uri}: version {begin_version} has no stable row ids and the next version is not its migration to "
        "them: the change feed starts at the version a migration read (docs/FORMAT.md §19)"
    )
