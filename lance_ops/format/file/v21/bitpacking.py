"""FastLanes bit-unpacking (1024-value transposed layout) in vectorised NumPy.

FastLanes packs a block of 1024 values of a T-bit unsigned type (T = 8, 16, 32, 64) at bit width
W into ``1024 * W / T`` words of T bits.  There are ``LANES = 1024 / T`` lanes; lane ``l`` owns
words ``k * LANES + l`` (k = 0..W-1), which form one little-endian bit stream holding T values of
W bits each (row r at bits ``[r*W, (r+1)*W)``).  Row ``r`` of lane ``l`` is the value at position
``FL_ORDER[r // 8] * 16 + (r % 8) * 128 + l`` of the block.
"""

import numpy as np

__all__ = ["unpack_blocks", "BLOCK"]

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
        # per lane, the W words in order form the bit stream
        lane_words = np.ascontiguousarray(w.transpose(0, 2, 1))
        bits = np.unpackbits(lane_words.view(np.uint8), bitorder="little").reshape(nblocks, lanes, t_bits, width)
        padded = np.zeros((nblocks, lanes, t_bits, t_bits), dtype=np.uint8)
        padded[..., :width] = bits
        vals = np.packbits(padded, axis=-1, bitorder="little").view(dt)[..., 0]
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
