"""pylance's ``late_materialization`` scanner option: which projected columns a filtered scan
decodes only for the rows that pass its filter.

A filtered scan decodes the filter's columns (and the *early* columns) for every row, filters,
then takes the *late* columns at the passing rows' offsets, decoding only the pages holding
them.  The option means what it means in pylance (``lance.dataset.LanceDataset.scanner``):

- ``True``: every projected column the filter does not read is late;
- ``False``: none (every column is decoded for every row, then filtered);
- a list of column names: those columns are late (the filter's own columns stay early);
- ``None`` (the default): pylance's heuristic, which assumes a filter keeps ~0.1% of the rows:
  a column is early when its values have a fixed width under 10 bytes on local storage
  (under 1,000 bytes on object stores, where a read costs more than its bytes), or when it is a
  blob column (a scan returns blob descriptions); strings, lists, structs and wide values are late.
"""

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from lance_ops.format.errors import ArgumentTypeError, SchemaError
from lance_ops.format.file.blob_columns import is_blob_field

__all__ = ["LateMaterialization", "late_materialization_option", "late_columns"]

#: pylance's byte widths under which a column is read early (local disk / object store)
EARLY_WIDTH_LOCAL = 10
EARLY_WIDTH_CLOUD = 1000


@dataclass(frozen=True)
class LateMaterialization:
    """The checked option: ``mode`` is "auto" (the heuristic), "all", "none" or "columns"."""

    mode: str = "auto"
    columns: tuple[str, ...] = ()


AUTO = LateMaterialization()


def late_materialization_option(value: object, names: Sequence[str] = ()) -> LateMaterialization:
    """``late_materialization`` as given to ``to_table``/``to_batches``/``scanner``, checked.

    Raises:
        ArgumentTypeError: not None, a bool or a list of column names.
        SchemaError: a listed name that is not a column of the dataset (``names``).
    """
    if value is None:
        return AUTO
    if isinstance(value, bool):
        return LateMaterialization("all" if value else "none")
    if isinstance(value, str) or not isinstance(value, Sequence | set | frozenset):
        raise ArgumentTypeError(f"late_materialization must be a bool or a list of column names, "
                                f"got {type(value).__name__} {value!r}")
    cols = list(value)
    for c in cols:
        if not isinstance(c, str):
            raise ArgumentTypeError(f"late_materialization column names must be strings, got {c!r} in {cols}")
        if names and c not in names:
            raise SchemaError(f"late_materialization names {c!r}, which is not a column of the dataset {list(names)}")
    return LateMaterialization("columns", tuple(cols))


def _fixed_width(t: pa.DataType) -> float | None:
    """Bytes per value of a fixed-width type (None for strings, lists, structs, maps)."""
    if pa.types.is_dictionary(t):
        return None
    if pa.types.is_boolean(t):
        return 0.125
    if pa.types.is_fixed_size_list(t):
        inner = _fixed_width(t.value_type)
        return None if inner is None else inner * t.list_size
    if pa.types.is_fixed_size_binary(t) or pa.types.is_decimal(t):
        return t.byte_width
    try:
        return t.bit_width / 8
    except ValueError:
        return None


def is_early(field: pa.Field, cloud: bool) -> bool:
    """pylance's heuristic: narrow fixed-width values and blob descriptions are read early."""
    if is_blob_field(field):
        return True
    width = _fixed_width(field.type)
    return width is not None and width < (EARLY_WIDTH_CLOUD if cloud else EARLY_WIDTH_LOCAL)


def late_columns(
    option: LateMaterialization,
    projected: Sequence[pa.Field],
    filter_columns: Sequence[str],
    *,
    cloud: bool,
) -> tuple[str, ...]:
    """The projected data columns to take after the filter (never one the filter reads)."""
    if option.mode == "none":
        return ()
    used = set(filter_columns)
    out = []
    for f in projected:
        if f.name in used:
            continue
        if option.mode == "all" or (option.mode == "columns" and f.name in option.columns) or (
            option.mode == "auto" and not is_early(f, cloud)
        ):
            out.append(f.name)
    return tuple(out)
