"""Operations a transaction can carry, as data (spec "Transaction", docs/FORMAT.md §9).

Each class maps to one ``Transaction.operation`` oneof case.  Fragments are
:class:`FragmentMetadata`; everything here is picklable so Spark executors can build
operations and the driver commit them.
"""

import uuid as uuidlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from lance_ops.format._proto import transaction_pb2
from lance_ops.format.index.metadata import IndexFile, IndexMetadata
from lance_ops.format.schema import LanceSchema
from lance_ops.format.table.fragment import DataFile, FragmentMetadata

T = transaction_pb2.Transaction


def _frags(protos: Sequence) -> list[FragmentMetadata]:  # type: ignore[type-arg]
    return [FragmentMetadata.from_proto(f) for f in protos]


@dataclass(frozen=True)
class Append:
    """Add new fragments (ids and row ids are assigned at commit)."""

    fragments: Sequence[FragmentMetadata]
    name = "append"

    def to_proto(self, t: transaction_pb2.Transaction) -> None:
        t.append.fragments.extend(f.to_proto() for f in self.fragments)


@dataclass(frozen=True)
class Overwrite:
    """Replace all fragments and the schema (also how a dataset is created)."""

    fragments: Sequence[FragmentMetadata]
    schema: LanceSchema
    config_upsert_values: Mapping[str, str] | None = None
    #: lance_ops' in-place migration to stable row ids (docs/FORMAT.md §19): the new version
    #: gets flag 2 and row ids for every fragment; not in the proto (a decoded Overwrite has False)
    enable_stable_row_ids: bool = False
    #: with ``enable_stable_row_ids``: the index section of the new version (the indices carried
    #: over, their files rewritten for row ids where they must be); None = no indices
    index_section: bytes | None = None
    name = "overwrite"

    def to_proto(self, t: transaction_pb2.Transaction) -> None:
        t.overwrite.fragments.extend(f.to_proto() for f in self.fragments)
        t.overwrite.schema.extend(self.schema.to_proto())
        t.overwrite.schema_metadata.update(self.schema.metadata)
        if self.config_upsert_values:
            t.overwrite.config_upsert_values.update(self.config_upsert_values)


@dataclass(frozen=True)
class Delete:
    """Fragments with new deletion files, and fragments deleted entirely."""

    updated_fragments: Sequence[FragmentMetadata]
    deleted_fragment_ids: Sequence[int]
    predicate: str = ""
    name = "delete"

    def to_proto(self, t: transaction_pb2.Transaction) -> None:
        t.delete.updated_fragments.extend(f.to_proto() for f in self.updated_fragments)
        t.delete.deleted_fragment_ids.extend(self.deleted_fragment_ids)
        t.delete.predicate = self.predicate


@dataclass(frozen=True)
class Update:
    """Rows rewritten: old rows tombstoned (updated/removed fragments), new rows in new fragments;
    or columns rewritten (``update_columns``: updated fragments and ``fields_modified``).  The
    keywords and defaults are pylance's ``LanceOperation.Update``."""

    removed_fragment_ids: Sequence[int] = ()
    updated_fragments: Sequence[FragmentMetadata] = ()
    new_fragments: Sequence[FragmentMetadata] = ()
    fields_modified: Sequence[int] = ()
    fields_for_preserving_frag_bitmap: Sequence[int] = ()
    name = "update"

    def to_proto(self, t: transaction_pb2.Transaction) -> None:
        u = t.update
        u.removed_fragment_ids.extend(self.removed_fragment_ids)
        u.updated_fragments.extend(f.to_proto() for f in self.updated_fragments)
        u.new_fragments.extend(f.to_proto() for f in self.new_fragments)
        u.fields_modified.extend(self.fields_modified)
        u.fields_for_preserving_frag_bitmap.extend(self.fields_for_preserving_frag_bitmap)


@dataclass(frozen=True)
class RewriteGroup:
    old_fragments: Sequence[FragmentMetadata]
    new_fragments: Sequence[FragmentMetadata]


@dataclass(frozen=True)
class RewrittenIndex:
    """An index a compaction remapped: ``old_id`` is replaced by ``new_id`` (new files)."""

    old_id: str
    new_id: str
    type_url: str = ""
    details: bytes = b""
    index_version: int = 0
    files: tuple[IndexFile, ...] = ()

    def to_proto(self, r: transaction_pb2.Transaction.Rewrite.RewrittenIndex) -> None:
        r.old_id.uuid = uuidlib.UUID(self.old_id).bytes
        r.new_id.uuid = uuidlib.UUID(self.new_id).bytes
        r.new_index_details.type_url = self.type_url
        r.new_index_details.value = self.details
        r.new_index_version = self.index_version
        for f in self.files:
            r.new_index_files.add(path=f.path, size_bytes=f.size_bytes)

    @classmethod
    def from_proto(cls, r: transaction_pb2.Transaction.Rewrite.RewrittenIndex) -> "RewrittenIndex":
        return cls(
            str(uuidlib.UUID(bytes=r.old_id.uuid)),
            str(uuidlib.UUID(bytes=r.new_id.uuid)),
            r.new_index_details.type_url,
            r.new_index_details.value,
            r.new_index_version,
            tuple(IndexFile(f.path, f.size_bytes) for f in r.new_index_files),
        )


@dataclass(frozen=True)
class Rewrite:
    """Compaction: groups of old fragments replaced by new ones holding the same rows.

    ``rewritten_indices``: indices remapped to the new row addresses (datasets without stable
    row ids), as pylance records them.
    """

    groups: Sequence[RewriteGroup]
    rewritten_indices: Sequence[RewrittenIndex] = ()
    name = "rewrite"

    def to_proto(self, t: transaction_pb2.Transaction) -> None:
        for g in self.groups:
            pg = t.rewrite.groups.add()
            pg.old_fragments.extend(f.to_proto() for f in g.old_fragments)
            pg.new_fragments.extend(f.to_proto() for f in g.new_fragments)
        for r in self.rewritten_indices:
            r.to_proto(t.rewrite.rewritten_indices.add())


@dataclass(frozen=True)
class CreateIndex:
    """Indices added (or replacing others) by pylance: ``create_index``, ``optimize_indices``.

    lance_ops commits one for the scalar segments it builds (``maintenance/index_build.py``).
    """

    new_indices: Sequence[IndexMetadata]
    removed_indices: Sequence[IndexMetadata] = ()
    name = "create_index"

    def to_proto(self, t: transaction_pb2.Transaction) -> None:
        t.create_index.new_indices.extend(i.to_proto() for i in self.new_indices)
        t.create_index.removed_indices.extend(i.to_proto() for i in self.removed_indices)


@dataclass(frozen=True)
class ReserveFragments:
    num_fragments: int
    name = "reserve_fragments"

    def to_proto(self, t: transaction_pb2.Transaction) -> None:
        t.reserve_fragments.num_fragments = self.num_fragments


@dataclass(frozen=True)
class MetadataUpdate:
    """Changes to a string map (pylance's ``UpdateMap``): key -> value, None = delete; with
    ``replace`` the set values become the whole map (None entries are then ignored, as pylance)."""

    updates: Mapping[str, str | None]
    replace: bool = False

    def apply(self, current: Mapping[str, str]) -> dict[str, str]:
        out = {} if self.replace else dict(current)
        for k, v in self.updates.items():
            if v is None:
                out.pop(k, None)
            else:
                out[k] = v
        return out

    def to_proto(self, m: transaction_pb2.Transaction.UpdateMap) -> None:
        m.replace = self.replace
        for key, value in self.updates.items():
            if value is None:
                m.update_entries.add(key=key)
            else:
                m.update_entries.add(key=key, value=value)

    @classmethod
    def from_proto(cls, m: transaction_pb2.Transaction.UpdateMap) -> "MetadataUpdate":
        return cls({e.key: (e.value if e.HasField("value") else None) for e in m.update_entries}, bool(m.replace))


@dataclass(frozen=True)
class UpdateConfig:
    """Upsert and delete table config keys (``lance.compaction.*`` and user keys), and change
    the schema, table and field metadata (pylance's ``update_*_metadata``)."""

    upsert_values: Mapping[str, str] = field(default_factory=dict)
    delete_keys: Sequence[str] = ()
    #: schema metadata changes (``update_schema_metadata``): key -> value, None = delete; with
    #: ``schema_metadata_replace`` the map replaces the whole metadata (pylance's ``UpdateMap``)
    schema_metadata_updates: Mapping[str, str | None] | None = None
    schema_metadata_replace: bool = False
    #: the manifest's table metadata (``update_metadata``)
    table_metadata_updates: MetadataUpdate | None = None
    #: field id -> changes of that field's metadata (``update_field_metadata``)
    field_metadata_updates: Mapping[int, MetadataUpdate] = field(default_factory=dict)
    name = "update_config"

    def to_proto(self, t: transaction_pb2.Transaction) -> None:
        cu = t.update_config.config_updates
        for k, v in self.upsert_values.items():
            cu.update_entries.add(key=k, value=v)
        for k in self.delete_keys:
            cu.update_entries.add(key=k)
        if self.schema_metadata_updates is not None:
            MetadataUpdate(self.schema_metadata_updates, self.schema_metadata_replace).to_proto(
                t.update_config.schema_metadata_updates)
        if self.table_metadata_updates is not None:
            self.table_metadata_updates.to_proto(t.update_config.table_metadata_updates)
        for fid, update in self.field_metadata_updates.items():
            update.to_proto(t.update_config.field_metadata_updates[fid])


@dataclass(frozen=True)
class Restore:
    version: int
    name = "restore"

    def to_proto(self, t: transaction_pb2.Transaction) -> None:
        t.restore.version = self.version


@dataclass(frozen=True)
class Merge:
    """New columns or a cast (pylance's ``add_columns`` / ``alter_columns`` with a cast): every
    fragment, with the data files of the new field ids, and the new schema."""

    fragments: Sequence[FragmentMetadata]
    schema: LanceSchema
    #: lance_ops: rows appended in the same commit (Spark ``mergeSchema``, Dagster
    #: ``schema_mode="merge"``); ids assigned at commit.  Encoded after ``fragments``.
    new_fragments: Sequence[FragmentMetadata] = ()
    name = "merge"

    def to_proto(self, t: transaction_pb2.Transaction) -> None:
        t.merge.fragments.extend(f.to_proto() for f in (*self.fragments, *self.new_fragments))
        t.merge.schema.extend(self.schema.to_proto())
        t.merge.schema_metadata.update(self.schema.metadata)


@dataclass(frozen=True)
class Project:
    """A new schema over the same data (``drop_columns``, renames, nullability): metadata only."""

    schema: LanceSchema
    name = "project"

    def to_proto(self, t: transaction_pb2.Transaction) -> None:
        t.project.schema.extend(self.schema.to_proto())


@dataclass(frozen=True)
class DataReplacementGroup:
    """One fragment's new data file for the fields it holds (pylance's ``DataReplacementGroup``)."""

    fragment_id: int
    new_file: DataFile


@dataclass(frozen=True)
class DataReplacement:
    """Data files replacing those of the same fields in existing fragments, rows unchanged
    (pylance's ``DataReplacement``); a file of fields a fragment does not hold yet (an all-null
    column given data) is added to it."""

    replacements: Sequence[DataReplacementGroup]
    name = "data_replacement"

    def to_proto(self, t: transaction_pb2.Transaction) -> None:
        for r in self.replacements:
            t.data_replacement.replacements.add(fragment_id=r.fragment_id, new_file=r.new_file.to_proto())


@dataclass(frozen=True)
class Unmodelled:
    """An operation lance_ops reads but does not apply (DataReplacement, Clone, ...)."""

    name: str
    raw: bytes = b""

    def to_proto(self, t: transaction_pb2.Transaction) -> None:  # pragma: no cover - never committed
        raise TypeError(f"lance_ops cannot commit a {self.name} operation")


Operation = (
    Append | Overwrite | Delete | Update | Rewrite | CreateIndex | ReserveFragments | UpdateConfig | Restore | Merge
    | Project | DataReplacement | Unmodelled
)


def operation_from_proto(t: transaction_pb2.Transaction) -> Operation:
    """Decode the operation oneof of a Transaction."""
    kind = t.WhichOneof("operation")
    if kind == "append":
        return Append(_frags(t.append.fragments))
    if kind == "overwrite":
        o = t.overwrite
        return Overwrite(
            _frags(o.fragments),
            LanceSchema.from_proto(o.schema, dict(o.schema_metadata)),
            dict(o.config_upsert_values) or None,
        )
    if kind == "delete":
        d = t.delete
        return Delete(_frags(d.updated_fragments), list(d.deleted_fragment_ids), d.predicate)
    if kind == "update":
        u = t.update
        return Update(
            list(u.removed_fragment_ids),
            _frags(u.updated_fragments),
            _frags(u.new_fragments),
            list(u.fields_modified),
            list(u.fields_for_preserving_frag_bitmap),
        )
    if kind == "rewrite":
        groups = [RewriteGroup(_frags(g.old_fragments), _frags(g.new_fragments)) for g in t.rewrite.groups]
        if not groups and (t.rewrite.old_fragments or t.rewrite.new_fragments):
            groups = [RewriteGroup(_frags(t.rewrite.old_fragments), _frags(t.rewrite.new_fragments))]
        return Rewrite(groups, [RewrittenIndex.from_proto(r) for r in t.rewrite.rewritten_indices])
    if kind == "create_index":
        ci = t.create_index
        return CreateIndex(
            [IndexMetadata.from_proto(m) for m in ci.new_indices],
            [IndexMetadata.from_proto(m) for m in ci.removed_indices],
        )
    if kind == "reserve_fragments":
        return ReserveFragments(t.reserve_fragments.num_fragments)
    if kind == "update_config":
        uc = t.update_config
        upserts = dict(uc.upsert_values)
        deletes = list(uc.delete_keys)
        for e in uc.config_updates.update_entries:
            if e.HasField("value"):
                upserts[e.key] = e.value
            else:
                deletes.append(e.key)
        schema_md: dict[str, str | None] | None = None
        replace_md = False
        if uc.HasField("schema_metadata_updates"):
            decoded = MetadataUpdate.from_proto(uc.schema_metadata_updates)
            schema_md, replace_md = dict(decoded.updates), decoded.replace
        elif uc.schema_metadata:  # the deprecated form: the whole new metadata
            schema_md, replace_md = dict(uc.schema_metadata), True
        table_md = MetadataUpdate.from_proto(uc.table_metadata_updates) \
            if uc.HasField("table_metadata_updates") else None
        field_md = {int(k): MetadataUpdate.from_proto(v) for k, v in uc.field_metadata_updates.items()}
        return UpdateConfig(upserts, deletes, schema_md, replace_md, table_md, field_md)
    if kind == "restore":
        return Restore(t.restore.version)
    if kind == "merge":
        m = t.merge
        return Merge(_frags(m.fragments), LanceSchema.from_proto(m.schema, dict(m.schema_metadata)))
    if kind == "project":
        # Project carries no schema metadata: the previous version's is kept when applied
        return Project(LanceSchema.from_proto(t.project.schema))
    if kind == "data_replacement":
        return DataReplacement([DataReplacementGroup(r.fragment_id, DataFile.from_proto(r.new_file))
                                for r in t.data_replacement.replacements])
    return Unmodelled(kind or "unknown")
