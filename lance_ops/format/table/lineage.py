"""What other branches, tags and detached versions still need from one branch's directory.

Cleanup of a branch (main included) must never remove a file that any other branch, any tag or
any detached version still reaches.  A branch is a shallow clone: its manifests name the data
and deletion files of the version it was created from through base paths (:mod:`.bases`), so
files in ``<root>/data/`` can be needed by ``<root>/tree/dev/_versions/*``.  pylance 14 keeps
them too: cleaning main keeps the files a branch uses and the manifest of the version a branch
was created from.

:func:`external_pins` reads every manifest of every other branch and every detached manifest
(metadata only) and returns the versions and files of the cleaned branch they pin, with the
names of the tags and branches responsible.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from lance_ops.format._proto import table_pb2
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.table.bases import (
    BasePath,
    data_file_location,
    deletion_file_location,
    location_key,
    store_location,
)
from lance_ops.format.table.deletion import deletion_file_name
from lance_ops.format.table.manifest import (
    Manifest,
    NamingScheme,
    list_detached_versions,
    list_versions,
    read_manifest,
)
from lance_ops.format.table.refs import branch_store, find_root, list_branches, list_tags

INDICES_DIR = "_indices"

__all__ = ["Pins", "external_pins", "manifest_file_keys"]

FileKey = tuple[str, str]


def _key(store: ObjectStore, rel: str) -> FileKey:
    return location_key(store_location(store) + "/" + rel)


def _index_dirs(store: ObjectStore, m: Manifest) -> Iterable[FileKey]:
    if not m.index_section:
        return
    sec = table_pb2.IndexSection()
    try:
        sec.ParseFromString(m.index_section)
    except Exception:  # noqa: BLE001 - an undecodable index section pins nothing we can name
        return
    bases: Mapping[int, BasePath] = m.bases
    for idx in sec.indices:
        uuid = _uuid_str(idx.uuid.uuid)
        if idx.HasField("base_id"):
            base = bases.get(idx.base_id)
            if base is None:
                continue
            root = base.path if not base.is_dataset_root else f"{base.path}/{INDICES_DIR}"
            yield location_key(f"{root}/{uuid}")
        else:
            yield _key(store, f"{INDICES_DIR}/{uuid}")


def _uuid_str(raw: bytes) -> str:
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}" if len(h) == 32 else h


def manifest_file_keys(store: ObjectStore, m: Manifest) -> set[FileKey]:
    """Locations of the data, deletion and index files manifest ``m`` (of the dataset or branch
    at ``store``) needs, as comparable keys (see :func:`.bases.location_key`)."""
    keys: set[FileKey] = set()
    bases = m.bases
    for f in m.fragments:
        for df in f.files:
            s, rel = data_file_location(store, bases, df)
            keys.add(_key(s, rel))
        if f.deletion_file is not None:
            d = f.deletion_file
            s = deletion_file_location(store, bases, d.base_id)
            keys.add(_key(s, deletion_file_name(f.id, d.to_proto())))
    keys.update(_index_dirs(store, m))
    return keys


@dataclass
class Pins:
    """What must survive a cleanup of one branch because something outside it needs it."""

    branch: str | None
    #: versions of the cleaned branch -> what pins each ("tag gold", "branch dev")
    versions: dict[int, list[str]] = field(default_factory=dict)
    #: file keys -> the branches (or "detached version N") whose manifests name them
    files: dict[FileKey, set[str]] = field(default_factory=dict)

    def file_pinned_by(self, store: ObjectStore, rel: str) -> set[str]:
        """Who needs file ``rel`` of ``store`` (empty when nobody outside the branch does).

        An index file is pinned when its ``_indices/<uuid>`` directory is.
        """
        if not self.files:
            return set()  # no other branch and no detached version: nothing outside pins a file
        key = _key(store, rel)
        hit = self.files.get(key)
        if hit:
            return hit
        parts = rel.split("/")
        if len(parts) > 2 and parts[0] == INDICES_DIR:
            return self.files.get(_key(store, f"{INDICES_DIR}/{parts[1]}"), set())
        return set()


def _branch_manifests(store: ObjectStore) -> Iterable[tuple[int, Manifest]]:
    scheme, versions = list_versions(store)
    for v in versions:
        assert scheme is not None
        try:
            yield v, read_manifest(store, v, scheme).manifest
        except FileNotFoundError:  # removed by a concurrent cleanup of that branch
            continue
    for v in list_detached_versions(store):
        try:
            yield v, read_manifest(store, v, NamingScheme.V2).manifest
        except FileNotFoundError:
            continue


def external_pins(store: ObjectStore, branch: str | None) -> Pins:
    """Versions and files of the branch at ``store`` that tags, other branches and detached
    versions need.

    Raises:
        CorruptFileError: a tag, branch or manifest file of another branch does not decode
            (cleanup must not guess what it protects).
    """
    root = find_root(store, branch)
    pins = Pins(branch)
    for name, tag in list_tags(root).items():
        if tag["branch"] == branch:
            pins.versions.setdefault(int(tag["version"]), []).append(f"tag {name}")
    branches = list_branches(root)
    for name, info in branches.items():
        if info["parent_branch"] == branch:
            pins.versions.setdefault(int(info["parent_version"]), []).append(f"branch {name}")
    others: list[str | None] = [b for b in branches if b != branch]
    if branch is not None:
        others.append(None)
    for other in others:
        ostore = branch_store(root, other)
        label = f"branch {other}" if other is not None else "branch main"
        for _v, m in _branch_manifests(ostore):
            for key in manifest_file_keys(ostore, m):
                pins.files.setdefault(key, set()).add(label)
    # detached versions of this branch: their files stay (pylance keeps their manifests; it
    # only spares their files for the unverified-file grace period -- a detached version whose
    # data is gone is a silent loss, so lance_ops keeps them for as long as the manifest exists)
    for v in list_detached_versions(store):
        try:
            m = read_manifest(store, v, NamingScheme.V2).manifest
        except FileNotFoundError:
            continue
        for key in manifest_file_keys(store, m):
            pins.files.setdefault(key, set()).add(f"detached version {v}")
    return pins
