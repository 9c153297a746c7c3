"""Compressive encodings of 2.1/2.2 pages (``lance.encodings21.CompressiveEncoding``).

Fixed-width decoders return a NumPy array of unsigned ints of the uncompressed width (or a bool
array for 1-bit values); variable-width decoders return ``(offsets int64[n+1], data uint8)``.
Anything not implemented raises :class:`UnsupportedFeatureError` naming the encoding.
"""

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from lance_ops.format._proto import encodings_v2_1_pb2 as pb
from lance_ops.format.errors import CorruptFileError, UnsupportedFeatureError
from lance_ops.format.file.v21 import fsst
from lance_ops.format.file.v21.bitpacking import BLOCK, unpack_block_count

__all__ = [
    "Where", "fixed_chunk", "fixed_block", "variable_chunk", "variable_block", "general_decompress", "per_value_general"
]


@dataclass
class Where:
    """Names the file and column for errors."""

    path: str
    column: int
    version: str = "2.1+"
    #: rows of a single-layer mini-block page whose values the caller keeps (uint8 per row);
    #: FSST strings of the other rows may decode empty (None: every row)
    keep: np.ndarray | None = field(default=None, compare=False, repr=False)

    def unsupported(self, what: str) -> UnsupportedFeatureError:
        return UnsupportedFeatureError(
            f"{self.path}: column {self.column}: Lance {self.version} encoding {what} is not supported"
        )

    def corrupt(self, what: str) -> CorruptFileError:
        return CorruptFileError(self.path, f"column {self.column}: {what}")


def leaf_type_below(w: Where, dtype: pa.DataType, depth: int) -> pa.DataType:
    """The leaf type below ``depth`` list / single-child struct layers of ``dtype``."""
    t = dtype
    for _ in range(depth):
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            t = t.value_type
        elif pa.types.is_struct(t) and t.num_fields == 1:
            t = t.field(0).type
        else:
            raise w.corrupt(f"{depth + 1} rep/def layers for a column read as {dtype}")
    return t


def full_zip_repetition_index(w: Where, buffer: pa.Buffer, n: int, data_len: int) -> np.ndarray:
    """A full-zip page's repetition index: ``n + 1`` byte positions (1, 2, 4 or 8 bytes each,
    told by the buffer's size) of each row's start and the end, non-decreasing, within the data."""
    raw = np.frombuffer(buffer, dtype=np.uint8)
    if len(raw) % (n + 1):
        raise w.corrupt(f"full-zip repetition index of {len(raw)} bytes for {n} rows")
    width = len(raw) // (n + 1)
    if width not in (1, 2, 4, 8):
        raise w.corrupt(f"full-zip repetition index with {width}-byte entries")
    ri = raw.view(f"<u{width}").astype(np.int64)
    if np.any(np.diff(ri) < 0) or ri[-1] > data_len:
        raise w.corrupt("bad full-zip repetition index")
    return ri


def _u8(buf: pa.Buffer | bytes | np.ndarray) -> np.ndarray:
    if isinstance(buf, np.ndarray):
        return buf.view(np.uint8)
    return np.frombuffer(buf, dtype=np.uint8)


def _kind(enc: pb.CompressiveEncoding) -> str | None:
    return enc.WhichOneof("compression")


def _unpack(w: Where, words: np.ndarray, width: int, t_bits: int, nblocks: int) -> np.ndarray:
    try:
        return unpack_block_count(words, width, t_bits, nblocks)
    except ValueError as e:
        raise w.corrupt(str(e)) from None


def general_decompress(w: Where, comp: pb.BufferCompression, data: np.ndarray) -> np.ndarray:
    """Undo ``general`` buffer compression (LZ4 block with u32 size prefix; zstd with u64 prefix or raw)."""
    raw = data.tobytes()
    if comp.scheme == pb.COMPRESSION_ALGORITHM_LZ4:
        if len(raw) < 4:
            raise w.corrupt("LZ4 buffer shorter than its size prefix")
        size = int.from_bytes(raw[:4], "little")
        if size == 0:
            return np.zeros(0, np.uint8)
        return _decompress(w, "lz4_raw", raw[4:], size)
    if comp.scheme == pb.COMPRESSION_ALGORITHM_ZSTD:
        if not raw:
            return np.zeros(0, np.uint8)
        if raw[:4] == b"\x28\xb5\x2f\xfd":
            raise w.unsupported("general(zstd) raw stream")
        size = int.from_bytes(raw[:8], "little")
        return _decompress(w, "zstd", raw[8:], size)
    raise w.unsupported(f"general(scheme={comp.scheme})")


def _decompress(w: Where, codec: str, raw: bytes, size: int) -> np.ndarray:
    """``raw`` decompressed by ``codec`` into its ``size`` bytes; bytes the codec refuses (Arrow
    raises ``OSError`` for them) are a :class:`CorruptFileError` naming the column."""
    try:
        return _u8(pa.Codec(codec).decompress(raw, decompressed_size=size))
    except (OSError, MemoryError, pa.ArrowException) as e:
        raise w.corrupt(f"{codec} buffer does not decompress to its {size} bytes: {e}") from None


def per_value_general(
    w: Where, comp: pb.BufferCompression, offs: np.ndarray, data: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Values compressed one by one (full-zip pages of large values, upstream
    ``CompressedBufferEncoder::per_value_compress``): ``(offsets, bytes)`` decompressed.

    One codec call per value: full-zip pages hold large values, so the calls are few and the
    time is the decompression's.
    """
    parts = [general_decompress(w, comp, data[int(a) : int(b)]) for a, b in zip(offs[:-1], offs[1:], strict=True)]
    out = np.zeros(len(parts) + 1, dtype=np.int64)
    if parts:
        np.cumsum([len(p) for p in parts], out=out[1:])
        return out, np.concatenate(parts)
    return out, np.zeros(0, np.uint8)


def _flat_fixed(w: Where, bits: int, data: np.ndarray, n: int) -> np.ndarray:
    if bits == 1:
        need = (n + 7) // 8
        if len(data) < need:
            raise w.corrupt(f"flat bit buffer of {len(data)} bytes, {need} needed")
        return np.unpackbits(data[:need], bitorder="little", count=n).astype(bool)
    if bits % 8 or bits == 0:
        raise w.unsupported(f"flat{{bits_per_value:{bits}}}")
    width = bits // 8
    if len(data) < n * width:
        raise w.corrupt(f"flat buffer of {len(data)} bytes, {n * width} needed")
    if width in (1, 2, 4, 8):
        return np.ascontiguousarray(data[: n * width]).view(f"<u{width}")
    return data[: n * width].reshape(n, width)  # wide values: raw bytes per value


def fixed_chunk(w: Where, enc: pb.CompressiveEncoding, bufs: list[np.ndarray], n: int) -> np.ndarray:
    """Decode ``n`` fixed-width values of one mini-block chunk from its buffers."""
    kind = _kind(enc)
    if kind == "flat":
        if enc.flat.HasField("data"):
            raise w.unsupported("flat with buffer compression")
        return _flat_fixed(w, int(enc.flat.bits_per_value), bufs[0], n)
    if kind == "inline_bitpacking":
        if enc.inline_bitpacking.HasField("values"):
            raise w.unsupported("inline_bitpacking with buffer compression")
        t_bits = int(enc.inline_bitpacking.uncompressed_bits_per_value)
        if t_bits not in (8, 16, 32, 64):
            raise w.unsupported(f"inline_bitpacking{{uncompressed_bits_per_value:{t_bits}}}")
        return inline_unpack(w, bufs[0], t_bits, n)
    if kind == "general":
        inner = list(bufs)
        inner[0] = general_decompress(w, enc.general.compression, bufs[0])
        return fixed_chunk(w, enc.general.values, inner, n)
    if kind == "out_of_line_bitpacking":
        return fixed_block(w, enc, bufs[0], n)
    if kind == "rle":
        return _rle(w, enc.rle, bufs, n)
    if kind == "byte_stream_split":
        inner = enc.byte_stream_split.values
        if _kind(inner) != "flat" or inner.flat.HasField("data"):
            raise w.unsupported(f"byte_stream_split of {_kind(inner)}")
        bits = int(inner.flat.bits_per_value)
        if bits % 8 or bits // 8 not in (2, 4, 8):
            raise w.unsupported(f"byte_stream_split of {bits}-bit values")
        width = bits // 8
        if len(bufs[0]) < n * width:
            raise w.corrupt(f"byte_stream_split buffer of {len(bufs[0])} bytes, {n * width} needed")
        streams = bufs[0][: n * width].reshape(width, n)
        return np.ascontiguousarray(streams.T).reshape(-1).view(f"<u{width}")
    if kind == "fixed_size_list":
        fsl = enc.fixed_size_list
        dim = int(fsl.items_per_value)
        if not fsl.has_validity:
            return fixed_chunk(w, fsl.values, bufs, n * dim)
        if _kind(fsl.values) != "flat":
            raise w.unsupported(f"fixed_size_list with item validity over {_kind(fsl.values)}")
        if len(bufs) >= 2:  # mini-block: [item validity bits, values]
            valid = _flat_fixed(w, 1, bufs[0], n * dim)
            values = fixed_chunk(w, fsl.values, bufs[1:], n * dim)
        else:  # per value (full-zip): each row is [validity bytes][values]
            width = int(fsl.values.flat.bits_per_value) // 8
            vbytes = (dim + 7) // 8
            row = vbytes + dim * width
            if not width or len(bufs[0]) < n * row:
                raise w.corrupt(f"fixed_size_list buffer of {len(bufs[0])} bytes for {n} rows")
            rows = bufs[0][: n * row].reshape(n, row)
            valid = np.unpackbits(np.ascontiguousarray(rows[:, :vbytes]), axis=1, bitorder="little")[:, :dim]
            valid = valid.reshape(-1).astype(bool)
            values = fixed_chunk(w, fsl.values, [np.ascontiguousarray(rows[:, vbytes:]).reshape(-1)], n * dim)
        return np.ma.MaskedArray(values, mask=np.broadcast_to(~valid.reshape(-1, *([1] * (values.ndim - 1))),
                                                              values.shape).copy())
    raise w.unsupported(f"{kind} (fixed-width, mini-block)")


def _rle(w: Where, rle: pb.Rle, bufs: list[np.ndarray], n: int) -> np.ndarray:
    """Run-length encoding: buffer 0 = run values, buffer 1 = run lengths (one per run)."""
    if len(bufs) != 2:
        raise w.corrupt(f"rle chunk with {len(bufs)} buffers")
    if _kind(rle.values) != "flat" or _kind(rle.run_lengths) != "flat" or rle.run_lengths.flat.bits_per_value != 8:
        raise w.unsupported(f"rle{{values:{_kind(rle.values)}, run_lengths:{_kind(rle.run_lengths)}}}")
    bits = int(rle.values.flat.bits_per_value)
    if bits % 8 or bits // 8 not in (1, 2, 4, 8):
        raise w.unsupported(f"rle of {bits}-bit values")
    width = bits // 8
    runs = len(bufs[0]) // width
    if len(bufs[0]) % width or len(bufs[1]) != runs:
        raise w.corrupt(f"rle chunk with {len(bufs[0])} value bytes and {len(bufs[1])} run lengths")
    values = np.ascontiguousarray(bufs[0]).view(f"<u{width}")
    out = np.repeat(values, bufs[1].astype(np.int64))
    if len(out) < n:
        raise w.corrupt(f"rle chunk decodes {len(out)} values, {n} expected")
    return out[:n]


def inline_unpack(w: Where, data: np.ndarray, t_bits: int, n: int) -> np.ndarray:
    """Inline bit-packing: blocks of ``[T bit_width][1024*W/T words]``, one per 1024 values."""
    size = t_bits // 8
    outs = []
    pos = 0
    remaining = n
    while remaining > 0:
        if pos + size > len(data):
            raise w.corrupt("inline bit-packed chunk is truncated")
        width = int(np.frombuffer(data[pos : pos + size].tobytes(), dtype=f"<u{size}")[0])
        if width > t_bits:
            raise w.corrupt(f"inline bit width {width} > {t_bits}")
        pos += size
        nbytes = BLOCK * width // 8
        if pos + nbytes > len(data):
            raise w.corrupt("inline bit-packed chunk is truncated")
        vals = _unpack(w, data[pos : pos + nbytes], width, t_bits, 1)
        pos += nbytes
        take = min(BLOCK, remaining)
        outs.append(vals[:take])
        remaining -= take
    if not outs:
        return np.zeros(0, dtype=f"<u{size}")
    return outs[0] if len(outs) == 1 else np.concatenate(outs)


def fixed_block(w: Where, enc: pb.CompressiveEncoding, data: np.ndarray, n: int) -> np.ndarray:
    """Decode ``n`` fixed-width values stored as one whole buffer (rep/def levels, dictionary items)."""
    kind = _kind(enc)
    if kind == "flat":
        return _flat_fixed(w, int(enc.flat.bits_per_value), data, n)
    if kind == "out_of_line_bitpacking":
        oob = enc.out_of_line_bitpacking
        t_bits = int(oob.uncompressed_bits_per_value)
        if t_bits not in (8, 16, 32, 64) or _kind(oob.values) != "flat":
            raise w.unsupported(f"out_of_line_bitpacking{{{t_bits}, {_kind(oob.values)}}}")
        width = int(oob.values.flat.bits_per_value)
        size = t_bits // 8
        words_per_block = (BLOCK * width + t_bits - 1) // t_bits
        whole, tail = divmod(n, BLOCK)
        nwords = len(data) // size
        out = _unpack(w, data[: whole * words_per_block * size], width, t_bits, whole)
        if tail:
            start = whole * words_per_block * size
            if nwords == whole * words_per_block + tail:  # raw tail
                raw = np.frombuffer(data[start : start + tail * size].tobytes(), dtype=f"<u{size}")
                out = np.concatenate([out, raw])
            else:
                last = _unpack(w, data[start : start + words_per_block * size], width, t_bits, 1)
                out = np.concatenate([out, last[:tail]])
        return out
    if kind == "inline_bitpacking":
        return fixed_chunk(w, enc, [data], n)
    if kind == "rle":
        # block form: [u64 bytes of run values][run values][one u8 run length per run]
        if len(data) < 8:
            raise w.corrupt("rle block shorter than its header")
        vbytes = int.from_bytes(data[:8].tobytes(), "little")
        if 8 + vbytes > len(data):
            raise w.corrupt(f"rle block claims {vbytes} bytes of run values, has {len(data) - 8}")
        return _rle(w, enc.rle, [data[8 : 8 + vbytes], data[8 + vbytes :]], n)
    if kind == "general":
        return fixed_block(w, enc.general.values, general_decompress(w, enc.general.compression, data), n)
    raise w.unsupported(f"{kind} (fixed-width block)")


def variable_chunk(w: Where, enc: pb.CompressiveEncoding, bufs: list[np.ndarray], n: int) -> tuple[np.ndarray, np.ndarray]:
    """Decode ``n`` variable-width values of one mini-block chunk: ``(offsets[n+1], data)``."""
    kind = _kind(enc)
    if kind == "variable":
        v = enc.variable
        if v.HasField("values"):
            raise w.unsupported("variable with buffer compression")
        if _kind(v.offsets) != "flat" or v.offsets.flat.bits_per_value not in (32, 64):
            raise w.unsupported(f"variable offsets {_kind(v.offsets)}")
        data = bufs[0]
        width = int(v.offsets.flat.bits_per_value) // 8
        if len(data) < (n + 1) * width:
            raise w.corrupt("variable chunk shorter than its offsets")
        offs = np.frombuffer(data[: (n + 1) * width].tobytes(), dtype=f"<u{width}").astype(np.int64)
        if n and (offs[-1] > len(data) or offs[0] > offs[-1] or np.any(np.diff(offs) < 0)):
            raise w.corrupt("bad offsets in variable chunk")
        return offs - offs[0], data[offs[0] : offs[-1]]
    if kind == "general":
        inner = list(bufs)
        inner[0] = general_decompress(w, enc.general.compression, bufs[0])
        return variable_chunk(w, enc.general.values, inner, n)
    if kind == "fsst":
        offs, data = variable_chunk(w, enc.fsst.values, bufs, n)
        try:
            return fsst.decompress(bytes(enc.fsst.symbol_table), offs, data)
        except ValueError as e:
            raise w.corrupt(f"bad FSST data: {e}") from None
    raise w.unsupported(f"{kind} (variable-width, mini-block)")


def variable_block(w: Where, enc: pb.CompressiveEncoding, data: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Decode ``n`` variable-width values stored as one buffer (dictionary items)."""
    kind = _kind(enc)
    if kind == "variable":
        if len(data) < 8:
            raise w.corrupt("variable block too short")
        head = np.frombuffer(data[:8].tobytes(), dtype="<u4")
        if data[1] or data[2] or data[3]:
            raise w.unsupported("variable block (old header scheme)")
        bits = int(head[0])
        if bits == 32:
            start, ostart = int(head[1]), 8
        elif bits == 64:
            start, ostart = int(np.frombuffer(data[8:16].tobytes(), dtype="<u8")[0]), 16
        else:
            raise w.corrupt(f"variable block with {bits} bits per offset")
        width = bits // 8
        offs = np.frombuffer(data[ostart:start].tobytes(), dtype=f"<u{width}").astype(np.int64)
        body = data[start:]
        if len(offs) == n + 1:
            pass
        elif len(offs) == n:
            offs = np.concatenate([[0], offs])
        else:
            raise w.corrupt(f"variable block has {len(offs)} offsets for {n} values")
        if offs[-1] > len(body) or np.any(np.diff(offs) < 0):
            raise w.corrupt("bad offsets in variable block")
        return offs - offs[0], body[offs[0] : offs[-1]]
    if kind == "general":
        return variable_block(w, enc.general.values, general_decompress(w, enc.general.compression, data), n)
    raise w.unsupported(f"{kind} (variable-width block)")
