"""Compiled (numba) loops of 2.1/2.2 page decoding; imported only through :mod:`.kernels`.

Every kernel checks its input before it reads (numba does not bounds-check): corrupt pages
return an error code, never read outside their buffers.  All of them release the GIL, so the
prefetch threads decode pages in parallel.  Compiled code is cached on disk (``cache=True``):
only the first process on a machine pays the compilation (a few seconds for all kernels).
"""

from typing import Any

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

_OPTS: dict[str, Any] = {"nogil": True, "cache": True, "boundscheck": False}

#: error codes returned by the kernels
OK, TRUNCATED, BAD_WIDTH, BAD_OFFSETS, ESCAPE_AT_END, NO_SYMBOL = 0, 1, 2, 3, 4, 5


@intrinsic
def _store_u64(typingctx, arr, idx, val):  # type: ignore[no-untyped-def]
    """``arr[idx : idx + 8] = val`` (little-endian), one unaligned 8-byte store; ``arr`` is uint8."""
    sig = types.void(arr, idx, val)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        a, i, v = args
        ary = context.make_array(signature.args[0])(context, builder, a)
        ptr = builder.gep(ary.data, [i])
        store = builder.store(v, builder.bitcast(ptr, ir.IntType(64).as_pointer()))
        store.align = 1
        return context.get_dummy_value()

    return sig, codegen


# ------------------------------------------------------------------------------------- FSST
@njit(nogil=True, cache=True, inline="always")
def _fsst_string(buf, j, e, n_symbols, words, lens, out, o):  # type: ignore[no-untyped-def]
    """Decode the codes ``buf[j:e]`` of one string into ``out[o:]``; returns the new output
    position, or ``-error`` (``out`` must have 8 bytes per code of room)."""
    while j < e:
        code = buf[j]
        if code == 255:
            if j + 1 >= e:
                return -ESCAPE_AT_END
            out[o] = buf[j + 1]
            o += 1
            j += 2
        elif code < n_symbols:
            _store_u64(out, o, words[code])
            o += lens[code]
            j += 1
        else:
            return -NO_SYMBOL
    return o


@njit(**_OPTS)
def fsst_decode(buf, offsets, n_symbols, words, lens, out_offsets, out):  # type: ignore[no-untyped-def]
    """Decode FSST strings ``buf[offsets[i] : offsets[i + 1]]`` (checked by the caller to lie
    in ``buf``, in order) in one pass; returns an error code.

    A code ``c < n_symbols`` emits ``lens[c]`` bytes of ``words[c]`` (stored as one unaligned
    8-byte word), 255 escapes the next byte.  ``out`` has room for 8 bytes per code (only the
    pages written count in memory); ``out_offsets`` gets the ``n + 1`` decoded offsets.
    """
    o = 0
    out_offsets[0] = 0
    for i in range(offsets.size - 1):
        o = _fsst_string(buf, offsets[i], offsets[i + 1], n_symbols, words, lens, out, o)
        if o < 0:
            return -o
        out_offsets[i + 1] = o
    return OK


@njit(**_OPTS)
def fsst_chunks(offs, raw, wstarts, bstarts, sizes, counts, n_symbols, words, lens, out_offsets, out, keep):  # type: ignore[no-untyped-def]
    """:func:`fsst_decode` straight from the ``variable`` chunks of a mini-block page, checking
    their offsets on the way (arguments as :func:`variable_sizes`; ``raw``: the page bytes).
    ``keep`` (uint8 per string, or empty for all): strings with 0 are left empty, not decoded."""
    every = keep.size == 0
    o = 0
    k_out = 0
    out_offsets[0] = 0
    for c in range(wstarts.size):
        s = wstarts[c]
        k = counts[c]
        b = bstarts[c]
        if s < 0 or s + k + 1 > offs.size or b < 0 or b + sizes[c] > raw.size:
            return TRUNCATED
        prev = np.int64(offs[s])
        if prev > sizes[c]:
            return BAD_OFFSETS
        for i in range(1, k + 1):
            v = np.int64(offs[s + i])
            if v < prev or v > sizes[c]:
                return BAD_OFFSETS
            if every or keep[k_out]:
                o = _fsst_string(raw, b + prev, b + v, n_symbols, words, lens, out, o)
                if o < 0:
                    return -o
            k_out += 1
            out_offsets[k_out] = o
            prev = v
    return OK


# ------------------------------------------------------------------------------ FastLanes
# One body, inlined into a wrapper per word size: the lane count is then a constant and the
# 1024 / T lanes of a row become a few vector instructions (~1 ns per value, 3x the generic).
@njit(nogil=True, cache=True, inline="always")
def _unpack_body(w, wpos, t_bits, lanes, ix, of, sp, hs, base, mask, out, opos):  # type: ignore[no-untyped-def]
    """One FastLanes block from ``w[wpos:]`` into ``out[opos : opos + 1024]``; ``ix, of, sp,
    hs, mask`` are the rows of :func:`~.kernels.plan` for the block's width."""
    for r in range(t_bits):
        i0 = wpos + ix[r] * lanes
        o0 = opos + base[r]
        sh = of[r]
        if sp[r]:
            h = hs[r]
            for lane in range(lanes):
                out[o0 + lane] = ((w[i0 + lane] >> sh) | (w[i0 + lanes + lane] << h)) & mask
        else:
            for lane in range(lanes):
                out[o0 + lane] = (w[i0 + lane] >> sh) & mask


@njit(nogil=True, cache=True, inline="always")
def _unpack_blocks(w, nblocks, width, t_bits, lanes, idx, off, spill, hshift, base, masks, out):  # type: ignore[no-untyped-def]
    if width > t_bits:
        return BAD_WIDTH
    if nblocks * width * lanes > w.size or nblocks * 1024 > out.size:
        return TRUNCATED
    if width == 0:
        for k in range(nblocks * 1024):
            out[k] = 0
        return OK
    ix, of, sp, hs, mask = idx[width], off[width], spill[width], hshift[width], masks[width]
    for b in range(nblocks):
        _unpack_body(w, b * width * lanes, t_bits, lanes, ix, of, sp, hs, base, mask, out, b * 1024)
    return OK


@njit(**_OPTS)
def unpack_blocks8(w, nblocks, width, idx, off, spill, hshift, base, masks, out):  # type: ignore[no-untyped-def]
    """``nblocks`` contiguous FastLanes blocks of one width (``w``: words) into ``out``."""
    return _unpack_blocks(w, nblocks, width, 8, 128, idx, off, spill, hshift, base, masks, out)


@njit(**_OPTS)
def unpack_blocks16(w, nblocks, width, idx, off, spill, hshift, base, masks, out):  # type: ignore[no-untyped-def]
    return _unpack_blocks(w, nblocks, width, 16, 64, idx, off, spill, hshift, base, masks, out)


@njit(**_OPTS)
def unpack_blocks32(w, nblocks, width, idx, off, spill, hshift, base, masks, out):  # type: ignore[no-untyped-def]
    return _unpack_blocks(w, nblocks, width, 32, 32, idx, off, spill, hshift, base, masks, out)


@njit(**_OPTS)
def unpack_blocks64(w, nblocks, width, idx, off, spill, hshift, base, masks, out):  # type: ignore[no-untyped-def]
    return _unpack_blocks(w, nblocks, width, 64, 16, idx, off, spill, hshift, base, masks, out)


@njit(nogil=True, cache=True, inline="always")
def _inline_chunks(w, starts, counts, t_bits, lanes, idx, off, spill, hshift, base, masks, out):  # type: ignore[no-untyped-def]
    o = 0
    for c in range(starts.size):
        pos = starts[c]
        left = counts[c]
        while left > 0:
            if pos < 0 or pos >= w.size:
                return TRUNCATED
            width = np.int64(w[pos])
            pos += 1
            if width > t_bits:
                return BAD_WIDTH
            if pos + width * lanes > w.size or o + 1024 > out.size:
                return TRUNCATED
            if width == 0:
                for k in range(1024):
                    out[o + k] = 0
            else:
                _unpack_body(w, pos, t_bits, lanes, idx[width], off[width], spill[width], hshift[width], base,
                             masks[width], out, o)
            pos += width * lanes
            take = min(left, 1024)
            o += take
            left -= take
    return OK


@njit(**_OPTS)
def inline_chunks8(w, starts, counts, idx, off, spill, hshift, base, masks, out):  # type: ignore[no-untyped-def]
    """Inline bit-packed values of every mini-block chunk: chunk ``c`` starts at word
    ``starts[c]`` with blocks ``[width word][1024 * width / T words]`` holding ``counts[c]``
    values.  ``out`` gets every chunk's values back to back; it needs 1024 values of slack
    (a chunk's last block is unpacked whole)."""
    return _inline_chunks(w, starts, counts, 8, 128, idx, off, spill, hshift, base, masks, out)


@njit(**_OPTS)
def inline_chunks16(w, starts, counts, idx, off, spill, hshift, base, masks, out):  # type: ignore[no-untyped-def]
    return _inline_chunks(w, starts, counts, 16, 64, idx, off, spill, hshift, base, masks, out)


@njit(**_OPTS)
def inline_chunks32(w, starts, counts, idx, off, spill, hshift, base, masks, out):  # type: ignore[no-untyped-def]
    return _inline_chunks(w, starts, counts, 32, 32, idx, off, spill, hshift, base, masks, out)


@njit(**_OPTS)
def inline_chunks64(w, starts, counts, idx, off, spill, hshift, base, masks, out):  # type: ignore[no-untyped-def]
    return _inline_chunks(w, starts, counts, 64, 16, idx, off, spill, hshift, base, masks, out)


UNPACK_BLOCKS = {8: unpack_blocks8, 16: unpack_blocks16, 32: unpack_blocks32, 64: unpack_blocks64}
INLINE_CHUNKS = {8: inline_chunks8, 16: inline_chunks16, 32: inline_chunks32, 64: inline_chunks64}


# ---------------------------------------------------------------------- variable chunks
@njit(**_OPTS)
def variable_sizes(offs, starts, sizes, counts, out_offsets):  # type: ignore[no-untyped-def]
    """Offsets of the values of every ``variable`` chunk into ``out_offsets`` (from 0, every
    chunk's values back to back); returns an error code.

    ``offs``: the page as offset words; chunk ``c`` has ``counts[c] + 1`` offsets at word
    ``starts[c]``, relative to the chunk's value buffer of ``sizes[c]`` bytes.
    """
    o = 0
    total = 0
    out_offsets[0] = 0
    for c in range(starts.size):
        s = starts[c]
        k = counts[c]
        if s < 0 or s + k + 1 > offs.size:
            return TRUNCATED
        prev = np.int64(offs[s])
        if prev > sizes[c]:
            return BAD_OFFSETS
        for i in range(1, k + 1):
            v = np.int64(offs[s + i])
            if v < prev or v > sizes[c]:
                return BAD_OFFSETS
            total += v - prev
            o += 1
            out_offsets[o] = total
            prev = v
    return OK


@njit(**_OPTS)
def variable_copy(raw, offs, starts, byte_starts, counts, out):  # type: ignore[no-untyped-def]
    """Copy every chunk's value bytes (checked by :func:`variable_sizes`) back to back."""
    o = 0
    for c in range(starts.size):
        lo = np.int64(offs[starts[c]])
        hi = np.int64(offs[starts[c] + counts[c]])
        b = byte_starts[c]
        out[o : o + hi - lo] = raw[b + lo : b + hi]
        o += hi - lo
    return o


# --------------------------------------------------------------------------- FSST encoding
@intrinsic
def _load_u64(typingctx, arr, idx):  # type: ignore[no-untyped-def]
    """``arr[idx : idx + 8]`` as a little-endian uint64, one unaligned load (``arr`` is uint8
    and must have 8 readable bytes from ``idx``)."""
    sig = types.uint64(arr, idx)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        a, i = args
        ary = context.make_array(signature.args[0])(context, builder, a)
        ptr = builder.gep(ary.data, [i])
        load = builder.load(builder.bitcast(ptr, ir.IntType(64).as_pointer()))
        load.align = 1
        return load

    return sig, codegen


_HASH_SLOTS = 4096


@njit(nogil=True, cache=True, inline="always")
def _slot(prefix3):  # type: ignore[no-untyped-def]
    h = prefix3 * np.uint64(2971215073)
    return np.int64((h ^ (h >> np.uint64(15))) & np.uint64(_HASH_SLOTS - 1))


@njit(nogil=True, cache=True)
def _load_tail(buf, p):  # type: ignore[no-untyped-def]
    """:func:`_load_u64` for the last 7 bytes of ``buf`` (zeros past its end)."""
    w = np.uint64(0)
    for k in range(buf.size - p):
        w |= np.uint64(buf[p + k]) << np.uint64(8 * k)
    return w


@njit(**_OPTS)
def fsst_select(cand_w, cand_l, by_gain, words, lens):  # type: ignore[no-untyped-def]
    """Fill ``words``/``lens`` with up to 255 candidates in ``by_gain`` order, as FSST's tables
    allow: one symbol per one-byte value, per two-byte value, and per hash slot of the first
    three bytes (so that matching is three table lookups); returns the symbol count."""
    byte_used = np.zeros(256, np.bool_)
    short_used = np.zeros(65536, np.bool_)
    slot_used = np.zeros(_HASH_SLOTS, np.bool_)
    n = 0
    for k in range(by_gain.size):
        if n == 255:
            break
        i = by_gain[k]
        w = cand_w[i]
        ln = cand_l[i]
        if ln == 1:
            key = np.int64(w & np.uint64(0xFF))
            if byte_used[key]:
                continue
            byte_used[key] = True
        elif ln == 2:
            key = np.int64(w & np.uint64(0xFFFF))
            if short_used[key]:
                continue
            short_used[key] = True
        else:
            key = _slot(w & np.uint64(0xFFFFFF))
            if slot_used[key]:
                continue
            slot_used[key] = True
        words[n] = w
        lens[n] = ln
        n += 1
    return n


@njit(**_OPTS)
def fsst_lookup(words, lens, n):  # type: ignore[no-untyped-def]
    """The match tables of symbols ``words[:n]`` / ``lens[:n]``: the code of the one-byte
    symbol of each byte, of the two-byte symbol of each byte pair, and of the longer symbol of
    each hash slot of three first bytes (-1 where there is none)."""
    # int16 codes: the three tables fit in 136 KiB of cache (int64: 544 KiB)
    byte_code = np.full(256, -1, np.int16)
    short_code = np.full(65536, -1, np.int16)
    hash_code = np.full(_HASH_SLOTS, -1, np.int16)
    for c in range(n):
        w = words[c]
        if lens[c] == 1:
            byte_code[np.int64(w & np.uint64(0xFF))] = c
        elif lens[c] == 2:
            short_code[np.int64(w & np.uint64(0xFFFF))] = c
        else:
            hash_code[_slot(w & np.uint64(0xFFFFFF))] = c
    return byte_code, short_code, hash_code


@njit(**_OPTS)
def fsst_count(buf, offsets, words, lens, n, masks, c2, touched):  # type: ignore[no-untyped-def]
    """One training round over the sample strings: how often each code (``256 + b`` for an
    escaped byte) and each pair of consecutive codes inside a string occur with table ``n``.

    Returns ``(c1, pairs)``: the code counts (512) and how many entries of ``touched`` name the
    pairs counted in ``c2`` (flat 512 x 512, all zero on entry; ``touched`` has room for one
    entry per sample byte).  Only the pairs seen are visited later (:func:`fsst_candidates`
    zeroes them again): a sample of 32 KiB has far fewer than the 262,144 possible pairs, and
    clearing and scanning them all each round cost more than the counting.

    The symbol matched at each position is the one :func:`fsst_encode` would emit (the matching
    is written out in both: numba compiles a shared helper ~15x slower here)."""
    byte_code, short_code, hash_code = fsst_lookup(words, lens, n)
    c1 = np.zeros(512, np.int64)
    pairs = 0
    for i in range(offsets.size - 1):
        p = offsets[i]
        end = offsets[i + 1]
        prev = -1
        while p < end:
            left = end - p
            w = _load_u64(buf, p) if p + 8 <= buf.size else _load_tail(buf, p)
            code = -1
            ln = 1
            if left >= 3:
                c = hash_code[_slot(w & np.uint64(0xFFFFFF))]
                if c >= 0:
                    l3 = lens[c]
                    if l3 <= left and (w & masks[l3]) == words[c]:
                        code = c
                        ln = l3
            if code < 0 and left >= 2:
                c = short_code[np.int64(w & np.uint64(0xFFFF))]
                if c >= 0:
                    code = c
                    ln = 2
            if code < 0:
                code = byte_code[np.int64(w & np.uint64(0xFF))]
            if code < 0:
                code = 256 + np.int64(w & np.uint64(0xFF))
            c1[code] += 1
            if ln > 1:  # the single byte too: one-byte symbols compete with longer ones
                c1[256 + np.int64(w & np.uint64(0xFF))] += 1
            if prev >= 0:
                k = prev * 512 + code
                if c2[k] == 0:
                    touched[pairs] = k
                    pairs += 1
                c2[k] += 1
            prev = code
            p += ln
    return c1, pairs


@njit(**_OPTS)
def fsst_encode(buf, offsets, words, lens, n, masks, out, out_offsets):  # type: ignore[no-untyped-def]
    """Compress strings ``buf[offsets[i] : offsets[i + 1]]`` with table ``n`` into ``out`` (room
    for 2 bytes per input byte); returns the bytes written, ``out_offsets`` gets the n + 1
    offsets.

    At each position: the symbol of the first three bytes' hash slot if it matches, else the
    two-byte symbol, else the one-byte symbol, else an escaped literal (255, byte)."""
    byte_code, short_code, hash_code = fsst_lookup(words, lens, n)
    o = 0
    out_offsets[0] = 0
    for i in range(offsets.size - 1):
        p = offsets[i]
        end = offsets[i + 1]
        while p < end:
            left = end - p
            w = _load_u64(buf, p) if p + 8 <= buf.size else _load_tail(buf, p)
            code = -1
            ln = 1
            if left >= 3:
                c = hash_code[_slot(w & np.uint64(0xFFFFFF))]
                if c >= 0:
                    l3 = lens[c]
                    if l3 <= left and (w & masks[l3]) == words[c]:
                        code = c
                        ln = l3
            if code < 0 and left >= 2:
                c = short_code[np.int64(w & np.uint64(0xFFFF))]
                if c >= 0:
                    code = c
                    ln = 2
            if code < 0:
                code = byte_code[np.int64(w & np.uint64(0xFF))]
            if code < 0:
                out[o] = 255
                out[o + 1] = np.uint8(w & np.uint64(0xFF))
                o += 2
            else:
                out[o] = np.uint8(code)
                o += 1
            p += ln
        out_offsets[i + 1] = o
    return o


@njit(**_OPTS)
def fsst_candidates(c1, c2, touched, pairs, cw, cl, masks):  # type: ignore[no-untyped-def]
    """The candidate symbols of a training round: every counted code (its bytes covered as
    gain) and every counted pair of codes concatenated (up to 8 bytes); ``(words, lens, gains)``.
    The pairs are ``touched[:pairs]`` of the flat ``c2`` (:func:`fsst_count`), zeroed here."""
    m = pairs
    for a in range(512):
        if c1[a]:
            m += 1
    w = np.empty(m, np.uint64)
    ln = np.empty(m, np.int64)
    g = np.empty(m, np.int64)
    k = 0
    for a in range(512):
        if c1[a]:
            w[k] = cw[a]
            ln[k] = cl[a]
            g[k] = c1[a] * cl[a]
            k += 1
    for t in range(pairs):
        i = touched[t]
        a = i >> 9
        b = i & 511
        la = cl[a]
        lp = min(la + cl[b], 8)
        w[k] = (cw[a] | (cw[b] << np.uint64(8 * la))) & masks[lp]
        ln[k] = lp
        g[k] = c2[i] * lp
        c2[i] = 0
        k += 1
    return w, ln, g


# ------------------------------------------------------------------ mini-block chunk table
@njit(**_OPTS)
def chunk_table(words, raw, num_items, has_rep, has_def, bw, out):  # type: ignore[no-untyped-def]
    """The chunk table of a mini-block page with one value buffer, in one call (small pages
    spend most of their decode time in NumPy's per-call cost otherwise).

    ``words``: the chunk metadata words; ``out`` (8 rows x chunks, int64) gets per chunk: value
    count, start, size, value-buffer size, level count, rep-level bytes, def-level bytes and
    the start of its buffers (after the header).  Returns an error code: 1 counts do not add up
    to ``num_items``, 2 chunks beyond the buffer, 3 header truncated, 4 def levels != values.
    """
    n = words.size
    nlev = has_rep + has_def
    head = 2 + 2 * nlev + bw
    body_off = (head + 7) // 8 * 8
    total = 0
    pos = 0
    for c in range(n):
        wd = np.int64(words[c])
        log = wd & 0xF
        size = ((wd >> 4) + 1) * 8
        if c < n - 1:
            count = np.int64(1) << log
        else:
            count = num_items - total
            if count < 0 or (log and count != (np.int64(1) << log)):
                return 1
        total += count
        if pos + size > raw.size:
            return 2
        if size < head:
            return 3
        vs = np.int64(0)
        for b in range(bw):
            vs |= np.int64(raw[pos + 2 + 2 * nlev + b]) << (8 * b)
        levels = count
        if nlev:
            levels = np.int64(raw[pos]) | (np.int64(raw[pos + 1]) << 8)
            if not has_rep and levels != count:
                return 4
        rs = np.int64(raw[pos + 2]) | (np.int64(raw[pos + 3]) << 8) if has_rep else np.int64(0)
        dp = pos + 2 + 2 * has_rep
        ds = np.int64(raw[dp]) | (np.int64(raw[dp + 1]) << 8) if has_def else np.int64(0)
        out[0, c] = count
        out[1, c] = pos
        out[2, c] = size
        out[3, c] = vs
        out[4, c] = levels
        out[5, c] = rs
        out[6, c] = ds
        out[7, c] = pos + body_off
        pos += size
    return 0


# ------------------------------------------------------------------------ FastLanes packing
@njit(**_OPTS)
def pack_blocks(vals, width, t_bits, base, mask, out):  # type: ignore[no-untyped-def]
    """FastLanes packing of ``vals`` (whole 1024-value blocks, any unsigned type) at ``width``
    bits into ``out`` (uint64, zeroed, ``width * 1024 / t_bits`` words per block; the caller
    narrows them to ``t_bits``-bit words).  Row ``r`` of a block's lanes starts at value
    ``base[r]``; it goes to bits ``[r*W, (r+1)*W)`` of its lane's stream, spilling into the next
    word (see :func:`lance_ops.format.file.v21.bitpacking.pack_blocks`, the NumPy path)."""
    lanes = 1024 // t_bits
    nblocks = vals.size // 1024
    tb = np.uint64(t_bits)
    for b in range(nblocks):
        vb = b * 1024
        ob = b * width * lanes
        for r in range(t_bits):
            bs = vb + base[r]
            q = r * width
            idx = q // t_bits
            off = np.uint64(q % t_bits)
            spill = off + np.uint64(width) > tb
            o1 = ob + idx * lanes
            for lane in range(lanes):
                v = np.uint64(vals[bs + lane]) & mask
                out[o1 + lane] |= v << off
                if spill:
                    out[o1 + lanes + lane] |= v >> (tb - off)
    return 0
