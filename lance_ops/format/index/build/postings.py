"""Posting lists of an INVERTED partition as pylance 14 compresses them, and their BM25 bounds
(docs/FORMAT.md "INVERTED segments").

A token's postings (dense doc ids ascending, term frequencies) are cut into blocks of 128:

- a full block: ``f32`` the block's max score, ``u32`` its first doc id, ``u8`` bits per doc id
  delta, the deltas (``doc[i] - doc[i-1]``, the first from the first doc itself, so 0)
  bit-packed, ``u8`` bits per frequency, the frequencies bit-packed; bit packing in the
  ``bitpacking`` crate's ``BitPacker4x`` layout (:func:`pack4x`);
- the rest (fewer than 128): ``f32`` max score, then per the tail codec ``varint_delta_v1``
  (LEB128 varints of the doc ids' deltas, the first from 0 -- also after full blocks --, then
  the frequencies) or ``fixed32_v1`` (``u32`` doc ids, then ``u32`` frequencies).

Scores are BM25 over the partition (:func:`bm25`).
"""

import numpy as np
import pyarrow as pa

from lance_ops.format.errors import UnsupportedFeatureError

BLOCK = 128
K1 = np.float32(1.2)
B = np.float32(0.75)


def pack4x(blocks: np.ndarray, bits: int) -> np.ndarray:
    """Blocks of 128 ``u32`` values (``(m, 128)``) in ``bits`` bits each, ``BitPacker4x``
    layout: value ``4*j + lane`` goes to lane ``lane`` (4 interleaved little-endian ``u32``
    streams, LSB first), and a block's output is ``bits`` rows of 4 words (row ``k`` holds word
    ``k`` of each lane); ``(m, 16 * bits)`` bytes."""
    m = len(blocks)
    if bits == 0:
        return np.zeros((m, 0), dtype=np.uint8)
    v = blocks.astype(np.uint64).reshape(m, 32, 4)
    words = np.zeros((m, bits + 1, 4), dtype=np.uint64)
    mask = np.uint64(0xFFFFFFFF)
    for j in range(32):  # 32 steps over every block at once
        wi, sh = j * bits // 32, (j * bits) % 32
        words[:, wi, :] |= (v[:, j, :] << np.uint64(sh)) & mask
        if sh + bits > 32:
            words[:, wi + 1, :] |= v[:, j, :] >> np.uint64(32 - sh)
    return words[:, :bits, :].astype("<u4").view(np.uint8).reshape(m, 16 * bits)


def _bits(x: np.ndarray) -> np.ndarray:
    """Bit width of the largest value of each row."""
    top = np.bitwise_or.reduce(x.astype(np.uint32), axis=1)
    return np.where(top == 0, 0, np.floor(np.log2(np.maximum(top, 1).astype(np.float64))).astype(np.int64) + 1)


def _varints(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """LEB128 of every value of ``x`` (``u32``): the bytes, and each value's byte count."""
    x = x.astype(np.uint64)
    n = np.ones(len(x), dtype=np.int64)
    for k in range(1, 5):
        n += x >= np.uint64(1 << (7 * k))
    out = np.zeros(int(n.sum()), dtype=np.uint8)
    starts = np.cumsum(n) - n
    for k in range(int(n.max()) if len(n) else 0):
        has = n > k
        byte = (x[has] >> np.uint64(7 * k)) & np.uint64(0x7F)
        more = (n[has] > k + 1).astype(np.uint64) << np.uint64(7)
        out[starts[has] + k] = (byte | more).astype(np.uint8)
    return out, n


def _segments(lengths: np.ndarray) -> np.ndarray:
    """Offsets ``[0, l0, l0+l1, ...]``."""
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)


def encode_postings(doc: np.ndarray, freq: np.ndarray, scores: np.ndarray, bounds: np.ndarray,
                    codec: str) -> list[list[bytes]]:
    """The blocks of every token's posting list: token ``t`` holds postings
    ``[bounds[t], bounds[t+1])`` (docs ascending).  Full blocks are packed together per bit
    width, tails varint-encoded in one pass; only the assembly runs per token."""
    if codec not in ("varint_delta_v1", "fixed32_v1"):
        raise UnsupportedFeatureError(f"full-text posting tail codec {codec!r}")
    lengths = np.diff(bounds)
    nfull = lengths // BLOCK
    # ---- full blocks: (num_blocks, 128)
    block_tok = np.repeat(np.arange(len(lengths)), nfull)
    block_start = bounds[:-1][block_tok] + (np.arange(len(block_tok)) - np.repeat(_segments(nfull)[:-1], nfull)) * BLOCK
    idx = block_start[:, None] + np.arange(BLOCK)[None, :]
    bdoc, bfreq = doc[idx].astype(np.uint32), freq[idx].astype(np.uint32)
    bdelta = np.diff(bdoc, axis=1, prepend=bdoc[:, :1])
    dbits, fbits = _bits(bdelta), _bits(bfreq)
    full_bytes: list[bytes] = [b""] * len(block_tok)
    head = np.zeros((len(block_tok), 8), dtype=np.uint8)
    if len(block_tok):
        head[:, :4] = scores[idx].max(axis=1).astype("<f4").view(np.uint8).reshape(-1, 4)
        head[:, 4:] = bdoc[:, :1].astype("<u4").view(np.uint8).reshape(-1, 4)
    packed_d = _packed_by_width(bdelta, dbits)
    packed_f = _packed_by_width(bfreq, fbits)
    for b in range(len(block_tok)):
        full_bytes[b] = (head[b].tobytes() + bytes([dbits[b]]) + packed_d[b] + bytes([fbits[b]]) + packed_f[b])
    # ---- tails
    tail_len = lengths - nfull * BLOCK
    tail_start = bounds[:-1] + nfull * BLOCK
    tail_idx = np.repeat(tail_start - _segments(tail_len)[:-1], tail_len) + np.arange(int(tail_len.sum()))
    tdoc, tfreq = doc[tail_idx], freq[tail_idx]
    owner = np.repeat(np.arange(len(lengths)), tail_len)
    first = np.zeros(len(tdoc), dtype=bool)
    first[_segments(tail_len)[:-1][tail_len > 0]] = True
    tdelta = np.where(first, tdoc, tdoc - np.concatenate([[0], tdoc[:-1]]))
    tmax = np.full(len(lengths), -np.inf, dtype=np.float32)
    np.maximum.at(tmax, owner, scores[tail_idx])
    if codec == "varint_delta_v1":
        dbytes, dn = _varints(tdelta)
        fbytes, fn = _varints(tfreq)
    else:
        dbytes, dn = tdoc.astype("<u4").view(np.uint8), np.full(len(tdoc), 4)
        fbytes, fn = tfreq.astype("<u4").view(np.uint8), np.full(len(tfreq), 4)
    doff = _segments(np.bincount(owner, weights=dn, minlength=len(lengths)).astype(np.int64))
    foff = _segments(np.bincount(owner, weights=fn, minlength=len(lengths)).astype(np.int64))
    dbuf, fbuf = dbytes.tobytes(), fbytes.tobytes()
    tmax_bytes = tmax.astype("<f4").tobytes()
    block_off = _segments(nfull)
    out: list[list[bytes]] = []
    for t in range(len(lengths)):
        blocks = full_bytes[block_off[t]:block_off[t + 1]]
        if tail_len[t]:
            blocks = [*blocks, tmax_bytes[4 * t:4 * t + 4] + dbuf[doff[t]:doff[t + 1]] + fbuf[foff[t]:foff[t + 1]]]
        out.append(blocks)
    return out


def _packed_by_width(values: np.ndarray, bits: np.ndarray) -> list[bytes]:
    """Each block of ``values`` packed at its own bit width (blocks of equal width together)."""
    out: list[bytes] = [b""] * len(values)
    for b in np.unique(bits).tolist():
        rows = np.flatnonzero(bits == b)
        packed = pack4x(values[rows], int(b))
        for r, p in zip(rows.tolist(), packed, strict=True):
            out[r] = p.tobytes()
    return out


def bm25(freqs: np.ndarray, doc_len: np.ndarray, df: np.ndarray, num_docs: int, total_tokens: int) -> np.ndarray:
    """BM25 of each posting (its frequency, its document's length, its token's document count)
    over a partition of ``num_docs`` documents, in ``float32`` as upstream's scorer:
    ``idf = ln((N - n + 0.5) / (n + 0.5) + 1)``, ``(k1 + 1) * tf / (tf + k1 * (1 - b + b * dl /
    avgdl))``.  (pylance's stored bounds can differ from these in the last bit.)"""
    n = np.float32(num_docs)
    dfs = df.astype(np.float32)
    arg = (n - dfs + np.float32(0.5)) / (dfs + np.float32(0.5)) + np.float32(1)
    idf = np.log(arg.astype(np.float64)).astype(np.float32)
    avgdl = np.float32(total_tokens) / np.float32(max(num_docs, 1))
    tf = freqs.astype(np.float32)
    norm = K1 * (np.float32(1) - B + B * doc_len.astype(np.float32) / avgdl)
    return (idf * ((K1 + np.float32(1)) * tf / (tf + norm))).astype(np.float32)


def encode_positions(positions: np.ndarray, freq: np.ndarray, bounds: np.ndarray) -> pa.Array:
    """The ``_position`` column: per token (postings ``[bounds[t], bounds[t+1])``) a list per
    document of binaries: ``u32`` the count, a block per 128 positions (``u32`` first, ``u8``
    bits, the deltas bit-packed as a full posting block's doc ids), then the rest as ``u32``s.
    ``positions``: every posting's positions, ascending, postings in order (``freq`` each)."""
    if len(freq) and int(freq.max()) < BLOCK:
        return _short_positions(positions, freq, bounds)
    off = _segments(freq.astype(np.int64))
    items: list[bytes] = []
    inner = [0]
    for i in range(len(freq)):
        p = positions[off[i]:off[i + 1]].astype(np.uint32)
        n = len(p)
        items.append(np.uint32(n).astype("<u4").tobytes())
        full = n // BLOCK
        if full:
            blocks = p[: full * BLOCK].reshape(full, BLOCK)
            deltas = np.diff(blocks, axis=1, prepend=blocks[:, :1])
            bits = _bits(deltas)
            for b in range(full):
                items.append(blocks[b, :1].astype("<u4").tobytes() + bytes([int(bits[b])])
                             + pack4x(deltas[b:b + 1], int(bits[b])).tobytes())
        if n % BLOCK:
            items.append(p[full * BLOCK:].astype("<u4").tobytes())
        inner.append(len(items))
    flat = pa.array(items, pa.large_binary())
    per_doc = pa.ListArray.from_arrays(pa.array(inner, pa.int32()), flat)
    return pa.ListArray.from_arrays(pa.array(bounds.astype(np.int32), pa.int32()), per_doc)


def _short_positions(positions: np.ndarray, freq: np.ndarray, bounds: np.ndarray) -> pa.Array:
    """:func:`encode_positions` when no document holds a token 128 times (no packed block): per
    posting two binaries, ``u32`` count and ``u32`` positions, built as whole buffers."""
    n = freq.astype(np.int64)
    off = _segments(n)
    stream = np.insert(positions.astype(np.uint32), off[:-1], n.astype(np.uint32))  # count, then positions
    start = off[:-1] + np.arange(len(n))  # where each posting's count sits in the stream
    cuts = np.empty(2 * len(n) + 1, np.int64)
    cuts[0:-1:2], cuts[1:-1:2], cuts[-1] = start, start + 1, len(stream)
    flat = pa.LargeBinaryArray.from_buffers(pa.large_binary(), 2 * len(n),
                                            [None, pa.py_buffer((cuts * 4).astype("<i8").tobytes()),
                                             pa.py_buffer(stream.astype("<u4").tobytes())])
    per_doc = pa.ListArray.from_arrays(pa.array(np.arange(0, 2 * len(n) + 1, 2), pa.int32()), flat)
    return pa.ListArray.from_arrays(pa.array(bounds.astype(np.int32), pa.int32()), per_doc)
