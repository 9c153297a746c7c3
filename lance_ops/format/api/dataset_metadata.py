"""A dataset handle's table config and its schema, table and field metadata, read and updated as
pylance's."""

from collections.abc import Mapping, Sequence

from lance_ops.format.api.dataset_core import DatasetCore
from lance_ops.format.errors import ArgumentTypeError, SchemaEvolutionError
from lance_ops.format.schema import LanceSchema
from lance_ops.format.txn.operations import MetadataUpdate, UpdateConfig


class MetadataMethods(DatasetCore):
    """The config and metadata methods of :class:`.lance_dataset.LanceDataset`."""

    def config(self) -> dict[str, str]:
        """The table config of this version (a method, as in pylance)."""
        return dict(self._manifest.config)

    def update_config(self, upsert_values: Mapping[str, str | None], *, replace: bool = False) -> dict[str, str]:
        """Set table config keys (e.g. ``lance.compaction.target_rows_per_fragment``); a value of
        None removes the key; ``replace=True`` makes ``upsert_values`` the whole config, as in
        pylance.  The handle moves to the new version.

        Returns:
            the config of the new version.
        """
        if not isinstance(upsert_values, Mapping):
            raise ArgumentTypeError(f"update_config takes a mapping of str to str or None, got {type(upsert_values).__name__}")
        upserts: dict[str, str] = {}
        removes: list[str] = []
        for k, v in upsert_values.items():
            if not isinstance(k, str) or not k:
                raise ArgumentTypeError(f"config keys must be non-empty strings, got {type(k).__name__} {k!r}")
            if v is None:
                removes.append(k)
            elif isinstance(v, str):
                upserts[k] = v
            else:
                raise ArgumentTypeError(f"config value of {k!r} must be a string or None (remove), got {type(v).__name__} {v!r}")
        if replace:
            removes = [k for k in self._manifest.config if k not in upserts]
        return dict(self._commit(UpdateConfig(upserts, removes)).config)

    def delete_config_keys(self, keys: Sequence[str]) -> None:
        """Remove config keys (as pylance); the handle moves to the new version."""
        if isinstance(keys, str) or not all(isinstance(k, str) for k in keys):
            raise ArgumentTypeError(f"delete_config_keys takes a list of key strings, got {keys!r}")
        self._commit(UpdateConfig({}, list(keys)))

    def update_schema_metadata(self, values: Mapping[str, str | None], *, replace: bool = False) -> dict[str, str]:
        """Set (``None``: remove) schema metadata keys in a new version, as pylance's
        ``update_schema_metadata`` (an ``UpdateConfig`` with ``schema_metadata_updates``); with
        ``replace`` the given keys become the whole metadata.

        Returns:
            the new version's schema metadata (the handle moves to the new version).
        """
        if not isinstance(values, Mapping):
            raise ArgumentTypeError(f"update_schema_metadata takes a mapping of str to str or None, "
                                    f"got {type(values).__name__}")
        for k, v in values.items():
            if not isinstance(k, str) or not (v is None or isinstance(v, str)):
                raise ArgumentTypeError(f"schema metadata must map str to str or None, got {k!r}: {v!r}")
        self._commit(UpdateConfig({}, [], dict(values), bool(replace)))
        return {k: bytes(v).decode() for k, v in self.lance_schema.metadata.items()}

    @property
    def schema_metadata(self) -> dict[str, str]:
        """The schema's metadata as strings (pylance's ``schema_metadata``)."""
        return {k: bytes(v).decode() for k, v in self.lance_schema.metadata.items()}

    def replace_schema_metadata(self, new_metadata: Mapping[str, str]) -> dict[str, str]:
        """Replace the whole schema metadata (pylance's ``replace_schema_metadata``)."""
        return self.update_schema_metadata(new_metadata, replace=True)


    @property
    def metadata(self) -> dict[str, str]:
        """The table metadata of this version (pylance's ``metadata``; not the schema's)."""
        return dict(self._manifest.table_metadata)

    def update_metadata(self, values: Mapping[str, str | None], *, replace: bool = False) -> dict[str, str]:
        """Set (``None``: remove) table metadata keys in a new version, as pylance's
        ``update_metadata`` (an ``UpdateConfig`` with ``table_metadata_updates``); with
        ``replace`` the given keys become the whole metadata.

        Returns:
            the new version's table metadata (the handle moves to the new version).
        """
        update = MetadataUpdate(_string_map(values, "values"), bool(replace))
        return dict(self._commit(UpdateConfig(table_metadata_updates=update)).table_metadata)

    def update_field_metadata(
        self, field_updates: Mapping[str, Mapping[str, str | None]], *, replace: bool = False
    ) -> None:
        """Set (``None``: remove) metadata keys of fields named by path (``"s.c"`` for a struct
        child) in a new version, as pylance's ``update_field_metadata`` (an ``UpdateConfig``
        with ``field_metadata_updates`` by field id); with ``replace`` the given keys become the
        field's whole metadata.  The handle moves to the new version.

        Raises:
            SchemaEvolutionError: no field at a path (an ``OSError`` too, pylance's message).
            ArgumentTypeError: not a mapping of paths to mappings of str to str or None.
        """
        if not isinstance(field_updates, Mapping):
            raise ArgumentTypeError(f"update_field_metadata takes a mapping of field path to a mapping, "
                                    f"got {type(field_updates).__name__}")
        paths = _field_paths(self._manifest.schema)
        updates = {}
        for path, values in field_updates.items():
            if not isinstance(path, str):
                raise ArgumentTypeError(f"update_field_metadata: field paths must be strings, got {path!r}")
            if path not in paths:
                raise SchemaEvolutionError(f"Field '{path}' not found.\nAvailable fields: {list(paths)}")
            updates[paths[path]] = MetadataUpdate(_string_map(values, f"field {path!r}"), bool(replace))
        self._commit(UpdateConfig(field_metadata_updates=updates))


def _string_map(values: object, what: str) -> dict[str, str | None]:
    """``values`` checked to map str to str or None (pylance's ``TypeError`` otherwise)."""
    if not isinstance(values, Mapping):
        raise ArgumentTypeError(f"{what} must be a mapping of str to str or None, got {type(values).__name__}")
    for k, v in values.items():
        if not isinstance(k, str) or not (v is None or isinstance(v, str)):
            raise ArgumentTypeError(f"{what} must map str to str or None, got {k!r}: {v!r}")
    return dict(values)


def _field_paths(schema: LanceSchema) -> dict[str, int]:
    """Every field's dotted path (``"s.c"``) and id, parents first."""
    out: dict[str, int] = {}

    def walk(field_id: int, prefix: str) -> None:
        for child in schema.children(field_id):
            out[prefix + child.name] = child.id
            walk(child.id, f"{prefix}{child.name}.")

    for f in schema.top_level():
        out[f.name] = f.id
        walk(f.id, f"{f.name}.")
    return out
