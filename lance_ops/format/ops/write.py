"""Writing data: uncommitted fragments (``write_fragments``) and ``write_dataset``.

Fragments are written as Lance data files (file format 2.0, 2.1 or 2.2: the dataset's) under ``data/``; nothing is visible until a
transaction referencing them commits, so a failed writer leaves only orphan files (removed
by cleanup).
"""

import io
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal, Protocol

import pyarrow as pa

from lance_ops.format.errors import ArgumentTypeError, EmptySchemaError, InvalidArgumentError, SchemaError
from lance_ops.format.file.writer import DataFileWriter, data_file_field_info
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.ops.inputs import blobs_as_v2, coerce_batches, fit_batch
from lance_ops.format.schema import LanceSchema
from lance_ops.format.table.file_versions import normalize_storage_version, require_writable
from lance_ops.format.table.fragment import DataFile, FragmentMetadata
from lance_ops.format.txn.handlers import commit_handler_for, try_open_latest
from lance_ops.format.txn.orphans import remove_fragment_files

DEFAULT_MAX_ROWS_PER_FILE = 1_048_576
DATA_DIR = "data"
WriteMode = Literal["create", "append", "overwrite"]

RESERVED_COLUMNS = ("_rowid", "_rowaddr", "_row_created_at_version", "_row_last_updated_at_version")


def new_schema(schema: pa.Schema) -> LanceSchema:
    """The Lance schema of a new dataset; metadata column names are reserved (as in pylance).

    Raises:
        EmptySchemaError: no columns (an ``OSError`` too, as pylance's).
        SchemaError: duplicate or reserved column names.
    """
    if not isinstance(schema, pa.Schema):
        raise ArgumentTypeError(f"schema must be a pyarrow.Schema, got {type(schema).__name__}")
    if len(schema) == 0:
        raise EmptySchemaError("Cannot write with an empty schema: a dataset needs at least one column; the data has none")
    check_unique_names(schema.names, "the data")
    check_metadata_utf8(schema, "the data")
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
    """(schema, batches) of any input pylance's writers take (:func:`.inputs.coerce_batches`)."""
    return coerce_batches(data, schema)


def conform_batch(batch: pa.RecordBatch, target: pa.Schema, where: str) -> pa.RecordBatch:
    """``batch`` fitted to ``target`` (:func:`.inputs.fit_batch`: column order, missing nullable
    columns as nulls, lossless casts)."""
    return fit_batch(batch, target, where)


def check_metadata_utf8(schema: pa.Schema, where: str) -> None:
    """Refuse schema or field metadata that is not UTF-8, as pylance does (a ``ValueError``
    naming the key; pylance would otherwise read it back with replacement characters).

    Raises:
        InvalidArgumentError: the first key or value that is not UTF-8.
    """
    items = [("schema", schema.metadata)] + [(f"field {f.name!r}", f.metadata) for f in _all_fields(schema)]
    for what, md in items:
        for k, v in (md or {}).items():
            for part in (k, v):
                try:
                    part.decode("utf-8")
                except UnicodeDecodeError:
                    raise InvalidArgumentError(
                        f"{where}: {what} metadata key {k!r} is not valid utf8 (its {'key' if part is k else 'value'}); "
                        "Consider base64 encode for generic binary metadata."
                    ) from None


def _all_fields(schema: pa.Schema) -> Iterator[pa.Field]:
    stack = list(schema)
    while stack:
        f = stack.pop()
        yield f
        t = f.type
        if pa.types.is_struct(t):
            stack.extend(t.field(i) for i in range(t.num_fields))
        elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
            stack.append(t.value_field)
        elif pa.types.is_map(t):
            stack.extend((t.key_field, t.item_field))


class WriteProgress(Protocol):
    """pylance's ``FragmentWriteProgress`` callbacks (``lance_ops.format.FragmentWriteProgress``)."""

    def begin(self, fragment: FragmentMetadata) -> None: ...
    def complete(self, fragment: FragmentMetadata) -> None: ...


def _column_bytes(arr: pa.Array) -> float:
    """Arrow bytes of ``arr``'s rows (a fixed-size list of fixed-width values by its width: a
    slice's ``nbytes`` can count its parent's whole child buffer)."""
    t = arr.type
    if pa.types.is_fixed_size_list(t) and getattr(t.value_type, "bit_width", 0) >= 8:
        return len(arr) * t.list_size * t.value_type.bit_width / 8
    return float(arr.nbytes)


class _ByteCut:
    """Where ``max_bytes_per_file`` closes a file: after the first input batch that brings the
    Arrow bytes written to it to the limit (pylance checks the bytes its encoders flushed after
    each batch; for small compressible columns those lag behind, and its files come out larger)."""

    def __init__(self, max_bytes: int | None, *, flushed_pages: bool = False) -> None:
        if max_bytes is not None and (isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes <= 0):
            raise InvalidArgumentError(f"max_bytes_per_file must be a positive integer, got {max_bytes!r}")
        self.limit = max_bytes
        #: compaction's cut (pylance's rewrite): only whole pages of a column count as flushed
        self.page = PAGE_BYTES if flushed_pages else 0
        self.columns: list[float] = []

    def open(self) -> None:
        self.columns = []

    @property
    def written(self) -> float:
        if self.page:
            return sum(c // self.page * self.page for c in self.columns)
        return sum(self.columns)

    def rows(self, batch: pa.RecordBatch, take: int) -> int:
        """``take`` rows of ``batch`` are written (counted; a batch is not split, as pylance
        checks its flushed bytes after each batch)."""
        if self.limit is not None and batch.num_rows and take > 0:
            if not self.columns:
                self.columns = [0.0] * batch.num_columns
            for i, col in enumerate(batch.columns):
                self.columns[i] += take * _column_bytes(col) / batch.num_rows
        return take

    def full(self) -> bool:
        return self.limit is not None and self.written >= self.limit


#: the page size of pylance's encoders (and of :class:`DataFileWriter`): a column's bytes reach
#: the file in pages of this size
PAGE_BYTES = 8 * 1024 * 1024


def rechunked(batches: Iterator[pa.RecordBatch], size: int) -> Iterator[pa.RecordBatch]:
    """The same rows in batches of ``size`` rows (the last one shorter), as a reader with
    ``batch_size`` yields them."""
    if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
        raise InvalidArgumentError(f"batch_size must be a positive integer, got {size!r}")
    pending: list[pa.RecordBatch] = []
    have = 0
    for b in batches:
        pos = 0
        while pos < b.num_rows:
            piece = b.slice(pos, size - have)
            pending.append(piece)
            have += piece.num_rows
            pos += piece.num_rows
            if have == size:
                yield pa.Table.from_batches(pending).combine_chunks().to_batches()[0]
                pending, have = [], 0
    if have:
        yield pa.Table.from_batches(pending).combine_chunks().to_batches()[0]


def write_fragment_files(
    store: ObjectStore,
    batches: Iterator[pa.RecordBatch],
    schema: LanceSchema,
    *,
    version: str,
    max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
    file_rows: Sequence[int] | None = None,
    background: bool = True,
    max_bytes_per_file: int | None = None,
    progress: WriteProgress | None = None,
    page_bytes: int | None = None,
    flushed_pages: bool = False,
) -> list[FragmentMetadata]:
    """Stream batches into data files of file format ``version`` and at most ``max_rows_per_file``
    rows; one fragment per file. ``file_rows`` (compaction) gives the row count of each file
    instead, in order, its last entry repeating (``background=False``: pages are encoded on the
    calling thread, for callers that write from several threads).  ``max_bytes_per_file`` also
    closes a file after the input batch that brings the Arrow bytes written to it to the limit
    (``flushed_pages``, compaction's cut: the bytes of the whole 8 MiB pages written).  ``progress``: pylance's ``FragmentWriteProgress``,
    ``begin(fragment)`` when a file is opened, ``complete(fragment)`` when it is finished.
    ``page_bytes``: the writer's target page size (default 8 MiB; smaller pages bound the
    encoder's working set, which is a few times a page).

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
        if progress is not None:
            progress.complete(frags[-1])

    cut = _ByteCut(max_bytes_per_file, flushed_pages=flushed_pages)
    page_size = {} if page_bytes is None else {"max_page_bytes": page_bytes}

    try:
        for batch in batches:
            batch = conform_batch(batch, target, store.uri)
            pos = 0
            while pos < batch.num_rows:
                if writer is None:
                    name = random_data_file_name()
                    sink = store.open_output(f"{DATA_DIR}/{name}")
                    writer = DataFileWriter(sink, schema, version=version, sidecar=_sidecars(store, name),
                                            background=background, **page_size)
                    cut.open()
                    if progress is not None:
                        progress.begin(FragmentMetadata(id=0, files=(DataFile(name, tuple(fields), tuple(columns),
                                                                              major, minor),), physical_rows=0))
                limit = file_rows[min(len(frags), len(file_rows) - 1)] if file_rows else max_rows_per_file
                take = cut.rows(batch, min(batch.num_rows - pos, limit - writer.num_rows))
                writer.write_batch(batch.slice(pos, take))
                pos += take
                if writer.num_rows >= limit or cut.full():
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
    max_bytes_per_file: int | None = None,
    progress: WriteProgress | None = None,
    max_rows_per_group: int | None = None,
) -> list[FragmentMetadata]:
    """Write data files for ``uri`` without committing; returns picklable fragment metadata
    (``max_bytes_per_file``, ``progress``: as :func:`write_fragment_files`; pylance's layout knob
    ``max_rows_per_group`` is accepted and ignored).

    The field ids come from ``schema`` when it is a LanceSchema, else from the dataset at
    ``uri`` if one exists, else they are assigned from 0.  The files have the dataset's file
    version, or ``data_storage_version`` for a dataset that does not exist yet.  Commit the result with
    ``commit(uri, Append(fragments), read_version=...)``.  ``manifest_store``: the external
    manifest store the dataset commits through, to read its latest version through it.
    """
    uri = getattr(uri, "uri", uri)  # pylance also takes the dataset (a LanceDataset) itself
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
        lance_schema = schema if isinstance(schema, LanceSchema) else new_schema(
            blobs_as_v2(arrow_schema or data_schema, version))
    return write_fragment_files(store, batches, lance_schema, version=version, max_rows_per_file=max_rows_per_file,
                                max_bytes_per_file=max_bytes_per_file, progress=progress)
