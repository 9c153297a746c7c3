"""FastLanes bit-unpacking (1024-value transposed layout) in vectorised NumPy.

FastLanes packs a block of 1024 values of a T-bit unsigned type (T = 8, 16, 32, 64) at bit width
W into ``1024 * W / T`` words of T bits.  There are ``LANES = 1024 / T`` lanes; lane ``l`` owns
words ``k * LANES + l`` (k = 0..W-1), which form one little-endian bit stream holding T values of
W bits each (row r at bits ``[r*W, (r+1)*W)``).  Row ``r`` of lane ``l`` is the value at position
``FL_ORDER[r // 8] * 16 + (r % 8) * 128 + l`` of the block.
"""

import numpy as np

from lance_ops.format.file.v21 import kernels

__all__ = ["unpack_blocks", "pack_blocks", "inline_pack", "PagePacker", "BLOCK"]

BLOCK = 1024
_FL_ORDER = np.array([0, 4, 2, 6, 1, 5, 3, 7])
_FEW_BLOCKS = 4
_GATHER_PLANS: dict[tuple[int, int], tuple[np.ndarray, ...]] = {}


def _gather_plan(width: int, t_bits: int) -> tuple[np.ndarray, ...]:
    """For each output position of a block (FastLanes order): the word holding its low bits and
    the shift; for the positions whose bits spill into the next word, that word and its shift."""
    plan = _GATHER_PLANS.get((width, t_bits))
    if plan is None:
        dt = np.dtype(f"<u{t_bits // 8}")
        lanes = BLOCK // t_bits
        r = np.arange(t_bits)
        pos = (_FL_ORDER[r // 8] * 16 + (r % 8) * 128)[:, None] + np.arange(lanes)[None, :]  # (row, lane)
        order = np.argsort(pos.reshape(-1))  # output position -> flat (row, lane)
        row, lane = order // lanes, order % lanes
        idx, off = divmod(row * width, t_bits)
        spill = np.flatnonzero(off + width > t_bits)
        plan = (idx * lanes + lane, off.astype(dt), spill, (idx[spill] + 1) * lanes + lane[spill],
                (t_bits - off[spill]).astype(dt))
        _GATHER_PLANS[(width, t_bits)] = plan
    return plan


def _unpack_gather(w: np.ndarray, width: int, t_bits: int, dt: np.dtype) -> np.ndarray:
    lo_i, off, spill, hi_i, hi_shift = _gather_plan(width, t_bits)
    flat = w.reshape(w.shape[0], -1)
    vals = flat[:, lo_i] >> off
    if len(spill):
        vals[:, spill] |= flat[:, hi_i] << hi_shift
    if width < t_bits:
        vals &= dt.type((1 << width) - 1)
    return vals


def unpack_blocks(words: np.ndarray, width: int, t_bits: int) -> np.ndarray:
    """Unpack ``nblocks`` FastLanes blocks of width ``width``.

    ``words``: uint8 bytes of ``nblocks * 1024 * width / 8`` (contiguous blocks).
    Returns an unsigned array of ``nblocks * 1024`` values of ``t_bits`` bits.
    """
    dt = np.dtype(f"<u{t_bits // 8}")
    nbytes_block = BLOCK * width // 8
    nblocks = len(words) // nbytes_block
    lanes = BLOCK // t_bits
    if nblocks == 0:
        return np.zeros(0, dtype=dt)
    jit = kernels.get()
    if jit is not None:
        flat = aligned_words(words[: nblocks * nbytes_block], dt)
        out = np.empty(nblocks * BLOCK, dtype=dt)
        if jit.UNPACK_BLOCKS[t_bits](flat, nblocks, width, *kernels.plan(t_bits), out):
            raise ValueError(f"bit-packed data of {len(words)} bytes does not hold {nblocks} blocks of width {width}")
        return out
    w = np.frombuffer(words[: nblocks * nbytes_block], dtype=dt).reshape(nblocks, width, lanes)
    if nblocks <= _FEW_BLOCKS:  # a few blocks: one gather beats T passes of Python overhead
        return _unpack_gather(w, width, t_bits, dt).reshape(-1)
    out = np.empty((nblocks, BLOCK), dtype=dt)
    mask = dt.type((1 << width) - 1) if width < t_bits else None
    tmp = np.empty((nblocks, lanes), dtype=dt)
    # per lane, the W words in order form the bit stream: row r is bits [r*W, (r+1)*W), i.e. word
    # r*W // T shifted right by r*W % T, plus the next word's low bits when it spills; row r of
    # every lane lands in one contiguous run of the block (FastLanes order), so each of the T
    # passes works on all blocks and lanes at once with views, no gathers
    for r in range(t_bits):
        idx, off = divmod(r * width, t_bits)
        base = int(_FL_ORDER[r // 8]) * 16 + (r % 8) * 128
        dst = out[:, base : base + lanes]
        if off:
            np.right_shift(w[:, idx, :], dt.type(off), out=tmp)
            if off + width > t_bits:
                tmp |= w[:, idx + 1, :] << dt.type(t_bits - off)
            src = tmp
        else:
            src = w[:, idx, :]
        if mask is not None:
            np.bitwise_and(src, mask, out=dst)
        else:
            dst[...] = src
    return out.reshape(-1)


def aligned_words(raw: np.ndarray, dt: np.dtype) -> np.ndarray:
    """``raw`` (bytes, a multiple of the word size) viewed as words of ``dt``, copied only when
    its address is not a multiple of the word size."""
    u8 = np.frombuffer(raw, dtype=np.uint8) if isinstance(raw, (bytes, memoryview)) else np.ascontiguousarray(raw)
    out = u8.view(dt)
    return out if out.flags.aligned else out.copy()


def unpack_block_count(words: np.ndarray, width: int, t_bits: int, nblocks: int) -> np.ndarray:
    """Like :func:`unpack_blocks` with an explicit block count (width may be 0)."""
    dt = np.dtype(f"<u{t_bits // 8}")
    if width == 0:
        return np.zeros(nblocks * BLOCK, dtype=dt)
    need = nblocks * BLOCK * width // 8
    if len(words) < need:
        raise ValueError(f"bit-packed data of {len(words)} bytes, {need} needed")
    return unpack_blocks(words[:need], width, t_bits)


_ROW_STARTS: dict[int, np.ndarray] = {}


def _row_starts(t_bits: int) -> np.ndarray:
    """Where row ``r`` of a block's lanes starts, for each ``r < t_bits`` (FastLanes order)."""
    got = _ROW_STARTS.get(t_bits)
    if got is None:
        r = np.arange(t_bits)
        got = _ROW_STARTS[t_bits] = (_FL_ORDER[r // 8] * 16 + (r % 8) * 128).astype(np.int64)
    return got


def pack_blocks(values: np.ndarray, width: int, t_bits: int) -> np.ndarray:
    """Inverse of :func:`unpack_blocks`: ``nblocks * 1024`` unsigned values -> packed bytes.

    Only the low ``width`` bits of each value are kept.
    """
    dt = np.dtype(f"<u{t_bits // 8}")
    vals = np.ascontiguousarray(values, dtype=dt).reshape(-1, BLOCK)
    nblocks = vals.shape[0]
    lanes = BLOCK // t_bits
    if width == 0:
        return np.zeros(0, dtype=np.uint8)
    jit = kernels.get()
    if jit is not None:  # one compiled pass (NumPy below: 64 passes of small-array calls for 64-bit values)
        out = np.zeros(nblocks * width * lanes, dtype=np.uint64)
        jit.pack_blocks(vals.reshape(-1), width, t_bits, _row_starts(t_bits), np.uint64((1 << width) - 1), out)
        return (out if t_bits == 64 else out.astype(dt)).view(np.uint8)
    mask = dt.type((1 << width) - 1) if width < t_bits else None
    words = np.zeros((width, nblocks, lanes), dtype=dt)
    # row r of every lane is one contiguous run of the block (FastLanes order): it goes to bits
    # [r*W, (r+1)*W) of its lane's stream, word r*W // T at offset r*W % T, its high bits into the
    # next word when it spills (T passes, each over every block and lane at once)
    for r in range(t_bits):
        base = int(_FL_ORDER[r // 8]) * 16 + (r % 8) * 128
        row = vals[:, base : base + lanes]
        if mask is not None:
            row = row & mask
        idx, off = divmod(r * width, t_bits)
        words[idx] |= row << dt.type(off) if off else row
        if off + width > t_bits:
            words[idx + 1] |= row >> dt.type(t_bits - off)
    return np.ascontiguousarray(words.transpose(1, 0, 2)).view(np.uint8).reshape(-1)


def inline_pack(values: np.ndarray, t_bits: int) -> bytes:
    """Inline bit-packing of one mini-block chunk: per 1024 values ``[T-bit width][packed]``,
    the last block padded with zeros (pylance's ``inline_bitpacking``)."""
    dt = np.dtype(f"<u{t_bits // 8}")
    v = np.ascontiguousarray(values).view(dt)
    n = len(v)
    nblocks = -(-n // BLOCK)
    padded = np.zeros(nblocks * BLOCK, dtype=dt)
    padded[:n] = v
    blocks = padded.reshape(nblocks, BLOCK)
    top = blocks.max(axis=1)
    widths = [int(x).bit_length() for x in top.tolist()]  # one per 1024-value block
    parts = []
    for b in range(nblocks):  # per 1024-value block (not per value)
        wdt = widths[b]
        parts.append(np.asarray([wdt], dtype=dt).tobytes())
        parts.append(pack_blocks(blocks[b], wdt, t_bits).tobytes())
    return b"".join(parts)


class PagePacker:
    """Inline bit-packing of a page's values, with the 1024-value blocks (aligned to the page
    start) packed up front, once per bit width; a chunk that starts on a block boundary and
    ends on one (or at the page end) is then a join of its blocks, others are packed on demand."""

    def __init__(self, values: np.ndarray, t_bits: int) -> None:
        self.t_bits = t_bits
        self.dt = np.dtype(f"<u{t_bits // 8}")
        self.values = np.ascontiguousarray(values).view(self.dt)
        n = len(self.values)
        self.n = n
        nblocks = -(-n // BLOCK)
        if n % BLOCK:
            padded = np.zeros(nblocks * BLOCK, dtype=self.dt)
            padded[:n] = self.values
        else:  # whole blocks: no padded copy
            padded = self.values
        blocks = padded.reshape(nblocks, BLOCK)
        top = blocks.max(axis=1) if nblocks else np.zeros(0, self.dt)
        widths = _bit_lengths(top)
        self.max_width = int(widths.max(initial=0))
        word = t_bits // 8
        # every block packed up front into one buffer, in page order: ``[T-bit width][packed]``
        sizes = word + widths * (BLOCK // 8)
        self.cum = np.zeros(nblocks + 1, dtype=np.int64)
        np.cumsum(sizes, out=self.cum[1:])
        groups = np.unique(widths).tolist()
        heads = widths.astype(self.dt).view(np.uint8).reshape(nblocks, word)
        #: one width (the usual case): the width words and the packed blocks as two matrices,
        #: joined into :attr:`buf` only when a chunk asks for its bytes
        self.uniform: tuple[np.ndarray, np.ndarray] | None = None
        self._buf: np.ndarray | None = None
        if len(groups) == 1:
            packed = pack_blocks(blocks, groups[0], t_bits) if groups[0] else np.zeros(0, np.uint8)
            self.uniform = (heads, packed.reshape(nblocks, -1))
            return
        buf = np.zeros(int(self.cum[-1]), dtype=np.uint8)
        for width in groups:
            ids = np.flatnonzero(widths == width)
            packed = pack_blocks(blocks[ids], width, t_bits).reshape(len(ids), -1) if width else None
            for j, b in enumerate(ids.tolist()):  # a slice copy per block
                at = int(self.cum[b])
                buf[at : at + word] = heads[b]
                if packed is not None:
                    buf[at + word : int(self.cum[b + 1])] = packed[j]
        self._buf = buf

    @property
    def buf(self) -> np.ndarray:
        """Every block in page order, ``[T-bit width][packed]`` each."""
        if self._buf is None:
            assert self.uniform is not None
            heads, packed = self.uniform
            rows = np.empty((len(heads), heads.shape[1] + packed.shape[1]), dtype=np.uint8)
            rows[:, : heads.shape[1]] = heads
            rows[:, heads.shape[1] :] = packed
            self._buf = rows.reshape(-1)
        return self._buf

    def _aligned(self, v0: int, k: int) -> bool:
        return v0 % BLOCK == 0 and (k % BLOCK == 0 or v0 + k == self.n)

    def nbytes(self, v0: int, k: int) -> int:
        if self._aligned(v0, k):
            return int(self.cum[-(-(v0 + k) // BLOCK)] - self.cum[v0 // BLOCK])
        return -(-k // BLOCK) * (self.t_bits // 8 + BLOCK * self.max_width // 8)  # an upper bound

    def chunk(self, v0: int, k: int) -> bytes | memoryview:
        """The packed bytes of values ``[v0, v0 + k)`` (a view of the page's buffer when the
        chunk is block-aligned)."""
        if self._aligned(v0, k):
            return memoryview(self.buf[int(self.cum[v0 // BLOCK]) : int(self.cum[-(-(v0 + k) // BLOCK)])])
        return inline_pack(self.values[v0 : v0 + k], self.t_bits)


def _bit_lengths(top: np.ndarray) -> np.ndarray:
    """``int(x).bit_length()`` of every unsigned value (int64)."""
    out = np.zeros(len(top), dtype=np.int64)
    v = top.astype(np.uint64)
    for shift in (32, 16, 8, 4, 2, 1):
        big = v >= np.uint64(1) << np.uint64(shift)
        out[big] += shift
        v = np.where(big, v >> np.uint64(shift), v)
    return out + (v > 0)
