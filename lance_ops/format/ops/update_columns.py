"""pylance's ``LanceFragment.update_columns``: new values of existing columns of one fragment by a
left join on a key (``_rowid`` by default), written as one more data file; the fragment's older
files keep their bytes, the updated fields' ids in them becoming ``-2`` (a tombstone, as
pylance writes them).  Committed with ``LanceOperation.Update(updated_fragments=...,
fields_modified=...)``; nothing is committed here.
"""

import dataclasses

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_ops.format.errors import SchemaEvolutionError
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.ops.schema_evolution import read_live
from lance_ops.format.ops.write import write_fragment_files
from lance_ops.format.read.scan import META_COLUMNS
from lance_ops.format.schema import rust_type_name
from lance_ops.format.table.fragment import FragmentMetadata
from lance_ops.format.table.manifest import Manifest

#: the field id pylance writes in place of a field whose values moved to a newer data file
TOMBSTONE = -2


def plan_update_columns(
    store: ObjectStore, manifest: Manifest, frag: FragmentMetadata, right: pa.Table, left_on: str, right_on: str
) -> tuple[FragmentMetadata, list[int]]:
    """The fragment with the columns of ``right`` (but ``right_on``) updated where its
    ``right_on`` equals the row's ``left_on`` (the last such row), unchanged elsewhere.

    Returns:
        the new fragment metadata and the ids of the fields modified (those the new file lists).

    Raises:
        SchemaEvolutionError: a key missing on either side or of another type, a column the
            fragment lacks, a metadata column (pylance's messages).
    """
    names = [f.name for f in manifest.schema.top_level()]
    updated = [n for n in right.column_names if n != right_on]
    for n in updated:
        if n in META_COLUMNS:
            raise SchemaEvolutionError(f"Invalid user input: Column {n} is a reserved metadata column and cannot "
                                       "be updated")
        if n not in names:
            raise SchemaEvolutionError(f"Invalid user input: Column {n} in right side fragment does not exist in "
                                       "left side fragment")
    if left_on not in names and left_on not in META_COLUMNS:
        raise SchemaEvolutionError(f"Invalid user input: Column {left_on} does not exist in the left side fragment")
    if right_on not in right.column_names:
        raise SchemaEvolutionError(f"Invalid user input: Column {right_on} does not exist in the right side data")
    live, offsets = read_live(store, manifest, frag, [left_on, *updated], None)
    left_type, right_type = live.schema.field(left_on).type, right.schema.field(right_on).type
    if left_type != right_type:
        raise SchemaEvolutionError(f"Invalid user input: Index column type mismatch: expected "
                                   f"{rust_type_name(right_type)}, got {rust_type_name(left_type)}")
    sub = manifest.schema.project(updated)
    target = sub.to_arrow()
    flipped = right.column(right_on).combine_chunks()[::-1]  # the first match in it is the last one
    pos = pc.index_in(live.column(left_on), value_set=flipped, skip_nulls=False)
    take = pc.subtract(len(flipped) - 1, pos)
    matched = pc.is_valid(pos)
    values = right.select(updated).cast(target)
    columns = [pc.if_else(matched, values.column(n).take(take), live.column(n)) for n in updated]
    full = _at_physical_rows(pa.Table.from_arrays(columns, schema=target), offsets, frag.physical_rows)
    new = write_fragment_files(store, iter(full.combine_chunks().to_batches()), sub,
                               version=manifest.data_storage_version, max_rows_per_file=max(frag.physical_rows, 1),
                               background=False)
    moved = {f.id for f in sub.fields}
    files = [dataclasses.replace(df, fields=tuple(TOMBSTONE if fid in moved else fid for fid in df.fields))
             for df in frag.files]
    # the ids the new file lists (every field at 2.0, leaves at 2.1+), as pylance's
    return frag.with_changes(files=(*files, new[0].files[0])), list(new[0].files[0].fields)


def _at_physical_rows(values: pa.Table, offsets: np.ndarray | None, physical_rows: int) -> pa.Table:
    """One value per physical row: the live rows' at their offsets, the first live row's at a
    deleted row (never read; a null could not be stored in a 2.0 struct or a non-nullable column)."""
    if offsets is None:
        return values
    idx = np.zeros(physical_rows, dtype=np.int64)
    idx[offsets] = np.arange(len(offsets), dtype=np.int64)
    return values.take(pa.array(idx))
