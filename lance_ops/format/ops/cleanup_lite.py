"""Routine cleanup (Delta's VACUUM LITE): what to remove, derived from metadata, no data listing.

Versions are read oldest first, only while they can go (older than the cut, not among the
newest ``retain_versions``); the first one that cannot is the *boundary*, and every version
from it on stays.  A data, deletion, index or ``.txn`` file of a removed version goes unless a
version that stays names it.  Files are immutable and uniquely named, so a file lives in one
run of versions: if the boundary does not name it, no later version does, unless a later
commit brings it back -- a ``Restore`` (it names the restored version's files again) or an
operation whose own fragments name it.  Those are found in the transactions committed since
(``_transactions/`` is listed, not ``data/``; each is parsed for its kind and searched for data
file paths, never decoded into fragments); a transaction of a kind that cannot be judged
(clone, base changes, an undecodable one) makes it read the manifests of every version from
the boundary on.  Versions pinned below the boundary
(tags, branch sources, leases) stay and their manifests count as well; other branches and
detached versions pin files through :mod:`..lineage`.

The work grows with the removed versions' files and the number of versions, never with the
table's total file count.
"""

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from lance_ops.format._proto import transaction_pb2
from lance_ops.format.errors import DatasetNotFoundError
from lance_ops.format.file.blob_columns import is_blob_field
from lance_ops.format.index.metadata import INDICES_DIR
from lance_ops.format.index.unreferenced import branch_index_uuids, index_uuids
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.table.leases import Lease
from lance_ops.format.table.lineage import Pins, external_pins
from lance_ops.format.table.manifest import Manifest, NamingScheme, read_manifest
from lance_ops.format.txn.orphans import FileSet, manifest_files
from lance_ops.format.txn.transaction import TRANSACTIONS_DIR

__all__ = ["LitePlan", "lite_candidates", "plan_lite"]


@dataclass
class LitePlan:
    """The versions routine cleanup removes and what stays."""

    drop: list[int]
    dropped: list[Manifest]
    #: the boundary and the versions pinned below it
    retained: list[Manifest]
    pins: Pins
    #: "tag <name>", "branch <name>", "lease <id>" that kept a version
    protected: set[str]
    leased: set[int] = field(default_factory=set)
    #: files named again by transactions committed since the boundary
    reintroduced: FileSet = field(default_factory=FileSet)


def _read(store: ObjectStore, scheme: NamingScheme, v: int) -> Manifest | None:
    try:
        return read_manifest(store, v, scheme).manifest
    except DatasetNotFoundError:
        return None  # removed meanwhile by another cleanup


def plan_lite(
    store: ObjectStore, scheme: NamingScheme, versions: list[int], retain_versions: int, cut_ns: int,
    leases: Iterable[Lease],
) -> LitePlan | None:
    """Read versions oldest first up to the boundary; None when nothing can go."""
    newest = set(versions[-retain_versions:])
    below: dict[int, Manifest] = {}
    boundary: Manifest | None = None
    for v in versions:
        m = None if v in newest else _read(store, scheme, v)
        if v in newest or (m is not None and m.timestamp_ns >= cut_ns):
            boundary = m or _read(store, scheme, v)
            if boundary is not None:
                break
            continue
        if m is not None:
            below[v] = m
    if boundary is None or not below:
        return None
    pins = external_pins(store, boundary.branch)
    leases = list(leases)
    who = {v: pins.versions.get(v, []) + [f"lease {lease.id}" for lease in leases if lease.pins(v)] for v in below}
    drop = [v for v in below if not who[v]]
    kept = [boundary] + [below[v] for v in below if who[v]]
    leased = {v for v in below if any(lease.pins(v) for lease in leases)}
    plan = LitePlan(drop, [below[v] for v in drop], kept, pins, {w for v in below for w in who[v]}, leased)
    if not drop:
        return plan  # nothing goes; the plan says what kept it
    named = {m.transaction_file for m in plan.dropped + kept if m.transaction_file}
    plan.reintroduced = _reintroduced_since(store, scheme, named, below, boundary.version, versions[-1])
    return plan


#: operations whose files are new, or named by their data file paths (found in the raw bytes)
_PATH_NAMED = frozenset({"append", "delete", "overwrite", "create_index", "rewrite", "merge", "reserve_fragments",
                         "update", "project", "update_config", "data_replacement"})
#: a data file path inside transaction bytes; a match may start with the string's length byte
_DATA_PATH = re.compile(rb"[A-Za-z0-9_./-]+\.lance")


def _brought_back(raw: bytes, manifest_of: Callable[[int], Manifest | None]) -> FileSet | None:
    """Files a committed transaction may name again: a ``Restore`` names its target's files;
    other operations name data files by path (every ``*.lance`` string in the bytes, which
    over-approximates, so only keeps more); None for an operation that cannot be judged (then
    the manifests are read instead).  Deletion files and indices come back only through a
    restore: a commit that keeps one names it in the boundary too."""
    t = transaction_pb2.Transaction()
    try:
        t.ParseFromString(raw)
    except Exception:  # noqa: BLE001 - undecodable: judge by the manifests
        return None
    kind = t.WhichOneof("operation")
    if kind == "restore":
        m = manifest_of(t.restore.version)
        return manifest_files(m) if m is not None else FileSet()
    if kind not in _PATH_NAMED:
        return None
    found = {m.decode("ascii") for m in _DATA_PATH.findall(raw)}
    return FileSet(data={f"data/{p}" for name in found for p in (name, name[1:])})


def _reintroduced_since(
    store: ObjectStore, scheme: NamingScheme, named: set[str], below: dict[int, Manifest], first: int, last: int
) -> FileSet:
    """Files the transactions not named by ``named`` manifests name (commits since the boundary,
    and uncommitted ones: counting those too only keeps more)."""
    def manifest_of(v: int) -> Manifest | None:
        return below.get(v) or _read(store, scheme, v)

    out = FileSet()
    for name in store.list_dir(TRANSACTIONS_DIR):
        if name in named or not name.endswith(".txn"):
            continue
        rel = f"{TRANSACTIONS_DIR}/{name}"
        try:
            files = _brought_back(store.read(rel), manifest_of)
        except FileNotFoundError:
            continue
        if files is None:  # not derivable: every version from the boundary on, by its manifest
            return _files_of_range(store, scheme, first, last)
        out |= files
    return out


def _files_of_range(store: ObjectStore, scheme: NamingScheme, first: int, last: int) -> FileSet:
    out = FileSet()
    for v in range(first + 1, last + 1):
        m = _read(store, scheme, v)
        if m is not None:
            out |= manifest_files(m)
    return out


def _txn(m: Manifest) -> set[str]:
    return {f"{TRANSACTIONS_DIR}/{m.transaction_file}"} if m.transaction_file else set()


def _sizes(manifests: Iterable[Manifest]) -> dict[str, int]:
    """Data file sizes the manifests record (0 = not recorded)."""
    return {f"data/{df.path}": df.file_size_bytes for m in manifests for f in m.fragments for df in f.files
            if df.base_id is None}


def lite_candidates(store: ObjectStore, plan: LitePlan) -> tuple[dict[str, int], dict[str, int]]:
    """``(files, index files)`` routine cleanup removes, path -> size; adds to ``plan.protected``
    the branches and detached versions that kept one."""
    kept = FileSet()
    kept_txn: set[str] = set()
    for m in plan.retained:
        kept |= manifest_files(m)
        kept_txn |= _txn(m)
    kept |= plan.reintroduced
    gone = FileSet()
    txns: set[str] = set()
    for m in plan.dropped:
        gone |= manifest_files(m)
        txns |= _txn(m)
    gone = gone - kept
    files: dict[str, int] = {}
    known = _sizes(plan.dropped)
    sidecars = any(is_blob_field(f) for m in plan.dropped for f in m.schema.top_level())
    for rel in sorted(gone.data | gone.deletions | (txns - kept_txn)):
        if _pinned(store, plan, rel):
            continue
        size = known.get(rel) or _size(store, rel)
        if size is None:
            continue  # gone already (another cleanup)
        files[rel] = size
        if sidecars and rel.endswith(".lance"):
            files.update({r: s for r, s, _m in store.list_files(rel[: -len(".lance")])})
    index_files: dict[str, int] = {}
    for uuid in sorted(gone.indices - branch_index_uuids(store)):
        for rel, size, _mtime in store.list_files(f"{INDICES_DIR}/{uuid}"):
            if not _pinned(store, plan, rel):
                index_files[rel] = size
    return files, index_files


def _pinned(store: ObjectStore, plan: LitePlan, rel: str) -> bool:
    needed_by = plan.pins.file_pinned_by(store, rel)
    plan.protected |= needed_by
    return bool(needed_by)


def _size(store: ObjectStore, rel: str) -> int | None:
    try:
        return store.size(rel)
    except FileNotFoundError:
        return None


def files_of_versions(manifests: Iterable[Manifest]) -> tuple[set[str], set[str]]:
    """``(files, index uuids)`` the manifests name in the dataset's root (``.txn`` included)."""
    files: set[str] = set()
    uuids: set[str] = set()
    for m in manifests:
        fs = manifest_files(m)
        files |= fs.data | fs.deletions | _txn(m)
        uuids |= index_uuids(m)
    return files, uuids
