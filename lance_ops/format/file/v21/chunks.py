"""Whole-page decoding of mini-block chunks (the fast path of :mod:`.layouts`).

pylance writes chunks of 1024 - 4096 values, so a 1M-row page has hundreds of chunks; decoding
them one by one costs a Python round trip per chunk.  For the common page shapes (no repetition
levels, one value buffer; values ``flat``, ``inline_bitpacking`` or ``variable``; def levels
``flat`` or ``inline_bitpacking``) every chunk header is read at once from its fixed position,
and the buffers of all chunks are decoded together: byte slices are concatenated with one mask,
bit-packed blocks are grouped by bit width and unpacked once per width.

:func:`decode_chunks` returns None for any other shape; the caller then decodes chunk by chunk.
"""

import numpy as np
import pyarrow as pa

from lance_ops.format._proto import encodings_v2_1_pb2 as pb
from lance_ops.format.file.v21 import fsst, kernels
from lance_ops.format.file.v21.bitpacking import BLOCK, aligned_words, unpack_blocks
from lance_ops.format.file.v21.compression import Where

__all__ = ["decode_chunks"]

_ALIGN = 8


def _pad(x: np.ndarray) -> np.ndarray:
    return (x + _ALIGN - 1) // _ALIGN * _ALIGN


def _le(raw: np.ndarray, pos: np.ndarray, width: int) -> np.ndarray:
    out = np.zeros(len(pos), dtype=np.int64)
    for b in range(width):
        out |= raw[pos + b].astype(np.int64) << (8 * b)
    return out


def _slices(raw: np.ndarray, start: np.ndarray, length: np.ndarray) -> np.ndarray:
    """``raw[start[i] : start[i] + length[i]]`` for every i, concatenated."""
    if not len(start):
        return raw[:0]
    # one memcpy per chunk (a mask over the whole page costs ~20x more)
    return np.concatenate([raw[s : s + n] for s, n in zip(start.tolist(), length.tolist(), strict=True)])


def _bits(raw: np.ndarray, start: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Little-endian bit-packed booleans: ``counts[i]`` bits at byte ``start[i]``, concatenated."""
    nbytes = (counts + 7) // 8
    bits = np.unpackbits(_slices(raw, start, nbytes), bitorder="little").view(bool)
    if (counts % 8 == 0).all():
        return bits
    # drop each chunk's padding bits
    pos = np.zeros(len(counts), dtype=np.int64)
    np.cumsum(nbytes[:-1] * 8, out=pos[1:])
    return _slices(bits, pos, counts)


def _inline_unpacked(w: Where, raw: np.ndarray, start: np.ndarray, counts: np.ndarray, t_bits: int) -> np.ndarray:
    """Inline bit-packing of every chunk: per 1024 values ``[T-bit width][packed]``."""
    size = t_bits // 8
    dt = np.dtype(f"<u{size}")
    jit = kernels.get()
    if jit is not None and not (start % size).any():
        words = aligned_words(raw[: len(raw) // size * size], dt)
        total = int(counts.sum())
        out = np.empty(total + BLOCK, dtype=dt)
        err = jit.INLINE_CHUNKS[t_bits](words, start // size, counts, *kernels.plan(t_bits), out)
        if err == 2:
            raise w.corrupt(f"inline bit width above {t_bits}")
        if err:
            raise w.corrupt("inline bit-packed chunk is truncated")
        return out[:total]
    nblk = (counts + BLOCK - 1) // BLOCK
    total = int(nblk.sum())
    out = np.zeros(total * BLOCK, dtype=dt)
    blk_first = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(nblk, out=blk_first[1:])
    pos = start.copy()
    blk_pos = np.zeros(total, dtype=np.int64)
    blk_width = np.zeros(total, dtype=np.int64)
    for k in range(int(nblk.max(initial=0))):  # k-th block of every chunk that has one (k < 4)
        has = np.flatnonzero(nblk > k)
        p = pos[has]
        if (p + size > len(raw)).any():
            raise w.corrupt("inline bit-packed chunk is truncated")
        width = _le(raw, p, size)
        if (width > t_bits).any():
            raise w.corrupt(f"inline bit width above {t_bits}")
        ids = blk_first[has] + k
        blk_pos[ids] = p + size
        blk_width[ids] = width
        pos[has] = p + size + BLOCK * width // 8
    if (blk_pos + BLOCK * blk_width // 8 > len(raw)).any():
        raise w.corrupt("inline bit-packed chunk is truncated")
    for width in np.unique(blk_width).tolist():
        ids = np.flatnonzero(blk_width == width)
        if width == 0:
            continue  # zeros
        nbytes = BLOCK * width // 8
        packed = _slices(raw, blk_pos[ids], np.full(len(ids), nbytes, dtype=np.int64))
        vals = unpack_blocks(packed, width, t_bits).reshape(len(ids), BLOCK)
        out.reshape(total, BLOCK)[ids] = vals
    # each chunk's last block is padded to 1024 values
    if (counts % BLOCK == 0).all():
        return out
    return _slices(out, blk_first[:-1] * BLOCK, counts)


def _fixed(w: Where, enc: pb.CompressiveEncoding, raw: np.ndarray, start: np.ndarray, counts: np.ndarray):
    kind = enc.WhichOneof("compression")
    if kind == "flat" and not enc.flat.HasField("data"):
        bits = int(enc.flat.bits_per_value)
        if bits == 1:
            return _bits(raw, start, counts)
        if bits % 8 or bits // 8 not in (1, 2, 4, 8):
            return None
        width = bits // 8
        return _slices(raw, start, counts * width).view(f"<u{width}")
    if kind == "inline_bitpacking" and not enc.inline_bitpacking.HasField("values"):
        t_bits = int(enc.inline_bitpacking.uncompressed_bits_per_value)
        if t_bits not in (8, 16, 32, 64):
            return None
        return _inline_unpacked(w, raw, start, counts, t_bits)
    return None


#: ``keep`` of :func:`.._jit.fsst_chunks` for "every row"
_EVERY_ROW = np.empty(0, dtype=np.uint8)


def _variable(w: Where, enc: pb.CompressiveEncoding, raw: np.ndarray, start: np.ndarray, size: np.ndarray,
              counts: np.ndarray, fsst_table: bytes | None = None):
    if enc.WhichOneof("compression") != "variable" or enc.variable.HasField("values"):
        return None
    off = enc.variable.offsets
    if off.WhichOneof("compression") != "flat" or off.flat.bits_per_value not in (32, 64):
        return None
    ow = int(off.flat.bits_per_value) // 8
    if ((counts + 1) * ow > size).any():
        raise w.corrupt("variable chunk shorter than its offsets")
    jit = kernels.get()
    if jit is not None and not (start % ow).any():
        words = aligned_words(raw[: len(raw) // ow * ow], np.dtype(f"<u{ow}"))
        out_offs = np.empty(int(counts.sum()) + 1, dtype=np.int64)
        if (start + size > len(raw)).any():
            raise w.corrupt("bad offsets in variable chunk")
        if fsst_table is not None:  # decompress straight from the chunks
            try:
                on, symbols, lens = fsst.parse_symbol_table(fsst_table)
            except ValueError as e:
                raise w.corrupt(f"bad FSST data: {e}") from None
            if on:
                data = fsst.output_buffer(int(size.sum()))
                keep = w.keep if w.keep is not None and len(w.keep) == len(out_offs) - 1 else _EVERY_ROW
                err = jit.fsst_chunks(words, raw, start // ow, start, size, counts, int(np.count_nonzero(lens)),
                                      symbols.view("<u8").reshape(-1), lens, out_offs, data, keep)
                if err in (1, 3):
                    raise w.corrupt("bad offsets in variable chunk")
                if err:
                    raise w.corrupt(f"bad FSST data: {fsst.error_message(err)}")
                return out_offs, _fit(data, int(out_offs[-1])), True
        if jit.variable_sizes(words, start // ow, size, counts, out_offs):
            raise w.corrupt("bad offsets in variable chunk")
        data = np.empty(int(out_offs[-1]), dtype=np.uint8)
        jit.variable_copy(raw, words, start // ow, start, counts, data)
        return out_offs, data, False
    n = int(counts.sum())
    offs = _slices(raw, start, (counts + 1) * ow).view(f"<u{ow}").astype(np.int64)
    # per chunk: counts+1 offsets, absolute in the chunk buffer
    first = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts + 1, out=first[1:])
    lo, hi = offs[first[:-1]], offs[first[1:] - 1]
    if (hi > size).any() or (lo > hi).any():
        raise w.corrupt("bad offsets in variable chunk")
    lens = np.diff(offs)
    lens[first[1:-1] - 1] = 0  # the step from one chunk's last offset to the next chunk's first
    keep = np.ones(len(lens), dtype=bool)
    keep[first[1:-1] - 1] = False
    lens = lens[keep]
    if len(lens) != n or (lens < 0).any():
        raise w.corrupt("bad offsets in variable chunk")
    out_offs = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lens, out=out_offs[1:])
    data = _slices(raw, start + lo, hi - lo)
    return out_offs, data, False


def _fit(buf: np.ndarray, used: int) -> np.ndarray:
    """``buf[:used]``, shrunk (or else copied) when that is under half of ``buf``: FSST output is written into room
    for 8 bytes per code (:func:`fsst.output_buffer`), and a view would keep all of it alive with the
    decoded strings; allocators that reuse touched memory (glibc above its dynamic mmap threshold)
    then count the slack too (a change feed's traced peak: 8 slack buffers of 8.7 MB)."""
    if 2 * used >= len(buf):
        return buf[:used]
    if buf.flags.owndata and buf.base is None:
        # shrunk in place (realloc: a large buffer is a mapping, cut by mremap), no copy; no
        # view of ``buf`` exists (it comes straight from the decoder)
        buf.resize(used, refcheck=False)
        return buf
    return buf[:used].copy()


def _rle_levels(w: Where, rle: pb.Rle, raw: np.ndarray, start: np.ndarray, size: np.ndarray,
                counts: np.ndarray) -> np.ndarray | None:
    """Run-length u16 levels of every chunk: ``[u64 bytes of run values][u16 values][u8 lengths]``."""
    if (rle.values.WhichOneof("compression") != "flat" or rle.values.flat.bits_per_value != 16
            or rle.run_lengths.WhichOneof("compression") != "flat" or rle.run_lengths.flat.bits_per_value != 8):
        return None
    if (size < 8).any():
        raise w.corrupt("rle levels shorter than their header")
    vbytes = _le(raw, start, 8)
    runs = vbytes // 2
    if (vbytes % 2).any() or (size - 8 - vbytes != runs).any():
        raise w.corrupt("rle levels with mismatched run values and lengths")
    if (runs == 0).any():
        return None
    values = _slices(raw, start + 8, vbytes).view("<u2")
    lengths = _slices(raw, start + 8 + vbytes, runs).astype(np.int64)
    per_chunk = np.add.reduceat(lengths, np.concatenate([[0], np.cumsum(runs)[:-1]])) if len(lengths) else lengths
    if len(per_chunk) != len(counts) or (per_chunk != counts).any():
        return None  # runs that overshoot a chunk: the chunk-by-chunk path truncates them
    return np.repeat(values, lengths)


def _levels(w: Where, enc: pb.CompressiveEncoding, raw: np.ndarray, start: np.ndarray, size: np.ndarray,
            counts: np.ndarray) -> np.ndarray | None:
    """u16 levels of every chunk: ``flat{16}``, or ``out_of_line_bitpacking{16}`` (per chunk: whole
    1024-level blocks at one width, then the rest raw or as one more padded block)."""
    kind = enc.WhichOneof("compression")
    if kind == "flat" and enc.flat.bits_per_value == 16 and not enc.flat.HasField("data"):
        if (2 * counts > size).any():
            raise w.corrupt("mini-block level buffer shorter than its levels")
        return _slices(raw, start, 2 * counts).view("<u2")
    if kind == "rle":
        return _rle_levels(w, enc.rle, raw, start, size, counts)
    if kind != "out_of_line_bitpacking":
        return None
    oob = enc.out_of_line_bitpacking
    if oob.uncompressed_bits_per_value != 16 or oob.values.WhichOneof("compression") != "flat":
        return None
    width = int(oob.values.flat.bits_per_value)
    if not 0 < width <= 16:
        return None
    wpb = BLOCK * width // 16  # u16 words per packed block
    whole, tail = counts // BLOCK, counts % BLOCK
    nwords = size // 2
    raw_tail = nwords == whole * wpb + tail
    packed_tail = (tail > 0) & ~raw_tail
    if (~raw_tail & (nwords < (whole + 1) * wpb)).any():
        raise w.corrupt("bit-packed levels shorter than their count")
    nblk = whole + packed_tail
    total_blk = int(nblk.sum())
    if total_blk:
        first = np.zeros(len(counts) + 1, dtype=np.int64)
        np.cumsum(nblk, out=first[1:])
        k = np.arange(total_blk, dtype=np.int64) - np.repeat(first[:-1], nblk)
        blk_start = np.repeat(start, nblk) + k * wpb * 2
        packed = _slices(raw, blk_start, np.full(total_blk, wpb * 2, dtype=np.int64))
        stream = unpack_blocks(packed, width, 16)
        # each chunk's part from the blocks: its first min(count, nblk * 1024) levels
        bpart = np.where(raw_tail, whole * BLOCK, counts)
        from_blocks = _slices(stream, first[:-1] * BLOCK, bpart)
    else:
        bpart = np.zeros(len(counts), dtype=np.int64)
        from_blocks = np.zeros(0, dtype="<u2")
    rpart = np.where(raw_tail, tail, 0)
    if not rpart.any():
        return from_blocks
    from_raw = _slices(raw, start + whole * wpb * 2, 2 * rpart).view("<u2")
    # interleave per chunk: [blocks part][raw part]
    ends = np.cumsum(counts)
    edge = np.zeros(int(ends[-1]) + 1, dtype=np.int8)
    has_raw = rpart > 0
    edge[(ends - rpart)[has_raw]] += 1
    edge[ends[has_raw]] -= 1
    raw_pos = np.cumsum(edge[:-1], dtype=np.int8).view(bool)
    out = np.empty(int(ends[-1]), dtype="<u2")
    out[raw_pos] = from_raw
    out[~raw_pos] = from_blocks
    return out


_TABLE_ERRORS = {
    1: "mini-block chunk value counts do not add up to num_items",
    3: "mini-block chunk header is truncated",
    4: "chunk def level counts differ from its item counts",
}


def _chunk_table(w: Where, words: np.ndarray, raw: np.ndarray, num_items: int, has_rep: bool, has_def: bool,
                 bw: int):
    """NumPy version of the compiled ``chunk_table``: ``(counts, starts, sizes, value-buffer
    sizes, level counts, buffer starts)`` of every chunk."""
    logs = words & 0xF
    sizes = ((words >> 4) + 1) * _ALIGN
    counts = np.left_shift(np.int64(1), logs)
    counts[-1] = num_items - int(counts[:-1].sum())
    if counts[-1] < 0 or (logs[-1] and counts[-1] != 1 << int(logs[-1])):
        raise w.corrupt(_TABLE_ERRORS[1])
    starts = np.zeros(len(words), dtype=np.int64)
    np.cumsum(sizes[:-1], out=starts[1:])
    if starts[-1] + sizes[-1] > len(raw):
        raise w.corrupt(f"mini-block chunks need {int(starts[-1] + sizes[-1])} bytes, buffer has {len(raw)}")
    nlev = has_rep + has_def
    head = 2 + 2 * nlev + bw
    if (sizes < head).any():
        raise w.corrupt(_TABLE_ERRORS[3])
    vsize = _le(raw, starts + 2 + 2 * nlev, bw)
    body = starts + _pad(np.int64(head))
    num_levels = _le(raw, starts, 2) if nlev else counts
    if not has_rep and (num_levels != counts).any():
        raise w.corrupt(_TABLE_ERRORS[4])
    return counts, starts, sizes, vsize, num_levels, body


def _one_chunk(w: Where, word: int, raw: np.ndarray, num_items: int, bw: int, var_values: bool,
               venc: pb.CompressiveEncoding):
    """The values of a page of one chunk without levels (small files: a 100-row page), read
    with scalar header arithmetic instead of the page-wide array passes; None for encodings
    other than ``flat`` fixed widths and ``variable`` with flat offsets (the general path then
    decodes it, raising the same errors for bad bytes)."""
    kind = venc.WhichOneof("compression")
    if var_values:
        if kind != "variable" or venc.variable.HasField("values"):
            return None
        off = venc.variable.offsets
        if off.WhichOneof("compression") != "flat" or off.flat.bits_per_value not in (32, 64):
            return None
        width = int(off.flat.bits_per_value) // 8
    else:
        if kind != "flat" or venc.flat.HasField("data"):
            return None
        bits = int(venc.flat.bits_per_value)
        if bits % 8 or bits // 8 not in (1, 2, 4, 8):
            return None
        width = bits // 8
    log = word & 0xF
    size = ((word >> 4) + 1) * _ALIGN
    if log and num_items != 1 << log:
        raise w.corrupt(_TABLE_ERRORS[1])
    if size > len(raw):
        raise w.corrupt("mini-block chunks run past the data buffer")
    head = 2 + bw
    if size < head:
        raise w.corrupt(_TABLE_ERRORS[3])
    vsize = int.from_bytes(raw[2 : 2 + bw].tobytes(), "little")
    body = (head + _ALIGN - 1) // _ALIGN * _ALIGN
    if body + vsize > size:
        raise w.corrupt("mini-block chunk buffer runs past the chunk")
    if not var_values:
        return raw[body : body + num_items * width].copy().view(f"<u{width}")  # aligned, like the general path
    if (num_items + 1) * width > vsize:
        raise w.corrupt("variable chunk shorter than its offsets")
    offs = raw[body : body + (num_items + 1) * width].view(f"<u{width}").astype(np.int64)
    lo, hi = int(offs[0]), int(offs[-1])
    if hi > vsize or (np.diff(offs) < 0).any():
        raise w.corrupt("bad offsets in variable chunk")
    return offs - lo, raw[body + lo : body + hi].copy()


def decode_chunks(w: Where, mb: pb.MiniBlockLayout, meta: pa.Buffer, data: pa.Buffer, num_items: int,
                  var_values: bool, venc: pb.CompressiveEncoding, fsst_table: bytes | None = None):
    """``(reps, defs, values, decompressed)`` of every chunk of the page, or None when the page
    needs the general path.

    ``reps`` / ``defs``: levels (or None), ``values``: fixed values or ``(offsets, data)``.
    ``fsst_table``: the page's FSST symbol table, when its variable values are FSST codes; with
    the compiled kernels they are then decompressed here (``decompressed`` True).
    """
    if int(mb.num_buffers) != 1:
        return None
    has_rep = mb.HasField("rep_compression")
    has_def = mb.HasField("def_compression")
    word = 4 if mb.has_large_chunk else 2
    if len(meta) % word:
        raise w.corrupt(f"mini-block chunk metadata of {len(meta)} bytes")
    words = np.frombuffer(meta, dtype=f"<u{word}")
    if not len(words):
        return None
    raw = np.frombuffer(data, dtype=np.uint8)
    bw = 4 if mb.has_large_chunk else 2
    if len(words) == 1 and not has_rep and not has_def and fsst_table is None:
        one = _one_chunk(w, int(words[0]), raw, num_items, bw, var_values, venc)
        if one is not None:
            return None, None, one, False
    jit = kernels.get()
    if jit is not None:  # the chunk table in one call
        table = np.empty((8, len(words)), dtype=np.int64)
        err = jit.chunk_table(words, raw, num_items, int(has_rep), int(has_def), bw, table)
        if err:
            raise w.corrupt(_TABLE_ERRORS[err] if err != 2 else "mini-block chunks run past the data buffer")
        counts, starts, sizes, vsize, num_levels, rsize_all, dsize_all, body = table
    else:
        counts, starts, sizes, vsize, num_levels, body = _chunk_table(w, words.astype(np.int64), raw, num_items,
                                                                      has_rep, has_def, bw)
        no_levels = np.zeros(len(starts), dtype=np.int64)
        rsize_all = _le(raw, starts + 2, 2) if has_rep else no_levels
        dsize_all = _le(raw, starts + 2 + 2 * has_rep, 2) if has_def else no_levels
    reps = defs = None
    if has_rep:
        rsize = rsize_all
        reps = _levels(w, mb.rep_compression, raw, body, rsize, num_levels)
        if reps is None:
            return None
        body = body + _pad(rsize)
    if has_def:
        dsize = dsize_all
        if has_rep:
            defs = _levels(w, mb.def_compression, raw, body, dsize, num_levels)
        else:
            defs = _fixed(w, mb.def_compression, raw, body, counts)
        if defs is None:
            return None
        body = body + _pad(dsize)
    if (body + vsize > starts + sizes).any():
        raise w.corrupt("mini-block chunk buffer runs past the chunk")
    done = False
    if var_values:
        got = _variable(w, venc, raw, body, vsize, counts, fsst_table)
        vals = None if got is None else got[:2]
        done = got is not None and got[2]
    else:
        vals = _fixed(w, venc, raw, body, counts)
    if vals is None:
        return None
    return reps, defs, vals, done
