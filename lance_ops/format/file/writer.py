"""Lance v2 data file writer, format 2.0 (FORMAT_NOTES.md §3, §4).

One column per Lance field in depth-first order (struct header columns and list offsets columns
included).  Each column queues incoming arrays until ``max_page_bytes`` of encoded data is
pending, then writes pages of at most about ``max_page_bytes``; the rest is flushed by
:meth:`DataFileWriter.finish`.  Pages are written as soon as they are encoded, so memory stays
bounded by roughly one page per column plus the current batch.

Every page uses exactly the encodings pylance 14 writes for 2.0 (Nullable+Flat, Binary with u64
end offsets and ``null_adjustment``, FixedSizeList, List offsets, SimpleStruct, and Dictionary
for Arrow dictionary columns); all buffers are padded to 64 bytes with ``0x48``.
"""

import bisect
import os
import struct
from collections import deque
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa
from google.protobuf import any_pb2

from .._proto import encodings_v2_0_pb2 as epb
from .._proto import file2_pb2, file_pb2
from ..errors import SchemaError, UnsupportedFeatureError
from ..schema import LanceField, LanceSchema, types_equivalent
from ..store import ObjectStore
from . import encodings as enc
from .blob_writer import (
    BlobV1Encoder,
    BlobV2Encoder,
    SidecarOpener,
    blob_column_encoding,
    file_schema_fields,
    leaf_field_ids,
)
from .blobs import is_blob_field
from .encodings import bitmap_slice, bitmap_to_bool, physical_bits
from .maps import contains_map, map_as_list
from .v21 import kernels
from .v21.encode import encode_page, leaf_kind
from .v21.nested_fsl import encode_nested_fsl_page, is_nested_fsl
from .v21.nested_fsl import row_bytes as nested_fsl_row_bytes
from .v21.repdef import build_levels

__all__ = ["DataFileWriter", "write_data_file", "data_file_field_info", "FOOTER_VERSION"]

PAD_BYTE = b"\x48"
ALIGN = 64
MAGIC = b"LANC"
FOOTER = struct.Struct("<QQQIIHH4s")
#: footer (major, minor) written for each file version
FOOTER_VERSION = {"2.0": (0, 3), "2.1": (2, 1), "2.2": (2, 2)}

_COMPRESSION_KEY = "lance-encoding:compression"
_COMPRESSION_LEVEL_KEY = "lance-encoding:compression-level"
_BINARY_TYPES = (pa.string(), pa.binary(), pa.large_string(), pa.large_binary())


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


class _Counter:
    """Hands out page buffer indices in depth-first order of the encoding tree."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self) -> int:
        i = self.n
        self.n += 1
        return i


# ------------------------------------------------------------------------------ leaf encoding
def _storage(arr: pa.Array) -> pa.Array:
    return arr.storage if isinstance(arr, pa.ExtensionArray) else arr


def _fixed_values(arr: pa.Array, bits: int) -> pa.Buffer:
    n = len(arr)
    if bits == 1:
        return bitmap_slice(arr.buffers()[1], arr.offset, n)
    width = bits // 8
    return arr.buffers()[1].slice(arr.offset * width, n * width)


def _validity(arr: pa.Array) -> pa.Buffer:
    return bitmap_slice(arr.buffers()[0], arr.offset, len(arr))


def _encode_fixed_like(arr: pa.Array, idx: _Counter) -> tuple[list[Any], epb.ArrayEncoding]:
    """Nullable{...} around Flat (fixed width, bool) or FixedSizeList (recursively)."""
    n = len(arr)
    t = arr.type
    nulls = arr.null_count
    if pa.types.is_null(t) or (n and nulls == n):
        return [], enc.nullable_all_nulls()
    bufs: list[Any] = []
    vidx = None
    if nulls:
        vidx = idx()
        bufs.append(_validity(arr))
    if pa.types.is_fixed_size_list(t):
        d = t.list_size
        items = arr.values.slice(arr.offset * d, n * d)
        item_bufs, item_enc = _encode_fixed_like(items, idx)
        bufs.extend(item_bufs)
        values = enc.fixed_size_list(d, item_enc)
    else:
        bits = physical_bits(t)
        if bits is None:
            raise UnsupportedFeatureError(f"cannot encode Arrow type {t} as fixed-width values")
        values = enc.flat(bits, idx())
        bufs.append(_fixed_values(arr, bits))
    if vidx is None:
        return bufs, enc.nullable_no_nulls(values)
    return bufs, enc.nullable_some_nulls(enc.flat(1, vidx), values)


def _binary_offsets(arr: pa.Array) -> np.ndarray:
    """The ``len(arr) + 1`` Arrow offsets of a (large) string/binary array, slice applied."""
    large = arr.type in (pa.large_string(), pa.large_binary())
    width = 8 if large else 4
    return np.frombuffer(
        arr.buffers()[1], dtype=np.int64 if large else np.int32, count=len(arr) + 1, offset=arr.offset * width
    )


def _binary_parts(arr: pa.Array) -> tuple[np.ndarray, int, pa.Buffer]:
    """(u64 2.0 end offsets with nulls adjusted, null_adjustment, value bytes) of a binary array."""
    n = len(arr)
    bufs = arr.buffers()
    offs = _binary_offsets(arr)
    base = int(offs[0])
    ends = offs[1:].astype(np.uint64)
    if base:
        ends -= np.uint64(base)
    total = int(offs[-1]) - base
    adj = total + 1
    if arr.null_count:
        null = ~bitmap_to_bool(bufs[0], arr.offset, n)
        ends[null] += np.uint64(adj)
    data = bufs[2].slice(base, total) if bufs[2] is not None else pa.py_buffer(b"")
    return ends, adj, data


def _encode_binary(
    arr: pa.Array, idx: _Counter, *, compress: bool = False, level: int | None = None
) -> tuple[list[Any], epb.ArrayEncoding]:
    ends, adj, data = _binary_parts(arr)
    off_enc = enc.nullable_no_nulls(enc.flat(64, idx()))
    if compress:
        data = enc.compress_zstd(data, level)
    bytes_enc = enc.flat(8, idx(), compress=compress, zstd_level=level)
    return [ends, data], enc.binary(off_enc, bytes_enc, adj)


def _encode_dictionary(arr: pa.DictionaryArray, idx: _Counter) -> tuple[list[Any], epb.ArrayEncoding]:
    indices = arr.indices
    items = arr.dictionary
    if indices.null_count:
        # 2.0 stores null keys as keys of a null dictionary item (appended if there is none)
        if items.null_count:
            null_key = int(np.argmax(np.asarray(items.is_null())))
        else:
            items = pa.concat_arrays([items, pa.nulls(1, type=items.type)])
            null_key = len(items) - 1
        indices = indices.fill_null(null_key)
    bits = physical_bits(indices.type)
    assert bits is not None
    ibuf = _fixed_values(indices, bits)
    ienc = enc.nullable_no_nulls(enc.flat(bits, idx()))
    item_bufs, item_enc = _encode_leaf(items, idx)
    return [ibuf, *item_bufs], enc.dictionary(ienc, item_enc, len(items))


def _encode_leaf(arr: pa.Array, idx: _Counter, **kw: Any) -> tuple[list[Any], epb.ArrayEncoding]:
    t = arr.type
    if t in _BINARY_TYPES:
        return _encode_binary(arr, idx, **kw)
    if pa.types.is_dictionary(t):
        return _encode_dictionary(arr, idx)
    return _encode_fixed_like(arr, idx)


def _leaf_row_bytes(t: pa.DataType) -> float:
    """Encoded bytes per row of a fixed-size leaf type (for page sizing)."""
    if pa.types.is_null(t):
        return 0.0
    if pa.types.is_fixed_size_list(t):
        return t.list_size * _leaf_row_bytes(t.value_type)
    if pa.types.is_dictionary(t):
        return t.index_type.bit_width / 8
    bits = physical_bits(t)
    if bits is None:
        raise UnsupportedFeatureError(f"Arrow type {t} cannot be stored in a Lance 2.0 file")
    return bits / 8


def _cuts_uniform(n: int, row_bytes: float, limit: int) -> list[int]:
    if row_bytes <= 0:
        return [0, n]
    rows = max(1, int(limit // row_bytes))
    return [*range(0, n, rows), n]


def _cuts_cumulative(cum: np.ndarray, limit: int) -> list[int]:
    """Row cut points so each piece holds about ``limit`` bytes; ``cum[i]`` = bytes of rows 0..i."""
    n = cum.size
    total = int(cum[-1]) if n else 0
    if total <= limit:
        return [0, n]
    targets = np.arange(limit, total, limit, dtype=np.int64)
    inner = np.searchsorted(cum, targets, side="left") + 1
    inner = np.unique(np.clip(inner, 1, n - 1)) if n > 1 else np.zeros(0, dtype=np.int64)
    return [0, *inner.tolist(), n]


def _cuts_binary(offs: np.ndarray, limit: int) -> list[int]:
    """:func:`_cuts_cumulative` of a binary array's page bytes (8-byte offset + data per row).

    The same cut points, found by bisection over the ``len + 1`` Arrow offsets instead of
    materialising the cumulative sizes (three full-length temporaries per page flush).
    """
    n = offs.size - 1
    base = int(offs[0])

    def upto(i: int) -> int:  # bytes of rows [0, i)
        return int(offs[i]) - base + 8 * i

    total = upto(n)
    if total <= limit:
        return [0, n]
    rows = range(1, n + 1)
    cuts = {min(max(bisect.bisect_left(rows, t, key=upto) + 1, 1), n - 1) for t in range(limit, total, limit)}
    return [0, *sorted(cuts), n] if n > 1 else [0, n]


# ------------------------------------------------------------------------------ column encoders
class _FieldEncoder:
    """Encodes one Lance field (and its subtree) into one or more columns."""

    def __init__(self, w: "DataFileWriter", fld: LanceField, dtype: pa.DataType) -> None:
        self.w = w
        self.field = fld
        self.dtype = dtype
        self.column = w._column_of[fld.id]

    def check_nulls(self, arr: pa.Array) -> None:
        if not self.field.nullable and arr.null_count:
            raise SchemaError(
                f"field {self.field.name!r} (id {self.field.id}) is not nullable but the data has {arr.null_count} nulls"
            )

    def add(self, arr: pa.Array) -> None:
        raise NotImplementedError

    def flush(self, final: bool) -> None:
        raise NotImplementedError


def concat_arrays(arrays: list[pa.Array]) -> pa.Array:
    """``pa.concat_arrays``, also for dictionary arrays whose dictionaries differ and hold nulls
    (as 2.0 files store null keys; Arrow cannot unify those): re-encoded from the values."""
    try:
        return pa.concat_arrays(arrays)
    except pa.ArrowInvalid:
        t = arrays[0].type
        if not pa.types.is_dictionary(t):
            raise
        values = pa.concat_arrays([a.cast(t.value_type) for a in arrays])
        return values.dictionary_encode().cast(t)


class _LeafEncoder(_FieldEncoder):
    def __init__(self, w: "DataFileWriter", fld: LanceField, dtype: pa.DataType) -> None:
        super().__init__(w, fld, dtype)
        self.queue: list[pa.Array] = []
        self.queued = 0.0
        self.binary = dtype in _BINARY_TYPES
        self.row_bytes = 0.0 if self.binary else _leaf_row_bytes(dtype)
        # only zstd is honoured (as pylance does for 2.0, on the bytes of binary pages); other
        # schemes are written uncompressed, which every reader accepts
        codec = fld.metadata.get(_COMPRESSION_KEY, b"").decode(errors="replace").lower()
        self.compress = self.binary and codec == "zstd"
        lvl = fld.metadata.get(_COMPRESSION_LEVEL_KEY, b"").decode(errors="replace").strip()
        self.level = int(lvl) if (self.compress and lvl.lstrip("-").isdigit()) else None

    def _size(self, arr: pa.Array) -> float:
        if self.binary:
            offs = _binary_offsets(arr)
            return 8 * len(arr) + float(offs[-1] - offs[0])
        return len(arr) * self.row_bytes

    def add(self, arr: pa.Array) -> None:
        if len(arr) == 0:
            return
        self.check_nulls(arr)
        self.queue.append(arr)
        self.queued += self._size(arr)
        if self.queued >= self.w.max_page_bytes:
            self.flush(final=False)

    def _cuts(self, arr: pa.Array) -> list[int]:
        limit = self.w.max_page_bytes
        if not self.binary:
            return _cuts_uniform(len(arr), self.row_bytes, limit)
        return _cuts_binary(_binary_offsets(arr), limit)

    def flush(self, final: bool) -> None:
        if not self.queue:
            return
        arr = self.queue[0] if len(self.queue) == 1 else concat_arrays(self.queue)
        self.queue, self.queued = [], 0.0
        cuts = self._cuts(arr)
        pieces = list(zip(cuts[:-1], cuts[1:], strict=True))
        if not final and len(pieces) > 1:
            a, b = pieces[-1]
            last = arr.slice(a, b - a)
            if self._size(last) < self.w.max_page_bytes:
                pieces.pop()
                self.queue, self.queued = [last], self._size(last)
        for a, b in pieces:
            self.w._emit_page(self.column, b - a, *self._encode(arr.slice(a, b - a)))

    def _encode(self, arr: pa.Array) -> tuple[list[Any], epb.ArrayEncoding]:
        if self.binary:
            return _encode_binary(arr, _Counter(), compress=self.compress, level=self.level)
        return _encode_leaf(arr, _Counter())


class _Leaf21Encoder:
    """One leaf column of a 2.1/2.2 file: the top-level field's arrays, reduced to this leaf's
    rep/def levels and visible values when a page is encoded (FORMAT_NOTES §5)."""

    def __init__(
        self, w: "DataFileWriter", top: LanceField, dtype: pa.DataType, path: list[int], leaf: LanceField,
        leaf_type: pa.DataType, column: int, share: int,
    ) -> None:
        self.w = w
        self.top = top
        self.path = path
        self.column = column
        self.share = max(1, share)  # leaves of the top-level field (for page size estimates)
        self.where = f"field {leaf.name!r} (id {leaf.id})"
        self.nested_fsl = is_nested_fsl(leaf_type) and path == []  # a top-level fsl<fsl<...>> (nested_fsl.py)
        if self.nested_fsl and nested_fsl_row_bytes(leaf_type) > 16 * 1024:
            raise UnsupportedFeatureError(
                f"{self.where}: rows of {leaf_type} over 16 KiB need full-zip pages, which lance_ops does not write"
            )
        if not self.nested_fsl:
            leaf_kind(leaf_type, self.where)  # refuse unsupported types before writing anything
        self.queue: list[pa.Array] = []
        self.queued = 0.0

    def _size(self, arr: pa.Array) -> float:
        return arr.nbytes / self.share

    def add(self, arr: pa.Array) -> None:
        if len(arr) == 0:
            return
        if not self.top.nullable and arr.null_count:
            raise SchemaError(
                f"field {self.top.name!r} (id {self.top.id}) is not nullable but the data has {arr.null_count} nulls"
            )
        self.queue.append(arr)
        self.queued += self._size(arr)
        if self.queued >= self.w.max_page_bytes:
            self.flush(final=False)

    def flush(self, final: bool) -> None:
        if not self.queue:
            return
        arr = self.queue[0] if len(self.queue) == 1 else concat_arrays(self.queue)
        self.queue, self.queued = [], 0.0
        size = self._size(arr)
        pieces = max(1, int(size // self.w.max_page_bytes))
        rows = -(-len(arr) // pieces)
        cuts = [*range(0, len(arr), rows), len(arr)]
        spans = list(zip(cuts[:-1], cuts[1:], strict=True))
        if not final and len(spans) > 1:
            a, b = spans.pop()
            self.queue, self.queued = [arr.slice(a, b - a)], self._size(arr.slice(a, b - a))
        for a, b in spans:
            if self.nested_fsl:
                buffers, layout = encode_nested_fsl_page(arr.slice(a, b - a), self.w.version)
                self.w._emit_page21(self.column, b - a, buffers, layout)
                continue
            levels = build_levels(arr.slice(a, b - a), self.path)
            self.w._encode_page21(self.column, b - a, levels, self.where)


class _ListEncoder(_FieldEncoder):
    """List offsets column (u64 end offsets per page) + the item field's columns."""

    def __init__(
        self, w: "DataFileWriter", fld: LanceField, dtype: pa.DataType, child: _FieldEncoder
    ) -> None:
        super().__init__(w, fld, dtype)
        self.child = child
        self.large = pa.types.is_large_list(dtype)
        self.queue: list[tuple[np.ndarray, np.ndarray | None]] = []
        self.rows = 0

    def add(self, arr: pa.Array) -> None:
        n = len(arr)
        if n == 0:
            return
        self.check_nulls(arr)
        bufs = arr.buffers()
        width = 8 if self.large else 4
        offs = np.frombuffer(
            bufs[1], dtype=np.int64 if self.large else np.int32, count=n + 1, offset=arr.offset * width
        )
        start, end = int(offs[0]), int(offs[-1])
        self.child.add(arr.values.slice(start, end - start))
        ends = (offs[1:] - start).astype(np.uint64)
        valid = bitmap_to_bool(bufs[0], arr.offset, n).copy() if arr.null_count else None
        self.queue.append((ends, valid))
        self.rows += n
        if 8 * self.rows >= self.w.max_page_bytes:
            self.flush(final=False)

    def flush(self, final: bool) -> None:
        if self.queue:
            self._flush_offsets(final)
        self.child.flush(final)

    def _flush_offsets(self, final: bool) -> None:
        parts, base = [], 0
        any_null = any(v is not None for _, v in self.queue)
        valids = []
        for ends, valid in self.queue:
            parts.append(ends + np.uint64(base) if base else ends)
            base += int(ends[-1])
            if any_null:
                valids.append(valid if valid is not None else np.ones(ends.size, dtype=np.bool_))
        ends = parts[0] if len(parts) == 1 else np.concatenate(parts)
        valid = (valids[0] if len(valids) == 1 else np.concatenate(valids)) if any_null else None
        self.queue, self.rows = [], 0
        n = ends.size
        cuts = _cuts_uniform(n, 8, self.w.max_page_bytes)
        pieces = list(zip(cuts[:-1], cuts[1:], strict=True))
        if not final and 8 * (pieces[-1][1] - pieces[-1][0]) < self.w.max_page_bytes:
            a, b = pieces.pop()
            first = int(ends[a - 1]) if a else 0
            rest_valid = valid[a:b] if valid is not None else None
            self.queue = [(ends[a:b] - np.uint64(first), rest_valid)]
            self.rows = b - a
        for a, b in pieces:
            first = int(ends[a - 1]) if a else 0
            page = ends[a:b] - np.uint64(first) if first else ends[a:b].copy()
            num_items = int(page[-1])
            adj = num_items + 1
            if valid is not None:
                page[~valid[a:b]] += np.uint64(adj)
            encoding = enc.list_offsets(enc.nullable_no_nulls(enc.flat(64, 0)), adj, num_items)
            self.w._emit_page(self.column, b - a, [page], encoding)


class _StructEncoder(_FieldEncoder):
    """SimpleStruct header column (one page at finish) + one encoder per child."""

    def __init__(
        self, w: "DataFileWriter", fld: LanceField, dtype: pa.DataType, children: list[_FieldEncoder]
    ) -> None:
        super().__init__(w, fld, dtype)
        self.children = children
        self.rows = 0

    def add(self, arr: pa.Array) -> None:
        if len(arr) == 0:
            return
        if arr.null_count:
            raise UnsupportedFeatureError(
                f"field {self.field.name!r}: Lance file version 2.0 does not encode struct validity "
                f"({arr.null_count} null structs)"
            )
        self.rows += len(arr)
        for i, child in enumerate(self.children):
            child.add(arr.field(i))

    def flush(self, final: bool) -> None:
        if final:
            self.w._emit_page(self.column, self.rows, [], enc.simple_struct())
        for child in self.children:
            child.flush(final)


# ------------------------------------------------------------------------------ the writer
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
    ) -> None:
        self._sidecar = sidecar  # opens data/<stem>/<name> beside this file (blob v2 payloads)
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
            _Leaf21Encoder(self, top, dtype, path, leaf, t, self._column_of[leaf.id], len(found))
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
            return _StructEncoder(self, fld, dtype, kids)
        if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
            return _ListEncoder(self, fld, dtype, self._make_encoder(children[0], dtype.value_type))
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
            and dtype.value_type not in _BINARY_TYPES
            and physical_bits(dtype.value_type) is None
        ):
            raise UnsupportedFeatureError(
                f"field {fld.name!r}: dictionary of {dtype.value_type} is not supported"
            )
        if isinstance(dtype, pa.BaseExtensionType):
            dtype = dtype.storage_type
        if dtype not in _BINARY_TYPES:
            try:
                _leaf_row_bytes(dtype)  # raises for types 2.0 cannot store
            except UnsupportedFeatureError as e:
                raise UnsupportedFeatureError(f"field {fld.name!r}: {e}") from None
        return _LeafEncoder(self, fld, dtype)

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
                    encoder.add(_storage(chunk))
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
        pool = _encode_pool() if kernels.get() is not None else None
        if pool is None:
            buffers, layout = encode_page(levels, self.version, where)
            self._emit_page21(column, length, buffers, layout)
            return
        self._pending.append((column, length, pool.submit(encode_page, levels, self.version, where)))
        while len(self._pending) > _MAX_PENDING_PAGES:
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
        for e in self._encoders:
            e.flush(final=True)
        while self._pending:
            self._emit_pending()
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
