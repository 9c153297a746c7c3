"""Encoding of Lance 2.1 / 2.2 pages (the writer's half of :mod:`.layouts`), docs/FORMAT.md §5.

Encodings pylance 14 reads: mini-block pages with inline bit-packed integer-like values,
``flat`` floats, ``fixed_size_list`` vectors, ``variable`` strings/binary (32-bit offsets, 64-bit
for large types) or, for low-cardinality pages, bit-packed indices into a page dictionary; def
levels bit-packed, ``flat{16}`` or ``rle`` (whichever is smallest), rep levels ``flat{16}`` or
``rle``.  A page without visible items (only null / empty lists) is a constant layout carrying its
levels, as pylance writes it; a page whose values are too large for 32 KiB chunks, or with more
null / empty lists between two values than a chunk counts, is full-zip.

Mini-block chunks hold a power-of-two number of values (at least 2; at most 4096, or 1024 when
bit-packed), the last one the rest; a chunk's levels run up to and including its last visible
slot (trailing null / empty lists go to the next chunk), as pylance slices them, and the
repetition index records per chunk the rows that finish in it and the levels left over after its
last row start.
"""

import struct
from typing import Any

import numpy as np
import pyarrow as pa

from lance_ops.format._proto import encodings_v2_1_pb2 as pb
from lance_ops.format.errors import ChunksTooLargeError, UnsupportedFeatureError
from lance_ops.format.file.v21 import fsst
from lance_ops.format.file.v21.bitpacking import PagePacker
from lance_ops.format.file.v21.fsst_reuse import PageReuse
from lance_ops.format.file.v21.repdef import Levels, def_counts, is_list_layer, max_visible_level

__all__ = ["encode_page", "leaf_kind"]

_ALIGN = 8
_MAX_CHUNK_BYTES = 32 * 1024
_MAX_CHUNK_VALUES = 4096
_MAX_LEVELS = 0xFFFF
#: pylance writes mini-block pages (FSST-compressed strings) only for values under 256 bytes
#: (``is_narrow`` in lance-encoding); longer ones are full-zip there
_NARROW_BYTES = 256


def _pad(n: int) -> int:
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


def _is_var(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_binary(t) or pa.types.is_large_string(t) or pa.types.is_large_binary(t)


def _large(t: pa.DataType) -> bool:
    return pa.types.is_large_string(t) or pa.types.is_large_binary(t)


def _bits(t: pa.DataType) -> int | None:
    if pa.types.is_boolean(t):
        return 1
    if pa.types.is_fixed_size_binary(t):
        return t.byte_width * 8
    try:
        bits = t.bit_width
    except ValueError:
        return None
    return bits if bits and bits % 8 == 0 else None


def leaf_kind(t: pa.DataType, where: str) -> tuple[str, int]:
    """``("var", offset bits)``, ``("fixed", bits)`` or ``("fsl", bits of one item)`` of a leaf type.

    Raises:
        UnsupportedFeatureError: a type the 2.1+ writer cannot store.
    """
    if _is_var(t):
        return "var", 64 if _large(t) else 32
    if pa.types.is_fixed_size_list(t):
        bits = _bits(t.value_type)
        if bits is None or bits == 1 or pa.types.is_nested(t.value_type):
            raise UnsupportedFeatureError(f"{where}: fixed-size lists of {t.value_type} cannot be written in Lance 2.1+ files")
        return "fsl", bits
    if pa.types.is_dictionary(t) and _is_var(t.value_type):
        return "dict", 64 if _large(t.value_type) else 32  # indices into a page dictionary, as pylance
    if pa.types.is_dictionary(t) and not pa.types.is_boolean(t.value_type) and _bits(t.value_type):
        return "dict", 0  # indices into a page dictionary of fixed-width items (flat), as pylance
    if pa.types.is_dictionary(t) or pa.types.is_null(t) or pa.types.is_map(t):
        raise UnsupportedFeatureError(f"{where}: Arrow type {t} cannot be written in Lance 2.1+ files by lance_ops")
    bits = _bits(t)
    if bits is None:
        raise UnsupportedFeatureError(f"{where}: Arrow type {t} cannot be written in Lance 2.1+ files by lance_ops")
    return "fixed", bits


def _flat(bits: int) -> pb.CompressiveEncoding:
    e = pb.CompressiveEncoding()
    e.flat.bits_per_value = bits
    return e


def _value_encoding(kind: str, bits: int, t: pa.DataType, item_validity: bool = False) -> pb.CompressiveEncoding:
    if kind == "fixed":
        return _flat(bits)
    if kind == "fsl":
        e = pb.CompressiveEncoding()
        e.fixed_size_list.items_per_value = t.list_size
        e.fixed_size_list.has_validity = item_validity
        e.fixed_size_list.values.CopyFrom(_flat(bits))
        return e
    e = pb.CompressiveEncoding()
    e.variable.offsets.CopyFrom(_flat(bits))
    return e


def _integer_like(t: pa.DataType) -> bool:
    """Types whose values are bit-packed when their high bits are all zero (pylance packs the
    raw bits of floats too: ``x`` in [0, 1) saves its two top bits)."""
    return (pa.types.is_integer(t) or pa.types.is_date(t) or pa.types.is_time(t) or pa.types.is_timestamp(t)
            or pa.types.is_duration(t) or pa.types.is_floating(t))


class _Values:
    """Byte access to the visible leaf values: fixed bytes, bits, or (offsets, data)."""

    def __init__(self, leaf: pa.Array, kind: str, bits: int) -> None:
        self.kind, self.bits, self.n = kind, bits, len(leaf)
        self.packer: PagePacker | None = None
        if leaf.offset:
            leaf = pa.concat_arrays([leaf])
        if kind == "var":
            bufs = leaf.buffers()
            odt = np.int64 if bits == 64 else np.int32
            offs = np.frombuffer(bufs[1], dtype=odt, count=self.n + 1).astype(np.int64) if bufs[1] is not None else np.zeros(
                self.n + 1, np.int64)
            self.offsets = offs - offs[0]
            self.data = (np.frombuffer(bufs[2], dtype=np.uint8)[offs[0] : offs[-1]]
                         if bufs[2] is not None and self.n else np.zeros(0, np.uint8))
        elif bits == 1:
            self.bools = np.asarray(leaf.fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)
        else:
            self.item_valid = None
            if kind == "fsl":
                dim = leaf.type.list_size
                child = leaf.values.slice(0, self.n * dim)
                if child.offset:
                    child = pa.concat_arrays([child])
                if child.null_count:  # items with their own validity: an extra bit buffer per chunk
                    self.item_valid = np.asarray(child.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
                width = bits // 8 * dim
                raw = np.frombuffer(child.buffers()[1], dtype=np.uint8)
            else:
                width = bits // 8
                raw = np.frombuffer(leaf.buffers()[1], dtype=np.uint8)
            self.width = width
            self.raw = raw[: self.n * width]
            if len(self.raw) < self.n * width:
                self.raw = np.concatenate([self.raw, np.zeros(self.n * width - len(self.raw), np.uint8)])
            if kind == "fixed" and bits in (8, 16, 32, 64) and _integer_like(leaf.type) and self.n:
                u = self.raw.view(f"<u{bits // 8}")
                if int(u.max()).bit_length() < bits:  # inline bit-packing saves space
                    self.packer = PagePacker(u, bits)

    def num_buffers(self) -> int:
        return 2 if self.kind == "fsl" and self.item_valid is not None else 1

    def nbytes(self, v0: int, k: int) -> int:
        if self.packer is not None:
            return self.packer.nbytes(v0, k)
        if self.kind == "fsl" and self.item_valid is not None:
            dim = self.width // (self.bits // 8)
            return _pad((k * dim + 7) // 8) + k * self.width
        if self.kind == "var":
            ow = self.bits // 8
            body = int(self.offsets[v0 + k] - self.offsets[v0])
            return (k + 1) * ow + body + (-body % ow)
        if self.bits == 1:
            return (k + 7) // 8
        return k * self.width

    def chunk(self, v0: int, k: int) -> list[bytes]:
        if self.kind == "fsl" and self.item_valid is not None:
            dim = self.width // (self.bits // 8)
            bits = np.packbits(self.item_valid[v0 * dim : (v0 + k) * dim], bitorder="little").tobytes()
            return [bits, self._chunk(v0, k)]
        return [self._chunk(v0, k)]

    def _chunk(self, v0: int, k: int) -> bytes:
        if self.kind == "var":
            ow = self.bits // 8
            o = self.offsets[v0 : v0 + k + 1]
            rel = (o - o[0] + (k + 1) * ow).astype(np.uint64 if ow == 8 else np.uint32)
            body = self.data[o[0] : o[-1]].tobytes()
            # pylance wants the chunk buffer to be a whole number of offset words
            return rel.tobytes() + body + b"\0" * (-len(body) % ow)
        if self.bits == 1:
            return np.packbits(self.bools[v0 : v0 + k], bitorder="little").tobytes()
        if self.packer is not None:
            return self.packer.chunk(v0, k)
        return self.raw[v0 * self.width : (v0 + k) * self.width].tobytes()

    def max_value_bytes(self) -> int:
        if self.kind == "var":
            return int(np.diff(self.offsets).max(initial=0))
        return self.width if self.bits != 1 else 1


class _LevelBuffer:
    """One kind of rep/def levels of a page, cut into chunk buffers: ``flat{16}``, or ``rle``
    (u16 run values, u8 run lengths, a u64 byte count of the values first) when that is smaller
    -- long runs of empty / null lists would not fit a 32 KiB chunk as flat levels.

    Runs are split every 255 levels from their start; a chunk holds the runs (pieces) that
    overlap it, clipped, so its run count is known exactly before it is encoded.
    """

    def __init__(self, levels: np.ndarray, rle: bool | None = None, bitpack: bool = False) -> None:
        self.levels = levels
        n = len(levels)
        self.packer = None
        starts = np.concatenate([[0], np.flatnonzero(np.diff(levels.astype(np.int64))) + 1]) if n else np.zeros(0, np.int64)
        lens = np.diff(np.append(starts, n))
        pieces = (lens + 254) // 255
        first = np.cumsum(pieces) - pieces
        which = np.repeat(np.arange(len(starts)), pieces)
        self.starts = starts[which] + 255 * (np.arange(len(which)) - first[which])
        self.rle = (8 + 3 * len(self.starts) < 2 * n) if rle is None else rle
        if bitpack and rle is None:
            # def levels of a page without lists (chunks start on 1024-level blocks): inline
            # bit-packing, as pylance writes them, when that is the smallest
            packer = PagePacker(levels.astype(np.uint16), 16)
            if packer.cum[-1] < min(2 * n, 8 + 3 * len(self.starts)):
                self.packer, self.rle = packer, False

    def compression(self) -> pb.CompressiveEncoding:
        if self.packer is not None:
            e = pb.CompressiveEncoding()
            e.inline_bitpacking.uncompressed_bits_per_value = 16
            return e
        if not self.rle:
            return _flat(16)
        e = pb.CompressiveEncoding()
        e.rle.values.CopyFrom(_flat(16))
        e.rle.run_lengths.CopyFrom(_flat(8))
        return e

    def _runs(self, l0: int, l1: int) -> np.ndarray:
        a = int(np.searchsorted(self.starts, l0, side="right"))
        b = int(np.searchsorted(self.starts, l1, side="left"))
        return np.concatenate([[l0], self.starts[a:b]])

    def nbytes(self, l0: int, l1: int) -> int:
        if self.packer is not None:
            return _pad(self.packer.nbytes(l0, l1 - l0))
        if not self.rle:
            return _pad(2 * (l1 - l0))
        a = int(np.searchsorted(self.starts, l0, side="right"))
        b = int(np.searchsorted(self.starts, l1, side="left"))
        return _pad(8 + 3 * (1 + b - a))

    def chunk(self, l0: int, l1: int) -> bytes:
        if self.packer is not None:
            return self.packer.chunk(l0, l1 - l0)
        if not self.rle:
            return self.levels[l0:l1].astype("<u2").tobytes()
        st = self._runs(l0, l1)
        values = self.levels[st].astype("<u2").tobytes()
        return len(values).to_bytes(8, "little") + values + np.diff(np.append(st, l1)).astype(np.uint8).tobytes()


def _plan_chunks(
    vals: _Values, vis_pos: "np.ndarray | _Identity", num_levels: int, level_bufs: list[_LevelBuffer], large: bool
) -> list[tuple[int, int, int, int]]:
    """``[(v0, k, l0, l1)]``: values ``[v0, v0+k)`` and levels ``[l0, l1)`` of each chunk."""
    n = vals.n
    header = _pad(2 + 2 * len(level_bufs) + (4 if large else 2) * vals.num_buffers())
    # pylance reads at most 1024 values (or levels) from an inline bit-packed chunk buffer
    packed = vals.packer is not None or any(b.packer is not None for b in level_bufs)
    max_values = 1024 if packed else _MAX_CHUNK_VALUES
    out = []
    v0 = l0 = 0
    full = _full_chunk(vals, level_bufs, header, max_values)
    if full:  # every chunk but the tail holds ``full`` values: cut them at once
        count = max(0, (n - max_values - 1) // full + 1)  # chunks taken while more than max_values remain
        starts = np.arange(count, dtype=np.int64) * full
        ends = (vis_pos[starts + full - 1] + 1).tolist() if count else []
        out = [(v, full, a, e) for v, a, e in zip(starts.tolist(), [0, *ends[:-1]], ends, strict=True)]
        if count:
            v0, l0 = count * full, ends[-1]
    while v0 < n:
        rem = n - v0
        chosen = None
        levels_only = True  # the levels, not the values, are what does not fit (smallest candidate)
        if rem <= max_values:
            cand = [rem]
        else:
            cand = []
        p = min(max_values, 1 << (max(rem - 1, 1).bit_length() - 1))
        while p >= 2:
            if p < rem:
                cand.append(p)
            p //= 2
        for k in cand:
            last = k == rem
            l1 = num_levels if last else int(vis_pos[v0 + k - 1]) + 1
            lv = l1 - l0
            if lv > _MAX_LEVELS:
                continue
            value_size = header + _pad(vals.nbytes(v0, k))
            levels_only = value_size <= _MAX_CHUNK_BYTES
            size = value_size + sum(b.nbytes(l0, l1) for b in level_bufs)
            if size <= _MAX_CHUNK_BYTES:
                chosen = (k, l1)
                break
        if chosen is None:
            raise ChunksTooLargeError(levels_only)
        k, l1 = chosen
        out.append((v0, k, l0, l1))
        v0 += k
        l0 = l1
    return out


def _full_chunk(vals: _Values, level_bufs: list[_LevelBuffer], header: int, max_values: int) -> int:
    """Values per chunk while more than ``max_values`` remain, when that is one number for the
    whole page (fixed-width values without levels: flat, or bit-packed in 1024-value blocks
    that each fit a chunk); 0 otherwise (each chunk is sized on its own)."""
    if level_bufs or vals.kind != "fixed" or vals.bits == 1 or vals.n <= max_values:
        return 0
    if vals.packer is not None:
        sizes = np.diff(vals.packer.cum)
        fits = max_values == 1024 and header + _pad(int(sizes.max(initial=0))) <= _MAX_CHUNK_BYTES
        return 1024 if fits else 0
    k = max_values
    while k >= 2 and header + _pad(k * vals.width) > _MAX_CHUNK_BYTES:
        k //= 2
    return k if k >= 2 else 0


def _rep_index(chunk_reps: list[np.ndarray], max_rep: int) -> np.ndarray:
    """Per chunk ``[rows that finish in it, leftover levels after its last row start]`` (u64)."""
    out: list[int] = []
    last = len(chunk_reps) - 1
    for i, r in enumerate(chunk_reps):
        starts = np.flatnonzero(r == max_rep)
        rows = int(np.count_nonzero(starts > 0))
        if i < last:
            leftovers = len(r) - int(starts[-1]) if len(starts) else len(r)
        else:
            leftovers = 0
        if i and len(r) and r[0] == max_rep and out[-1] != 0:
            out[-2] += 1
            out[-1] = 0
        if i == last:
            rows += 1
        out.extend((rows, leftovers))
    return np.asarray(out, dtype=np.uint64)


def encode_page(
    levels: Levels, version: str, where: str, reuse: PageReuse | None = None
) -> tuple[list[Any], pb.PageLayout]:
    """Buffers and layout of one page holding ``levels.num_rows`` rows of one leaf column
    (``reuse``: FSST tables of earlier files, :mod:`.fsst_reuse`)."""
    kind, bits = leaf_kind(levels.leaf.type, where)
    arrow_dictionary = None
    if kind == "dict":  # an Arrow dictionary column: always a page dictionary (pylance reads it back as one)
        arrow_dictionary = _arrow_dictionary(levels.leaf)
        if arrow_dictionary is None and levels.rep is None and len(levels.layers) == 1:
            # every value null: pylance writes (and only reads) an all-null constant page
            layout = pb.PageLayout()
            layout.constant_layout.layers.extend(levels.layers)
            return [], layout
        levels = Levels(levels.layers, levels.rep, levels.defs, levels.leaf.cast(levels.leaf.type.value_type),
                        levels.num_rows)
        kind, bits = leaf_kind(levels.leaf.type, where)
    rep, defs = levels.rep, levels.defs
    n_items = len(levels.leaf)
    if n_items == 0:
        return _constant_page(levels, version)
    dictionary = arrow_dictionary or (_dictionary_encode(levels.leaf) if kind == "var" else None)
    fsst_table = None
    if dictionary is not None:  # low-cardinality strings: bit-packed indices into a page dictionary
        vals = _Values(dictionary[0], "fixed", 32)
    else:
        vals = _Values(levels.leaf, kind, bits)
        if kind == "var":
            fsst_table = _fsst_encode(vals, reuse)
    num_levels = levels.num_levels
    vis_pos = _visible_positions(levels, where)
    # 2.2 readers require the "large chunk" grammar: u32 chunk words and u32 value-buffer sizes
    large = version != "2.1"
    level_bufs = [_LevelBuffer(x, bitpack=rep is None) for x in (rep, defs) if x is not None]
    try:
        try:
            chunks = _plan_chunks(vals, vis_pos, num_levels, level_bufs, large)
        except ChunksTooLargeError:
            if all(b.rle for b in level_bufs):
                raise
            level_bufs = [_LevelBuffer(b.levels, rle=True) for b in level_bufs]
            chunks = _plan_chunks(vals, vis_pos, num_levels, level_bufs, large)
    except ChunksTooLargeError:
        # values too large for 32 KiB chunks, or too many levels between two values: full-zip
        # pages have no chunks (one control word per level, values zipped in)
        if dictionary is not None or fsst_table is not None:
            vals = _Values(levels.leaf, kind, bits)
        return _full_zip(levels, vals, kind, bits, where)
    meta, parts = _write_chunks(chunks, vals, level_bufs, large)
    layout = pb.PageLayout()
    mb = layout.mini_block_layout
    if rep is not None:
        mb.rep_compression.CopyFrom(level_bufs[0].compression())
        mb.repetition_index_depth = 1
    if defs is not None:
        mb.def_compression.CopyFrom(level_bufs[-1].compression())
    if vals.packer is not None:
        mb.value_compression.inline_bitpacking.uncompressed_bits_per_value = vals.bits
    elif fsst_table is not None:
        mb.value_compression.fsst.symbol_table = fsst_table
        mb.value_compression.fsst.values.CopyFrom(_value_encoding(kind, bits, levels.leaf.type))
    else:
        mb.value_compression.CopyFrom(_value_encoding(kind, bits, levels.leaf.type, vals.num_buffers() == 2))
    mb.layers.extend(levels.layers)
    mb.num_buffers = vals.num_buffers()
    mb.num_items = n_items
    mb.has_large_chunk = large
    buffers: list[Any] = [meta.tobytes(), parts]  # the chunks, written one after another
    if dictionary is not None:
        _, dict_buffer, items, offset_bits = dictionary
        if offset_bits:
            mb.dictionary.variable.offsets.CopyFrom(_flat(offset_bits))
        else:  # fixed-width items of an Arrow dictionary column
            mb.dictionary.flat.bits_per_value = _bits(levels.leaf.type)
        mb.num_dictionary_items = items
        buffers.append(dict_buffer)
    if rep is not None:
        max_rep = sum(1 for x in levels.layers if is_list_layer(x))
        chunk_reps = [rep[l0:l1] for _, _, l0, l1 in chunks]
        buffers.append(_rep_index(chunk_reps, max_rep).tobytes())
    return buffers, layout


def _constant_page(levels: Levels, version: str) -> tuple[list[Any], pb.PageLayout]:
    """A page without values: its levels only (2.2 describes their compression)."""
    rep, defs = levels.rep, levels.defs
    layout = pb.PageLayout()
    c = layout.constant_layout
    c.layers.extend(levels.layers)
    if version != "2.1":
        if rep is not None:
            c.rep_compression.CopyFrom(_flat(16))
            c.num_rep_values = len(rep)
        if defs is not None:
            c.def_compression.CopyFrom(_flat(16))
            c.num_def_values = len(defs)
    rb = rep.astype("<u2").tobytes() if rep is not None else b""
    db = defs.astype("<u2").tobytes() if defs is not None else b""
    return [rb, db], layout


class _Identity:
    """``np.arange(n)`` without its ``8 * n`` bytes: position ``i`` of a page whose every level
    holds a value is ``i`` (indexing by an int or an int array returns it)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: Any) -> Any:
        return i


def _visible_positions(levels: Levels, where: str) -> "np.ndarray | _Identity":
    """Level positions that hold a value (one per leaf item)."""
    rep, defs, n_items = levels.rep, levels.defs, len(levels.leaf)
    mv = max_visible_level(levels.layers)
    if rep is None or defs is None or mv is None:
        vis_pos = _Identity(levels.num_levels if rep is not None else n_items)
    else:
        vis_pos = np.flatnonzero(defs <= mv)
    if len(vis_pos) != n_items:
        raise AssertionError(f"{where}: {len(vis_pos)} visible slots for {n_items} values")
    return vis_pos


def _write_chunks(
    chunks: list[tuple[int, int, int, int]], vals: "_Values", level_bufs: list["_LevelBuffer"], large: bool
) -> tuple[np.ndarray, list[bytes]]:
    """Mini-block chunk metadata words and chunk bytes: per chunk a header (level count, level and
    value buffer sizes), then the buffers, each padded to the chunk alignment.  The chunks come
    back joined, as one buffer."""
    meta = np.empty(len(chunks), dtype="<u4" if large else "<u2")
    packed = _packed_block_chunks(chunks, vals, level_bufs, large, meta)
    if packed is not None:
        return meta, [packed]
    head = struct.Struct("<" + "H" * (1 + len(level_bufs)) + ("I" if large else "H") * vals.num_buffers())
    head_pad = _ZEROS[_pad(head.size) - head.size]
    out: list[Any] = []
    words = []
    last = len(chunks) - 1
    for i, (v0, k, l0, l1) in enumerate(chunks):
        body = [b.chunk(l0, l1) for b in level_bufs]
        vbs = vals.chunk(v0, k)
        sizes = [len(x) for x in body] + [len(x) for x in vbs]
        out.append(head.pack(l1 - l0 if level_bufs else 0, *sizes))
        out.append(head_pad)
        size = head.size + len(head_pad)
        for part, n in zip((*body, *vbs), sizes, strict=True):
            out.append(part)
            pad = -n % _ALIGN
            if pad:
                out.append(_ZEROS[pad])
            size += n + pad
        log = 0 if i == last else k.bit_length() - 1
        words.append(((size // _ALIGN - 1) << 4) | log)
    meta[:] = words
    return meta, [b"".join(out)]


def _packed_block_chunks(
    chunks: list[tuple[int, int, int, int]], vals: "_Values", level_bufs: list["_LevelBuffer"], large: bool,
    meta: np.ndarray,
) -> np.ndarray | None:
    """:func:`_write_chunks` at once for the usual bit-packed page (no levels, one chunk per
    1024-value block, every block of one width): the chunks are rows of one byte matrix,
    ``[header][block][padding]``; None for any other page.  Fills ``meta``."""
    packer = vals.packer
    if level_bufs or packer is None or vals.num_buffers() != 1 or not chunks:
        return None
    nblocks = len(packer.cum) - 1
    if len(chunks) != nblocks or any(v0 != i * 1024 for i, (v0, _, _, _) in enumerate(chunks)):
        return None
    if packer.uniform is None:  # blocks of different widths
        return None
    heads, packed = packer.uniform
    block = heads.shape[1] + packed.shape[1]
    head = struct.pack("<HI" if large else "<HH", 0, block)
    size = _pad(len(head)) + _pad(block)
    start = _pad(len(head))
    rows = np.empty((nblocks, size), dtype=np.uint8)
    rows[:, :start] = np.frombuffer(head + _ZEROS[start - len(head)], dtype=np.uint8)
    rows[:, start : start + heads.shape[1]] = heads
    rows[:, start + heads.shape[1] : start + block] = packed
    rows[:, start + block :] = 0
    meta[:] = ((size // _ALIGN - 1) << 4) | 10  # 1024 = 2^10 values a chunk
    meta[-1] = (size // _ALIGN - 1) << 4  # the last chunk: log 0
    return rows.reshape(-1)


#: zero padding of each length below the alignment
_ZEROS = [b"\0" * i for i in range(_ALIGN)]


def _fsst_encode(vals: _Values, reuse: PageReuse | None = None) -> bytes | None:
    """FSST-compress the page's strings in place (``vals`` then holds the codes) and return the
    symbol table, where pylance would (mini-block pages of values under 256 bytes with 32 KiB of
    data and a value of 5 bytes or more) and the codes are smaller; None to store them as they
    are (or without the compiled kernels)."""
    longest = vals.max_value_bytes()
    if len(vals.data) < fsst.MIN_INPUT_BYTES or not fsst.MIN_MAX_LENGTH <= longest < _NARROW_BYTES:
        return None
    got = fsst.compress(vals.data, vals.offsets, reuse)
    if got is None:
        return None
    table, offsets, codes = got
    if len(codes) + len(table) >= len(vals.data):
        return None
    vals.offsets, vals.data = offsets, codes
    return table


def _arrow_dictionary(leaf: pa.Array) -> tuple[pa.Array, bytes, int, int] | None:
    """:func:`_dictionary_encode` of an Arrow dictionary array, whatever its cardinality (its
    dictionary is re-derived from the values: only the items it uses, none of them null).
    Fixed-width items are one flat buffer (offset bits 0 mark it)."""
    values = leaf.cast(leaf.type.value_type)
    if _is_var(values.type):
        return _dictionary_encode(values, force=True)
    enc = values.dictionary_encode()
    items = enc.dictionary
    if not len(items):
        return None
    width = _bits(items.type) // 8  # type: ignore[operator]
    data = items.buffers()[1]
    body = bytes(data)[items.offset * width : (items.offset + len(items)) * width]
    return enc.indices.fill_null(0).cast(pa.uint32()), body, len(items), 0


def _dictionary_encode(leaf: pa.Array, force: bool = False) -> tuple[pa.Array, bytes, int, int] | None:
    """``(u32 indices, dictionary buffer, items, offset bits)`` when a page dictionary halves the
    string bytes.

    The dictionary buffer is a ``variable`` block (as pylance writes it): ``u32 32``, ``u32``
    start of the bytes and ``items + 1`` u32 offsets; for large types ``u32 64``, ``u32 0``,
    ``u64`` start and u64 offsets (pylance wants 64-bit offsets there); then the bytes."""
    n = len(leaf)
    if n < 64 and not force:
        return None
    if n > 8192 and not force:  # a cheap look at a sample first: high-cardinality pages skip the full hashing
        step = n // 4096
        sample = leaf.take(pa.array(np.arange(0, n, step, dtype=np.int64)))
        distinct = sample.unique()  # ~2.5x quicker than pc.count_distinct; nulls not counted
        if len(distinct) - distinct.null_count > len(sample) // 4:
            return None
    enc = leaf.dictionary_encode()
    items = enc.dictionary
    k = len(items)
    if k == 0 or (k > n // 4 and not force):  # all null (nothing to index), or too many distinct values
        return None
    if items.offset:
        items = pa.concat_arrays([items])
    large = pa.types.is_large_string(items.type) or pa.types.is_large_binary(items.type)
    offs = np.frombuffer(items.buffers()[1], dtype=np.int64 if large else np.int32, count=k + 1).astype(np.int64)
    body_len = int(offs[-1] - offs[0])
    plain = leaf.nbytes
    if body_len >= 2**32 - 8 * (k + 2) or (
        not force and body_len + 4 * (k + 1) + n * max(1, (k - 1).bit_length()) / 8 > plain / 2
    ):
        return None
    body = np.frombuffer(items.buffers()[2], dtype=np.uint8)[offs[0] : offs[-1]] if body_len else np.zeros(0, np.uint8)
    if large:
        head = np.asarray([64, 0], dtype="<u4").tobytes() + np.asarray([16 + 8 * (k + 1)], dtype="<u8").tobytes()
        rel = (offs - offs[0]).astype("<u8").tobytes()
    else:
        head = np.asarray([32, 8 + 4 * (k + 1)], dtype="<u4").tobytes()
        rel = (offs - offs[0]).astype("<u4").tobytes()
    indices = enc.indices.fill_null(0).cast(pa.uint32())
    return indices, head + rel + body.tobytes(), k, 64 if large else 32


def _full_zip(levels: Levels, vals: _Values, kind: str, bits: int, where: str) -> tuple[list[Any], pb.PageLayout]:
    """Full-zip page: per level slot ``[control word][value]``, the control word
    ``rep << bits_def | def`` in 1, 2 or 4 bytes; fixed-width values follow every visible slot,
    variable-width ones (``[length][bytes]``, the length as wide as the Arrow offsets) every
    valid item.  Buffer 1, the repetition index, holds each row's start and the end (u64)."""
    if vals.num_buffers() != 1:
        raise UnsupportedFeatureError(
            f"{where}: fixed-size lists with null items larger than a 32 KiB mini-block chunk cannot be "
            "written by lance_ops"
        )
    rep, defs = levels.rep, levels.defs
    n_slots = levels.num_levels
    layers = levels.layers
    max_rep = sum(1 for x in layers if is_list_layer(x))
    bits_rep = max_rep.bit_length() if rep is not None else 0
    bits_def = sum(def_counts(layers)).bit_length() if defs is not None else 0
    total = bits_rep + bits_def
    cw = 0 if total == 0 else 1 if total <= 8 else 2 if total <= 16 else 4
    layout = pb.PageLayout()
    fz = layout.full_zip_layout
    fz.layers.extend(layers)
    fz.bits_rep = bits_rep
    fz.bits_def = bits_def
    fz.value_compression.CopyFrom(_value_encoding(kind, bits, levels.leaf.type))
    mv = max_visible_level(layers)
    if rep is None or defs is None or mv is None:
        visible = np.ones(n_slots, dtype=bool)
    else:
        visible = defs <= mv
    fz.num_items = n_slots
    fz.num_visible_items = vals.n
    word = np.zeros(n_slots, dtype=np.int64)
    if rep is not None:
        word |= rep.astype(np.int64) << bits_def
    if defs is not None:
        word |= defs.astype(np.int64)
    vis = np.flatnonzero(visible)
    if kind != "var":
        fz.bits_per_value = bits if kind == "fixed" else bits * levels.leaf.type.list_size
        width = vals.width
        body = np.zeros(n_slots, dtype=np.int64)
        body[vis] = width
        src = vals.raw
    else:
        fz.bits_per_offset = bits
        width = bits // 8
        valid = np.zeros(n_slots, dtype=bool)
        lens_all = np.zeros(n_slots, dtype=np.int64)
        item_valid = (defs[vis] == 0) if defs is not None else np.ones(len(vis), dtype=bool)
        valid[vis[item_valid]] = True
        lens_all[vis] = np.diff(vals.offsets)
        lens_all[~valid] = 0
        body = np.where(valid, width + lens_all, 0)
        src = vals.data[np.repeat(item_valid, np.diff(vals.offsets))]
    starts = np.zeros(n_slots + 1, dtype=np.int64)
    np.cumsum(cw + body, out=starts[1:])
    out = np.zeros(int(starts[-1]), dtype=np.uint8)
    if cw:
        cws = word.astype(f"<u{cw}").view(np.uint8).reshape(n_slots, cw)
        out[(starts[:-1, None] + np.arange(cw)[None, :]).reshape(-1)] = cws.reshape(-1)
    if kind == "var":
        vi = np.flatnonzero(valid)
        lb = lens_all[vi].astype(f"<u{width}").view(np.uint8).reshape(-1, width)
        out[(starts[vi, None] + cw + np.arange(width)[None, :]).reshape(-1)] = lb.reshape(-1)
        vstart, vlen = starts[vi] + cw + width, lens_all[vi]
    else:
        vstart, vlen = starts[vis] + cw, body[vis]
    # value bytes: a mask of their destinations, in order
    edge = np.zeros(len(out) + 1, dtype=np.int8)
    keep = vlen > 0
    edge[vstart[keep]] += 1
    edge[vstart[keep] + vlen[keep]] -= 1
    out[np.cumsum(edge[:-1], dtype=np.int8).view(bool)] = src[: int(vlen.sum())]
    buffers: list[Any] = [out.tobytes()]
    if rep is not None:
        rows = np.flatnonzero(rep == max_rep)
        buffers.append(np.append(starts[rows], starts[-1]).astype("<u8").tobytes())
    elif kind == "var":
        buffers.append(starts.astype("<u8").tobytes())
    return buffers, layout
