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

from ...errors import UnsupportedFeatureError

BLOCK = 128
K1 = np.float32(1.2)
B = np.float32(0.75)


def pack4x(values: np.ndarray, bits: int) -> bytes:
    """128 ``u32`` values in ``bits`` bits each, ``BitPacker4x`` layout: value ``4*j + lane``
    goes to lane ``lane`` (4 interleaved little-endian ``u32`` streams, LSB first), and the
    output is ``bits`` rows of 4 words (row ``k`` holds word ``k`` of each lane)."""
    if bits == 0:
        return b""
    v = values.astype(np.uint64).reshape(32, 4)
    words = np.zeros((bits + 1, 4), dtype=np.uint64)
    off = np.arange(32, dtype=np.int64) * bits
    wi, sh = off // 32, (off % 32).astype(np.uint64)
    lanes = np.arange(4)
    for j in range(32):  # 32 steps of 4 lanes each, whatever the number of values
        words[wi[j], lanes] |= (v[j] << sh[j]) & np.uint64(0xFFFFFFFF)
        words[wi[j] + 1, lanes] |= v[j] >> (np.uint64(32) - sh[j]) if sh[j] else np.uint64(0)
    return words[:bits].astype("<u4").tobytes()


def _bits(x: np.ndarray) -> int:
    return int(np.bitwise_or.reduce(x.astype(np.uint32))).bit_length() if len(x) else 0


def _varints(x: np.ndarray) -> bytes:
    """LEB128 of each value of ``x`` (``u32``), vectorised over the values."""
    x = x.astype(np.uint64)
    n = np.maximum(1, (np.floor(np.log2(np.maximum(x, 1))).astype(np.int64) // 7) + 1)
    n[x == 0] = 1
    total = int(n.sum())
    out = np.zeros(total, dtype=np.uint8)
    starts = np.concatenate([[0], np.cumsum(n)[:-1]])
    for k in range(int(n.max()) if len(n) else 0):
        has = n > k
        byte = (x[has] >> np.uint64(7 * k)) & np.uint64(0x7F)
        more = (n[has] > k + 1).astype(np.uint64) << np.uint64(7)
        out[starts[has] + k] = (byte | more).astype(np.uint8)
    return out.tobytes()


def encode_posting(docs: np.ndarray, freqs: np.ndarray, scores: np.ndarray, codec: str) -> list[bytes]:
    """The blocks of one token's posting list (``docs`` ascending; ``scores`` per posting)."""
    blocks = []
    n = len(docs)
    full = n // BLOCK * BLOCK
    for s in range(0, full, BLOCK):
        d, f = docs[s : s + BLOCK], freqs[s : s + BLOCK]
        deltas = np.diff(d, prepend=d[0]).astype(np.uint32)
        db, fb = _bits(deltas), _bits(f)
        blocks.append(np.float32(scores[s : s + BLOCK].max()).tobytes() + int(d[0]).to_bytes(4, "little")
                      + bytes([db]) + pack4x(deltas, db) + bytes([fb]) + pack4x(f, fb))
    if full < n:
        d, f = docs[full:], freqs[full:]
        head = np.float32(scores[full:].max()).tobytes()
        if codec == "varint_delta_v1":
            blocks.append(head + _varints(np.diff(d, prepend=0)) + _varints(f))
        elif codec == "fixed32_v1":
            blocks.append(head + d.astype("<u4").tobytes() + f.astype("<u4").tobytes())
        else:
            raise UnsupportedFeatureError(f"full-text posting tail codec {codec!r}")
    return blocks


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
