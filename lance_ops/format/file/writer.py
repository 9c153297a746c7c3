"""Lance v2 data file writer, format 2.0 (docs/FORMAT.md §3, §4).

One column per Lance field in depth-first order (struct header columns and list offsets columns
included).  Each column queues incoming arrays until ``max_page_bytes`` of encoded data is
pending, then writes pages of at most about ``max_page_bytes``; the rest is flushed by
:meth:`DataFileWriter.finish`.  Pages are written as soon as they are encoded, so memory stays
bounded by roughly one page per column plus the current batch.

Every page uses exactly the encodings pylance 14 writes for 2.0 (Nullable+Flat, Binary with u64
end offsets and ``null_adjustment``, FixedSizeList, List offsets, SimpleStruct, and Dictionary
for Arrow dictionary columns); all buffers are padded to 64 bytes with ``0x48``.
"""

import os
import struct
from collections import deque
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, BinaryIO

import pyarrow as pa
from google.protobuf import any_pb2

from lance_ops.format._proto import encodings_v2_0_pb2 as epb
from lance_ops.format._proto import file2_pb2, file_pb2
from lance_ops.format.errors import SchemaError, UnsupportedFeatureError
from lance_ops.format.file import encodings as enc
from lance_ops.format.file.blob_columns import is_blob_field
from lance_ops.format.file.blob_writer import (
    BlobV1Encoder,
    BlobV2Encoder,
    SidecarOpener,
    blob_column_encoding,
    file_schema_fields,
    leaf_field_ids,
)
from lance_ops.format.file.encodings import physical_bits
from lance_ops.format.file.field_encoders import (
    BINARY_TYPES,
    Leaf21Encoder,
    LeafEncoder,
    ListEncoder,
    StructEncoder,
    leaf_row_bytes,
    storage_array,
)
from lance_ops.format.file.maps import contains_map, map_as_list
from lance_ops.format.file.v21 import kernels
from lance_ops.format.file.v21.encode import encode_page
from lance_ops.format.file.v21.fsst_reuse import FileTables
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.schema import LanceField, LanceSchema, types_equivalent

__all__ = ["DataFileWriter", "write_data_file", "data_file_field_info", "FOOTER_VERSION"]

PAD_BYTE = b"\x48"
ALIGN = 64
MAGIC = b"LANC"
FOOTER = struct.Struct("<QQQIIHH4s")
#: footer (major, minor) written for each file version
FOOTER_VERSION = {"2.0": (0, 3), "2.1": (2, 1), "2.2": (2, 2)}



def _any(type_url: str, msg: Any) -> bytes:
    return any_pb2.Any(type_url=type_url, value=msg.SerializeToString()).SerializeToString()


def _column_encoding_bytes() -> bytes:
    ce = epb.ColumnEncoding()
    ce.values.SetInParent()
    return _any(enc.COLUMN_ENCODING_URL, ce)


_COLUMN_ENCODING = _column_encoding_bytes()


class _Sink:
    """Tracks the write position and pads buffers to 64 bytes."""

    def __init__(self, f: BinaryIO) -> None:
        self.f = f
        self.pos = 0

    def write(self, data: Any) -> None:
        mv = memoryview(data)
        if mv.nbytes:
            self.f.write(mv)
            self.pos += mv.nbytes

    def write_buffer(self, data: Any) -> tuple[int, int]:
        """Write one page buffer (bytes-like, or a list of parts written back to back)."""
        start = self.pos
        if isinstance(data, list):
            for part in data:
                self.write(part)
        else:
            self.write(data)
        size = self.pos - start
        pad = -size % ALIGN
        if pad:
            self.f.write(PAD_BYTE * pad)
            self.pos += pad
        return start, size


class DataFileWriter:
    """Streams RecordBatches into one Lance v2 data file (format 2.0, 2.1 or 2.2).

    Args:
        sink: binary stream to write to (not closed by the writer).
        schema: the Lance schema (field ids are kept in the file's FileDescriptor).
        version: file format version, ``"2.0"``, ``"2.1"`` or ``"2.2"`` (2.1+ pages are
            encoded by :mod:`.v21.encode`).
        max_page_bytes: target encoded size of a page; columns are split into pages of about
            this size.

    Raises:
        UnsupportedFeatureError: another version, or a type the version cannot store (map).
    """

    def __init__(
        self,
        sink: BinaryIO,
        schema: LanceSchema,
        *,
        version: str = "2.0",
        max_page_bytes: int = 8 * 1024 * 1024,
        sidecar: SidecarOpener | None = None,
        background: bool = True,
    ) -> None:
        self._sidecar = sidecar
        #: large 2.1+ pages may be encoded on the process's encoder thread (False: callers that
        #: write from several threads of their own keep each file's encoding on its thread)
        self._background = background  # opens data/<stem>/<name> beside this file (blob v2 payloads)
        self._column_encodings: dict[int, bytes] = {}
        if version not in FOOTER_VERSION:
            raise UnsupportedFeatureError(
                f"Lance file version {version!r} cannot be written (lance_ops writes {', '.join(FOOTER_VERSION)})"
            )
        if max_page_bytes <= 0:
            raise ValueError(f"max_page_bytes must be positive, got {max_page_bytes}")
        self.schema = schema
        self.version = version
        self.max_page_bytes = int(max_page_bytes)
        self._sink = _Sink(sink)
        self._num_rows = 0
        self._finished = False
        self._pending: deque[tuple[int, int, Future[Any]]] = deque()
        self._fsst = FileTables()  # FSST tables of earlier files of a rewrite (fsst_reuse.py)
        #: pages of the final flush, collected to be shared out (see :meth:`_encode_final`)
        self._final: list[tuple[int, int, Any, str, Any]] | None = None
        self._global_buffers: list[bytes] = []
        self._arrow_schema = schema.to_arrow()
        if version == "2.0":
            self._column_of = {f.id: i for i, f in enumerate(schema.fields)}
            self._pages: list[list[file2_pb2.ColumnMetadata.Page]] = [[] for _ in schema.fields]
            self._encoders: list[Any] = [
                self._make_encoder(f, self._arrow_schema.field(f.name).type) for f in schema.top_level()
            ]
            self._top_encoders: list[list[Any]] = [[e] for e in self._encoders]
        else:
            leaves = data_file_field_info(schema, version)[0]
            self._column_of = {fid: i for i, fid in enumerate(leaves)}
            self._pages = [[] for _ in leaves]
            self._page_rows = [0 for _ in leaves]
            # maps are written as the lists of entries they are (maps.py); pylance allows them from 2.2
            tops = [(f, self._arrow_schema.field(f.name).type) for f in schema.top_level()]
            self._views = [map_as_list(t) if contains_map(t) else None for _, t in tops]
            if version == "2.1":
                for (f, t), view in zip(tops, self._views, strict=True):
                    if view is not None:
                        raise UnsupportedFeatureError(
                            f"field {f.name!r} of type {t}: maps cannot be written in Lance 2.1 files (2.2+, as pylance)"
                        )
            self._top_encoders = [
                self._leaf_encoders(f, view or t) for (f, t), view in zip(tops, self._views, strict=True)
            ]
            self._encoders = [e for es in self._top_encoders for e in es]

    def _leaf_encoders(self, top: LanceField, dtype: pa.DataType) -> list[Any]:
        """One encoder per leaf below ``top`` (structs: each child; lists: the item)."""
        if is_blob_field(top):
            if top.logical_type != "struct" or self.version == "2.1":
                raise UnsupportedFeatureError(
                    f"field {top.name!r}: blob columns are written by lance_ops in Lance 2.0 files (large_binary) "
                    "and, as blob v2, in 2.2 files (pylance refuses 2.1 blob v2 too)"
                )
            return [BlobV2Encoder(self, top, self._column_of[top.id], self._sidecar)]
        found: list[tuple[LanceField, pa.DataType, list[int]]] = []

        def walk(f: LanceField, t: pa.DataType, path: list[int]) -> None:
            if isinstance(t, pa.BaseExtensionType):
                t = t.storage_type
            kids = self.schema.children(f.id)
            if pa.types.is_struct(t):
                if not kids:
                    raise UnsupportedFeatureError(f"field {f.name!r}: empty structs cannot be written in Lance {self.version}")
                for i, c in enumerate(kids):
                    walk(c, t.field(i).type, [*path, i])
            elif pa.types.is_list(t) or pa.types.is_large_list(t):
                walk(kids[0], t.value_type, path)
            elif kids:
                raise UnsupportedFeatureError(f"field {f.name!r} of type {t} cannot be written in Lance {self.version}")
            else:
                if f.logical_type == "json":
                    raise UnsupportedFeatureError(f"field {f.name!r}: JSON (lance.json) columns cannot be written by lance_ops")
                found.append((f, t, path))

        walk(top, dtype, [])
        return [
            Leaf21Encoder(self, top, dtype, path, leaf, t, self._column_of[leaf.id], len(found))
            for leaf, t, path in found
        ]

    def _make_encoder(self, fld: LanceField, dtype: pa.DataType) -> Any:
        children = self.schema.children(fld.id)
        if is_blob_field(fld):
            if fld.logical_type not in ("large_binary", "binary"):
                raise UnsupportedFeatureError(f"field {fld.name!r}: blob v2 columns need Lance 2.2 files (as pylance)")
            self._column_encodings[self._column_of[fld.id]] = blob_column_encoding()
            return BlobV1Encoder(self, fld, self._column_of[fld.id])
        if pa.types.is_struct(dtype):
            kids = [self._make_encoder(c, dtype.field(i).type) for i, c in enumerate(children)]
            return StructEncoder(self, fld, dtype, kids)
        if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
            return ListEncoder(self, fld, dtype, self._make_encoder(children[0], dtype.value_type))
        if fld.logical_type == "json":
            raise UnsupportedFeatureError(
                f"field {fld.name!r}: JSON (lance.json) columns cannot be written by lance_ops"
            )
        if pa.types.is_map(dtype):
            raise UnsupportedFeatureError(
                f"field {fld.name!r}: map columns cannot be written in Lance file version 2.0"
            )
        if (
            pa.types.is_dictionary(dtype)
            and dtype.value_type not in BINARY_TYPES
            and physical_bits(dtype.value_type) is None
        ):
            raise UnsupportedFeatureError(
                f"field {fld.name!r}: dictionary of {dtype.value_type} is not supported"
            )
        if isinstance(dtype, pa.BaseExtensionType):
            dtype = dtype.storage_type
        if dtype not in BINARY_TYPES:
            try:
                leaf_row_bytes(dtype)  # raises for types 2.0 cannot store
            except UnsupportedFeatureError as e:
                raise UnsupportedFeatureError(f"field {fld.name!r}: {e}") from None
        return LeafEncoder(self, fld, dtype)

    @property
    def num_rows(self) -> int:
        return self._num_rows

    def write_batch(self, batch: pa.RecordBatch | pa.Table) -> None:
        """Append rows.  Columns are matched by name; types must match the schema.

        Raises:
            SchemaError: missing/extra column, wrong type, or nulls in a non-nullable field.
            UnsupportedFeatureError: null structs (not representable in 2.0).
        """
        if self._finished:
            raise ValueError("write_batch() after finish()")
        if not isinstance(batch, (pa.RecordBatch, pa.Table)):
            raise TypeError(f"expected a pyarrow RecordBatch or Table, got {type(batch).__name__}")
        names = batch.schema.names
        if len(set(names)) != len(names):
            raise SchemaError(f"batch has duplicate column names: {names}")
        wanted = [f.name for f in self.schema.top_level()]
        for name in names:
            if name not in wanted:
                raise SchemaError(f"column {name!r} of the batch is not in the schema (columns: {wanted})")
        columns = []
        for name in wanted:
            if name not in names:
                raise SchemaError(f"column {name!r} of the schema is missing from the batch")
            col = batch.column(name)
            expected = self._arrow_schema.field(name).type
            if not types_equivalent(expected, col.type):
                raise SchemaError(f"column {name!r} has type {col.type} but the schema says {expected}")
            columns.append(col)
        views = getattr(self, "_views", None) or [None] * len(columns)
        for encoders, col, view in zip(self._top_encoders, columns, views, strict=True):
            chunks = col.chunks if isinstance(col, pa.ChunkedArray) else [col]
            for chunk in chunks:
                if view is not None:
                    chunk = chunk.view(view)
                for encoder in encoders:
                    encoder.add(storage_array(chunk))
        self._num_rows += batch.num_rows

    def add_global_buffer(self, data: bytes) -> int:
        """Queue a global buffer (written after the FileDescriptor); return its index (1, 2, ...).

        Index files keep codebooks, IVF centroids and row-address sets in global buffers and
        name them from the schema metadata (``"lance:ivf": "1"``).
        """
        if self._finished:
            raise ValueError("add_global_buffer() after finish()")
        self._global_buffers.append(bytes(data))
        return len(self._global_buffers)

    def _emit_page(self, column: int, length: int, buffers: list[Any], encoding: epb.ArrayEncoding) -> None:
        page = file2_pb2.ColumnMetadata.Page()
        for b in buffers:
            pos, size = self._sink.write_buffer(b)
            page.buffer_offsets.append(pos)
            page.buffer_sizes.append(size)
        page.length = length
        page.encoding.direct.encoding = _any(enc.ARRAY_ENCODING_URL, encoding)
        self._pages[column].append(page)

    def _encode_page21(self, column: int, length: int, levels: Any, where: str) -> None:
        """Encode a page of ``column`` and emit it; with the compiled kernels the encoding runs
        on a background thread (FSST and NumPy release the GIL, so it overlaps the caller's
        next batch), at most :data:`_MAX_PENDING_PAGES` pages ahead of the file."""
        reuse = self._fsst.page(where)
        if self._final is not None:
            self._final.append((column, length, levels, where, reuse))
            return
        use_pool = self._background and kernels.get() is not None and length >= _INLINE_PAGE_ROWS
        pool = _encode_pool() if use_pool else None
        if pool is None:
            while self._pending:  # pages go into the file in order
                self._emit_pending()
            buffers, layout = encode_page(levels, self.version, where, reuse)
            self._emit_page21(column, length, buffers, layout)
            return
        self._pending.append((column, length, pool.submit(encode_page, levels, self.version, where, reuse)))
        while len(self._pending) > _MAX_PENDING_PAGES:
            self._emit_pending()

    def _encode_final(self, pages: list[tuple[int, int, Any, str, Any]]) -> None:
        """The pages left at :meth:`finish`, in order: there is no next batch to overlap with, so
        the encoder thread takes every other large page and this thread encodes the rest (a
        single page is encoded here: handing it over and waiting only adds a wait)."""
        big = [i for i, (_, length, _, _, _) in enumerate(pages) if length >= _INLINE_PAGE_ROWS]
        share = set(big[0::2]) if len(big) > 1 and self._background and kernels.get() is not None else set()
        futures = {i: _encode_pool().submit(encode_page, pages[i][2], self.version, pages[i][3], pages[i][4])
                   for i in sorted(share)}
        for i, (column, length, levels, where, reuse) in enumerate(pages):
            fut = futures.get(i)
            if fut is None:
                fut = Future()
                fut.set_result(encode_page(levels, self.version, where, reuse))
            self._pending.append((column, length, fut))
            while self._pending and self._pending[0][2].done():
                self._emit_pending()

    def _emit_pending(self) -> None:
        column, length, fut = self._pending.popleft()
        buffers, layout = fut.result()
        self._emit_page21(column, length, buffers, layout)

    def _emit_page21(self, column: int, length: int, buffers: list[Any], layout: Any) -> None:
        page = file2_pb2.ColumnMetadata.Page()
        for b in buffers:
            pos, size = self._sink.write_buffer(b)
            page.buffer_offsets.append(pos)
            page.buffer_sizes.append(size)
        page.length = length
        page.priority = self._page_rows[column]
        self._page_rows[column] += length
        page.encoding.direct.encoding = _any(enc.PAGE_LAYOUT_21_URL, layout)
        self._pages[column].append(page)

    def finish(self) -> int:
        """Flush all pages and write the file metadata and footer; return the file size.

        Layout: data buffers, FileDescriptor (global buffer 0), column metadata, CMO table,
        GBO table, 40-byte footer with version (0, 3).  The sink is not closed.
        """
        if self._finished:
            raise ValueError("finish() called twice")
        self._finished = True
        self._final = []
        try:
            for e in self._encoders:
                e.flush(final=True)
            pages = self._final
        finally:
            self._final = None
        self._encode_final(pages)
        while self._pending:
            self._emit_pending()
        self._fsst.publish()
        sink = self._sink
        fd = file_pb2.FileDescriptor()
        fd.schema.fields.extend(file_schema_fields(self.schema, self.version))
        for k, v in self.schema.metadata.items():
            fd.schema.metadata[k] = bytes(v)
        fd.length = self._num_rows
        gbo = [(sink.pos, 0)]
        sink.write(fd.SerializeToString())
        gbo[0] = (gbo[0][0], sink.pos - gbo[0][0])
        for extra in self._global_buffers:
            sink.write(PAD_BYTE * (-sink.pos % ALIGN))  # pylance requires 64-byte aligned global buffers
            gbo.append(sink.write_buffer(extra))
        column_meta_start = sink.pos
        cmo = []
        for pages in self._pages:
            cm = file2_pb2.ColumnMetadata()
            cm.encoding.direct.encoding = self._column_encodings.get(len(cmo), _COLUMN_ENCODING)
            cm.pages.extend(pages)
            start = sink.pos
            sink.write(cm.SerializeToString())
            cmo.append((start, sink.pos - start))
        cmo_offset = sink.pos
        sink.write(b"".join(struct.pack("<QQ", p, s) for p, s in cmo))
        gbo_offset = sink.pos
        sink.write(b"".join(struct.pack("<QQ", p, s) for p, s in gbo))
        major, minor = FOOTER_VERSION[self.version]
        sink.write(
            FOOTER.pack(
                column_meta_start, cmo_offset, gbo_offset, len(gbo), len(self._pages), major, minor, MAGIC
            )
        )
        return sink.pos


#: pages encoded ahead of the file by the background encoder (each holds its encoded buffers)
_MAX_PENDING_PAGES = 2
#: pages of fewer rows are encoded on the caller's thread: there is little to overlap (a small
#: file's pages all come at ``finish``), and each hand-off to the encoder thread and back costs
#: CPU and, on a loaded machine, a wait to be scheduled (materialising 200 fragments of 9,000
#: rows, load 8: median 2.84 s inline against 3.44 s through the thread, CPU 1.25 / 1.39 s)
_INLINE_PAGE_ROWS = 65_536
_POOL: dict[int, ThreadPoolExecutor] = {}


def _encode_pool() -> ThreadPoolExecutor:
    """One encoder thread per process (made anew after a fork: Spark forks its workers)."""
    pid = os.getpid()
    pool = _POOL.get(pid)
    if pool is None:
        _POOL.clear()
        pool = _POOL[pid] = ThreadPoolExecutor(1, thread_name_prefix="lance_ops-encode")
    return pool


def data_file_field_info(schema: LanceSchema, version: str = "2.0") -> tuple[list[int], list[int]]:
    """``(DataFile.fields, DataFile.column_indices)`` for a file of ``version`` written with ``schema``.

    In 2.0 every field (parents included) has a column, in depth-first order (§4.1); in 2.1+
    only leaf fields do (§5), in the same order.
    """
    if version == "2.0":
        ids = schema.field_ids()
    else:
        ids = leaf_field_ids(schema)  # a blob v2 field is one column (blob_writer.py)
    return ids, list(range(len(ids)))


def write_data_file(
    store: ObjectStore,
    rel_path: str,
    data: pa.Table | pa.RecordBatch | Iterable[pa.RecordBatch],
    schema: LanceSchema,
    *,
    max_page_bytes: int = 8 * 1024 * 1024,
    version: str = "2.0",
) -> tuple[int, int]:
    """Write ``data`` as one data file of ``version`` at ``rel_path``; return ``(num_rows, file_size)``."""
    with store.open_output(rel_path) as f:
        w = DataFileWriter(f, schema, max_page_bytes=max_page_bytes, version=version)
        if isinstance(data, (pa.Table, pa.RecordBatch)):
            w.write_batch(data)
        else:
            for batch in data:
                w.write_batch(batch)
        size = w.finish()
    return w.num_rows, size
