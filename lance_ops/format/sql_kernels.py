"""Arrow compute kernels for the SQL list functions pyarrow lacks, registered as scalar UDFs.

pylance (DataFusion) accepts ``array_has_any(tags, ['a', 'b'])``, ``array_has_all``,
``array_has`` / ``array_contains`` and 1-based list indexing ``xs[1]`` (null when out of range).
``pyarrow.compute`` has no such kernels, so each is a whole-array NumPy function registered
once per (function, input types) under a derived name; the SQL translator calls it as any
other compute function, so a filter using one still runs inside the scan's Acero plan.
"""

import hashlib
import threading
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["list_kernel", "nan_rank_kernel"]

_LOCK = threading.Lock()
_REGISTERED: dict[str, str] = {}


def _as_list(arr: pa.Array) -> pa.Array:
    """A fixed-size or large list as a plain list array (same values, offsets to walk)."""
    if pa.types.is_fixed_size_list(arr.type) or pa.types.is_large_list(arr.type):
        return arr.cast(pa.list_(arr.type.value_field))
    return arr


def _needles(scalar: pa.Scalar) -> pa.Array:
    """The distinct non-null values of a list scalar."""
    vals = scalar.values
    if vals is None:
        return pa.array([], scalar.type.value_type)
    return pc.unique(vals.drop_null())


def _hits_per_row(lists: pa.Array, needles: pa.Array) -> np.ndarray:
    """How many distinct needles each row's list holds."""
    lists = _as_list(lists)
    flat = pc.list_flatten(lists)
    parents = pc.list_parent_indices(lists).to_numpy(zero_copy_only=False)
    found = pc.index_in(flat, value_set=needles.cast(flat.type)) if len(needles) else pa.nulls(len(flat), pa.int32())
    mask = found.is_valid().to_numpy(zero_copy_only=False)
    if not mask.any():
        return np.zeros(len(lists), dtype=np.int64)
    idx = pc.fill_null(found, 0).to_numpy(zero_copy_only=False).astype(np.int64)
    pairs = np.unique(parents[mask].astype(np.int64) * len(needles) + idx[mask])
    return np.bincount(pairs // len(needles), minlength=len(lists))


def _with_nulls(values: np.ndarray, lists: pa.Array) -> pa.Array:
    return pa.array(values, mask=lists.is_null().to_numpy(zero_copy_only=False))


def _has_any(ctx: object, lists: pa.Array, needles: pa.Scalar) -> pa.Array:
    return _with_nulls(_hits_per_row(lists, _needles(needles)) > 0, lists)


def _has_all(ctx: object, lists: pa.Array, needles: pa.Scalar) -> pa.Array:
    want = _needles(needles)
    return _with_nulls(_hits_per_row(lists, want) >= len(want), lists)


def _list_get(ctx: object, lists: pa.Array, index: pa.Scalar) -> pa.Array:
    """Element ``index`` (1-based, DataFusion's) of each list; null when out of range."""
    lists = _as_list(lists)
    i = index.as_py()
    lengths = pc.fill_null(pc.list_value_length(lists), 0).to_numpy(zero_copy_only=False)
    starts = lists.offsets.to_numpy(zero_copy_only=False)[:-1]
    pos = starts + (i - 1 if i > 0 else lengths + i)
    ok = (lengths >= abs(i)) & (i != 0) & ~lists.is_null().to_numpy(zero_copy_only=False)
    return pc.take(lists.values, pa.array(np.where(ok, pos, 0), mask=~ok))


_KERNELS: dict[str, tuple[Callable[..., pa.Array], Callable[[pa.DataType], pa.DataType]]] = {
    "array_has_any": (_has_any, lambda t: pa.bool_()),
    "array_has_all": (_has_all, lambda t: pa.bool_()),
    "list_get": (_list_get, lambda t: t.value_type),
}


def list_kernel(name: str, list_type: pa.DataType, arg_type: pa.DataType) -> str:
    """The compute-function name of kernel ``name`` for these input types (registered on first use)."""
    key = f"{name}|{list_type}|{arg_type}"
    with _LOCK:
        fn_name = _REGISTERED.get(key)
        if fn_name is None:
            fn, out = _KERNELS[name]
            fn_name = f"lance_ops_{name}_{hashlib.sha1(key.encode()).hexdigest()[:12]}"
            try:
                pc.register_scalar_function(
                    fn, fn_name, {"summary": f"lance_ops SQL {name}", "description": key},
                    {"list": list_type, "arg": arg_type}, out(list_type))
            except pa.ArrowKeyError:  # registered by an earlier import of this module
                pass
            _REGISTERED[key] = fn_name
    return fn_name


def _nan_rank(ctx: object, x: pa.Array | pa.Scalar) -> pa.Array | pa.Scalar:
    """1 for a NaN with the sign bit clear, -1 for one with it set, 0 for a number: where IEEE
    754 ``totalOrder`` (DataFusion's float order) puts it against every number."""
    if isinstance(x, pa.Scalar):
        v = x.as_py()
        r = None if v is None else (0 if v == v else (-1 if np.signbit(v) else 1))
        return pa.scalar(r, pa.int8())
    vals = x.to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
    nan = np.isnan(vals)
    rank = np.where(nan, np.where(np.signbit(vals), -1, 1), 0).astype(np.int8)
    return pa.array(rank, mask=x.is_null().to_numpy(zero_copy_only=False))


def nan_rank_kernel(float_type: pa.DataType) -> str:
    """The compute-function name of the NaN rank of a float type (registered on first use)."""
    key = f"nan_rank|{float_type}"
    with _LOCK:
        fn_name = _REGISTERED.get(key)
        if fn_name is None:
            fn_name = f"lance_ops_nan_rank_{hashlib.sha1(key.encode()).hexdigest()[:12]}"
            try:
                pc.register_scalar_function(_nan_rank, fn_name, {"summary": "lance_ops NaN rank", "description": key},
                                            {"x": float_type}, pa.int8())
            except pa.ArrowKeyError:
                pass
            _REGISTERED[key] = fn_name
    return fn_name
