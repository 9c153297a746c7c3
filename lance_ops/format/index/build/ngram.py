"""NGRAM segments as pylance 14 writes them (upstream ``rust/lance-index/src/scalar/ngram.rs``).

A value is lower-cased and ASCII-folded whole, cut into every 3-character window, and windows
of ASCII letters and digits only are kept; a window is the token ``37^2*a + 37*b + c`` with each
character's rank (``0-9`` -> 1..10, ``a-z`` -> 11..36).  A null value is token 0.  One Lance file,
``ngram_postings.lance``: ``tokens`` (``uint32``, ascending) and ``posting_list`` (``binary``: a
``RoaringTreemap`` of the row ids holding it -- ``u64`` count of 32-bit bitmaps, then per bitmap
``u32`` high word and the portable roaring bitmap of the low words).  ``index_version`` 0, empty
``NGramIndexDetails``.
"""

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap

from lance_ops.format.index.build.common import BuiltSegment, SegmentInput, SegmentWriter
from lance_ops.format.index.build.text_tokens import fold_ascii

TYPE_URL = "/lance.table.NGramIndexDetails"
FILE = "ngram_postings.lance"
_SPAN = 37


def _rank(codes: np.ndarray) -> np.ndarray:
    """Each ASCII letter / digit's rank (``0`` for anything else)."""
    out = np.zeros(len(codes), np.int64)
    digit = (codes >= ord("0")) & (codes <= ord("9"))
    lower = (codes >= ord("a")) & (codes <= ord("z"))
    out[digit] = codes[digit] - ord("0") + 1
    out[lower] = codes[lower] - ord("a") + 11
    return out


def ngram_tokens(values: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Every (row, token) pair of ``values`` (distinct), nulls as token 0."""
    if not pa.types.is_string(values.type):
        values = values.cast(pa.string())
    enc = pc.dictionary_encode(pc.utf8_lower(values))
    rows_out, toks_out = [np.flatnonzero(~values.is_valid().to_numpy(zero_copy_only=False))], []
    toks_out.append(np.zeros(len(rows_out[0]), np.int64))
    per_value: list[np.ndarray] = []
    for text in enc.dictionary.to_pylist():  # once per distinct value
        chars = fold_ascii(text)
        if len(chars) < 3:
            per_value.append(np.zeros(0, np.int64))
            continue
        code = np.array([ord(c) for c in chars], np.int64)
        r = _rank(code)
        win = np.lib.stride_tricks.sliding_window_view(r, 3)
        ok = (win > 0).all(axis=1)
        per_value.append(np.unique(win[ok] @ np.array([_SPAN * _SPAN, _SPAN, 1])))
    idx = enc.indices.to_numpy(zero_copy_only=False)
    valid = values.is_valid().to_numpy(zero_copy_only=False)
    counts = np.array([len(p) for p in per_value], np.int64)
    rows = np.flatnonzero(valid)
    which = idx[rows].astype(np.int64)
    n = counts[which] if len(which) else np.zeros(0, np.int64)
    flat = np.concatenate(per_value) if per_value else np.zeros(0, np.int64)
    starts = np.concatenate([[0], np.cumsum(counts)])[:-1] if len(counts) else np.zeros(0, np.int64)
    take = np.repeat(starts[which] - np.concatenate([[0], np.cumsum(n)])[:-1], n) + np.arange(int(n.sum()))
    rows_out.append(np.repeat(rows, n))
    toks_out.append(flat[take] if len(take) else np.zeros(0, np.int64))
    return np.concatenate(rows_out), np.concatenate(toks_out)


def encode_treemap(ids: np.ndarray) -> bytes:
    """A ``RoaringTreemap`` of ``u64`` ids (sorted or not)."""
    ids = np.unique(ids.astype(np.uint64))
    highs = (ids >> np.uint64(32)).astype(np.uint32)
    parts = [np.uint64(len(np.unique(highs))).astype("<u8").tobytes()]
    for h in np.unique(highs).tolist():
        low = (ids[highs == h] & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        parts.append(np.uint32(h).astype("<u4").tobytes() + BitMap(low.tolist()).serialize())
    return b"".join(parts)


def write_ngram(w: SegmentWriter, data: SegmentInput) -> BuiltSegment:
    rows, toks = ngram_tokens(data.values)
    ids = data.row_ids[rows].astype(np.uint64)
    order = np.lexsort((ids, toks))
    toks, ids = toks[order], ids[order]
    keys, starts = np.unique(toks, return_index=True)
    bounds = np.append(starts, len(toks))
    postings = [encode_treemap(ids[bounds[i]:bounds[i + 1]]) for i in range(len(keys))]
    field = pa.field("posting_list", pa.binary(), False, metadata={"lance-encoding:compression": "none"})
    w.write(FILE, pa.table({"tokens": pa.array(keys, pa.uint32()), "posting_list": pa.array(postings, pa.binary())},
                           schema=pa.schema([pa.field("tokens", pa.uint32()), field])))
    return BuiltSegment(tuple(w.files), TYPE_URL, b"", 0)
