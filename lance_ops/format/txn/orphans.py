"""Files a transaction wrote that no manifest references: removed when its commit never lands.

A transaction references files it (or its planner) wrote before the commit: data files of new
fragments and their blob sidecars (``data/<stem>/<id>.blob``), deletion files of the fragments
it updates, index directories it adds (``_indices/<uuid>/``: a compaction's remapped indices),
and deletion files a rebase wrote.  When the commit fails for good, or an idempotent retry finds
the write already committed, those files are referenced by no version; the commit loop removes
them (pylance leaves them for ``cleanup_old_versions``, upstream lance issue #7207).

Only files of the dataset's own root are candidates (``base_id`` None: a branch source's or
another base's files are never touched), and never a file a manifest the loop saw still names
(the read version, the latest version, the version an idempotent retry found) or a transaction
committed meanwhile names.
"""

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from lance_ops.format.file.blob_columns import is_blob_field
from lance_ops.format.index.metadata import INDICES_DIR
from lance_ops.format.index.unreferenced import index_uuids, prune_empty_index_dirs
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.schema import LanceSchema
from lance_ops.format.table.deletion import deletion_file_path
from lance_ops.format.table.fragment import FragmentMetadata
from lance_ops.format.table.manifest import Manifest
from lance_ops.format.txn.operations import (
    Append,
    CreateIndex,
    Delete,
    Merge,
    Operation,
    Overwrite,
    Rewrite,
    Update,
)
from lance_ops.format.txn.transaction import Transaction

DATA_DIR = "data"


@dataclass
class FileSet:
    """Files of the dataset's root, relative paths: data and deletion files, index uuids."""

    data: set[str] = field(default_factory=set)
    deletions: set[str] = field(default_factory=set)
    indices: set[str] = field(default_factory=set)

    def __ior__(self, other: "FileSet") -> "FileSet":
        self.data |= other.data
        self.deletions |= other.deletions
        self.indices |= other.indices
        return self

    def __sub__(self, other: "FileSet") -> "FileSet":
        return FileSet(self.data - other.data, self.deletions - other.deletions, self.indices - other.indices)

    def __bool__(self) -> bool:
        return bool(self.data or self.deletions or self.indices)


def _deletion_files(frags: Iterable[FragmentMetadata]) -> FileSet:
    return FileSet(deletions={
        deletion_file_path(f.id, f.deletion_file.to_proto())
        for f in frags
        if f.deletion_file is not None and f.deletion_file.base_id is None
    })


def _fragment_files(frags: Iterable[FragmentMetadata]) -> FileSet:
    """Data files (own root) and deletion files of ``frags``."""
    frags = list(frags)
    out = _deletion_files(frags)
    out.data = {f"{DATA_DIR}/{df.path}" for f in frags for df in f.files if df.base_id is None}
    return out


def _update_files(op: Update) -> FileSet:
    out = _deletion_files(op.updated_fragments)
    out |= _fragment_files(op.new_fragments)
    return out


def _rewrite_files(op: Rewrite) -> FileSet:
    out = _fragment_files(f for g in op.groups for f in g.new_fragments)
    out.indices = {r.new_id for r in op.rewritten_indices}
    return out


def _create_index_files(op: CreateIndex) -> FileSet:
    return FileSet(indices={i.uuid for i in op.new_indices if i.base_id is None})


#: the files each kind of operation references (kinds without files are absent)
_FILES_OF: dict[type, Callable[..., FileSet]] = {
    Append: lambda op: _fragment_files(op.fragments),
    Overwrite: lambda op: _fragment_files(op.fragments),
    # every fragment: the files already committed are kept by the manifests that reference them
    Merge: lambda op: _fragment_files((*op.fragments, *op.new_fragments)),
    Delete: lambda op: _deletion_files(op.updated_fragments),
    Update: _update_files,
    Rewrite: _rewrite_files,
    CreateIndex: _create_index_files,
}


def operation_files(op: Operation) -> FileSet:
    """The files of the dataset's root that ``op`` references (new fragments' data and deletion
    files, updated fragments' deletion files, new index directories)."""
    fn = _FILES_OF.get(type(op))
    return fn(op) if fn is not None else FileSet()


def manifest_files(m: Manifest) -> FileSet:
    """The files of the dataset's root that version ``m`` references."""
    out = _fragment_files(m.fragments)
    out.indices = index_uuids(m, f"version {m.version}")
    return out


def _has_blobs(schemas: Iterable[LanceSchema]) -> bool:
    return any(is_blob_field(f) for s in schemas for f in s.top_level())


def remove_unreferenced(
    store: ObjectStore,
    written: Iterable[Transaction],
    *,
    keep: Iterable[Manifest | None] = (),
    keep_transactions: Iterable[Transaction] = (),
) -> list[str]:
    """Remove the files the ``written`` transactions reference that neither a manifest in
    ``keep`` nor a transaction in ``keep_transactions`` references; best effort.

    Returns:
        the relative paths removed (data files, their blob sidecars, deletion files, index files).
    """
    written = list(written)
    mine = FileSet()
    for t in written:
        mine |= operation_files(t.operation)
    if not mine:
        return []
    manifests = [m for m in keep if m is not None]
    kept = FileSet()
    for m in manifests:
        kept |= manifest_files(m)
    for t in keep_transactions:
        kept |= operation_files(t.operation)
    gone = mine - kept
    # an operation that brings its own schema (an Overwrite) may bring blob columns too
    schemas = [m.schema for m in manifests] + [s for t in written if (s := getattr(t.operation, "schema", None))]
    sidecars = store.is_local or _has_blobs(schemas)  # a listing per data file costs a request remotely
    paths = sorted(gone.data | gone.deletions)
    for rel in sorted(gone.data):
        if sidecars:
            paths += sorted(r for r, _s, _m in store.list_files(rel[: -len(".lance")] if rel.endswith(".lance") else rel))
    index_files = [rel for uuid in sorted(gone.indices) for rel, _s, _m in store.list_files(f"{INDICES_DIR}/{uuid}")]
    removed = []
    for rel in paths + index_files:
        try:
            store.delete(rel)
            removed.append(rel)
        except Exception:  # noqa: BLE001 - never hide the commit's outcome; cleanup removes orphans anyway
            pass
    prune_empty_index_dirs(store, index_files)
    _prune_sidecar_dirs(store, gone.data if sidecars else set())
    return removed


def remove_fragment_files(store: ObjectStore, fragments: Iterable[FragmentMetadata]) -> list[str]:
    """Remove the files of ``fragments`` no transaction references yet (written, never committed):
    data files with their blob sidecars, and deletion files; best effort."""
    return remove_unreferenced(store, [Transaction(0, Append(list(fragments)))])


def _prune_sidecar_dirs(store: ObjectStore, data_files: Iterable[str]) -> None:
    """Remove the emptied ``data/<stem>/`` directories of removed data files (local stores)."""
    if not store.is_local:
        return
    for rel in data_files:
        try:
            os.rmdir(store.full_path(rel[: -len(".lance")]))
        except OSError:
            pass  # none, or not empty
