"""Which index files ``cleanup_old_versions`` may remove (pylance ``index_files_removed``).

An index lives in ``_indices/<uuid>/``; a version references it through its IndexSection.  A
directory is kept while any retained version (newest versions, versions newer than the cut,
tagged versions, and whatever else the caller keeps, e.g. branch heads) lists its uuid.  Files
of other directories go when a removed version listed them, or -- left by a failed or killed
writer, referenced by no version at all -- once older than the grace period, as pylance does.
An index stored under another base path (``base_id``) is not ours to remove.

Branches (pylance ``create_branch``) live in ``tree/<name>/`` with their own versions and
``_indices/``, and name the indices they inherited in the root's ``_indices/`` (``base_id`` 0,
the dataset root): every index any branch manifest names is kept, whatever the root's cut.
"""

import os
from collections.abc import Iterable

from lance_ops.format.index.metadata import INDICES_DIR, decode_index_section
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.table.manifest import Manifest, decode_manifest_file


def index_uuids(manifest: Manifest, where: str = "") -> set[str]:
    """uuids of the index directories ``manifest`` references in this dataset's root."""
    return {
        i.uuid
        for i in decode_index_section(manifest.index_section, where or f"version {manifest.version}")
        if i.base_id is None
    }


BRANCHES_DIR = "tree"


def branch_index_uuids(store: ObjectStore) -> set[str]:
    """uuids of every index a branch's manifest (any version, any depth) names.

    Raises:
        CorruptFileError: a branch manifest does not decode.
    """
    out: set[str] = set()
    for rel, _size, _mtime in store.list_files(BRANCHES_DIR):
        parts = rel.split("/")
        if len(parts) < 3 or parts[-2] != "_versions" or not parts[-1].endswith(".manifest"):
            continue
        mf = decode_manifest_file(store.read(rel), store.full_path(rel))
        out |= {i.uuid for i in decode_index_section(mf.manifest.index_section, store.full_path(rel))}
    return out


def unreferenced_index_files(
    store: ObjectStore,
    kept: Iterable[Manifest],
    dropped: Iterable[Manifest],
    grace_cut: float,
) -> dict[str, int]:
    """``{relative path: size}`` of the index files cleanup may remove.

    Args:
        kept: manifests of every version that stays (their indices are never touched).
        dropped: manifests of the versions being removed.
        grace_cut: epoch seconds; an index directory no version references is removed only
            if its files are older than this.

    Raises:
        CorruptFileError: an index section does not decode (nothing should be removed then).
    """
    keep = set().union(*(index_uuids(m, f"{store.uri} version {m.version}") for m in kept))
    keep |= branch_index_uuids(store)
    gone = set().union(*(index_uuids(m, f"{store.uri} version {m.version}") for m in dropped))
    out: dict[str, int] = {}
    for rel, size, mtime in store.list_files(INDICES_DIR):
        parts = rel.split("/")
        if len(parts) < 3 or parts[0] != INDICES_DIR:
            continue
        uuid = parts[1]
        if uuid in keep:
            continue
        if uuid in gone or (mtime is not None and mtime < grace_cut):
            out[rel] = size
    return out


def prune_empty_index_dirs(store: ObjectStore, removed: Iterable[str]) -> None:
    """Remove the ``_indices/<uuid>/`` directories ``removed`` emptied (local stores; object
    stores have no directories).  Best effort: a directory still in use is not empty."""
    if not store.is_local:
        return
    for d in sorted({rel.rsplit("/", 1)[0] for rel in removed if rel.startswith(INDICES_DIR + "/")}):
        try:
            os.rmdir(store.full_path(d))
        except OSError:
            pass  # not empty (another writer) or already gone
