"""Full-zip pages with repetition levels (lists of large values) in Lance 2.1 / 2.2.

The data buffer is one entry per level slot: a control word (``rep << bits_def | def`` in 1, 2 or
4 bytes), then, for a visible slot, the value: fixed width values always (null items too),
variable width values ``[length][bytes]`` only for valid items.  Buffer 1, the repetition index,
holds ``rows + 1`` byte positions (1, 2, 4 or 8 bytes each): where each row starts.

Entries have data-dependent sizes, so they are found by walking all rows at once: step ``k``
reads the ``k``-th entry of every row that still has one (NumPy over the active rows).
"""

import numpy as np
import pyarrow as pa

from lance_ops.format._proto import encodings_v2_1_pb2 as pb
from lance_ops.format.errors import LevelsError
from lance_ops.format.file.v21.compression import (
    Where,
    fixed_chunk,
    full_zip_repetition_index,
    leaf_type_below,
)
from lance_ops.format.file.v21.repdef import max_visible_level, unravel

__all__ = ["decode_full_zip_rep"]


def _gather_le(raw: np.ndarray, pos: np.ndarray, width: int) -> np.ndarray:
    """Little-endian unsigned ints of ``width`` bytes at byte positions ``pos``."""
    out = np.zeros(len(pos), dtype=np.int64)
    for b in range(width):
        out |= raw[pos + b].astype(np.int64) << (8 * b)
    return out


def decode_full_zip_rep(
    w: Where, fz: pb.FullZipLayout, n: int, buffers: list[pa.Buffer], dtype: pa.DataType,
    build_fixed, build_var, per_value_variable,
) -> pa.Array:
    """Decode a full-zip page with repetition into ``n`` rows of ``dtype`` (a list chain)."""
    layers = list(fz.layers)
    leaf_type = leaf_type_below(w, dtype, len(layers) - 1)
    bits_rep, bits_def = int(fz.bits_rep), int(fz.bits_def)
    total = bits_rep + bits_def
    cw = 1 if total <= 8 else 2 if total <= 16 else 4
    if len(buffers) < 2:
        raise w.corrupt("full-zip page with repetition but without a repetition index")
    raw = np.frombuffer(buffers[0], dtype=np.uint8)
    ri = full_zip_repetition_index(w, buffers[1], n, len(raw))
    mv = max_visible_level(layers)
    details = fz.WhichOneof("details")
    if details == "bits_per_value":
        bits = int(fz.bits_per_value)
        if bits % 8:
            raise w.unsupported(f"full-zip with {bits} bits per value")
        fixed_bytes, lb = bits // 8, 0
    elif details == "bits_per_offset":
        fixed_bytes, lb = -1, int(fz.bits_per_offset) // 8
        if lb not in (1, 2, 4, 8):
            raise w.unsupported(f"full-zip with {fz.bits_per_offset}-bit lengths")
    else:
        raise w.unsupported(f"full-zip details {details}")
    def_mask = (1 << bits_def) - 1
    pos = ri[:-1].copy()
    end = ri[1:]
    starts, words, vstarts, vlens = [], [], [], []
    active = np.flatnonzero(pos < end)
    while len(active):
        p = pos[active]
        if np.any(p + cw > end[active]):
            raise w.corrupt("full-zip control word runs past its row")
        word = _gather_le(raw, p, cw)
        d = word & def_mask
        visible = d <= mv if mv is not None else np.ones(len(p), dtype=bool)
        body = p + cw
        if fixed_bytes >= 0:
            size = np.where(visible, fixed_bytes, 0)
            vstart, vlen = body, size
        else:
            has = visible & (d == 0)
            ln = np.zeros(len(p), dtype=np.int64)
            if has.any():
                if np.any(body[has] + lb > end[active][has]):
                    raise w.corrupt("full-zip length prefix runs past its row")
                ln[has] = _gather_le(raw, body[has], lb)
            vstart = body + np.where(has, lb, 0)
            vlen = ln
            size = np.where(has, lb + ln, 0)
        starts.append(p)
        words.append(word)
        vstarts.append(vstart)
        vlens.append(vlen)
        pos[active] = body + size
        if np.any(pos[active] > end[active]):
            raise w.corrupt("full-zip value runs past its row")
        active = active[pos[active] < end[active]]
    if starts:
        order = np.argsort(np.concatenate(starts), kind="stable")
        word = np.concatenate(words)[order]
        vstart = np.concatenate(vstarts)[order]
        vlen = np.concatenate(vlens)[order]
    else:
        word = vstart = vlen = np.zeros(0, dtype=np.int64)
    rep = (word >> bits_def).astype(np.uint16)
    defs = (word & def_mask).astype(np.uint16) if bits_def else None
    visible = defs <= mv if (defs is not None and mv is not None) else np.ones(len(word), dtype=bool)
    if int(fz.num_visible_items) not in (0, int(visible.sum())) and fz.num_visible_items != fz.num_items:
        raise w.corrupt(f"full-zip page says {fz.num_visible_items} visible items, levels have {int(visible.sum())}")
    vs, vl = vstart[visible], vlen[visible]
    count = len(vs)
    if fixed_bytes >= 0:
        idx = (vs[:, None] + np.arange(fixed_bytes)[None, :]).reshape(-1) if count else np.zeros(0, np.int64)
        values = fixed_chunk(w, fz.value_compression, [raw[idx]], count)
        leaf = build_fixed(w, [values], None, count, leaf_type)
    else:
        offs = np.zeros(count + 1, dtype=np.int64)
        np.cumsum(vl, out=offs[1:])
        keep = np.zeros(len(raw) + 1, dtype=np.int64)
        np.add.at(keep, vs, 1)
        np.add.at(keep, vs + vl, -1)
        data = raw[np.cumsum(keep)[: len(raw)] > 0]
        if len(data) != offs[-1]:
            raise w.corrupt("full-zip values overlap")
        offs, data = per_value_variable(w, fz.value_compression, offs, data)
        leaf = build_var(w, [(offs, data)], None, count, leaf_type)
    try:
        return unravel(layers, rep, defs, leaf, dtype, n)
    except LevelsError as e:
        raise w.corrupt(f"bad rep/def levels: {e}") from None
