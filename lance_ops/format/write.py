"""Writing data: uncommitted fragments (``write_fragments``) and ``write_dataset``.

Fragments are written as Lance data files (file format 2.0, 2.1 or 2.2: the dataset's) under ``data/``; nothing is visible until a
transaction referencing them commits, so a failed writer leaves only orphan files (removed
by cleanup).
"""

import io
import os
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Literal

import pyarrow as pa

from .commit_handler import commit_handler_for, try_open_latest
from .errors import ArgumentTypeError, InvalidArgumentError, SchemaError
from .file.blobs import as_blob_storage, is_blob_field
from .file.writer import DataFileWriter, data_file_field_info
from .fragment import DataFile, FragmentMetadata
from .orphans import remove_fragment_files
from .schema import LanceSchema
from .store import ObjectStore
from .versions import normalize_storage_version, require_writable

DEFAULT_MAX_ROWS_PER_FILE = 1_048_576
DATA_DIR = "data"
WriteMode = Literal["create", "append", "overwrite"]

RESERVED_COLUMNS = ("_rowid", "_rowaddr", "_row_created_at_version", "_row_last_updated_at_version")


def new_schema(schema: pa.Schema) -> LanceSchema:
    """The Lance schema of a new dataset; metadata column names are reserved (as in pylance).

    Raises:
        SchemaError: no columns, duplicate or reserved column names.
    """
    if not isinstance(schema, pa.Schema):
        raise ArgumentTypeError(f"schema must be a pyarrow.Schema, got {type(schema).__name__}")
    if len(schema) == 0:
        raise SchemaError("a dataset needs at least one column; the data has none")
    check_unique_names(schema.names, "the data")
    reserved = [n for n in schema.names if n in RESERVED_COLUMNS]
    if reserved:
        raise SchemaError(f"column name(s) {reserved} are reserved for Lance metadata columns")
    return LanceSchema.from_arrow(schema)


def check_unique_names(names: list[str], what: str) -> None:
    """SchemaError naming the repeated columns of ``names`` (a table's top-level names)."""
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise SchemaError(f"{what} has duplicate column names {dup} (columns {names})")


def discard_files(store: ObjectStore, fragments: Iterable[FragmentMetadata]) -> None:
    """Best-effort removal of the files of fragments no transaction references (written, never
    committed): data files, their blob sidecars and deletion files."""
    remove_fragment_files(store, fragments)


def random_data_file_name() -> str:
    """24 binary digits + 26 hex chars + ``.lance``, from a random uuid (as pylance names files)."""
    raw = os.urandom(16)
    bits = "".join(f"{b:08b}" for b in raw[:3])
    return bits + raw[3:].hex()[:26] + ".lance"


def iter_batches(data: Any, schema: pa.Schema | None = None) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
    """(schema, batches) for a Table, RecordBatch, RecordBatchReader, Dataset-like or iterable of batches.

    Raises:
        ArgumentTypeError: anything else (a string, a dict, None, an iterable of non-batches).
    """
    if schema is not None and not isinstance(schema, pa.Schema):
        raise ArgumentTypeError(f"schema must be a pyarrow.Schema, got {type(schema).__name__} {schema!r}")
    if isinstance(data, (str, bytes, bytearray, Mapping)) or data is None:
        raise ArgumentTypeError(
            f"cannot write data of type {type(data).__name__}; pass a pyarrow Table, RecordBatch, "
            "RecordBatchReader or an iterable of RecordBatches"
        )
    if isinstance(data, pa.Table):
        return data.schema, iter(data.to_batches())
    if isinstance(data, pa.RecordBatch):
        return data.schema, iter([data])
    if isinstance(data, pa.RecordBatchReader):
        return data.schema, iter(data)
    if hasattr(data, "to_batches") and hasattr(data, "schema"):
        return data.schema, iter(data.to_batches())
    if isinstance(data, Iterable):
        it = iter(data)
        if schema is not None:
            return schema, it
        first = next(it, None)
        if first is None:
            raise InvalidArgumentError("write needs a schema when the data has no batches")
        if not isinstance(first, (pa.Table, pa.RecordBatch)):
            raise ArgumentTypeError(
                f"cannot write an iterable of {type(first).__name__}; it must yield pyarrow RecordBatches or Tables"
            )
        if isinstance(first, pa.Table):
            first_batches = first.to_batches()
            rest = (b for t in it for b in (t.to_batches() if isinstance(t, pa.Table) else [t]))
            return first.schema, _chain(first_batches, rest)
        return first.schema, _chain([first], it)
    raise ArgumentTypeError(f"cannot write data of type {type(data).__name__}; pass a pyarrow Table or RecordBatchReader")


def _chain(head: list[pa.RecordBatch], rest: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield from head
    yield from rest


def conform_batch(batch: pa.RecordBatch, target: pa.Schema, where: str) -> pa.RecordBatch:
    """Reorder ``batch`` to ``target``'s columns; types must match exactly (no silent casts)."""
    if not isinstance(batch, pa.RecordBatch):
        raise ArgumentTypeError(f"{where}: the data yielded a {type(batch).__name__}, not a pyarrow RecordBatch")
    if batch.schema.names != target.names:
        check_unique_names(batch.schema.names, f"{where}: the data")
    if batch.schema.names == target.names and all(
        a.type == b.type for a, b in zip(batch.schema, target, strict=True)
    ):
        cols = batch.columns
    else:
        missing = [n for n in target.names if n not in batch.schema.names]
        extra = [n for n in batch.schema.names if n not in target.names]
        if missing or extra:
            raise SchemaError(f"{where}: data columns {batch.schema.names} do not match the schema {target.names}"
                              f" (missing {missing}, unexpected {extra})")
        cols = []
        for f in target:
            col = batch.column(f.name)
            blob = as_blob_storage(col, f.type) if col.type != f.type and is_blob_field(f) else None
            col = col if blob is None else blob
            if col.type != f.type:
                raise SchemaError(f"{where}: column {f.name!r} has type {col.type}, the dataset has {f.type}")
            cols.append(col)
    for f, col in zip(target, cols, strict=True):
        if not f.nullable and col.null_count:
            raise SchemaError(f"{where}: column {f.name!r} is not nullable but the data has {col.null_count} nulls")
    return pa.RecordBatch.from_arrays(cols, schema=target)


def write_fragment_files(
    store: ObjectStore,
    batches: Iterator[pa.RecordBatch],
    schema: LanceSchema,
    *,
    version: str,
    max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
) -> list[FragmentMetadata]:
    """Stream batches into data files of file format ``version`` and at most ``max_rows_per_file``
    rows; one fragment per file.

    Durability: data files are written without ``fsync``, as pylance writes them (its local
    object store, ``object_store::LocalFileSystem``, did not sync files before the opt-in
    fsync of apache/arrow-rs-object-store#643; lance's writers do not ask for one): a data file
    only becomes part of the dataset through the manifest of a later commit, and that manifest
    is fsynced before it is linked into place (``ObjectStore.put_if_absent``).  A crash before
    the page cache reaches the disk can lose the newest version's files, never corrupt an
    earlier version."""
    if isinstance(max_rows_per_file, bool) or not isinstance(max_rows_per_file, int) or max_rows_per_file <= 0:
        raise InvalidArgumentError(f"max_rows_per_file must be a positive integer, got {max_rows_per_file!r}")
    version = require_writable(version, store.uri)
    major, minor = (int(x) for x in version.split("."))
    target = schema.to_arrow()
    fields, columns = data_file_field_info(schema, version)
    check_writable(schema, version)  # before a file is created
    frags: list[FragmentMetadata] = []
    writer: DataFileWriter | None = None
    sink = None
    name = ""

    def close() -> None:
        nonlocal writer, sink
        assert writer is not None and sink is not None
        rows = writer.num_rows
        size = writer.finish()
        sink.close()
        frags.append(
            FragmentMetadata(
                id=0,
                files=(DataFile(name, tuple(fields), tuple(columns), major, minor, size),),
                physical_rows=rows,
            )
        )
        writer = sink = None

    try:
        for batch in batches:
            batch = conform_batch(batch, target, store.uri)
            pos = 0
            while pos < batch.num_rows:
                if writer is None:
                    name = random_data_file_name()
                    sink = store.open_output(f"{DATA_DIR}/{name}")
                    writer = DataFileWriter(sink, schema, version=version, sidecar=_sidecars(store, name))
                take = min(batch.num_rows - pos, max_rows_per_file - writer.num_rows)
                writer.write_batch(batch.slice(pos, take))
                pos += take
                if writer.num_rows >= max_rows_per_file:
                    close()
        if writer is not None and writer.num_rows > 0:
            close()
    except BaseException:
        if sink is not None:
            sink.close()
            store.delete(f"{DATA_DIR}/{name}")
            _delete_sidecars(store, name)
        for f in frags:
            for df in f.files:
                store.delete(f"{DATA_DIR}/{df.path}")
                _delete_sidecars(store, df.path)
        raise
    if writer is not None and sink is not None:  # opened but empty
        sink.close()
        store.delete(f"{DATA_DIR}/{name}")
    return frags


def check_writable(schema: LanceSchema, version: str) -> None:
    """Raise :class:`UnsupportedFeatureError` (naming the field and type) when data files of
    ``version`` cannot hold a column of ``schema``; writes nothing."""
    global _LAST_WRITABLE
    last_schema, last_version = _LAST_WRITABLE  # one tuple: threads see a pair that was checked
    if last_schema is schema and last_version == version:
        return  # the same (frozen) schema as last time: a compaction writes one file per task
    DataFileWriter(io.BytesIO(), schema, version=version)
    _LAST_WRITABLE = (schema, version)


#: the last ``(schema, version)`` :func:`check_writable` accepted (held, so its id is not reused)
_LAST_WRITABLE: tuple[LanceSchema | None, str | None] = (None, None)


def _sidecars(store: ObjectStore, name: str) -> Any:
    """Opens ``data/<stem>/<file>`` beside data file ``name`` (blob v2 payloads)."""
    stem = name[: -len(".lance")] if name.endswith(".lance") else name
    return lambda file: store.open_output(f"{DATA_DIR}/{stem}/{file}")


def _delete_sidecars(store: ObjectStore, name: str) -> None:
    stem = name[: -len(".lance")] if name.endswith(".lance") else name
    for rel, _size, _mtime in list(store.list_files(f"{DATA_DIR}/{stem}")):
        store.delete(rel)


def write_fragments(
    data: Any,
    uri: str,
    *,
    schema: pa.Schema | LanceSchema | None = None,
    max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
    storage_options: Mapping[str, Any] | None = None,
    data_storage_version: str | None = None,
    manifest_store: Any = None,
) -> list[FragmentMetadata]:
    """Write data files for ``uri`` without committing; returns picklable fragment metadata.

    The field ids come from ``schema`` when it is a LanceSchema, else from the dataset at
    ``uri`` if one exists, else they are assigned from 0.  The files have the dataset's file
    version, or ``data_storage_version`` for a dataset that does not exist yet.  Commit the result with
    ``commit(uri, Append(fragments), read_version=...)``.  ``manifest_store``: the external
    manifest store the dataset commits through, to read its latest version through it.
    """
    store = ObjectStore(uri, storage_options)
    arrow_schema = schema.to_arrow() if isinstance(schema, LanceSchema) else schema
    data_schema, batches = iter_batches(data, arrow_schema)
    # commits nothing, so not refused here: the commit of these fragments checks the handler
    existing = try_open_latest(store, commit_handler_for(store, manifest_store), check_writable=False)
    if existing is not None:
        # new files must have the dataset's file version (pylance refuses a mix)
        version = require_writable(existing.data_storage_version, uri)
        lance_schema = schema if isinstance(schema, LanceSchema) else existing.schema
    else:
        version = normalize_storage_version(data_storage_version)
        lance_schema = schema if isinstance(schema, LanceSchema) else new_schema(arrow_schema or data_schema)
    return write_fragment_files(store, batches, lance_schema, version=version, max_rows_per_file=max_rows_per_file)
