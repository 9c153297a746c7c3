"""Format 2.0 page encodings (``lance.encodings.ArrayEncoding``), docs/FORMAT.md §4.

Decoding goes through :data:`DECODERS`, a registry from the ``array_encoding`` oneof name to a
decoder function, so more encodings (and the 2.1/2.2 structural layouts) can be added without
touching the readers.  Every decoder works on whole buffers (``np.frombuffer``,
``pa.Array.from_buffers``); none loops per value.

Encoding helpers (``flat``, ``nullable_*``, ``binary``, ...) build the ``ArrayEncoding`` trees
pylance 14 writes, plus the bitmap and offset conversions the writer needs.
"""

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from lance_ops.format._proto import encodings_v2_0_pb2 as pb
from lance_ops.format.errors import CorruptFileError, UnsupportedFeatureError

__all__ = [
    "ARRAY_ENCODING_URL",
    "COLUMN_ENCODING_URL",
    "PAGE_LAYOUT_21_URL",
    "DECODERS",
    "ListPage",
    "PageBuffers",
    "decode_array",
    "register_decoder",
    "physical_bits",
]

ARRAY_ENCODING_URL = "/lance.encodings.ArrayEncoding"
COLUMN_ENCODING_URL = "/lance.encodings.ColumnEncoding"
PAGE_LAYOUT_21_URL = "/lance.encodings21.PageLayout"

_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_LARGE_TYPES = (pa.large_string(), pa.large_binary())
_INT32_MAX = 2**31 - 1


def physical_bits(t: pa.DataType) -> int | None:
    """Bits per value of a fixed-width leaf type (bool = 1); None for other types."""
    if pa.types.is_boolean(t):
        return 1
    if pa.types.is_fixed_size_binary(t):
        return 8 * int(t.byte_width)
    if pa.types.is_decimal(t) or pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_temporal(t):
        try:
            return int(t.bit_width)
        except ValueError:
            return None
    return None


@dataclass
class PageBuffers:
    """The buffers of one page, addressed by ``Buffer.buffer_index``, plus the file for errors."""

    path: str
    buffers: list[pa.Buffer]

    def get(self, buf: pb.Buffer) -> pa.Buffer:
        if buf.buffer_type != pb.Buffer.page:
            raise UnsupportedFeatureError(
                f"{self.path}: column/file buffers in page encodings are not supported (buffer_type {buf.buffer_type})"
            )
        if buf.buffer_index >= len(self.buffers):
            raise CorruptFileError(
                self.path,
                f"page encoding refers to buffer {buf.buffer_index} but the page has {len(self.buffers)}",
            )
        return self.buffers[buf.buffer_index]

    def corrupt(self, problem: str) -> CorruptFileError:
        return CorruptFileError(self.path, problem)


@dataclass
class ListPage:
    """A decoded 2.0 list-offsets page: per-row end offsets relative to the page's first item."""

    ends: np.ndarray  # uint64, real end offsets (null adjustment removed)
    valid: np.ndarray | None  # bool per row, None when no list is null
    num_items: int


Decoder = Callable[[PageBuffers, Any, int, pa.DataType], Any]

DECODERS: dict[str, Decoder] = {}


def register_decoder(name: str) -> Callable[[Decoder], Decoder]:
    """Register a decoder for the ``ArrayEncoding`` oneof member ``name``."""

    def deco(fn: Decoder) -> Decoder:
        DECODERS[name] = fn
        return fn

    return deco


def decode_array(ctx: PageBuffers, enc: pb.ArrayEncoding, num_rows: int, dtype: pa.DataType) -> Any:
    """Decode ``num_rows`` values of Arrow type ``dtype`` described by ``enc``.

    Returns an array with offset 0 (or a :class:`ListPage` for list offsets pages, ``None`` for
    struct header pages).

    Raises:
        UnsupportedFeatureError: an encoding without a registered decoder.
        CorruptFileError: buffers too short, offsets out of order, ...
    """
    kind = enc.WhichOneof("array_encoding")
    if kind is None:
        raise ctx.corrupt("empty ArrayEncoding in page")
    fn = DECODERS.get(kind)
    if fn is None:
        raise UnsupportedFeatureError(f"{ctx.path}: 2.0 page encoding {kind!r} is not supported")
    return fn(ctx, getattr(enc, kind), num_rows, dtype)


# ---------------------------------------------------------------------------- decompression
def decompress(ctx: PageBuffers, buf: pa.Buffer, comp: pb.Compression) -> pa.Buffer:
    """Undo 2.0 general compression: ``u64 LE uncompressed length`` + zstd frame, or a raw frame."""
    scheme = comp.scheme.lower()
    if scheme in ("", "none"):
        return buf
    if scheme != "zstd":
        raise UnsupportedFeatureError(f"{ctx.path}: compression scheme {comp.scheme!r} is not supported")
    if buf.size == 0:
        return buf
    head = buf.slice(0, 4).to_pybytes()
    try:
        if head == _ZSTD_MAGIC:
            # a raw zstd stream without the length prefix (older writers)
            return pa.input_stream(pa.BufferReader(buf), compression="zstd").read_buffer()
        if buf.size < 8:
            raise ctx.corrupt(f"zstd buffer of {buf.size} bytes is shorter than its length prefix")
        (n,) = struct.unpack("<Q", buf.slice(0, 8).to_pybytes())
        if n > 64 * max(buf.size, 1024) and n > 2**32:
            raise ctx.corrupt(f"zstd buffer claims {n} uncompressed bytes from {buf.size}")
        return pa.Codec("zstd").decompress(buf.slice(8), decompressed_size=n)
    except (OSError, pa.ArrowException) as e:
        raise ctx.corrupt(f"zstd decompression failed: {e}") from e


def compress_zstd(data: pa.Buffer | bytes, level: int | None) -> bytes:
    """2.0 zstd buffer: ``u64 LE uncompressed length`` + zstd frame (pylance default level 3)."""
    raw = pa.py_buffer(data) if isinstance(data, bytes) else data
    codec = pa.Codec("zstd", compression_level=3 if not level else level)
    return struct.pack("<Q", raw.size) + codec.compress(raw, asbytes=True)


# ---------------------------------------------------------------------------- bitmaps
def bitmap_to_bool(buf: pa.Buffer, bit_offset: int, n: int) -> np.ndarray:
    """Arrow LSB-first bitmap bits ``[bit_offset, bit_offset+n)`` as a numpy bool array."""
    start = bit_offset // 8
    shift = bit_offset % 8
    nbytes = (shift + n + 7) // 8
    raw = np.frombuffer(buf, dtype=np.uint8, count=nbytes, offset=start)
    return np.unpackbits(raw, bitorder="little", count=shift + n)[shift:].view(np.bool_)


def bool_to_bitmap(mask: np.ndarray) -> pa.Buffer:
    """Numpy bool array -> LSB-first bitmap of exactly ceil(n/8) bytes."""
    return pa.py_buffer(np.packbits(mask, bitorder="little"))


def bitmap_slice(buf: pa.Buffer, bit_offset: int, n: int) -> pa.Buffer:
    """Bits ``[bit_offset, bit_offset+n)`` of an Arrow bitmap re-based to bit 0, ceil(n/8) bytes,
    unused trailing bits cleared."""
    nbytes = (n + 7) // 8
    if bit_offset % 8 == 0:
        start = bit_offset // 8
        if n % 8 == 0:
            return buf.slice(start, nbytes)
        raw = np.frombuffer(buf, dtype=np.uint8, count=nbytes, offset=start).copy()
        raw[-1] &= (1 << (n % 8)) - 1
        return pa.py_buffer(raw)
    return bool_to_bitmap(bitmap_to_bool(buf, bit_offset, n))


def _need(ctx: PageBuffers, buf: pa.Buffer, nbytes: int, what: str) -> None:
    if buf.size < nbytes:
        raise ctx.corrupt(f"{what} buffer has {buf.size} bytes, expected at least {nbytes}")


# ---------------------------------------------------------------------------- decoders
@register_decoder("flat")
def _decode_flat(ctx: PageBuffers, flat: pb.Flat, n: int, dtype: pa.DataType) -> pa.Array:
    if pa.types.is_null(dtype):
        return pa.nulls(n)
    bits = int(flat.bits_per_value)
    want = physical_bits(dtype)
    if want is None:
        raise UnsupportedFeatureError(f"{ctx.path}: flat encoding cannot produce Arrow type {dtype}")
    if bits != want:
        raise ctx.corrupt(f"flat page has {bits} bits per value but {dtype} needs {want}")
    buf = ctx.get(flat.buffer)
    if flat.HasField("compression"):
        buf = decompress(ctx, buf, flat.compression)
    _need(ctx, buf, (n * bits + 7) // 8, f"{dtype} values")
    return pa.Array.from_buffers(dtype, n, [None, buf], null_count=0)


def with_validity(arr: pa.Array, validity: pa.Buffer | None) -> pa.Array:
    """``arr`` (offset 0, no nulls) with the given validity bitmap attached."""
    if validity is None:
        return arr
    t = arr.type
    if pa.types.is_fixed_size_list(t) or pa.types.is_struct(t):
        children = (
            [arr.values] if pa.types.is_fixed_size_list(t) else [arr.field(i) for i in range(t.num_fields)]
        )
        return pa.Array.from_buffers(t, len(arr), [validity], children=children)
    if pa.types.is_dictionary(t):
        idx = with_validity(arr.indices, validity)
        return pa.DictionaryArray.from_arrays(idx, arr.dictionary)
    bufs = arr.buffers()
    return pa.Array.from_buffers(t, len(arr), [validity, *bufs[1:]])


@register_decoder("nullable")
def _decode_nullable(ctx: PageBuffers, nul: pb.Nullable, n: int, dtype: pa.DataType) -> pa.Array:
    which = nul.WhichOneof("nullability")
    if which == "no_nulls":
        return decode_array(ctx, nul.no_nulls.values, n, dtype)
    if which == "all_nulls":
        return pa.nulls(n, type=dtype)
    if which == "some_nulls":
        validity = decode_array(ctx, nul.some_nulls.validity, n, pa.bool_())
        values = decode_array(ctx, nul.some_nulls.values, n, dtype)
        if len(values) != n or len(validity) != n:
            raise ctx.corrupt(
                f"nullable page decoded {len(values)} values / {len(validity)} flags, expected {n}"
            )
        vbuf = validity.buffers()[1]
        if validity.offset:
            vbuf = bitmap_slice(vbuf, validity.offset, n)
        return with_validity(values, vbuf)
    raise ctx.corrupt("Nullable encoding without a nullability case")


@register_decoder("fixed_size_list")
def _decode_fsl(ctx: PageBuffers, fsl: pb.FixedSizeList, n: int, dtype: pa.DataType) -> pa.Array:
    if not pa.types.is_fixed_size_list(dtype):
        raise ctx.corrupt(f"fixed_size_list page for a column of type {dtype}")
    dim = int(fsl.dimension)
    if dim != dtype.list_size:
        raise ctx.corrupt(f"fixed_size_list page has dimension {dim}, schema says {dtype.list_size}")
    if fsl.has_validity:
        raise UnsupportedFeatureError(f"{ctx.path}: fixed_size_list pages with inline validity (2.1+)")
    items = decode_array(ctx, fsl.items, n * dim, dtype.value_type)
    if len(items) != n * dim:
        raise ctx.corrupt(f"fixed_size_list page decoded {len(items)} items, expected {n * dim}")
    return pa.Array.from_buffers(dtype, n, [None], null_count=0, children=[items])


def _u64_values(ctx: PageBuffers, enc: pb.ArrayEncoding, n: int, what: str) -> np.ndarray:
    arr = decode_array(ctx, enc, n, pa.uint64())
    if len(arr) != n:
        raise ctx.corrupt(f"{what} decoded {len(arr)} values, expected {n}")
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    return np.frombuffer(arr.buffers()[1], dtype=np.uint64, count=n, offset=arr.offset * 8)


def _split_adjusted(
    ctx: PageBuffers, raw: np.ndarray, adj: int, what: str
) -> tuple[np.ndarray, np.ndarray | None]:
    """Undo 2.0 null adjustment: values >= adj are nulls whose real end is ``v - adj``."""
    if adj == 0 or raw.size == 0 or int(raw.max()) < adj:  # max: one pass, no temporary
        ends, valid = raw, None
    else:
        null = raw >= np.uint64(adj)
        if null.any():
            ends = np.where(null, raw - np.uint64(adj), raw)
            valid = ~null
        else:
            ends, valid = raw, None
    if ends.size > 1 and bool(np.any(ends[1:] < ends[:-1])):
        raise ctx.corrupt(f"corrupt {what} page: end offsets are not monotonic")
    return ends, valid


@register_decoder("binary")
def _decode_binary(ctx: PageBuffers, b: pb.Binary, n: int, dtype: pa.DataType) -> pa.Array:
    if dtype not in (pa.string(), pa.binary(), pa.large_string(), pa.large_binary()):
        raise ctx.corrupt(f"binary page for a column of type {dtype}")
    if n == 0:
        return pa.array([], type=dtype)
    raw = _u64_values(ctx, b.indices, n, "binary offsets")
    ends, valid = _split_adjusted(ctx, raw, int(b.null_adjustment), "binary")
    total = int(ends[-1])
    large = dtype in _LARGE_TYPES
    if not large and total > _INT32_MAX:
        raise UnsupportedFeatureError(
            f"{ctx.path}: page of {total} bytes does not fit {dtype} (32-bit offsets); read it as large_{dtype}"
        )
    data_arr = decode_array(ctx, b.bytes, total, pa.uint8())
    if len(data_arr) < total:
        raise ctx.corrupt(f"binary page has {len(data_arr)} data bytes, offsets need {total}")
    data = data_arr.buffers()[1]
    offsets = np.empty(n + 1, dtype=np.int64 if large else np.int32)
    offsets[0] = 0
    offsets[1:] = ends
    vbuf = bool_to_bitmap(valid) if valid is not None else None
    return pa.Array.from_buffers(dtype, n, [vbuf, pa.py_buffer(offsets), data])


def _peek_bits(enc: pb.ArrayEncoding) -> int | None:
    """bits_per_value of the flat leaf under nullable wrappers, if any."""
    while True:
        kind = enc.WhichOneof("array_encoding")
        if kind == "flat":
            return int(enc.flat.bits_per_value)
        if kind != "nullable":
            return None
        which = enc.nullable.WhichOneof("nullability")
        if which == "no_nulls":
            enc = enc.nullable.no_nulls.values
        elif which == "some_nulls":
            enc = enc.nullable.some_nulls.values
        else:
            return None


_UINT_BY_BITS = {8: pa.uint8(), 16: pa.uint16(), 32: pa.uint32(), 64: pa.uint64()}


@register_decoder("dictionary")
def _decode_dictionary(ctx: PageBuffers, d: pb.Dictionary, n: int, dtype: pa.DataType) -> pa.Array:
    num_items = int(d.num_dictionary_items)
    if pa.types.is_dictionary(dtype):
        # an Arrow dictionary column: indices are stored as-is; nulls are null dictionary items
        items = decode_array(ctx, d.items, num_items, dtype.value_type)
        indices = decode_array(ctx, d.indices, n, dtype.index_type)
        if len(indices) != n or len(items) != num_items:
            raise ctx.corrupt("dictionary page decoded the wrong number of indices or items")
        if n:
            idx = np.asarray(indices.fill_null(0).to_numpy(zero_copy_only=False)).astype(np.int64)
            if idx.min() < 0 or idx.max() >= max(num_items, 1):
                raise ctx.corrupt(f"dictionary index out of range (dictionary has {num_items} items)")
            if items.null_count:
                item_null = np.asarray(items.is_null().to_numpy(zero_copy_only=False))
                null = item_null[idx]
                if null.any():
                    if indices.null_count:
                        null |= np.asarray(indices.is_null().to_numpy(zero_copy_only=False))
                    indices = pa.Array.from_buffers(
                        indices.type, n, [bool_to_bitmap(~null), indices.buffers()[1]], offset=indices.offset
                    )
        return pa.DictionaryArray.from_arrays(indices, items)
    # a string page pylance chose to dictionary-encode: u8 indices, 0 = null, k = items[k-1]
    bits = _peek_bits(d.indices) or 8
    itype = _UINT_BY_BITS.get(bits)
    if itype is None:
        raise ctx.corrupt(f"dictionary indices of {bits} bits")
    items = decode_array(ctx, d.items, num_items, dtype)
    indices = decode_array(ctx, d.indices, n, itype)
    if len(indices) != n or len(items) != num_items:
        raise ctx.corrupt("dictionary page decoded the wrong number of indices or items")
    idx = np.asarray(indices.fill_null(0).to_numpy(zero_copy_only=False)).astype(np.int64)
    if n and idx.max() > num_items:
        raise ctx.corrupt(
            f"dictionary index {int(idx.max())} out of range (dictionary has {num_items} items)"
        )
    null = idx == 0
    take = pa.array(idx - 1, type=pa.int64(), mask=null if null.any() else None)
    out = items.take(take)
    if out.offset:
        out = pa.concat_arrays([out])
    return out


@register_decoder("list")
def _decode_list(ctx: PageBuffers, lst: pb.List, n: int, dtype: pa.DataType) -> ListPage:
    raw = _u64_values(ctx, lst.offsets, n, "list offsets")
    ends, valid = _split_adjusted(ctx, raw, int(lst.null_offset_adjustment), "list offsets")
    num_items = int(lst.num_items)
    if ends.size and int(ends[-1]) > num_items:
        raise ctx.corrupt(f"list offsets page refers to item {int(ends[-1])} but holds {num_items} items")
    return ListPage(ends=ends, valid=valid, num_items=num_items)


@register_decoder("struct")
def _decode_struct(ctx: PageBuffers, s: pb.SimpleStruct, n: int, dtype: pa.DataType) -> None:
    return None


# ---------------------------------------------------------------------------- encoding builders
def buffer_ref(msg: pb.Buffer, index: int) -> None:
    msg.buffer_index = index
    msg.SetInParent()


def flat(bits: int, index: int, *, zstd_level: int | None = None, compress: bool = False) -> pb.ArrayEncoding:
    enc = pb.ArrayEncoding()
    enc.flat.bits_per_value = bits
    buffer_ref(enc.flat.buffer, index)
    if compress:
        enc.flat.compression.scheme = "zstd"
        if zstd_level is not None:
            enc.flat.compression.level = zstd_level
    return enc


def nullable_no_nulls(values: pb.ArrayEncoding) -> pb.ArrayEncoding:
    enc = pb.ArrayEncoding()
    enc.nullable.no_nulls.values.CopyFrom(values)
    return enc


def nullable_some_nulls(validity: pb.ArrayEncoding, values: pb.ArrayEncoding) -> pb.ArrayEncoding:
    enc = pb.ArrayEncoding()
    enc.nullable.some_nulls.validity.CopyFrom(validity)
    enc.nullable.some_nulls.values.CopyFrom(values)
    return enc


def nullable_all_nulls() -> pb.ArrayEncoding:
    enc = pb.ArrayEncoding()
    enc.nullable.all_nulls.SetInParent()
    return enc


def fixed_size_list(dimension: int, items: pb.ArrayEncoding) -> pb.ArrayEncoding:
    enc = pb.ArrayEncoding()
    enc.fixed_size_list.dimension = dimension
    enc.fixed_size_list.items.CopyFrom(items)
    return enc


def binary(indices: pb.ArrayEncoding, data: pb.ArrayEncoding, null_adjustment: int) -> pb.ArrayEncoding:
    enc = pb.ArrayEncoding()
    enc.binary.indices.CopyFrom(indices)
    enc.binary.bytes.CopyFrom(data)
    enc.binary.null_adjustment = null_adjustment
    return enc


def dictionary(indices: pb.ArrayEncoding, items: pb.ArrayEncoding, num_items: int) -> pb.ArrayEncoding:
    enc = pb.ArrayEncoding()
    enc.dictionary.indices.CopyFrom(indices)
    enc.dictionary.items.CopyFrom(items)
    enc.dictionary.num_dictionary_items = num_items
    return enc


def list_offsets(offsets: pb.ArrayEncoding, null_offset_adjustment: int, num_items: int) -> pb.ArrayEncoding:
    enc = pb.ArrayEncoding()
    enc.list.offsets.CopyFrom(offsets)
    enc.list.null_offset_adjustment = null_offset_adjustment
    enc.list.num_items = num_items
    return enc


def simple_struct() -> pb.ArrayEncoding:
    enc = pb.ArrayEncoding()
    enc.struct.SetInParent()
    return enc
