"""Optional compiled kernels for the hot loops of 2.1/2.2 pages (FSST, FastLanes, chunk walks).

``numba`` is a dependency of lance_ops, but nothing needs it to be correct: :func:`get` returns
the compiled module (:mod:`._jit`) or None when numba is missing, fails to load, or
``LANCE_OPS_NO_JIT=1`` is set; every caller then uses its NumPy path, which decodes the same
bytes to the same arrays (the test suite runs both).  numba is imported on the first page that
needs it, not with lance_ops.

Why compiled: FSST and FastLanes are per-code / per-bit loops that NumPy can only express as
several passes over page-sized temporaries; a 1M-string FSST page decodes in ~9 ms compiled
against ~39 ms with NumPy (and the kernels release the GIL, so prefetch threads decode in
parallel).
"""

import os
import threading
from types import ModuleType

import numpy as np

__all__ = ["get", "plan", "disabled"]

_lock = threading.Lock()
_state: dict[str, ModuleType | None] = {}
_PLANS: dict[int, tuple[np.ndarray, ...]] = {}
_FL_ORDER = np.array([0, 4, 2, 6, 1, 5, 3, 7])


def disabled() -> bool:
    """True when ``LANCE_OPS_NO_JIT`` is set to anything but ``""``/``"0"``."""
    return os.environ.get("LANCE_OPS_NO_JIT", "") not in ("", "0")


def get() -> ModuleType | None:
    """The compiled kernels, or None (numba missing or broken, or ``LANCE_OPS_NO_JIT=1``)."""
    if disabled():
        return None
    mod = _state.get("jit", 0)
    if mod != 0:
        return mod  # type: ignore[return-value]
    with _lock:
        if "jit" not in _state:
            try:
                from lance_ops.format.file.v21 import _jit

                _state["jit"] = _jit
            except Exception:  # numba absent or unusable here: the NumPy paths do the work
                _state["jit"] = None
    return _state["jit"]


def plan(t_bits: int) -> tuple[np.ndarray, ...]:
    """FastLanes unpacking plans for every width ``0..t_bits`` of ``t_bits``-bit words.

    Row ``r`` of every lane's bit stream (``width`` bits at bit ``r * width``) starts in word
    ``idx[width, r]`` at bit ``off[width, r]``; when it ``spill``\\ s into the next word, that
    word is shifted left by ``hshift[width, r]``.  Row ``r`` of lane ``l`` is value
    ``base[r] + l`` of the block.  ``masks[width]`` keeps the low ``width`` bits.
    """
    hit = _PLANS.get(t_bits)
    if hit is not None:
        return hit
    dt = np.dtype(f"<u{t_bits // 8}")
    r = np.arange(t_bits)
    widths = np.arange(t_bits + 1)[:, None]
    idx, off = np.divmod(r[None, :] * widths, t_bits)
    spill = (off + widths > t_bits) & (off > 0)
    hshift = np.where(spill, t_bits - off, 0)
    base = (_FL_ORDER[r // 8] * 16 + (r % 8) * 128).astype(np.int64)
    masks = np.array([(1 << int(w)) - 1 for w in range(t_bits + 1)], dtype=np.uint64).astype(dt)
    out = (idx.astype(np.int64), off.astype(dt), spill, hshift.astype(dt), base, masks)
    _PLANS[t_bits] = out
    return out
