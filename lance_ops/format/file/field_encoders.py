"""Field encoders of the data file writer: one per top-level field, turning Arrow arrays into
pages (2.0 encodings as pylance 14 writes them; 2.1/2.2 structural pages through :mod:`.v21`).
:class:`~.writer.DataFileWriter` owns them and the file they write to.
"""

import bisect
from typing import Any

import numpy as np
import pyarrow as pa

from lance_ops.format._proto import encodings_v2_0_pb2 as epb
from lance_ops.format.errors import SchemaError, UnsupportedFeatureError
from lance_ops.format.file import encodings as enc
from lance_ops.format.file.encodings import bitmap_slice, bitmap_to_bool, physical_bits
from lance_ops.format.file.v21.encode import leaf_kind
from lance_ops.format.file.v21.nested_fsl import encode_nested_fsl_page, is_nested_fsl
from lance_ops.format.file.v21.nested_fsl import row_bytes as nested_fsl_row_bytes
from lance_ops.format.file.v21.repdef import build_levels
from lance_ops.format.schema import LanceField

_COMPRESSION_KEY = "lance-encoding:compression"
_COMPRESSION_LEVEL_KEY = "lance-encoding:compression-level"
BINARY_TYPES = (pa.string(), pa.binary(), pa.large_string(), pa.large_binary())


class _Counter:
    """Hands out page buffer indices in depth-first order of the encoding tree."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self) -> int:
        i = self.n
        self.n += 1
        return i


# ------------------------------------------------------------------------------ leaf encoding
def storage_array(arr: pa.Array) -> pa.Array:
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
    if t in BINARY_TYPES:
        return _encode_binary(arr, idx, **kw)
    if pa.types.is_dictionary(t):
        return _encode_dictionary(arr, idx)
    return _encode_fixed_like(arr, idx)


def leaf_row_bytes(t: pa.DataType) -> float:
    """Encoded bytes per row of a fixed-size leaf type (for page sizing)."""
    if pa.types.is_null(t):
        return 0.0
    if pa.types.is_fixed_size_list(t):
        return t.list_size * leaf_row_bytes(t.value_type)
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
class FieldEncoder:
    """Encodes one Lance field (and its subtree) into one or more columns."""

    def __init__(self, w: Any, fld: LanceField, dtype: pa.DataType) -> None:
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


def concat_batches(batches: list[pa.RecordBatch], schema: pa.Schema | None = None) -> pa.RecordBatch:
    """One batch of ``batches``' rows in order (``Table.combine_chunks``, but dictionary columns
    whose dictionaries hold nulls, as 2.0 files store null keys, are joined by :func:`concat_arrays`)."""
    schema = schema if schema is not None else batches[0].schema
    if len(batches) == 1:
        return batches[0]
    if not batches:
        return pa.RecordBatch.from_pylist([], schema=schema)
    try:
        return pa.Table.from_batches(batches, schema=schema).combine_chunks().to_batches()[0]
    except pa.ArrowInvalid:
        cols = [concat_arrays([b.column(i) for b in batches]) for i in range(len(schema))]
        return pa.RecordBatch.from_arrays(cols, schema=schema)


class LeafEncoder(FieldEncoder):
    def __init__(self, w: Any, fld: LanceField, dtype: pa.DataType) -> None:
        super().__init__(w, fld, dtype)
        self.queue: list[pa.Array] = []
        self.queued = 0.0
        self.binary = dtype in BINARY_TYPES
        self.row_bytes = 0.0 if self.binary else leaf_row_bytes(dtype)
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


class Leaf21Encoder:
    """One leaf column of a 2.1/2.2 file: the top-level field's arrays, reduced to this leaf's
    rep/def levels and visible values when a page is encoded (docs/FORMAT.md §5)."""

    def __init__(
        self, w: Any, top: LanceField, dtype: pa.DataType, path: list[int], leaf: LanceField,
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


class ListEncoder(FieldEncoder):
    """List offsets column (u64 end offsets per page) + the item field's columns."""

    def __init__(
        self, w: Any, fld: LanceField, dtype: pa.DataType, child: FieldEncoder
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


class StructEncoder(FieldEncoder):
    """SimpleStruct header column (one page at finish) + one encoder per child."""

    def __init__(
        self, w: Any, fld: LanceField, dtype: pa.DataType, children: list[FieldEncoder]
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
