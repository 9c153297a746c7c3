"""Base paths: files a manifest names that live outside the dataset's own directory.

A branch is a shallow clone (upstream ``docs/format/table/branch_tag.md``): its manifests
live under ``<root>/tree/<branch>/_versions/`` and keep naming the data and deletion files of
the version it was cloned from, which stay where they are.  Such a file carries a ``base_id``;
the manifest's ``base_paths`` map the id to a location (``BasePath.path``, a URI or absolute
path).  With ``is_dataset_root`` the location is a dataset root: data files are under its
``data/``, deletion files under its ``_deletions/``; otherwise data files are directly below it.
Files without a ``base_id`` live in the directory of the dataset (branch) itself.

Verified against pylance 14: ``create_branch("dev", 1)`` writes a manifest whose data files
have ``base_id: 0`` and ``base_paths {id: 0, is_dataset_root: true, path: "<root>"}``; a branch
of ``dev`` adds ``{id: 1, name: "dev", path: "<root>/tree/dev"}`` for files written on ``dev``.
Reader and writer feature flag 16 ("base paths") is set on every such manifest.
"""

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass

from lance_ops.format._proto import table_pb2
from lance_ops.format.errors import CorruptFileError
from lance_ops.format.io.object_store import ObjectStore, split_uri
from lance_ops.format.table.fragment import DataFile

DATA_DIR = "data"
DELETIONS_DIR = "_deletions"

__all__ = [
    "BasePath",
    "base_store",
    "data_file_location",
    "deletion_file_location",
    "location_key",
    "parse_base_paths",
    "store_location",
]


@dataclass(frozen=True)
class BasePath:
    """One ``Manifest.base_paths`` entry."""

    id: int
    path: str
    name: str | None = None
    is_dataset_root: bool = True

    @classmethod
    def from_proto(cls, m: table_pb2.BasePath) -> "BasePath":
        return cls(id=m.id, path=m.path, name=m.name if m.HasField("name") else None, is_dataset_root=m.is_dataset_root)

    def to_proto(self) -> table_pb2.BasePath:
        m = table_pb2.BasePath(id=self.id, path=self.path, is_dataset_root=self.is_dataset_root)
        if self.name is not None:
            m.name = self.name
        return m


def parse_base_paths(raw: tuple[bytes, ...]) -> dict[int, BasePath]:
    """``Manifest.base_paths`` (serialized messages) by id."""
    out = {}
    for b in raw:
        m = table_pb2.BasePath()
        m.ParseFromString(b)
        out[m.id] = BasePath.from_proto(m)
    return out


def store_location(store: ObjectStore) -> str:
    """The location string a manifest stores for ``store``'s root (as pylance writes it:
    an absolute path for local files, ``scheme://path`` otherwise)."""
    if store.protocol == "file":
        return store.root
    return f"{store.protocol}://{store.root}"


def location_key(uri: str) -> tuple[str, str]:
    """A comparable ``(protocol, normalised path)`` for a location (``file://`` and plain paths agree)."""
    protocol, path = split_uri(uri)
    return protocol, posixpath.normpath(path) if path else path


_STORES: dict[tuple[str, str, tuple[tuple[str, str], ...]], ObjectStore] = {}


def base_store(store: ObjectStore, base: BasePath) -> ObjectStore:
    """An object store rooted at ``base`` (with ``store``'s storage options); ``store`` itself
    when they are the same location."""
    if location_key(base.path) == location_key(store_location(store)):
        return store
    key = (*location_key(base.path), tuple(sorted((str(k), repr(v)) for k, v in store.storage_options.items())))
    hit = _STORES.get(key)
    if hit is None:
        hit = ObjectStore(base.path, store.storage_options)
        if len(_STORES) > 256:
            _STORES.clear()
        _STORES[key] = hit
    return hit


def _base(bases: Mapping[int, BasePath] | None, base_id: int, what: str, where: str) -> BasePath:
    base = (bases or {}).get(base_id)
    if base is None:
        raise CorruptFileError(where, f"{what} names base path {base_id}, which the manifest does not define")
    return base


def data_file_location(
    store: ObjectStore, bases: Mapping[int, BasePath] | None, df: DataFile
) -> tuple[ObjectStore, str]:
    """``(store, path relative to it)`` of a data file of a manifest with ``bases``."""
    if df.base_id is None:
        return store, f"{DATA_DIR}/{df.path}"
    base = _base(bases, df.base_id, f"data file {df.path}", store.uri)
    return base_store(store, base), (f"{DATA_DIR}/{df.path}" if base.is_dataset_root else df.path)


def deletion_file_location(
    store: ObjectStore, bases: Mapping[int, BasePath] | None, base_id: int | None
) -> ObjectStore:
    """The store whose ``_deletions/`` holds a deletion file with ``base_id``."""
    if base_id is None:
        return store
    base = _base(bases, base_id, "a deletion file", store.uri)
    if not base.is_dataset_root:
        raise CorruptFileError(store.uri, f"a deletion file names base path {base_id}, which is not a dataset root")
    return base_store(store, base)
