"""Tags and branches as pylance 14 stores them (upstream ``docs/format/table/branch_tag.md``).

Layout, verified against pylance 14.0.2::

    <root>/_refs/tags/<tag>.json          {"branch": null|"dev", "version": 2, "createdAt": ...,
                                           "updatedAt": ..., "manifestSize": 491, "metadata": {}}
    <root>/_refs/branches/<name>.json     {"parentBranch": null|"dev", "identifier":
                                           {"version_mapping": [[3, "<hex uuid>"], ...]},
                                           "parentVersion": 3, "createAt": <unix s>,
                                           "manifestSize": 436, "metadata": {}}
    <root>/tree/<name>/_versions/...      the branch: a shallow clone with its own versions,
                                          transactions, deletion files and new data files

A ``/`` in a branch name is ``%2F`` in its ref file name and a directory level under ``tree/``.
Tags always live at the root, whichever branch they point into.  A version reference is, as in
pylance: an ``int`` (a version of the current branch), a ``str`` (a tag), or a tuple
``(branch, version)`` where ``None``/``"main"`` is the main branch and a ``None`` version the
branch's latest.
"""

import json
import re
import secrets
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from lance_ops.format._proto import table_pb2, transaction_pb2
from lance_ops.format.errors import (
    ArgumentTypeError,
    BranchError,
    CorruptFileError,
    DatasetNotFoundError,
    InvalidArgumentError,
    RefError,
    TagError,
)
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.table.bases import BasePath, location_key, store_location
from lance_ops.format.table.manifest import (
    Manifest,
    NamingScheme,
    is_detached_version,
    list_versions,
    manifest_path,
    write_manifest_if_absent,
    write_version_hint,
)

TAGS_DIR = "_refs/tags"
BRANCHES_DIR = "_refs/branches"
BRANCH_DIR = "tree"
MAIN = "main"

#: a version reference: a version number, a tag name, or ``(branch, version)``
VersionRef = int | str | tuple[str | None, int | None] | None

__all__ = [
    "BRANCHES_DIR",
    "BRANCH_DIR",
    "BranchError",
    "Branches",
    "RefError",
    "TAGS_DIR",
    "TagError",
    "Tags",
    "VersionRef",
    "branch_store",
    "clone_manifest_for_branch",
    "create_branch",
    "find_root",
    "list_branches",
    "list_tags",
    "normalize_branch",
    "resolve_reference",
    "validate_branch_name",
    "validate_tag_name",
]


_SEGMENT = re.compile(r"[A-Za-z0-9._-]+")


def validate_tag_name(name: str) -> str:
    """Tag names: alphanumerics, ``.``, ``-``, ``_``; not starting/ending with ``.``, no ``..``,
    not ending in ``.lock`` (upstream spec).  ``ValueError`` otherwise."""
    if (
        not isinstance(name, str)
        or not _SEGMENT.fullmatch(name)
        or name.startswith(".")
        or name.endswith(".")
        or ".." in name
        or name.endswith(".lock")
    ):
        raise TagError(f"invalid tag name {name!r}: use letters, digits, '.', '-', '_' (no '..', no leading '.')")
    return name


def validate_branch_name(name: str) -> str:
    """Branch names: ``/``-separated segments of alphanumerics, ``.``, ``-``, ``_``; no ``..``,
    no empty segment, not ``main``, not ending in ``.lock`` (upstream spec)."""
    if not isinstance(name, str) or not name or name == MAIN:
        raise BranchError(f"invalid branch name {name!r}" + (": 'main' is the default branch" if name == MAIN else ""))
    if ".." in name or "\\" in name or name.endswith(".lock") or name.startswith("/") or name.endswith("/"):
        raise BranchError(f"invalid branch name {name!r}")
    for seg in name.split("/"):
        if not _SEGMENT.fullmatch(seg) or seg == ".":
            raise BranchError(f"invalid branch name {name!r}: segment {seg!r}")
    return name


def normalize_branch(branch: str | None) -> str | None:
    """``None`` for the main branch (``"main"`` is an alias), else the validated name."""
    if branch is None or branch == MAIN:
        return None
    return validate_branch_name(branch)


def _tag_file(name: str) -> str:
    return f"{TAGS_DIR}/{validate_tag_name(name)}.json"


def _branch_file(name: str) -> str:
    return f"{BRANCHES_DIR}/{validate_branch_name(name).replace('/', '%2F')}.json"


def branch_store(root: ObjectStore, branch: str | None) -> ObjectStore:
    """The store of ``branch`` (``root`` itself for main): ``<root>/tree/<branch>``."""
    if branch is None:
        return root
    return ObjectStore(f"{root.uri.rstrip('/')}/{BRANCH_DIR}/{validate_branch_name(branch)}", root.storage_options)


def find_root(store: ObjectStore, branch: str | None) -> ObjectStore:
    """The root dataset store of a store that holds ``branch`` (``<root>/tree/<branch>``).

    Raises:
        CorruptFileError: the store's path does not end in ``tree/<branch>``.
    """
    if branch is None:
        return store
    suffix = f"/{BRANCH_DIR}/{branch}"
    uri = store.uri.rstrip("/")
    if not uri.endswith(suffix):
        raise CorruptFileError(store.uri, f"the manifest says branch {branch!r} but the path does not end in {suffix[1:]!r}")
    return ObjectStore(uri[: -len(suffix)], store.storage_options)


def _now_iso() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    text = value.replace("Z", "+00:00")
    # pylance writes nanoseconds; datetime keeps microseconds
    text = re.sub(r"(\.\d{6})\d+", r"\1", text)
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def _read_json(store: ObjectStore, rel: str, what: str) -> dict[str, Any]:
    data = store.read(rel)
    try:
        raw = json.loads(data)
        if not isinstance(raw, dict):
            raise ValueError(f"a JSON {type(raw).__name__}, not an object")
    except (ValueError, UnicodeDecodeError) as e:
        raise CorruptFileError(store.full_path(rel), f"not a {what} file: {e}") from e
    return raw


def _positive_int(raw: dict[str, Any], key: str, path: str, what: str) -> int:
    value = raw.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise CorruptFileError(path, f"not a {what} file: {key} {value!r} is not a positive integer")
    return value


def _load_tag(root: ObjectStore, name: str) -> dict[str, Any]:
    rel = _tag_file(name)
    raw = _read_json(root, rel, "tag")
    path = root.full_path(rel)
    version = _positive_int(raw, "version", path, "tag")
    branch = raw.get("branch")
    if branch is not None and not isinstance(branch, str):
        raise CorruptFileError(path, f"not a tag file: branch {branch!r} is not a string")
    size = raw.get("manifestSize", raw.get("manifest_size"))
    return {
        "branch": normalize_branch(branch) if branch is not None else None,
        "version": version,
        "created_at": _parse_time(raw.get("createdAt", raw.get("created_at"))),
        "updated_at": _parse_time(raw.get("updatedAt", raw.get("updated_at"))),
        "manifest_size": size if isinstance(size, int) else None,
        "metadata": dict(raw.get("metadata") or {}),
    }


def list_tags(root: ObjectStore) -> dict[str, dict[str, Any]]:
    """Every tag: ``{name: {"branch", "version", "created_at", "updated_at", "manifest_size",
    "metadata"}}`` (pylance's ``Tag`` keys).

    Raises:
        CorruptFileError: a tag file does not decode (cleanup must not guess what it protects).
    """
    return _list_refs(root, TAGS_DIR, "tag", lambda stem: stem, validate_tag_name, _load_tag)


def _load_branch(root: ObjectStore, name: str) -> dict[str, Any]:
    rel = _branch_file(name)
    raw = _read_json(root, rel, "branch")
    path = root.full_path(rel)
    parent = raw.get("parentBranch", raw.get("parent_branch"))
    if parent is not None and not isinstance(parent, str):
        raise CorruptFileError(path, f"not a branch file: parentBranch {parent!r} is not a string")
    key = "parentVersion" if "parentVersion" in raw else "parent_version"
    mapping = (raw.get("identifier") or {}).get("version_mapping") or []
    size = raw.get("manifestSize", raw.get("manifest_size"))
    return {
        "parent_branch": normalize_branch(parent),
        "branch_identifier": [(int(v), str(u)) for v, u in mapping],
        "parent_version": _positive_int(raw, key, path, "branch"),
        "create_at": raw.get("createAt", raw.get("create_at")),
        "manifest_size": size if isinstance(size, int) else None,
        "metadata": dict(raw.get("metadata") or {}),
    }


def list_branches(root: ObjectStore) -> dict[str, dict[str, Any]]:
    """Every branch: ``{name: {"parent_branch", "branch_identifier", "parent_version",
    "create_at", "manifest_size", "metadata"}}`` (pylance's ``Branch`` keys).

    Raises:
        CorruptFileError: a branch file does not decode.
    """
    return _list_refs(root, BRANCHES_DIR, "branch", lambda stem: stem.replace("%2F", "/"), validate_branch_name,
                      _load_branch)


def _list_refs(
    root: ObjectStore,
    directory: str,
    kind: str,
    name_of: Callable[[str], str],
    validate: Callable[[str], object],
    load: Callable[[ObjectStore, str], dict[str, Any]],
) -> dict[str, dict[str, Any]]:
    """Every ``<directory>/<name>.json`` ref, loaded; one deleted since the listing is skipped."""
    out: dict[str, dict[str, Any]] = {}
    for fname in sorted(root.list_dir(directory)):
        if fname.endswith(".json"):
            name = name_of(fname[: -len(".json")])
            try:
                validate(name)
            except ValueError:
                raise CorruptFileError(root.full_path(f"{directory}/{fname}"), f"not a valid {kind} name") from None
            try:
                out[name] = load(root, name)
            except FileNotFoundError:
                continue  # deleted since the listing
    return out


def _latest(root: ObjectStore, branch: str | None) -> int:
    versions = list_versions(branch_store(root, branch))[1]
    if not versions:
        where = f"branch {branch!r}" if branch else "the main branch"
        raise DatasetNotFoundError(f"{root.uri}: {where} has no versions")
    return versions[-1]


def resolve_reference(
    root: ObjectStore,
    reference: VersionRef,
    *,
    current_branch: str | None = None,
    current_version: int | None = None,
    latest: Callable[[str | None], int] | None = None,
) -> tuple[str | None, int]:
    """``(branch, version)`` a version reference names (``None`` branch = main).

    ``reference``: ``None`` (``current_version``, else the latest of ``current_branch``), an
    ``int`` (a version of ``current_branch``), a tag name, or ``(branch, version)``.

    Raises:
        TagError: no such tag.  ValueError/TypeError: a malformed reference.
    """
    latest = latest or (lambda b: _latest(root, b))
    if reference is None:
        if current_version is not None:
            return current_branch, current_version
        return current_branch, latest(current_branch)
    if isinstance(reference, bool):
        raise ArgumentTypeError(f"a version must be an int, a tag name or (branch, version), got {reference!r}")
    if isinstance(reference, int):
        if reference < 0:
            raise InvalidArgumentError(f"version must be positive, got {reference}")
        return current_branch, reference
    if isinstance(reference, str):
        if reference.isdigit():
            return current_branch, int(reference)  # "3" from a config file or a Spark option
        try:
            tag = _load_tag(root, reference)
        except FileNotFoundError:
            raise TagError(f"{root.uri}: tag {reference!r} does not exist") from None
        return tag["branch"], int(tag["version"])
    if isinstance(reference, tuple | list) and len(reference) == 2:
        branch = normalize_branch(reference[0])
        version = reference[1]
        if version is None:
            return branch, latest(branch)
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise ArgumentTypeError(f"the version of a (branch, version) reference must be an int or None, got {version!r}")
        return branch, version
    raise ArgumentTypeError(f"a version must be an int, a tag name or (branch, version), got {reference!r}")


def _manifest_size(root: ObjectStore, branch: str | None, version: int) -> int:
    """Size of the manifest of ``version`` on ``branch``; TagError when it does not exist."""
    store = branch_store(root, branch)
    scheme, versions = list_versions(store)
    if is_detached_version(version):
        scheme = NamingScheme.V2
    elif version not in versions or scheme is None:
        where = f"{branch}:{version}" if branch else f"main:{version}"
        raise TagError(f"{root.uri}: version {where} does not exist")
    return store.size(manifest_path(scheme, version))


class Tags:
    """``ds.tags``: named versions (of any branch) that cleanup keeps, as pylance's ``Tags``.

    Args:
        root: the root dataset's store (tags always live there).
        branch, version: the handle's branch and version (what an ``int`` or ``None``
            reference means).
    """

    def __init__(self, root: ObjectStore, branch: str | None = None, version: int | None = None) -> None:
        self._root = root
        self._branch = branch
        self._version = version

    def _resolve(self, reference: VersionRef) -> tuple[str | None, int]:
        return resolve_reference(self._root, reference, current_branch=self._branch, current_version=self._version)

    def list(self) -> dict[str, dict[str, Any]]:
        """``{name: {"branch", "version", "created_at", "updated_at", "manifest_size", "metadata"}}``."""
        return list_tags(self._root)

    def list_ordered(self, order: str | None = None) -> "list[tuple[str, dict[str, Any]]]":
        """Tags sorted by version (``"desc"``, the default, or ``"asc"``), then by update time."""
        if order not in (None, "asc", "desc"):
            raise InvalidArgumentError(f"order must be 'asc' or 'desc', got {order!r}")
        items = list(self.list().items())
        epoch = datetime.fromtimestamp(0, UTC)
        items.sort(key=lambda kv: (kv[1]["version"], kv[1]["updated_at"] or epoch), reverse=order != "asc")
        return items

    def get(self, name: str) -> tuple[str | None, int]:
        """``(branch, version)`` of a tag (``None`` = main)."""
        try:
            tag = _load_tag(self._root, name)
        except FileNotFoundError:
            raise TagError(f"{self._root.uri}: tag {name!r} does not exist") from None
        return tag["branch"], int(tag["version"])

    def get_version(self, name: str) -> int:
        """The version number of a tag (of its branch; see :meth:`get` for the branch)."""
        return self.get(name)[1]

    def _write(self, name: str, branch: str | None, version: int, created: str | None) -> bytes:
        now = _now_iso()
        body = {
            "branch": branch,
            "version": version,
            "createdAt": created or now,
            "updatedAt": now,
            "manifestSize": _manifest_size(self._root, branch, version),
            "metadata": {},
        }
        return json.dumps(body, indent=2).encode()

    def create(self, name: str, reference: VersionRef = None) -> None:
        """Tag a version: ``reference`` as in pylance (int, tag name, ``(branch, version)``)."""
        rel = _tag_file(name)
        branch, version = self._resolve(reference)
        if not self._root.put_if_absent(rel, self._write(name, branch, version, None)):
            raise TagError(f"{self._root.uri}: tag {name!r} already exists")

    def update(self, name: str, reference: VersionRef = None) -> None:
        """Point an existing tag at another version (keeps its creation time)."""
        rel = _tag_file(name)
        try:
            old = _read_json(self._root, rel, "tag")
        except FileNotFoundError:
            raise TagError(f"{self._root.uri}: tag {name!r} does not exist") from None
        branch, version = self._resolve(reference)
        self._root.put(rel, self._write(name, branch, version, old.get("createdAt")))

    def delete(self, name: str) -> None:
        rel = _tag_file(name)
        if not self._root.exists(rel):
            raise TagError(f"{self._root.uri}: tag {name!r} does not exist")
        self._root.delete(rel)


class Branches:
    """``ds.branches``: list and delete branches, as pylance's ``Branches``."""

    def __init__(self, root: ObjectStore) -> None:
        self._root = root

    def list(self) -> dict[str, dict[str, Any]]:
        return list_branches(self._root)

    def list_ordered(self, order: str | None = None) -> "list[tuple[str, dict[str, Any]]]":
        """Branches sorted by parent version (``"desc"`` by default, or ``"asc"``)."""
        if order not in (None, "asc", "desc"):
            raise InvalidArgumentError(f"order must be 'asc' or 'desc', got {order!r}")
        items = list(self.list().items())
        items.sort(key=lambda kv: (kv[1]["parent_version"], kv[0]), reverse=order != "asc")
        return items

    def delete(self, name: str) -> None:
        """Delete a branch: its ref file and its directory ``tree/<name>``.

        Raises:
            BranchError: no such branch, or tags or other branches still point into it (as
                pylance, which refuses while tags reference it).
        """
        branches = self.list()
        name = validate_branch_name(name)
        if name not in branches:
            raise BranchError(f"{self._root.uri}: branch {name!r} does not exist")
        tagged = sorted((t, v["version"]) for t, v in list_tags(self._root).items() if v["branch"] == name)
        if tagged:
            raise BranchError(f"{self._root.uri}: branch {name!r} is referenced by tags {tagged}; delete them first")
        children = sorted(b for b, info in branches.items() if info["parent_branch"] == name)
        if children:
            raise BranchError(f"{self._root.uri}: branches {children} were created from branch {name!r}; delete them first")
        self._root.delete(_branch_file(name))
        store = branch_store(self._root, name)
        # only the branch's own directories: ``tree/<name>/<sub>`` may hold another branch
        for sub in ("_versions", "_transactions", "_deletions", "data", "_indices"):
            for rel, _size, _mtime in list(store.list_files(sub)):
                store.delete(rel)


def new_branch_identifier(parent: dict[str, Any] | None, parent_version: int) -> list[list[Any]]:
    """The ``identifier.version_mapping`` of a new branch: its parent's, plus this fork."""
    mapping = [list(x) for x in (parent or {}).get("branch_identifier", [])]
    mapping.append([parent_version, secrets.token_hex(16)])
    return mapping


def write_branch_file(
    root: ObjectStore, name: str, parent_branch: str | None, parent_version: int, manifest_size: int,
    identifier: list[list[Any]],
) -> bool:
    """Create ``_refs/branches/<name>.json``; False if the branch already exists."""
    body = {
        "parentBranch": parent_branch,
        "identifier": {"version_mapping": identifier},
        "parentVersion": parent_version,
        "createAt": int(time.time()),
        "manifestSize": manifest_size,
        "metadata": {},
    }
    return root.put_if_absent(_branch_file(name), json.dumps(body, indent=2).encode())


def clone_manifest_for_branch(
    source: Manifest, source_store: ObjectStore, source_branch: str | None, name: str, transaction_file: str
) -> Manifest:
    """The first manifest of branch ``name``: ``source`` (a version of ``source_branch`` at
    ``source_store``) with every file the source keeps in its own directory named through a
    base path to that directory, as pylance's shallow clone writes it."""
    bases = dict(source.bases)
    location = store_location(source_store)
    own = next((b.id for b in bases.values() if b.is_dataset_root and location_key(b.path) == location_key(location)), None)
    if own is None:
        own = max(bases, default=-1) + 1
        bases[own] = BasePath(own, location, source_branch, True)
    frags = []
    for f in source.fragments:
        files = tuple(df if df.base_id is not None else replace(df, base_id=own) for df in f.files)
        d = f.deletion_file
        if d is not None and d.base_id is None:
            d = replace(d, base_id=own)
        frags.append(f.with_changes(files=files, deletion_file=d))
    index = source.index_section
    if index:
        sec = table_pb2.IndexSection()
        sec.ParseFromString(index)
        for idx in sec.indices:
            if not idx.HasField("base_id"):
                idx.base_id = own
        index = sec.SerializeToString()
    m = source.with_changes(
        fragments=tuple(frags),
        base_paths=tuple(bases[i].to_proto().SerializeToString() for i in sorted(bases)),
        branch=name,
        index_section=index,
        transaction_file=transaction_file,
        timestamp_ns=time.time_ns(),
        tag="",
    )
    reader, writer = m.computed_flags()
    return m.with_changes(reader_feature_flags=reader, writer_feature_flags=writer)


def create_branch(
    root: ObjectStore, name: str, source: Manifest, source_branch: str | None
) -> ObjectStore:
    """Create branch ``name`` from version ``source.version`` of ``source_branch`` (a shallow
    clone, as pylance's ``create_branch``): the branch's first version has the source's number.

    Returns:
        the branch's store (``<root>/tree/<name>``).

    Raises:
        BranchError: the branch exists already.
    """
    name = validate_branch_name(name)
    branches = list_branches(root)
    if name in branches:
        raise BranchError(f"{root.uri}: branch {name!r} already exists")
    store = branch_store(root, name)
    if list_versions(store)[1]:
        raise BranchError(f"{store.uri}: a dataset already exists where branch {name!r} would live")
    source_store = branch_store(root, source_branch)
    txn = transaction_pb2.Transaction(read_version=source.version, uuid=str(uuid.uuid4()))
    txn.clone.is_shallow = True
    if source_branch is not None:
        txn.clone.ref_name = source_branch
    txn.clone.ref_version = source.version
    txn.clone.ref_path = store_location(source_store)
    txn.clone.branch_name = name
    txn_file = f"{txn.read_version}-{txn.uuid}.txn"
    manifest = clone_manifest_for_branch(source, source_store, source_branch, name, txn_file)
    store.put(f"_transactions/{txn_file}", txn.SerializeToString(), atomic=False)
    if not write_manifest_if_absent(store, manifest, txn, NamingScheme.V2):
        raise BranchError(f"{store.uri}: a dataset already exists where branch {name!r} would live")
    write_version_hint(store, manifest.version)
    size = store.size(manifest_path(NamingScheme.V2, manifest.version))
    identifier = new_branch_identifier(branches.get(source_branch) if source_branch else None, source.version)
    if not write_branch_file(root, name, source_branch, source.version, size, identifier):
        raise BranchError(f"{root.uri}: branch {name!r} already exists")
    return store
