"""FastLanes bit-unpacking (1024-value transposed layout) in vectorised NumPy.

FastLanes packs a block of 1024 values of a T-bit unsigned type (T = 8, 16, 32, 64) at bit width
W into ``1024 * W / T`` words of T bits.  There are ``LANES = 1024 / T`` lanes; lane ``l`` owns
words ``k * LANES + l`` (k = 0..W-1), which form one little-endian bit stream holding T values of
W bits each (row r at bits ``[r*W, (r+1)*W)``).  Row ``r`` of lane ``l`` is the value at position
``FL_ORDER[r // 8] * 16 + (r % 8) * 128 + l`` of the block.
"""

import numpy as np

__all__ = ["unpack_blocks", "pack_blocks", "inline_pack", "BLOCK"]

BLOCK = 1024
_FL_ORDER = np.array([0, 4, 2, 6, 1, 5, 3, 7])
_INDEX_CACHE: dict[int, np.ndarray] = {}


def _index(t_bits: int) -> np.ndarray:
    """Block positions of (lane, row), shape (LANES, T)."""
    idx = _INDEX_CACHE.get(t_bits)
    if idx is None:
        lanes = BLOCK // t_bits
        row = np.arange(t_bits)
        lane = np.arange(lanes)
        idx = (_FL_ORDER[row // 8] * 16 + (row % 8) * 128)[None, :] + lane[:, None]
        _INDEX_CACHE[t_bits] = idx
    return idx


def unpack_blocks(words: np.ndarray, width: int, t_bits: int) -> np.ndarray:
    """Unpack ``nblocks`` FastLanes blocks of width ``width``.

    ``words``: uint8 bytes of ``nblocks * 1024 * width / 8`` (contiguous blocks).
    Returns an unsigned array of ``nblocks * 1024`` values of ``t_bits`` bits.
    """
    dt = np.dtype(f"<u{t_bits // 8}")
    nbytes_block = BLOCK * width // 8
    nblocks = len(words) // nbytes_block
    lanes = BLOCK // t_bits
    if width == t_bits:
        w = np.frombuffer(words[: nblocks * nbytes_block], dtype=dt).reshape(nblocks, t_bits, lanes)
        vals = w.transpose(0, 2, 1)  # (block, lane, row)
    else:
        w = np.frombuffer(words[: nblocks * nbytes_block], dtype=dt).reshape(nblocks, width, lanes)
        # per lane, the W words in order form the bit stream: row r is bits [r*W, (r+1)*W), i.e.
        # word r*W // T shifted right by r*W % T, plus the next word's low bits when it spills
        start = np.arange(t_bits) * width
        idx, off = start // t_bits, start % t_bits
        spill = off + width > t_bits
        vals = w[:, idx, :] >> off.astype(dt)[None, :, None]
        if spill.any():
            rows = np.flatnonzero(spill)
            vals[:, rows, :] |= w[:, idx[rows] + 1, :] << (t_bits - off[rows]).astype(dt)[None, :, None]
        vals &= dt.type((1 << width) - 1)
        vals = vals.transpose(0, 2, 1)  # (block, lane, row)
    out = np.empty((nblocks, BLOCK), dtype=dt)
    out[:, _index(t_bits)] = vals
    return out.reshape(-1)


def unpack_block_count(words: np.ndarray, width: int, t_bits: int, nblocks: int) -> np.ndarray:
    """Like :func:`unpack_blocks` with an explicit block count (width may be 0)."""
    dt = np.dtype(f"<u{t_bits // 8}")
    if width == 0:
        return np.zeros(nblocks * BLOCK, dtype=dt)
    need = nblocks * BLOCK * width // 8
    if len(words) < need:
        raise ValueError(f"bit-packed data of {len(words)} bytes, {need} needed")
    return unpack_blocks(words[:need], width, t_bits)


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
    by_lane = vals[:, _index(t_bits)]  # (block, lane, row)
    if width == t_bits:
        return np.ascontiguousarray(by_lane.transpose(0, 2, 1)).view(np.uint8).reshape(-1)
    bits = np.unpackbits(np.ascontiguousarray(by_lane).view(np.uint8), bitorder="little")
    bits = bits.reshape(nblocks, lanes, t_bits, t_bits)[..., :width]
    lane_words = np.packbits(bits.reshape(nblocks, lanes, t_bits * width), axis=-1, bitorder="little")
    words = lane_words.view(dt).reshape(nblocks, lanes, width).transpose(0, 2, 1)
    return np.ascontiguousarray(words).view(np.uint8).reshape(-1)


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
