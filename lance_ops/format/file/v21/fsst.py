"""FSST decompression (vectorised NumPy).

Symbol table (``Fsst.symbol_table``, 2312 bytes): u64 LE header ``"FSST" << 32 | switch << 24 |
suffix_lim << 16 | terminator << 8 | n_symbols``; then ``n_symbols`` 8-byte symbols, then
``n_symbols`` length bytes.  If the switch bit is 0 the data is stored uncompressed.  Compressed
strings are code streams: a code ``c != 255`` emits ``symbol[c][:len[c]]``; ``255`` escapes the
next byte, which is emitted literally.

Escape detection without a sequential scan: a byte that follows a non-255 byte always starts a
code (it is either after a code or after an escaped literal), so inside a run of 255 bytes the
escapes are the bytes at even distance from the run start.
"""

import threading

import numpy as np
import pyarrow as pa

from lance_ops.format.file.v21 import kernels
from lance_ops.format.file.v21.fsst_reuse import SLACK, PageReuse, Trained

_MAGIC = 0x46535354
ESC = 255


def parse_symbol_table(table: bytes) -> tuple[bool, np.ndarray, np.ndarray]:
    """``(compressed, symbols (256, 8) uint8, lens (256,) int64)``; raises ValueError when bad."""
    if len(table) < 8:
        raise ValueError(f"FSST symbol table of {len(table)} bytes")
    info = int.from_bytes(table[:8], "little")
    if info >> 32 != _MAGIC:
        raise ValueError("FSST symbol table without the FSST magic")
    on = bool(info & (1 << 24))
    n = info & 0xFF
    if len(table) < 8 + 9 * n:
        raise ValueError(f"FSST symbol table of {len(table)} bytes for {n} symbols")
    symbols = np.zeros((256, 8), dtype=np.uint8)
    lens = np.zeros(256, dtype=np.int64)
    symbols[:n] = np.frombuffer(table[8 : 8 + 8 * n], dtype=np.uint8).reshape(n, 8)
    lens[:n] = np.frombuffer(table[8 + 8 * n : 8 + 9 * n], dtype=np.uint8)
    if np.any(lens[:n] > 8) or np.any(lens[:n] == 0):
        raise ValueError("FSST symbol of length 0 or longer than 8 bytes")
    return on, symbols, lens


def decompress(table: bytes, offsets: np.ndarray, data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Decompress FSST strings ``data[offsets[i]:offsets[i+1]]``; returns ``(offsets int64, data uint8)``."""
    on, symbols, lens = parse_symbol_table(table)
    offsets = np.asarray(offsets, dtype=np.int64)
    if offsets[0] < 0 or offsets[-1] > len(data) or np.any(offsets[1:] < offsets[:-1]):
        raise ValueError("FSST string offsets out of order or beyond the data")
    if not on:
        return offsets - offsets[0], data[offsets[0] : offsets[-1]]
    jit = kernels.get()
    if jit is not None:
        return _decompress_jit(jit, symbols, lens, offsets, data)
    base = int(offsets[0])
    buf = data[base : int(offsets[-1])]
    offsets = offsets - base
    m = len(buf)
    if m == 0:
        return offsets, np.zeros(0, np.uint8)
    is255 = buf == ESC
    starts = offsets[:-1][offsets[:-1] < m]
    # a 255 after a 255 (inside one string) may be an escaped literal or an escape: only then is
    # the run parity needed; usually every 255 is an escape
    double = np.zeros(m, dtype=bool)
    double[1:] = is255[1:] & is255[:-1]
    double[starts] = False
    if double.any():
        prev255 = np.zeros(m, dtype=bool)
        prev255[1:] = is255[:-1]
        starts_mask = np.zeros(m, dtype=bool)
        starts_mask[starts] = True
        run_start = is255 & (~prev255 | starts_mask)  # 255 bytes whose predecessor is not 255
        idx = np.arange(m)
        last_start = np.maximum.accumulate(np.where(run_start, idx, -1))
        esc = is255 & (((idx - last_start) & 1) == 0)
    else:
        esc = is255
    if esc[-1]:
        raise ValueError("FSST data ends with an escape byte")
    lit = np.zeros(m, dtype=bool)
    lit[1:] = esc[:-1]
    # tokens: codes 0..254 -> symbol, literals -> 256 + byte (a one-byte "symbol"), escapes -> 512
    # (an empty symbol).  Arrow's take of the tokens from a 513-entry binary array of the symbols
    # writes exactly the decoded bytes, and its offsets at the string starts are the output offsets.
    token = buf.astype(np.uint16)
    token[lit] += 256
    token[esc] = 512
    ext_len = np.zeros(513, dtype=np.int64)
    ext_len[:256] = lens
    ext_len[256:512] = 1
    n_symbols = int(np.count_nonzero(lens))  # symbols 0..n-1 all have a length (checked on parse)
    if np.any((buf >= n_symbols) & ~(esc | lit)):
        raise ValueError("FSST code without a symbol")
    sym_offsets = np.zeros(514, dtype=np.int64)
    np.cumsum(ext_len, out=sym_offsets[1:])
    ext_sym = np.zeros((513, 8), dtype=np.uint8)
    ext_sym[:256] = symbols
    ext_sym[256:512, 0] = np.arange(256, dtype=np.uint8)
    sym_bytes = ext_sym[np.arange(8)[None, :] < ext_len[:, None]]
    table_arr = pa.Array.from_buffers(pa.large_binary(), 513, [None, pa.py_buffer(sym_offsets), pa.py_buffer(sym_bytes)])
    taken = table_arr.take(pa.array(token))
    t_offs = np.frombuffer(taken.buffers()[1], dtype=np.int64, count=m + 1)
    out = np.frombuffer(taken.buffers()[2], dtype=np.uint8, count=int(t_offs[-1])) if t_offs[-1] else np.zeros(0, np.uint8)
    return t_offs[np.minimum(offsets, m)], out


_ERRORS = {4: "FSST data ends with an escape byte", 5: "FSST code without a symbol"}


def error_message(code: int) -> str:
    """The message of a compiled FSST kernel's error code."""
    return _ERRORS.get(code, f"FSST decode error {code}")


def _decompress_jit(jit, symbols: np.ndarray, lens: np.ndarray, offsets: np.ndarray,  # type: ignore[no-untyped-def]
                    data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`decompress` by the compiled kernel, in one pass."""
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    data = np.ascontiguousarray(data, dtype=np.uint8)
    out_offsets = np.empty(len(offsets), dtype=np.int64)
    out = output_buffer(int(offsets[-1] - offsets[0]))
    err = jit.fsst_decode(data, offsets, int(np.count_nonzero(lens)), symbols.view("<u8").reshape(-1), lens,
                          out_offsets, out)
    if err:
        raise ValueError(error_message(err))
    return out_offsets, out[: int(out_offsets[-1])]


def output_buffer(codes: int) -> np.ndarray:
    """Room for the decoded bytes of ``codes`` FSST codes (at most 8 bytes each, plus the 8 a
    last symbol store may touch).  Allocated untouched: only the pages the decoder writes take
    memory (a large ``np.empty`` is a fresh anonymous mapping)."""
    return np.empty(8 * codes + 8, dtype=np.uint8)


# ------------------------------------------------------------------------------ encoding
#: the symbol table pylance's decoder reads: header, 256 symbol words, 256 lengths
TABLE_BYTES = 8 + 256 * 8 + 256
#: pylance compresses a page's strings with FSST from 32 KiB of data and a longest value of 5
#: bytes (rust/compression/fsst ``FSST_LEAST_INPUT_SIZE`` / ``FSST_LEAST_INPUT_MAX_LENGTH``)
MIN_INPUT_BYTES = 32 * 1024
MIN_MAX_LENGTH = 5
#: training sample: pylance's (rust/compression/fsst ``FSST_SAMPLETARGET``, 16 KiB, at most twice
#: that); 32 KiB gave tables no better (pylance's 2.2 table: 191.8 vs 192.0 MB) and cost twice the
#: counting (materialize_22: 200 pages trained, 1.03 -> 0.86 s)
_SAMPLE_BYTES = 16 * 1024
_ROUNDS = 5
#: per thread: the 512 x 512 pair counts (2 MiB), all zero again after each training (the
#: kernels zero what they counted), so one buffer serves every page a thread trains on
_PAIRS = threading.local()


def _pair_counts() -> np.ndarray:
    c2 = getattr(_PAIRS, "c2", None)
    if c2 is None:
        c2 = _PAIRS.c2 = np.zeros(512 * 512, np.int64)
    return c2

_MASKS = np.array([0] + [(1 << (8 * k)) - 1 for k in range(1, 8)] + [2**64 - 1], dtype=np.uint64)


def _sample(data: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """About :data:`_SAMPLE_BYTES` of whole strings spread over the page."""
    n = len(offsets) - 1
    total = int(offsets[-1] - offsets[0])
    step = max(1, total // _SAMPLE_BYTES)
    pick = np.arange(0, n, step) if step > 1 else np.arange(n)
    lens = (offsets[pick + 1] - offsets[pick]).astype(np.int64)
    keep = np.cumsum(lens) <= 2 * _SAMPLE_BYTES
    pick, lens = pick[keep], lens[keep]
    so = np.zeros(len(pick) + 1, np.int64)
    np.cumsum(lens, out=so[1:])
    idx = np.repeat(offsets[pick] - so[:-1], lens) + np.arange(int(so[-1]))
    return data[idx], so


def train(jit, data: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:  # type: ignore[no-untyped-def]
    """A symbol table for the strings ``data[offsets[i]:offsets[i+1]]``: ``(words, lens, n)``.

    FSST's training (Boncz et al., VLDB 2020), on a sample: compress it with the current table,
    count each code and each pair of consecutive codes, and keep the 255 candidates (codes and
    concatenated pairs, at most 8 bytes) that cover the most bytes; five rounds.
    """
    buf, so = _sample(data, offsets)
    words = np.zeros(256, np.uint64)
    lens = np.zeros(256, np.int64)
    c2 = _pair_counts()  # pair counts, kept zero between rounds by the kernels
    touched = np.empty(max(len(buf), 1), np.int64)
    try:
        n = _rounds(jit, buf, so, words, lens, c2, touched)
    except BaseException:  # a failed round may leave counts behind
        _PAIRS.c2 = None
        raise
    return words, lens, n


def _rounds(jit, buf, so, words, lens, c2, touched) -> int:  # type: ignore[no-untyped-def]
    """:func:`train`'s rounds, filling ``words`` / ``lens``; the number of symbols."""
    n = 0
    base_words = np.zeros(512, np.uint64)
    base_words[256:] = np.arange(256, dtype=np.uint64)
    base_lens = np.zeros(512, np.int64)
    base_lens[256:] = 1
    for _ in range(_ROUNDS):
        c1, pairs = jit.fsst_count(buf, so, words, lens, n, _MASKS, c2, touched)
        cw, cl = base_words.copy(), base_lens.copy()
        cw[:n], cl[:n] = words[:n], lens[:n]
        cand_w, cand_l, gain = jit.fsst_candidates(c1, c2, touched, pairs, cw, cl, _MASKS)
        if not len(cand_w):
            break
        order = np.lexsort((cand_w, cand_l))
        cand_w, cand_l, gain = cand_w[order], cand_l[order], gain[order]
        first = np.ones(len(cand_w), bool)
        first[1:] = (cand_w[1:] != cand_w[:-1]) | (cand_l[1:] != cand_l[:-1])
        starts = np.flatnonzero(first)
        total = np.add.reduceat(gain, starts)
        by_gain = starts[np.argsort(-total, kind="stable")]
        words[:] = 0
        lens[:] = 0
        n = int(jit.fsst_select(cand_w, cand_l, by_gain, words, lens))
    return n


def table_bytes(words: np.ndarray, lens: np.ndarray, n: int) -> bytes:
    """The 2312-byte symbol table pylance reads (switch on, ``n`` symbols)."""
    head = (_MAGIC << 32) | (1 << 24) | n
    out = np.zeros(TABLE_BYTES, np.uint8)
    out[:8] = np.frombuffer(head.to_bytes(8, "little"), np.uint8)
    out[8 : 8 + 8 * n] = words[:n].astype("<u8").view(np.uint8)
    out[8 + 8 * n : 8 + 9 * n] = lens[:n].astype(np.uint8)
    return out.tobytes()


def compress(
    data: np.ndarray, offsets: np.ndarray, reuse: "PageReuse | None" = None
) -> tuple[bytes, np.ndarray, np.ndarray] | None:
    """FSST-compress strings ``data[offsets[i]:offsets[i+1]]`` (``offsets`` from 0): ``(symbol
    table, code offsets, codes)``, or None without the compiled kernels (the writer then stores
    the strings uncompressed).  ``reuse``: a table trained on an earlier file's page of the
    column, tried first (:mod:`.fsst_reuse`)."""
    jit = kernels.get()
    if jit is None:
        return None
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    size = int(offsets[-1])
    src = np.ascontiguousarray(data[:size])
    out = np.empty(2 * size + 8, np.uint8)  # escapes take 2 bytes; untouched pages cost nothing
    out_offsets = np.empty(len(offsets), np.int64)
    prior = reuse.prior if reuse is not None else None
    if prior is not None:
        used = jit.fsst_encode(src, offsets, prior.words, prior.lens, prior.n, _MASKS, out, out_offsets)
        if used <= size * prior.ratio * (1 + SLACK):
            return table_bytes(prior.words, prior.lens, prior.n), out_offsets, out[:used]
    words, lens, n = train(jit, data, offsets)
    used = jit.fsst_encode(src, offsets, words, lens, n, _MASKS, out, out_offsets)
    if reuse is not None:
        reuse.record(Trained(words, lens, n, used / max(size, 1)))
    return table_bytes(words, lens, n), out_offsets, out[:used]
