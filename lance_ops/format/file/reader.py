"""Lance v2 data file reader, format 2.0 (docs/FORMAT.md §3, §4.4).

Opening reads the footer and all file metadata with at most two range reads (the last 64 KiB,
then whatever of the metadata lies before it).  Reading decodes only the requested columns and
only the pages overlapping the requested rows; each page's buffers are fetched with one
``read_ranges`` call.  Files of version 2.1/2.2 are decoded by :mod:`.v21` (structural
layouts: mini-block, full-zip, constant; leaf columns, lists of leaves, structs of leaves);
anything it does not implement raises :class:`UnsupportedFeatureError` naming file, column and
encoding.

Speed: local files are read with ``preadv`` into buffers from Arrow's memory pool (which
recycles page-sized blocks); parsed footers of local files and parsed schemas are cached per
process (data files are immutable; the cache key includes size, mtime and inode); a
:class:`PagePrefetcher` reads and decodes upcoming pages in background threads.
"""

import copy
import dataclasses
import os
import struct
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
from google.protobuf import any_pb2
from google.protobuf.message import DecodeError

from lance_ops.format._proto import encodings_v2_0_pb2 as epb
from lance_ops.format._proto import encodings_v2_1_pb2 as e21
from lance_ops.format._proto import file2_pb2, file_pb2
from lance_ops.format.errors import (
    CorruptFileError,
    ObjectNotFoundError,
    SchemaError,
    UnsupportedFeatureError,
)
from lance_ops.format.file import blob_columns as blobs
from lance_ops.format.file import parts, v21
from lance_ops.format.file.columns import (
    Column,
    LeafColumn,
    ListColumn,
    Page,
    StructColumn,
    Tree21Column,
    flat_fsl,
)
from lance_ops.format.file.encodings import (
    ARRAY_ENCODING_URL,
    COLUMN_ENCODING_URL,
    PAGE_LAYOUT_21_URL,
    PageBuffers,
    decode_array,
)
from lance_ops.format.file.maps import MapView, contains_map, map_as_list
from lance_ops.format.file.prefetch import PagePrefetcher
from lance_ops.format.io.io_stats import record_read
from lance_ops.format.io.object_store import ObjectStore, open_regular
from lance_ops.format.schema import LanceField, LanceSchema

__all__ = ["DataFileReader", "PagePrefetcher", "TAIL_BYTES"]

FOOTER = struct.Struct("<QQQIIHH4s")
MAGIC = b"LANC"
#: bytes read from the end of the file on open
TAIL_BYTES = 64 * 1024

#: parsed 2.1+ page layouts by their (Any-wrapped) bytes: pages of fixed-width columns repeat
#: the same layout in every file (read-only once parsed; cleared when full)
_LAYOUTS: dict[bytes, Any] = {}
_LAYOUT_CACHE_ENTRIES = 4096
_LAYOUT_CACHE_MAX_BYTES = 512

#: sanity bound on the rows of one page (a page is decoded whole)
_MAX_PAGE_ROWS = 2**32

#: file versions whose pages use the structural (2.1+) layouts this reader implements
_V21_VERSIONS = ((2, 1), (2, 2))

_VERSIONS = {(0, 3): (2, 0), (2, 0): (2, 0), (2, 1): (2, 1), (2, 2): (2, 2), (2, 3): (2, 3)}


class _LRU:
    """A small thread-safe LRU map."""

    def __init__(self, entries: int) -> None:
        self._entries = entries
        self._data: OrderedDict[Any, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Any) -> Any:
        with self._lock:
            hit = self._data.get(key)
            if hit is not None:
                self._data.move_to_end(key)
            return hit

    def put(self, key: Any, value: Any) -> None:
        with self._lock:
            self._data[key] = value
            while len(self._data) > self._entries:
                self._data.popitem(last=False)


#: parsed file schemas (by their protobuf bytes) and projections of them (by bytes + field ids)
_SCHEMA_CACHE = _LRU(256)
#: parsed footers of local files, keyed by (path, size, stat size, mtime, inode): data files are
#: immutable once written, and a rewrite under the same name changes the stat key
_METADATA_CACHE = _LRU(1024)
_METADATA_CACHE_MAX_BYTES = 1 << 20  # metadata bigger than this (per file) is not cached
#: parsed FileDescriptors (read-only) with their schema keys, by their bytes
_DESCRIPTORS = _LRU(64)
_CACHED_ATTRS = (
    "file_size", "footer_version", "version", "num_columns", "_base", "_buf", "_gbo", "_cmo",
    "file_descriptor", "schema", "num_rows", "_column_of", "_pages_cache", "_schema_key",
)


def _pread_buffers(path: str, ranges: Sequence[tuple[int, int]], where: str) -> list[pa.Buffer]:
    record_read(sum(size for _, size in ranges), len(ranges))
    fd = open_regular(path)
    try:
        out = []
        for pos, size in ranges:
            buf = pa.allocate_buffer(size)
            got = 0
            view = memoryview(buf)
            while got < size:
                n = _preadv(fd, view[got:], pos + got)
                if n <= 0:
                    raise CorruptFileError(
                        where, f"short read of page buffer at {pos}: {got} of {size} bytes (truncated?)"
                    )
                got += n
            out.append(buf)
        return out
    finally:
        os.close(fd)


def _preadv(fd: int, view: memoryview, offset: int) -> int:
    if hasattr(os, "preadv"):
        return os.preadv(fd, [view], offset)
    data = os.pread(fd, len(view), offset)  # pragma: no cover - platforms without preadv
    view[: len(data)] = data
    return len(data)


class DataFileReader:
    """Reads one Lance v2 data file (formats 2.0, 2.1, 2.2).

    Attributes:
        num_rows: rows in the file (FileDescriptor.length).
        schema: the file's Lance schema (field ids are the dataset's).
        version: ``(major, minor)`` of the file format: footer (0,3)/(2,0) -> (2,0), (2,1), (2,2).

    Raises:
        CorruptFileError: wrong magic, truncated file, lengths beyond the file size, bad protobuf.
        UnsupportedFeatureError: legacy (v1) files.
    """

    #: the file rows its caller keeps (bool per row; None: all): see :meth:`kept_rows`
    row_mask: np.ndarray | None = None

    def __init__(self, store: ObjectStore, rel_path: str, *, file_size: int | None = None) -> None:
        self.store = store
        self.rel_path = rel_path
        self.path = store.full_path(rel_path)  # refuses paths outside the dataset root
        # the preadv fast path only for the plain local store (wrappers keep their read_ranges)
        self._local_path = self.path if type(store) is ObjectStore and store.is_local else None
        key = None
        if self._local_path is not None:
            try:
                st = os.stat(self._local_path)
            except OSError:
                st = None  # the ordinary path below reports it
            if st is not None:
                if file_size is None:
                    file_size = st.st_size
                key = (self._local_path, int(file_size), st.st_size, st.st_mtime_ns, st.st_ino)
                cached = _METADATA_CACHE.get(key)
                if cached is not None:
                    self.__dict__.update(cached)
                    return
        self._open(store, rel_path, file_size)
        if key is not None and len(self._buf) <= _METADATA_CACHE_MAX_BYTES:
            _METADATA_CACHE.put(key, {k: self.__dict__[k] for k in _CACHED_ATTRS})

    def _open(self, store: ObjectStore, rel_path: str, file_size: int | None) -> None:
        a, b, c, ngb, ncols, tail_start, tail, meta_end = self._read_footer(store, rel_path, file_size)
        self.num_columns = ncols
        self._base = tail_start
        self._buf = tail
        # a file no bigger than the tail read is now whole in memory: its pages are served from
        # it (one read per small file, no reopening per page); not part of the footer cache.
        # Plain stores only: a wrapping store (fault injection) keeps seeing every page read.
        self._whole = tail if tail_start == 0 and type(store) is ObjectStore else None
        self._load_offset_tables(a, b, c, ngb, ncols, meta_end)
        self._load_descriptor()
        self._pages_cache: dict[int, list[Page]] = {}
        # keep only the metadata (the tail read may have pulled in the end of the data)
        first = min(a, b, c, int(self._gbo[:, 0].min()), int(self._cmo[:, 0].min()) if ncols else a)
        if first > self._base:
            self._buf = self._buf[first - self._base :]
            self._base = first

    def _read_footer(
        self, store: ObjectStore, rel_path: str, file_size: int | None
    ) -> tuple[int, int, int, int, int, int, bytes, int]:
        """Read the file's tail and check its footer: (column meta start, column metadata offsets
        start, global buffer offsets start, global buffers, columns, tail start, tail, metadata end)."""
        try:
            size = store.size(rel_path) if file_size is None else int(file_size)
        except FileNotFoundError as e:
            raise ObjectNotFoundError(f"{self.path}: data file named by the manifest does not exist") from e
        self.file_size = size
        if size < FOOTER.size:
            raise CorruptFileError(
                self.path, f"file of {size} bytes is too small for a Lance footer ({FOOTER.size})"
            )
        tail_len = min(size, TAIL_BYTES)
        tail_start = size - tail_len
        tail = self._read_meta_range(tail_start, tail_len)
        if len(tail) != tail_len:
            raise CorruptFileError(
                self.path, f"expected {tail_len} bytes at offset {tail_start}, got {len(tail)} (truncated?)"
            )
        a, b, c, ngb, ncols, major, minor, magic = FOOTER.unpack_from(tail, tail_len - FOOTER.size)
        if magic != MAGIC:
            raise CorruptFileError(
                self.path, f"bad magic {magic!r} (expected {MAGIC!r}): not a Lance file or truncated"
            )
        if (major, minor) in ((0, 1), (0, 2)) or (major, minor) not in _VERSIONS:
            raise UnsupportedFeatureError(
                f"{self.path}: Lance file format {major}.{minor} is not supported (only v2 files)"
            )
        self.footer_version = (major, minor)
        self.version = _VERSIONS[(major, minor)]
        meta_end = size - FOOTER.size
        if ngb < 1:
            raise CorruptFileError(self.path, "file has no global buffers (FileDescriptor missing)")
        if not (a <= meta_end and b + 16 * ncols <= meta_end and c + 16 * ngb <= meta_end):
            raise CorruptFileError(
                self.path,
                f"footer points beyond the file (column meta {a}, CMO {b} x{ncols}, GBO {c} x{ngb}, "
                f"metadata ends at {meta_end})",
            )
        return a, b, c, ngb, ncols, tail_start, tail, meta_end

    def _load_offset_tables(self, a: int, b: int, c: int, ngb: int, ncols: int, meta_end: int) -> None:
        """The global buffer and column metadata offset tables (reading metadata before the tail
        when they point there), checked to lie within the file metadata."""
        tail_start, tail = self._base, self._buf

        def table(pos: int, count: int) -> np.ndarray:
            raw = self._meta_bytes(pos, 16 * count)
            return np.frombuffer(raw, dtype="<u8").reshape(count, 2).astype(np.int64)

        lo = min(a, b, c)
        if c >= tail_start:
            g = table(c, ngb)
            g0 = int(g[0, 0])
            if 0 <= g0 < lo and int(g[0, 1]) <= meta_end - g0:
                lo = g0
        if lo < tail_start:
            extra = self._read_meta_range(lo, tail_start - lo)
            if len(extra) != tail_start - lo:
                raise CorruptFileError(self.path, f"short read of metadata at {lo} (truncated?)")
            self._buf = extra + tail
            self._base = lo
        self._gbo = table(c, ngb)
        self._cmo = table(b, ncols)
        for what, tab in (("global buffer", self._gbo), ("column metadata", self._cmo)):
            bad = (tab[:, 0] < 0) | (tab[:, 1] < 0) | (tab[:, 0] + tab[:, 1] > meta_end)
            if bad.any():
                k = int(np.argmax(bad))
                raise CorruptFileError(
                    self.path,
                    f"{what} {k} at {int(tab[k, 0])} (+{int(tab[k, 1])}) lies beyond the file metadata",
                )

    def _load_descriptor(self) -> None:
        """The FileDescriptor (global buffer 0) and the schema it holds, both cached per process."""
        fd_bytes = self.global_buffer(0)
        # files of one dataset repeat the same FileDescriptor (schema + row count) byte for byte
        fd_hit = _DESCRIPTORS.get(fd_bytes)
        if fd_hit is not None:
            self.file_descriptor, self._schema_key = fd_hit
        else:
            try:
                self.file_descriptor = file_pb2.FileDescriptor.FromString(fd_bytes)
            except DecodeError as e:
                raise CorruptFileError(self.path, f"cannot decode FileDescriptor: {e}") from e
            # every file of a dataset carries the same schema: parse it once per process
            self._schema_key = self.file_descriptor.schema.SerializeToString()
            if len(fd_bytes) <= _METADATA_CACHE_MAX_BYTES // 16:
                _DESCRIPTORS.put(bytes(fd_bytes), (self.file_descriptor, self._schema_key))
        cached = _SCHEMA_CACHE.get(self._schema_key)
        if cached is None:
            try:
                schema = LanceSchema.from_proto(
                    blobs.strip_packed_children(self.file_descriptor.schema.fields),
                    dict(self.file_descriptor.schema.metadata),
                )
                schema.to_arrow()  # every field's logical type resolves
            except SchemaError as e:
                raise CorruptFileError(self.path, f"bad schema in FileDescriptor: {e}") from e
            cached = (schema, {f.id: i for i, f in enumerate(schema.fields)})
            _SCHEMA_CACHE.put(self._schema_key, cached)
        self.schema, self._column_of = cached
        self.num_rows = int(self.file_descriptor.length)

    def renumbered(self, field_ids: Sequence[int]) -> "DataFileReader":
        """This reader with the file's top-level fields taken as ``field_ids`` (in the order the
        file lists them), for a standalone file (``LanceFileWriter``, numbered from 0) that a
        ``DataFile`` names with the dataset's field ids.  Flat files only.

        Raises:
            CorruptFileError: the file has nested fields or another number of fields.
        """
        fields = self.schema.fields
        if len(fields) != len(field_ids) or any(f.parent_id != -1 for f in fields):
            raise CorruptFileError(self.path, f"the file's fields {[f.id for f in fields]} cannot be read as the "
                                              f"data file's fields {list(field_ids)}")
        out = copy.copy(self)
        out.schema = dataclasses.replace(self.schema, fields=tuple(
            dataclasses.replace(f, id=int(new)) for f, new in zip(fields, field_ids, strict=True)))
        out._column_of = {int(new): i for i, new in enumerate(field_ids)}
        out._schema_key = self._schema_key + b"|renumbered " + repr(tuple(field_ids)).encode()
        out.__dict__.pop("_leaf_column_of", None)
        return out

    def _read_meta_range(self, start: int, length: int) -> bytes:
        if self._local_path is None:
            return self.store.read_range(self.rel_path, start, length)
        try:
            fd = open_regular(self._local_path)
        except FileNotFoundError as e:
            raise ObjectNotFoundError(f"{self.path}: data file named by the manifest does not exist") from e
        record_read(length)
        try:
            out = os.pread(fd, length, start)
            while len(out) < length:
                more = os.pread(fd, length - len(out), start + len(out))
                if not more:
                    break
                out += more
            return out
        finally:
            os.close(fd)

    # ------------------------------------------------------------------ metadata
    def _meta_bytes(self, pos: int, length: int) -> bytes:
        rel = pos - self._base
        if rel < 0 or rel + length > len(self._buf):
            # only for odd files whose metadata is not at the end
            data = self.store.read_range(self.rel_path, pos, length)
            if len(data) != length:
                raise CorruptFileError(self.path, f"short read of {length} bytes at {pos}")
            return data
        return self._buf[rel : rel + length]

    def global_buffer(self, index: int) -> bytes:
        """Raw bytes of global buffer ``index`` (0 = FileDescriptor)."""
        pos, size = (int(x) for x in self._gbo[index])
        return self._meta_bytes(pos, size)

    def column_metadata(self, column: int) -> file2_pb2.ColumnMetadata:
        """The ``ColumnMetadata`` protobuf of a column."""
        if not 0 <= column < self.num_columns:
            raise CorruptFileError(
                self.path, f"column {column} requested but the file has {self.num_columns}"
            )
        pos, size = (int(x) for x in self._cmo[column])
        try:
            return file2_pb2.ColumnMetadata.FromString(self._meta_bytes(pos, size))
        except DecodeError as e:
            raise CorruptFileError(self.path, f"cannot decode metadata of column {column}: {e}") from e

    def _column_pages(self, column: int) -> list[Page]:
        cached = self._pages_cache.get(column)
        if cached is not None:
            return cached
        cm = self.column_metadata(column)
        if cm.encoding.WhichOneof("location") == "direct":
            ce_any = self._any(cm.encoding.direct.encoding, f"column {column} encoding")
            if ce_any.type_url == COLUMN_ENCODING_URL:
                try:
                    epb.ColumnEncoding.FromString(ce_any.value)  # must decode
                except DecodeError as e:
                    raise CorruptFileError(self.path, f"cannot decode encoding of column {column}: {e}") from e
        pages = []
        row = 0
        for k, p in enumerate(cm.pages):
            where = f"column {column} page {k}"
            if p.encoding.WhichOneof("location") != "direct":
                raise UnsupportedFeatureError(f"{self.path}: {where} has a non-direct encoding")
            raw_encoding = p.encoding.direct.encoding
            encoding = _LAYOUTS.get(raw_encoding) if self.version in _V21_VERSIONS else None
            if encoding is not None:
                pass  # the same 2.1+ layout bytes were parsed before (fixed-width columns' pages)
            elif (page_any := self._any(raw_encoding, where)).type_url == PAGE_LAYOUT_21_URL:
                if self.version not in _V21_VERSIONS:
                    raise UnsupportedFeatureError(
                        f"{self.path}: {where} uses a 2.1+ structural page layout in a file of version "
                        f"{self.version[0]}.{self.version[1]}"
                    )
                encoding = v21.parse_layout(self.path, page_any.value, where)
                if len(raw_encoding) <= _LAYOUT_CACHE_MAX_BYTES:
                    if len(_LAYOUTS) >= _LAYOUT_CACHE_ENTRIES:
                        _LAYOUTS.clear()
                    _LAYOUTS[raw_encoding] = encoding
            elif page_any.type_url != ARRAY_ENCODING_URL:
                raise UnsupportedFeatureError(
                    f"{self.path}: {where} has unknown encoding {page_any.type_url!r}"
                )
            else:
                try:
                    encoding = epb.ArrayEncoding.FromString(page_any.value)
                except DecodeError as e:
                    raise CorruptFileError(self.path, f"cannot decode encoding of {where}: {e}") from e
            if len(p.buffer_offsets) != len(p.buffer_sizes):
                raise CorruptFileError(
                    self.path, f"{where} has {len(p.buffer_offsets)} offsets but {len(p.buffer_sizes)} sizes"
                )
            ranges = list(zip(p.buffer_offsets, p.buffer_sizes, strict=True))
            for pos, size in ranges:
                if pos + size > self.file_size:
                    raise CorruptFileError(
                        self.path,
                        f"{where} buffer at {pos} (+{size}) lies beyond the file size {self.file_size}",
                    )
            if p.length > _MAX_PAGE_ROWS:
                raise CorruptFileError(self.path, f"{where} claims {p.length} rows")
            pages.append(Page(row_start=row, length=int(p.length), ranges=ranges, encoding=encoding))
            row += int(p.length)
        self._pages_cache[column] = pages
        return pages

    def _any(self, data: bytes, what: str) -> any_pb2.Any:
        try:
            return any_pb2.Any.FromString(data)
        except DecodeError as e:
            raise CorruptFileError(self.path, f"cannot decode {what}: {e}") from e

    def read_buffers(self, ranges: Sequence[tuple[int, int]]) -> list[pa.Buffer]:
        """The bytes of ``(offset, size)`` ranges of the file, as Arrow buffers.

        Local files are read with ``preadv`` straight into buffers from Arrow's memory pool:
        the pool recycles page-sized blocks, where a fresh ``bytes`` per page costs page faults
        that halve the scan speed.  Other stores go through ``ObjectStore.read_ranges``.
        """
        if not ranges:
            return []
        whole = self.__dict__.get("_whole")
        if whole is not None:
            buf = pa.py_buffer(whole)
            out = []
            for pos, size in ranges:
                if pos < 0 or pos + size > len(whole):
                    raise CorruptFileError(
                        self.path, f"short read of page buffer at {pos}: {size} bytes beyond the file's {len(whole)}"
                    )
                out.append(buf.slice(pos, size))
            return out
        if self._local_path is not None:
            return _pread_buffers(self._local_path, ranges, self.path)
        raw = self.store.read_ranges(self.rel_path, list(ranges))
        bufs = []
        for (pos, size), data in zip(ranges, raw, strict=True):
            if len(data) != size:
                raise CorruptFileError(
                    self.path, f"short read of page buffer at {pos}: {len(data)} of {size} bytes"
                )
            bufs.append(data if isinstance(data, pa.Buffer) else pa.py_buffer(data))
        return bufs

    def _split_pages(self, pages: list[Page], dtype: pa.DataType) -> list[Page]:
        """``pages`` of a leaf column read as ``dtype``, big 2.1/2.2 pages cut into row ranges."""
        if self.version not in _V21_VERSIONS:
            return pages
        return parts.split_pages(pages, dtype)

    def kept_rows(self, start: int, length: int) -> np.ndarray | None:
        """Which of rows ``[start, start + length)`` the caller keeps (uint8 each; None: all),
        from :attr:`row_mask`: string values of the other rows may decode empty (a change feed
        reading scattered pre-images decompresses only theirs)."""
        if self.row_mask is None:
            return None
        keep = self.row_mask[start: start + length]
        return None if len(keep) != length else keep.view(np.uint8)

    def _decode_page(self, column: int, page: Page, dtype: pa.DataType) -> Any:
        if page.part is not None:  # rows of a bigger page (parts.py)
            return parts.decode_part(self, column, page, dtype)
        if blobs.is_description_type(dtype):  # a blob column: its descriptions (blobs.py)
            return blobs.decode_description_page(
                self.path, column, page.encoding, page.length, self.read_buffers(page.ranges), dtype
            )
        if isinstance(page.encoding, e21.PageLayout):
            buffers = self.read_buffers(page.ranges)
            version = f"{self.version[0]}.{self.version[1]}"
            return parts.checked_decode(
                self.path, f"page at row {page.row_start} of column {column}", page.length,
                lambda: v21.decode_page(self.path, column, page.encoding, page.length, buffers, dtype, version,
                                        self.kept_rows(page.row_start, page.length)),
            )
        ctx = PageBuffers(self.path, self.read_buffers(page.ranges))
        out = decode_array(ctx, page.encoding, page.length, dtype)
        if isinstance(out, pa.Array) and len(out) != page.length:
            raise CorruptFileError(
                self.path, f"page of column {column} decoded {len(out)} rows, expected {page.length}"
            )
        return out

    # ------------------------------------------------------------------ columns
    def _check_readable(self) -> None:
        if self.version != (2, 0) and self.version not in _V21_VERSIONS:
            raise UnsupportedFeatureError(
                f"{self.path}: Lance file version {self.version[0]}.{self.version[1]} cannot be read "
                "(only 2.0, 2.1 and 2.2 encodings are implemented)"
            )

    def _build21(self, fld: LanceField, dtype: pa.DataType) -> Column:
        """2.1/2.2: only leaf fields have columns, in DFS order of the leaves.

        A leaf (or a list of a leaf) is one column whose rep/def levels carry the nesting; a
        field with several leaves below it (structs, lists of structs) is a :class:`Tree21Column`.
        Maps are read as the lists of entries they are stored as (:mod:`.maps`).
        """
        if contains_map(dtype):
            return MapView(self._build21(fld, map_as_list(dtype)), dtype)  # type: ignore[return-value]
        if blobs.is_blob_field(fld):  # one column of descriptions (blobs.py)
            leaf_of = self.__dict__.get("_leaf_column_of")
            if leaf_of is None:
                ids = [f.id for f in self.schema.fields if not self.schema.children(f.id)]
                leaf_of = self._leaf_column_of = {fid: i for i, fid in enumerate(ids)}
            return LeafColumn(self, leaf_of[fld.id], fld, blobs.description_type(fld))
        leaves: list[LeafColumn] = []
        leaf_of = self.__dict__.get("_leaf_column_of")
        if leaf_of is None:
            ids = [f.id for f in self.schema.fields if not self.schema.children(f.id)]
            leaf_of = {fid: i for i, fid in enumerate(ids)}
            self._leaf_column_of = leaf_of
        version = f"{self.version[0]}.{self.version[1]}"

        def walk(f: LanceField, t: pa.DataType) -> tuple[Any, list[pa.DataType]]:
            """(tree, chain types of the leaves below ``f``, each rooted at ``f``)."""
            kids = self.schema.children(f.id)
            if pa.types.is_struct(t):
                if not kids:
                    raise UnsupportedFeatureError(f"{self.path}: empty struct field {f.name!r} in a Lance {version} file")
                subs, chains = [], []
                for i, c in enumerate(kids):
                    ft = t.field(i)
                    sub, cs = walk(c, ft.type)
                    if not cs:
                        raise UnsupportedFeatureError(
                            f"{self.path}: struct field {c.name!r} without leaf columns in a Lance {version} file"
                        )
                    subs.append((sub, len(cs)))
                    chains += [pa.struct([pa.field(ft.name, x, ft.nullable)]) for x in cs]
                return (t, subs), chains
            if pa.types.is_list(t) or pa.types.is_large_list(t):
                if len(kids) != 1:
                    raise CorruptFileError(self.path, f"list (or map) field {f.name!r} has {len(kids)} child fields")
                vf = t.value_field
                sub, cs = walk(kids[0], vf.type)
                make = pa.large_list if pa.types.is_large_list(t) else pa.list_
                return (t, [(sub, len(cs))]), [make(pa.field(vf.name, x, vf.nullable)) for x in cs]
            if kids or pa.types.is_map(t) or (
                pa.types.is_fixed_size_list(t) and not flat_fsl(t) and not v21.is_nested_fsl(t)
            ):
                raise UnsupportedFeatureError(
                    f"{self.path}: field {f.name!r} of type {t} is not supported in Lance {version} files"
                )
            column = leaf_of.get(f.id)
            if column is None or column >= self.num_columns:
                raise CorruptFileError(
                    self.path, f"field {f.name!r} has no leaf column (the file has {self.num_columns})"
                )
            leaves.append(LeafColumn(self, column, f, t))
            return (t, None), [t]

        tree, chains = walk(fld, dtype)
        if len(leaves) == 1 and tree[1] is None:
            return leaves[0]
        for leaf, chain in zip(leaves, chains, strict=True):
            leaf.dtype = chain
        if len(leaves) == 1:
            leaves[0].dtype = dtype
            return leaves[0]
        return Tree21Column(dtype, tree, leaves, self.path)

    def _build(self, fld: LanceField, dtype: pa.DataType) -> Column:
        if self.version in _V21_VERSIONS:
            return self._build21(fld, dtype)
        column = self._column_of[fld.id]
        if blobs.is_blob_field(fld):  # 2.0 blob column: packed (position, size) descriptions
            return LeafColumn(self, column, fld, blobs.V1_DESCRIPTION)
        if column >= self.num_columns:
            raise CorruptFileError(
                self.path, f"field {fld.name!r} needs column {column} but the file has {self.num_columns}"
            )
        children = self.schema.children(fld.id)
        if pa.types.is_struct(dtype):
            return StructColumn(dtype, [self._build(c, dtype.field(i).type) for i, c in enumerate(children)])
        if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
            return ListColumn(self, column, fld, dtype, self._build(children[0], dtype.value_type))
        if pa.types.is_map(dtype):
            raise UnsupportedFeatureError(f"{self.path}: map columns cannot be read from a 2.0 file")
        return LeafColumn(self, column, fld, dtype)

    def _columns(self, field_ids: Sequence[int] | None) -> tuple[pa.Schema, list[Column]]:
        self._check_readable()
        if field_ids is None:
            field_ids = [f.id for f in self.schema.top_level()]
        key = (self._schema_key, tuple(field_ids))
        out_schema = _SCHEMA_CACHE.get(key)
        if out_schema is None:
            try:
                projected = self.schema.project_ids(list(field_ids))
            except SchemaError as e:
                if "no field with id" in str(e):
                    # the manifest says the file holds these fields: a file that does not disagrees
                    raise CorruptFileError(self.path, f"the file does not hold a requested field: {e}") from None
                raise SchemaError(f"{self.path}: {e}") from None
            try:
                out_schema = blobs.scan_schema(projected.to_arrow())
            except SchemaError as e:  # the file's own schema (FileDescriptor) is damaged
                raise CorruptFileError(self.path, f"bad schema in FileDescriptor: {e}") from None
            _SCHEMA_CACHE.put(key, out_schema)
        # the column objects of a projection depend on the schema only: where all of them are
        # single leaf columns (the common case), rebuild them from (column, field, type)
        leaves_key = ("leaves", key, self.version)
        recipe = _SCHEMA_CACHE.get(leaves_key)
        if recipe and all(col < self.num_columns for col, _, _ in recipe):
            cols: list[Column] = [LeafColumn(self, col, fld, dt) for col, fld, dt in recipe]
        else:
            cols = [
                self._build(self.schema.field_by_id(fid), out_schema.field(i).type)
                for i, fid in enumerate(field_ids)
            ]
            if recipe is None:
                plain = [c for c in cols if isinstance(c, LeafColumn) and type(c) is LeafColumn]
                _SCHEMA_CACHE.put(
                    leaves_key, [(c.column, c.field, c.dtype) for c in plain] if len(plain) == len(cols) else []
                )
        for c in cols:
            c.expect_rows(self.num_rows)
        return out_schema, cols

    def _range(self, offset: int, length: int | None) -> tuple[int, int]:
        if offset < 0 or (length is not None and length < 0):
            raise ValueError(f"offset and length must be non-negative, got offset={offset} length={length}")
        start = min(offset, self.num_rows)
        end = self.num_rows if length is None else min(self.num_rows, offset + length)
        return start, max(start, end)

    # ------------------------------------------------------------------ reads
    def read(
        self,
        field_ids: Sequence[int] | None = None,
        *,
        offset: int = 0,
        length: int | None = None,
        batch_size: int = 65536,
        prefetch: PagePrefetcher | None = None,
    ) -> Iterator[pa.RecordBatch]:
        """Yield batches of rows ``[offset, offset+length)`` for the top-level ``field_ids``.

        Output schema is ``schema.project_ids(field_ids).to_arrow()`` (requested order).
        With ``prefetch``, the pages of the range are scheduled on it now (in the order the
        batches will need them) and decoded in the background.

        Raises:
            UnsupportedFeatureError: the file is not format 2.0/2.1/2.2, or uses an encoding or
                nesting that is not implemented.
            CorruptFileError: the data does not decode.
            SchemaError: an id that is not a top-level field of the file.
            CorruptFileError: an id the file does not hold at all (the manifest and the file
                disagree).
        """
        if batch_size <= 0:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        out_schema, cols = self._columns(field_ids)
        start, end = self._range(offset, length)
        if prefetch is not None:
            self._schedule(prefetch, cols, start, end)
        return self._iter(out_schema, cols, start, end, batch_size)

    @staticmethod
    def _schedule(prefetch: PagePrefetcher, cols: list[Column], start: int, end: int) -> None:
        """Schedule the row-aligned leaf pages of ``[start, end)`` (lists' items are read on demand)."""
        leaves: list[LeafColumn] = []
        stack = list(reversed(cols))
        while stack:
            c = stack.pop()
            if isinstance(c, LeafColumn):
                leaves.append(c)
            elif isinstance(c, StructColumn):
                stack.extend(reversed(c.children))
        order = []
        for k, c in enumerate(leaves):
            c._prefetch = prefetch
            for i in c.pages_overlapping(start, end):
                order.append((c.pages[i].row_start, k, i))
        order.sort()
        prefetch.schedule([(leaves[k], i) for _, k, i in order])

    def _iter(
        self, schema: pa.Schema, cols: list[Column], start: int, end: int, batch_size: int
    ) -> Iterator[pa.RecordBatch]:
        pos = start
        while pos < end:
            stop = min(end, pos + batch_size)
            arrays = [c.read(pos, stop) for c in cols]
            yield pa.RecordBatch.from_arrays(arrays, schema=schema)
            pos = stop

    def read_table(
        self, field_ids: Sequence[int] | None = None, *, offset: int = 0, length: int | None = None
    ) -> pa.Table:
        """Rows ``[offset, offset+length)`` as a table; chunks follow the file's pages."""
        out_schema, cols = self._columns(field_ids)
        start, end = self._range(offset, length)
        if start == end:
            return out_schema.empty_table()
        arrays = [
            pa.chunked_array(c.read_chunks(start, end), type=out_schema.field(i).type)
            for i, c in enumerate(cols)
        ]
        return pa.Table.from_arrays(arrays, schema=out_schema)
