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

import numpy as np

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
    if np.any(lens[:n] > 8):
        raise ValueError("FSST symbol longer than 8 bytes")
    return on, symbols, lens


def decompress(table: bytes, offsets: np.ndarray, data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Decompress FSST strings ``data[offsets[i]:offsets[i+1]]``; returns ``(offsets int64, data uint8)``."""
    on, symbols, lens = parse_symbol_table(table)
    offsets = offsets.astype(np.int64)
    if not on:
        return offsets - offsets[0], data[offsets[0] : offsets[-1]]
    base = int(offsets[0])
    buf = data[base : int(offsets[-1])]
    offsets = offsets - base
    m = len(buf)
    if m == 0:
        return offsets, np.zeros(0, np.uint8)
    is255 = buf == ESC
    # run starts: 255 bytes whose predecessor is not 255 (or a string start)
    prev255 = np.zeros(m, dtype=bool)
    prev255[1:] = is255[:-1]
    starts_mask = np.zeros(m, dtype=bool)
    starts_mask[offsets[:-1][offsets[:-1] < m]] = True
    run_start = is255 & (~prev255 | starts_mask)
    idx = np.arange(m)
    last_start = np.maximum.accumulate(np.where(run_start, idx, -1))
    esc = is255 & (((idx - last_start) & 1) == 0)
    lit = np.zeros(m, dtype=bool)
    lit[1:] = esc[:-1]
    if esc[-1]:
        raise ValueError("FSST data ends with an escape byte")
    code = ~(esc | lit)
    if np.any(code & (lens[buf] == 0)):
        raise ValueError("FSST code without a symbol")
    # tokens: codes 0..254 -> symbol, literals -> 256 + byte (a one-byte "symbol"); escapes dropped
    ext_sym = np.zeros((512, 8), dtype=np.uint8)
    ext_sym[:256] = symbols
    ext_sym[256:, 0] = np.arange(256, dtype=np.uint8)
    ext_len = np.concatenate([lens, np.ones(256, dtype=np.int64)])
    token = np.where(lit, buf.astype(np.int64) + 256, buf.astype(np.int64))
    out_len = np.where(esc, 0, ext_len[token])
    cum = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(out_len, out=cum[1:])
    total = int(cum[-1])
    # output byte k comes from token t at symbol byte k - cum[t]
    src = np.repeat(token * 8 - cum[:-1], out_len) + np.arange(total, dtype=np.int64)
    out = ext_sym.reshape(-1)[src]
    return cum[offsets], out
