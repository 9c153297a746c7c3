"""Apply an operation to the previous manifest: the next version's manifest (docs/FORMAT.md §9).

Fragment ids and stable row ids are assigned here, at commit time, so concurrent writers
never collide: new fragments get ``max_fragment_id + 1, ...``; with stable row ids new rows
get ``next_row_id, ...`` and both version sequences start at the new version.
"""

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import singledispatch

import numpy as np

from lance_ops.format.errors import (
    IncompatibleTransactionError,
    InvalidArgumentError,
    UnsupportedFeatureError,
)
from lance_ops.format.index import coverage
from lance_ops.format.index.metadata import decode_index_section, encode_index_section
from lance_ops.format.schema import LanceSchema
from lance_ops.format.table import rowids
from lance_ops.format.table.file_versions import READABLE_FILE_VERSIONS, normalize_storage_version
from lance_ops.format.table.fragment import DataFile, FragmentMetadata
from lance_ops.format.table.manifest import FLAG_MIXED_FILE_VERSIONS, FLAG_STABLE_ROW_IDS, Manifest
from lance_ops.format.txn.operations import (
    Append,
    CreateIndex,
    DataReplacement,
    Delete,
    Merge,
    MetadataUpdate,
    Operation,
    Overwrite,
    Project,
    ReserveFragments,
    Restore,
    Rewrite,
    Update,
    UpdateConfig,
)
from lance_ops.format.txn.transaction import Transaction


class _Ids:
    """Hands out fragment ids and row ids for one new manifest."""

    def __init__(self, max_fragment_id: int | None, next_row_id: int, stable: bool, version: int) -> None:
        self.next_fragment_id = -1 if max_fragment_id is None else max_fragment_id
        self.next_row_id = next_row_id
        self.stable = stable
        self.version = version

    def new_fragment(self, frag: FragmentMetadata, *, keep_id: bool = False) -> FragmentMetadata:
        """``frag`` with the next fragment id (or its own, ``keep_id``) and, with stable row ids,
        ids for its rows past its row-id sequence and both version sequences."""
        if not keep_id:
            self.next_fragment_id += 1
        changes: dict[str, object] = {"id": frag.id if keep_id else self.next_fragment_id}
        if self.stable:
            n = frag.physical_rows
            kept = np.empty(0, np.uint64) if frag.row_ids is None else rowids.decode_row_ids(frag.row_ids)
            if kept.size < n:
                # rows past the sequence are new (pylance's merge_insert writes matched rows, with
                # their ids, then inserted ones into one fragment): fresh ids, this version
                fresh = np.arange(self.next_row_id, self.next_row_id + n - kept.size, dtype=np.uint64)
                changes["row_ids"] = rowids.encode_row_ids(np.concatenate([kept, fresh]))
                self.next_row_id += fresh.size
            if frag.created_at_versions is None:
                changes["created_at_versions"] = rowids.constant_versions(n, self.version)
            elif kept.size < n:
                created = rowids.decode_versions(frag.created_at_versions)
                changes["created_at_versions"] = rowids.encode_versions(
                    np.concatenate([created, np.full(n - created.size, self.version, np.uint64)])
                )
            changes["last_updated_at_versions"] = rowids.constant_versions(n, self.version)
        else:
            changes.update(row_ids=None, created_at_versions=None, last_updated_at_versions=None)
        return frag.with_changes(**changes)


def _created_versions_for(prev: Manifest, row_ids: np.ndarray) -> bytes:
    """created_at of preserved row ids, looked up in the previous version (vectorised)."""
    all_ids, all_created = [], []
    for f in prev.fragments:
        if f.row_ids is None:
            continue
        ids = rowids.fragment_row_ids(f, prev.source)
        all_ids.append(ids)
        if f.created_at_versions is not None:
            all_created.append(rowids.fragment_versions(f, prev.source, created=True))
        else:
            all_created.append(np.ones(len(ids), dtype=np.uint64))
    if not all_ids:
        return rowids.constant_versions(len(row_ids), 1)
    ids = np.concatenate(all_ids)
    created = np.concatenate(all_created)
    order = np.argsort(ids, kind="stable")
    ids, created = ids[order], created[order]
    pos = np.searchsorted(ids, row_ids)
    pos = np.clip(pos, 0, len(ids) - 1)
    found = ids[pos] == row_ids
    out = np.where(found, created[pos], np.uint64(prev.version))
    return rowids.encode_versions(out.astype(np.uint64))


@dataclass(frozen=True)
class _Build:
    """What applying one operation needs: the previous manifest, the transaction, id counters."""

    prev: Manifest | None
    txn: Transaction
    version: int
    stable: bool
    ids: _Ids
    data_storage_version: str | None
    load_version: Callable[[int], Manifest] | None

    @property
    def base(self) -> Manifest:
        """The previous manifest; only an Overwrite may create a dataset."""
        if self.prev is None:
            raise IncompatibleTransactionError(
                f"a {self.txn.operation.name} cannot create a dataset; write an Overwrite first"
            )
        return self.prev


def build_manifest(
    prev: Manifest | None,
    txn: Transaction,
    version: int,
    *,
    enable_stable_row_ids: bool = False,
    data_storage_version: str | None = None,
    load_version: Callable[[int], Manifest] | None = None,
) -> Manifest:
    """The manifest of ``version`` = ``txn.operation`` applied to ``prev`` (None = new dataset).

    An Overwrite takes the file version of its data files (they must agree); without files, the
    previous version's, else ``data_storage_version`` (default: lance_ops' default).
    """
    stable = prev.uses_stable_row_ids if prev is not None else enable_stable_row_ids
    ids = _Ids(
        prev.max_fragment_id if prev is not None else None,
        prev.next_row_id if prev is not None else 0,
        stable,
        version,
    )
    b = _Build(prev, txn, version, stable, ids, data_storage_version, load_version)
    new, frags = _apply(txn.operation, b)
    new = _without_dropped_field_indices(new)
    if _check_file_versions(frags, prev, new.data_storage_version, mixing=_may_mix_file_versions(txn.operation)):
        new = new.with_changes(reader_feature_flags=new.reader_feature_flags | FLAG_MIXED_FILE_VERSIONS)
    max_id = max([f.id for f in frags] + [ids.next_fragment_id, -1])
    new = new.with_changes(
        fragments=tuple(sorted(frags, key=lambda f: f.id)),
        version=version,
        timestamp_ns=time.time_ns(),
        max_fragment_id=max_id if max_id >= 0 else None,
        next_row_id=ids.next_row_id,
        transaction_file=txn.file_name,
        tag="",
        source="",  # not written yet; the commit loop names the file it lands in
    )
    reader, writer = new.computed_flags()
    return new.with_changes(reader_feature_flags=reader, writer_feature_flags=writer)


_Applied = tuple[Manifest, list[FragmentMetadata]]


@singledispatch
def _apply(op: Operation, b: _Build) -> _Applied:
    """The next manifest (before its fragments are set) and its fragments: ``op`` applied.

    By default (Unmodelled): refused, lance_ops does not commit it.
    """
    b.base  # noqa: B018 - a new dataset starts with an Overwrite (that error first)
    raise IncompatibleTransactionError(f"lance_ops cannot commit a {op.name} operation")


@_apply.register
def _(op: Overwrite, b: _Build) -> _Applied:
    prev = b.prev
    config = dict(prev.config) if prev is not None else {}
    if op.config_upsert_values:
        config.update(op.config_upsert_values)
    if op.enable_stable_row_ids:  # migration in place: every fragment gets row ids from here on
        b.ids.stable = True
    flags = FLAG_STABLE_ROW_IDS if b.stable or op.enable_stable_row_ids else 0
    migrating = op.enable_stable_row_ids and prev is not None
    if migrating:  # the same files: a mixed table stays mixed
        flags |= prev.reader_feature_flags & FLAG_MIXED_FILE_VERSIONS
    new = Manifest(
        schema=op.schema,
        fragments=(),
        version=b.version,
        reader_feature_flags=flags,
        writer_feature_flags=flags,
        max_fragment_id=prev.max_fragment_id if prev is not None else None,
        next_row_id=prev.next_row_id if prev is not None else 0,
        data_storage_version=prev.data_storage_version if migrating else _overwrite_file_version(
            op, prev, b.data_storage_version),
        config=config,
        table_metadata=dict(prev.table_metadata) if prev is not None else {},
        # a branch stays a branch: its name and the base paths its history may still use
        base_paths=prev.base_paths if prev is not None else (),
        branch=prev.branch if prev is not None else None,
        index_section=op.index_section if op.enable_stable_row_ids else None,
    )
    # a migration keeps the fragments (their deletion files are named by fragment id)
    return new, [b.ids.new_fragment(f, keep_id=op.enable_stable_row_ids) for f in op.fragments]


@_apply.register
def _(op: Restore, b: _Build) -> _Applied:
    base = b.base
    if b.load_version is None:
        raise ValueError("Restore needs load_version")
    old = b.load_version(op.version)
    new = old.with_changes(
        max_fragment_id=max(x for x in (base.max_fragment_id, old.max_fragment_id, -1) if x is not None),
        next_row_id=max(base.next_row_id, old.next_row_id),
    )
    b.ids.next_fragment_id = new.max_fragment_id if new.max_fragment_id is not None else -1
    return new, list(old.fragments)


@_apply.register
def _(op: Append, b: _Build) -> _Applied:
    base = b.base
    return base, [*base.fragments, *(b.ids.new_fragment(f) for f in op.fragments)]


@_apply.register
def _(op: Delete, b: _Build) -> _Applied:
    base = b.base
    return base, _replace(list(base.fragments), op.updated_fragments, removed=op.deleted_fragment_ids)


@_apply.register
def _(op: Update, b: _Build) -> _Applied:
    base = b.base
    frags = _replace(list(base.fragments), op.updated_fragments, removed=op.removed_fragment_ids)
    pure: list[int] = []  # new fragments whose every row kept its row id
    for f in op.new_fragments:
        all_ids_kept = f.row_ids is not None and rowids.decode_row_ids(f.row_ids).size == f.physical_rows
        if b.stable and f.row_ids is not None and f.created_at_versions is None:
            preserved = rowids.decode_row_ids(f.row_ids, path=f"transaction {b.txn.file_name}")
            f = f.with_changes(created_at_versions=_created_versions_for(base, preserved))
        nf = b.ids.new_fragment(f)
        if all_ids_kept:
            pure.append(nf.id)
        frags.append(nf)
    new = _with_indices(base, lambda idx: coverage.update_coverage(
        idx,
        stable=b.stable,
        original_fragment_ids=[*op.removed_fragment_ids, *(f.id for f in op.updated_fragments)],
        updated_fragment_ids=[f.id for f in op.updated_fragments],
        pure_rewrite_fragment_ids=pure,
        fields_for_preserving_frag_bitmap=op.fields_for_preserving_frag_bitmap,
        fields_modified=op.fields_modified,
    ))
    return new, frags


@_apply.register
def _(op: Rewrite, b: _Build) -> _Applied:
    base = b.base
    old_ids = {f.id for g in op.groups for f in g.old_fragments}
    # Old fragments already gone were deleted by a transaction this one was rebased over.
    kept = [f for f in base.fragments if f.id not in old_ids]
    # New fragments keep the ids reserved for them (ReserveFragments, as pylance);
    # a placeholder 0 or a colliding id gets a fresh one.
    taken = {f.id for f in kept}
    new_frags = []
    moved: list[coverage.Group] = []
    for g in op.groups:
        group_ids = []
        for f in g.new_fragments:
            if f.id == 0 or f.id in taken:
                b.ids.next_fragment_id += 1
                f = f.with_changes(id=b.ids.next_fragment_id)
            taken.add(f.id)
            new_frags.append(f)
            group_ids.append(f.id)
        moved.append(([f.id for f in g.old_fragments], group_ids))
    remapped = {r.old_id: (r.new_id, tuple(r.files)) for r in op.rewritten_indices}
    tomb = [f.id for g in op.groups for f in g.old_fragments if f.num_deleted_rows > 0]
    new = _with_indices(base, lambda idx: coverage.rewrite_coverage(
        idx, moved, stable=b.stable, remapped=remapped, tombstone_fragments=tomb
    ))
    return new, kept + new_frags


@_apply.register
def _(op: ReserveFragments, b: _Build) -> _Applied:
    base = b.base
    b.ids.next_fragment_id += op.num_fragments
    return base, list(base.fragments)


@_apply.register
def _(op: UpdateConfig, b: _Build) -> _Applied:
    base = b.base
    config = {k: v for k, v in base.config.items() if k not in set(op.delete_keys)}
    config.update(op.upsert_values)
    if op.table_metadata_updates is not None:
        base = base.with_changes(table_metadata=op.table_metadata_updates.apply(base.table_metadata))
    if op.field_metadata_updates:
        base = base.with_changes(schema=_with_field_metadata(base.schema, op.field_metadata_updates))
    if op.schema_metadata_updates is None:
        return base.with_changes(config=config), list(base.fragments)
    metadata = {} if op.schema_metadata_replace else dict(base.schema.metadata)
    for k, v in op.schema_metadata_updates.items():
        if v is None:
            metadata.pop(k, None)
        else:
            metadata[k] = v.encode()
    schema = dataclasses.replace(base.schema, metadata=metadata)
    return base.with_changes(config=config, schema=schema), list(base.fragments)


def _with_field_metadata(schema: LanceSchema, updates: Mapping[int, MetadataUpdate]) -> LanceSchema:
    """``schema`` with the metadata of the fields ``updates`` names changed (values as bytes)."""
    fields = []
    for f in schema.fields:
        if f.id in updates:
            current = {k: bytes(v).decode() for k, v in f.metadata.items()}
            f = dataclasses.replace(f, metadata={k: v.encode() for k, v in updates[f.id].apply(current).items()})
        fields.append(f)
    return dataclasses.replace(schema, fields=tuple(fields))


@_apply.register
def _(op: CreateIndex, b: _Build) -> _Applied:
    base = b.base
    return _with_created_indices(base, op), list(base.fragments)


def _with_created_indices(m: Manifest, op: CreateIndex) -> Manifest:
    """``m`` with ``op.removed_indices`` (by uuid) taken out and ``op.new_indices`` appended,
    as pylance's ``CreateIndex`` applies."""
    before = decode_index_section(m.index_section, f"index section of version {m.version}") if m.index_section else ()
    gone = {i.uuid for i in op.removed_indices}
    after = tuple(i for i in before if i.uuid not in gone) + tuple(op.new_indices)
    return m.with_changes(index_section=encode_index_section(after) if after else None)


@_apply.register
def _(op: Merge, b: _Build) -> _Applied:
    """Schema replaced; every fragment replaced by its version in ``op`` (same ids, same rows).

    With stable row ids the rows of a fragment given new data files were updated at this
    version (pylance: ``_row_last_updated_at_version`` moves; a metadata-only all-null column
    leaves it)."""
    base = b.base
    before = {f.id: f.files for f in base.fragments}
    frags = []
    for f in op.fragments:
        if f.id not in before:
            raise IncompatibleTransactionError(
                f"merge names fragment {f.id}, which version {base.version} does not have"
            )
        if b.stable and f.files != before[f.id]:
            f = f.with_changes(last_updated_at_versions=rowids.constant_versions(f.physical_rows, b.version))
        frags.append(f)
    frags.extend(b.ids.new_fragment(f) for f in op.new_fragments)
    return base.with_changes(schema=op.schema), frags


@_apply.register
def _(op: Project, b: _Build) -> _Applied:
    """Schema replaced (metadata only); data files left holding no field of it are dropped."""
    base = b.base
    keep = set(op.schema.field_ids())
    frags = []
    for f in base.fragments:
        files = tuple(df for df in f.files if keep.intersection(df.fields))
        frags.append(f if files == tuple(f.files) else f.with_changes(files=files))
    return base.with_changes(schema=op.schema), frags


@_apply.register
def _(op: DataReplacement, b: _Build) -> _Applied:
    """Each fragment's data file of the same fields (and file version) takes the new file's
    path and size, as pylance's; a file of fields the fragment lacks is added.  Index segments
    over a replaced field no longer cover the replaced fragments (pylance keeps them, then
    answers from stale entries; lance_ops scans those fragments instead)."""
    base = b.base
    fields = {tuple(r.new_file.fields) for r in op.replacements}
    if len(fields) > 1:
        raise InvalidArgumentError(f"DataReplacement: all new data files must have the same fields, got {sorted(fields)}")
    by_id = {f.id: f for f in base.fragments}
    for r in op.replacements:
        frag = by_id.get(r.fragment_id)
        if frag is None:
            raise InvalidArgumentError(f"DataReplacement: fragment {r.fragment_id} is not in version {base.version}")
        by_id[r.fragment_id] = _replaced_file(frag, r.new_file)
    replaced_fields = set().union(*(r.new_file.fields for r in op.replacements)) if op.replacements else set()
    gone = frozenset(r.fragment_id for r in op.replacements)
    new = _with_indices(base, lambda idx: tuple(
        dataclasses.replace(i, fragment_ids=i.fragment_ids - gone)
        if i.fragment_ids is not None and replaced_fields & set(i.fields) else i for i in idx))
    return new, list(by_id.values())


def _replaced_file(frag: FragmentMetadata, new: DataFile) -> FragmentMetadata:
    files, covered = [], set()
    for df in frag.files:
        covered.update(df.fields)
        same = tuple(df.fields) == tuple(new.fields) and df.version == new.version
        files.append(dataclasses.replace(df, path=new.path, file_size_bytes=new.file_size_bytes) if same else df)
    if covered.isdisjoint(new.fields):
        files.append(new)
    if files == list(frag.files):
        raise InvalidArgumentError(
            f"DataReplacement: fragment {frag.id} has no data file of fields {list(new.fields)} and file version "
            f"{new.version}; the new file must match an existing one (fields, major and minor version)")
    return frag.with_changes(files=tuple(files))


#: indices of the table itself, not of a column (kept whatever the schema, as Lance keeps them)
_SYSTEM_INDEX_NAMES = ("__lance_frag_reuse", "__lance_mem_wal")


def _without_dropped_field_indices(m: Manifest) -> Manifest:
    """``m`` without the index segments of a field its schema no longer has (a dropped column,
    a cast that gave the column a new field id), as Lance's ``retain_relevant_indices``."""
    if not m.index_section:
        return m
    ids = set(m.schema.field_ids())
    before = decode_index_section(m.index_section, f"index section of version {m.version}")
    after = tuple(i for i in before if set(i.fields) <= ids or i.name in _SYSTEM_INDEX_NAMES)
    if len(after) == len(before):
        return m
    return m.with_changes(index_section=encode_index_section(after) if after else None)


def _with_indices(m: Manifest, change: Callable[[tuple], tuple]) -> Manifest:
    """``m`` with its index section passed through ``change`` (raw bytes kept when unchanged)."""
    if not m.index_section:
        return m
    before = decode_index_section(m.index_section, f"index section of version {m.version}")
    after = change(before)
    if after == before:
        return m
    return m.with_changes(index_section=encode_index_section(after))


def _overwrite_file_version(op: Overwrite, prev: Manifest | None, asked: str | None) -> str:
    found = {df.version for f in op.fragments for df in f.files}
    if len(found) > 1:
        raise UnsupportedFeatureError(f"an Overwrite with data files of several file versions {sorted(found)}")
    if found:
        return found.pop()
    if prev is not None and asked is None:
        return prev.data_storage_version
    return normalize_storage_version(asked)


@singledispatch
def _may_mix_file_versions(op: Operation) -> bool:
    """Whether ``op`` may bring data files of another 2.x version than the dataset's default.

    Only a compaction's rewrite (``compact_files(data_storage_version=...)``, as pylance 14's):
    the manifest then gets feature flag 256 (docs/FORMAT.md §17).
    """
    return False


@_may_mix_file_versions.register
def _(op: Rewrite) -> bool:
    return True


def _check_file_versions(
    frags: Sequence[FragmentMetadata], base: Manifest | None, version: str, *, mixing: bool = False
) -> bool:
    """Every data file new in this version must have the dataset's file version, unless
    ``mixing`` (a rewrite to another 2.x file version); returns whether a new file has another
    version (the manifest then needs flag 256)."""
    carried = {id(f) for f in base.fragments} if base is not None else set()
    old: set[str] | None = None
    mixed = False
    for f in frags:
        if id(f) in carried:  # the previous version's fragment object, unchanged
            continue
        for df in f.files:
            if df.version == version:
                continue
            if old is None:  # a changed fragment may keep its old files
                old = {d.path for g in base.fragments for d in g.files} if base is not None else set()
            if df.path in old:
                continue
            if mixing and df.version in READABLE_FILE_VERSIONS and version in READABLE_FILE_VERSIONS:
                mixed = True
                continue
            raise UnsupportedFeatureError(
                f"data file {df.path} has file version {df.version} but the dataset uses {version}; "
                "only a compaction (compact_files(data_storage_version=...)) writes files of another version"
            )
    return mixed


def _replace(
    frags: list[FragmentMetadata], updated: Sequence[FragmentMetadata], *, removed: Sequence[int]
) -> list[FragmentMetadata]:
    by_id = {f.id: f for f in updated}
    gone = set(removed)
    return [by_id.get(f.id, f) for f in frags if f.id not in gone]
