"""The rows a delete removes, found from the predicate's columns alone (local datasets).

A fragment's predicate columns are read for its physical rows (deleted ones included) without
any metadata column: the predicate becomes one boolean mask per group of fragments (one Acero
projection for up to :data:`GROUP_ROWS` rows), cut at the fragments' row counts and and-ed with
each fragment's live rows; the local offsets are the mask's set positions.  No ``_rowaddr`` is
built, nothing but the predicate's columns is decoded and no rows are filtered or copied.
"""

from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.acero as acero
import pyarrow.compute as pc

from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.read.blob_payloads import has_blob_columns
from lance_ops.format.read.scan import META_COLUMNS, fragment_data, named_fragment, plan_scan
from lance_ops.format.table.deletion import read_deletion_file
from lance_ops.format.table.fragment import FragmentMetadata
from lance_ops.format.table.manifest import Manifest

#: rows (or bytes of the predicate's columns) one mask evaluation covers
GROUP_ROWS = 1 << 18
GROUP_BYTES = 8 << 20
_MASK = "__lance_ops_delete_mask"


def predicate_columns(manifest: Manifest, predicate: pc.Expression) -> list[str] | None:
    """The data columns ``predicate`` reads, or None when this path does not apply (a
    metadata column such as ``_rowid`` or a blob column in the predicate)."""
    probe = plan_scan(manifest.schema, [], predicate, False, False)
    names = list(probe.filter_columns)
    if not names or any(n in META_COLUMNS for n in names) or has_blob_columns(manifest, names):
        return None
    return names


def matching_offsets(
    store: ObjectStore, manifest: Manifest, predicate: pc.Expression, names: Sequence[str]
) -> Iterator[tuple[int, np.ndarray]]:
    """``(fragment id, sorted uint32 local offsets)`` of the live rows matching ``predicate``,
    in the manifest's fragment order (fragments without a match left out)."""
    group: list[tuple[FragmentMetadata, list[pa.RecordBatch]]] = []
    rows = size = 0
    for frag in manifest.fragments:
        batches = [
            pa.RecordBatch.from_arrays(b.columns, names=list(names))  # by position: old names after a rename
            for b in fragment_data(store, manifest, frag, names, GROUP_ROWS)
        ]
        group.append((frag, batches))
        rows += frag.physical_rows
        size += sum(b.nbytes for b in batches)
        if rows >= GROUP_ROWS or size >= GROUP_BYTES:
            yield from _group_offsets(store, manifest, group, predicate)
            group, rows, size = [], 0, 0
    if group:
        yield from _group_offsets(store, manifest, group, predicate)


def _group_offsets(
    store: ObjectStore,
    manifest: Manifest,
    group: list[tuple[FragmentMetadata, list[pa.RecordBatch]]],
    predicate: pc.Expression,
) -> Iterator[tuple[int, np.ndarray]]:
    batches = [b for _, bs in group for b in bs if b.num_rows]
    if not batches:
        return
    mask = _mask(pa.Table.from_batches(batches), predicate)
    start = 0
    for frag, _ in group:
        stop = start + frag.physical_rows
        hit = mask[start:stop]
        start = stop
        if frag.deletion_file is not None and hit.any():
            with named_fragment(manifest, frag):
                deleted = read_deletion_file(store, frag.id, frag.deletion_file.to_proto(),
                                             physical_rows=frag.physical_rows, bases=manifest.bases)
            hit = hit.copy()
            hit[deleted] = False
        offsets = np.flatnonzero(hit)
        if offsets.size:
            yield frag.id, offsets.astype(np.uint32)


def _mask(table: pa.Table, predicate: pc.Expression) -> np.ndarray:
    """``predicate`` over ``table`` as a NumPy bool array (null: False), on the calling thread."""
    out = acero.Declaration.from_sequence([
        acero.Declaration("table_source", acero.TableSourceNodeOptions(table)),
        acero.Declaration("project", acero.ProjectNodeOptions([predicate], [_MASK])),
    ]).to_table(use_threads=False).column(0)
    if out.null_count:
        out = pc.fill_null(out, False)
    return out.combine_chunks().to_numpy(zero_copy_only=False) if out.num_chunks != 1 else \
        out.chunk(0).to_numpy(zero_copy_only=False)
