"""``LanceOperation``: pylance's constructors of the operations ``commit`` takes.

Code written for pylance builds operations as ``LanceOperation.Overwrite(new_schema, fragments)``,
``LanceOperation.UpdateConfig(config_updates=LanceOperation.UpdateMap({...}))``; this namespace
builds lance_ops' operations (:mod:`.operations`) from the same arguments, so such code runs on
``lance_ops.format`` unchanged.
"""

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from lance_ops.format.errors import ArgumentTypeError, UnsupportedFeatureError
from lance_ops.format.schema import LanceSchema
from lance_ops.format.table.fragment import FragmentMetadata
from lance_ops.format.txn.index_entry import Index, index_metadata
from lance_ops.format.txn.operations import (
    Append,
    CreateIndex,
    DataReplacement,
    DataReplacementGroup,
    Delete,
    Merge,
    MetadataUpdate,
    Overwrite,
    Project,
    Restore,
    Rewrite,
    RewriteGroup,
    Update,
    UpdateConfig,
)


@dataclass
class UpdateMap:
    """Changes to a metadata map (pylance's ``LanceOperation.UpdateMap``): key -> value, None =
    delete the key; ``replace`` replaces the whole map."""

    updates: Mapping[str, str | None] = field(default_factory=dict)
    replace: bool = False


def _overwrite(new_schema: pa.Schema | LanceSchema, fragments: Sequence[FragmentMetadata],
               **kwargs: object) -> Overwrite:
    """pylance's ``Overwrite(new_schema, fragments)``: the field ids of a ``pa.Schema`` are those
    its fragments were written with (assigned from 0, as ``write_fragments`` assigns them)."""
    if kwargs:
        raise UnsupportedFeatureError(f"LanceOperation.Overwrite: {sorted(kwargs)} are not supported by lance_ops")
    schema = new_schema if isinstance(new_schema, LanceSchema) else LanceSchema.from_arrow(new_schema)
    return Overwrite(list(fragments), schema)


def _update_config(
    config_updates: UpdateMap | None = None,
    table_metadata_updates: UpdateMap | None = None,
    schema_metadata_updates: UpdateMap | None = None,
    field_metadata_updates: Mapping[int, UpdateMap] | None = None,
) -> UpdateConfig:
    """pylance's ``UpdateConfig(config_updates=, table_metadata_updates=, schema_metadata_updates=,
    field_metadata_updates={field_id: UpdateMap})``."""
    fields = dict(field_metadata_updates or {})
    for name, m in (("config_updates", config_updates), ("schema_metadata_updates", schema_metadata_updates),
                    ("table_metadata_updates", table_metadata_updates),
                    *((f"field_metadata_updates[{k!r}]", v) for k, v in fields.items())):
        if m is not None and not isinstance(m, UpdateMap):
            raise ArgumentTypeError(f"{name} must be a LanceOperation.UpdateMap, got {type(m).__name__}")
    if any(isinstance(k, bool) or not isinstance(k, int) for k in fields):
        raise ArgumentTypeError(f"field_metadata_updates is keyed by field id (int), got {sorted(map(repr, fields))}")
    upserts: dict[str, str] = {}
    deletes: list[str] = []
    if config_updates is not None:
        if config_updates.replace:
            raise UnsupportedFeatureError("LanceOperation.UpdateConfig: replacing the whole config "
                                          "(UpdateMap(replace=True)) is not supported by lance_ops")
        for k, v in config_updates.updates.items():
            if v is None:
                deletes.append(k)
            else:
                upserts[k] = v
    sm, tm = schema_metadata_updates, table_metadata_updates
    return UpdateConfig(upserts, deletes, dict(sm.updates) if sm is not None else None,
                        bool(sm.replace) if sm is not None else False,
                        MetadataUpdate(dict(tm.updates), bool(tm.replace)) if tm is not None else None,
                        {k: MetadataUpdate(dict(v.updates), bool(v.replace)) for k, v in fields.items()})


def _as_lance_schema(schema: pa.Schema | LanceSchema) -> LanceSchema:
    return schema if isinstance(schema, LanceSchema) else LanceSchema.from_arrow(schema)


def _project(schema: pa.Schema | LanceSchema) -> Project:
    """pylance's ``Project(schema)``: a new schema over the same data files (field ids kept)."""
    return Project(_as_lance_schema(schema))


def _merge(fragments: Sequence[FragmentMetadata], schema: pa.Schema | LanceSchema) -> Merge:
    """pylance's ``Merge(fragments, schema)``: every fragment with its new data files, and the
    schema (a ``LanceSchema``; a ``pa.Schema``, numbered from 0, is deprecated as in pylance)."""
    if isinstance(schema, pa.Schema):
        warnings.warn("LanceOperation.Merge with a pyarrow Schema is deprecated (as in pylance): pass the "
                      "LanceSchema merge_columns returns", DeprecationWarning, stacklevel=2)
    return Merge(list(fragments), _as_lance_schema(schema))


def _create_index(new_indices: Sequence["Index | Any"], removed_indices: Sequence["Index | Any"] = ()) -> CreateIndex:
    """pylance's ``CreateIndex(new_indices, removed_indices)`` of ``lance.dataset.Index`` segments."""
    return CreateIndex(tuple(map(index_metadata, new_indices)), tuple(map(index_metadata, removed_indices)))


class LanceOperation:
    """pylance's ``lance.LanceOperation`` namespace, building lance_ops operations."""

    UpdateMap = UpdateMap
    Append = Append
    Delete = Delete
    Restore = Restore
    Overwrite = staticmethod(_overwrite)
    UpdateConfig = staticmethod(_update_config)
    Project = staticmethod(_project)
    Merge = staticmethod(_merge)
    CreateIndex = staticmethod(_create_index)
    DataReplacement = DataReplacement
    Rewrite = Rewrite
    RewriteGroup = RewriteGroup
    DataReplacementGroup = DataReplacementGroup
    Update = Update  # a class, as pylance's: ``isinstance(txn.operation, LanceOperation.Update)``
