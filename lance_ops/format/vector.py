"""Vector table helpers with pylance's names (``lance.vector.vec_to_table``)."""

from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any

import numpy as np
import pyarrow as pa

from lance_ops.format.errors import ArgumentTypeError, InvalidArgumentError

__all__ = ["IndexFileVersion", "validate_vector_index", "vec_to_table"]


def _vectors(values: Any, ndim: int | None, check_ndim: bool) -> pa.FixedSizeListArray:
    """Rows of equal length as a ``fixed_size_list<float32>[ndim]`` array (one NumPy copy)."""
    mat = np.asarray(values, dtype=np.float32) if not check_ndim else None
    if check_ndim:
        lengths = {len(v) for v in values}
        if ndim is not None:
            lengths.add(ndim)
        if len(lengths) > 1:
            raise InvalidArgumentError(f"vec_to_table: vectors of different lengths {sorted(lengths)}")
        mat = np.asarray(values, dtype=np.float32)
    width = ndim if ndim is not None else (mat.shape[1] if mat.ndim == 2 else len(next(iter(values))))
    return pa.FixedSizeListArray.from_arrays(pa.array(mat.ravel(), pa.float32()), list_size=width)


def vec_to_table(
    data: Mapping[str, Any] | Sequence[Any] | np.ndarray,
    names: str | Sequence[str] | None = None,
    ndim: int | None = None,
    check_ndim: bool = True,
) -> pa.Table:
    """A table of float32 fixed-size-list vectors, as pylance's ``vec_to_table``: a dict gives
    columns ``id`` (its keys) and ``vector``; a list or 2-D array gives one ``vector`` column
    (``names`` renames them).

    Raises:
        InvalidArgumentError: vectors of different lengths (``check_ndim``), bad ``names``.
        ArgumentTypeError: ``data`` is not a dict, list or ndarray.
    """
    if isinstance(data, Mapping):
        cols = list(names) if names is not None else ["id", "vector"]
        if len(cols) != 2:
            raise InvalidArgumentError("vec_to_table: for a dict, names must be 2 strings (id, vector)")
        return pa.Table.from_arrays([pa.array(list(data.keys())), _vectors(list(data.values()), ndim, check_ndim)],
                                    names=cols)
    if isinstance(data, list | np.ndarray):
        cols = [names] if isinstance(names, str) else list(names or ["vector"])
        if len(cols) != 1:
            raise InvalidArgumentError(f"vec_to_table: names cannot be more than 1, got {len(cols)}")
        return pa.Table.from_arrays([_vectors(data, ndim, check_ndim)], names=cols)
    raise ArgumentTypeError(f"vec_to_table: data must be a dict, list or ndarray, got {type(data).__name__}")


class IndexFileVersion(StrEnum):
    """pylance's ``lance.indices.IndexFileVersion``: the index file layout (lance_ops writes V3)."""

    LEGACY = "Legacy"
    V3 = "V3"


def validate_vector_index(
    dataset: Any, column: str, refine_factor: int = 5, sample_size: int | None = None, pass_threshold: float = 1.0
) -> None:
    """pylance's ``lance.util.validate_vector_index``: search each (sampled) vector of ``column``
    for its nearest row, and refuse when fewer than ``pass_threshold`` of them find themselves at
    distance 0 (vectors holding a NaN are not counted).

    Raises:
        InvalidArgumentError: the check failed (a ``ValueError``, as pylance's).
    """
    data = dataset.to_table() if sample_size is None else dataset.sample(sample_size)
    vecs = data[column].to_numpy(zero_copy_only=False)
    passes, total = 0, len(vecs)
    for vec in vecs:
        if np.isnan(vec).any():
            total -= 1
            continue
        spec = {"column": column, "q": vec, "k": 1, "nprobes": 1, "refine_factor": refine_factor}
        distance = dataset.to_table(nearest=spec)["_distance"].to_pylist()[0]
        passes += 1 if abs(distance) < 1e-6 else 0
    if total and passes / total < pass_threshold:
        raise InvalidArgumentError(f"Vector index failed sanity check, only {passes}/{total} passed")
