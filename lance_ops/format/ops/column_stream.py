"""A fragment's new column values computed and placed at their physical rows a slice at a time.

``add_columns`` (SQL, UDF, ``merge``, casts) writes one more data file per fragment holding a
value for every physical row (null at deleted rows, as pylance's updater).  Reading a whole
fragment's live rows, computing the new columns for all of them and placing them at their
offsets held three copies of the fragment's columns at once (two fragments are written in
parallel): ~70 MB above pylance for 1M-row fragments (issue 35).  Here the live rows are read in
slices of :data:`STREAM_ROWS` (or exactly ``batch_size`` rows, when the caller asks for
batches: a UDF sees the batch sizes it saw before), computed, and handed to the writer as they
come; the file holds the same values.
"""

from collections.abc import Callable, Iterator, Sequence

import numpy as np
import pyarrow as pa

from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.read.scan import ROW_ADDR, plan_scan, scan_fragment
from lance_ops.format.table.fragment import FragmentMetadata
from lance_ops.format.table.manifest import Manifest

#: live rows read, computed and written at a time when the caller names no batch size
STREAM_ROWS = 1 << 18
#: page size of the new columns' files: the encoder holds a few times a page, two fragments at
#: a time; 2 MiB pages (256K 8-byte values) keep that near pylance's streaming writer
STREAM_PAGE_BYTES = 2 << 20
_LOW32 = np.uint64(0xFFFFFFFF)


def _live_slices(
    store: ObjectStore, manifest: Manifest, frag: FragmentMetadata, columns: Sequence[str], batch_size: int | None
) -> Iterator[tuple[pa.Table, np.ndarray | None]]:
    """Live rows of ``frag`` (``columns`` only) with their physical offsets (None: no deletions),
    in slices of ``batch_size`` rows exactly (the last may be shorter), else as the scan gives
    them (at most :data:`STREAM_ROWS`)."""
    asked = ROW_ADDR in columns  # a merge keyed on ``_rowaddr`` reads it as a column
    deleted = frag.deletion_file is not None
    with_addr = (deleted or not columns) and not asked  # empty projections carry their row count in it
    plan = plan_scan(manifest.schema, list(columns), None, False, with_addr)
    parts: list[pa.Table] = []
    offs: list[np.ndarray] = []
    have = 0
    for batch in scan_fragment(store, manifest, frag, plan, batch_size=batch_size or STREAM_ROWS):
        t = pa.Table.from_batches([batch], schema=plan.out_schema)
        off = (t.column(ROW_ADDR).to_numpy() & _LOW32).astype(np.int64) if deleted else None
        if with_addr:
            t = t.drop_columns([ROW_ADDR])
        if batch_size is None:
            if t.num_rows:
                yield t, off
            continue
        parts.append(t)
        offs.append(off if off is not None else np.empty(0, np.int64))
        have += t.num_rows
        while have >= batch_size:
            whole, every = pa.concat_tables(parts), np.concatenate(offs)
            yield whole.slice(0, batch_size), every[:batch_size] if deleted else None
            parts, offs = [whole.slice(batch_size)], [every[batch_size:]]
            have -= batch_size
    if batch_size is not None and have:
        yield pa.concat_tables(parts), np.concatenate(offs) if deleted else None


def _nulls(target: pa.Schema, n: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.nulls(n, f.type) for f in target], schema=target)


def physical_batches(
    store: ObjectStore,
    manifest: Manifest,
    frag: FragmentMetadata,
    columns: Sequence[str],
    compute: Callable[[pa.Table], pa.Table],
    target: pa.Schema,
    batch_size: int | None = None,
) -> Iterator[pa.RecordBatch]:
    """``compute`` of the live rows' ``columns``, cast to ``target``, one value per physical row
    of ``frag`` in order (null at deleted rows), streamed."""
    pos = 0  # physical rows emitted
    for live, off in _live_slices(store, manifest, frag, columns, batch_size):
        values = compute(live).cast(target)
        if off is None:
            pos += values.num_rows
        elif len(off):
            idx = np.full(int(off[-1]) + 1 - pos, -1, dtype=np.int64)
            idx[off - pos] = np.arange(len(off), dtype=np.int64)
            values = values.take(pa.array(idx, mask=idx < 0))
            pos = int(off[-1]) + 1
        yield from values.combine_chunks().to_batches()
    if pos < frag.physical_rows:
        yield _nulls(target, frag.physical_rows - pos)
