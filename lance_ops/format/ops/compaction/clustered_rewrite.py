"""A clustered compaction task's rewrite: its live rows written in cluster-key order, holding
at most :data:`SPILL_ABOVE_BYTES` of rows in memory (an external sort by fragment groups
beyond that; docs/FORMAT.md §18).

Every column is decoded once:

1. **keys**: the ``cluster_by`` columns of every live row, in fragment order, give the order
   (:func:`.clustering.cluster_order`) and each row's output position.  With stable row ids
   ``_rowid`` and both version columns are kept as NumPy arrays (from the fragments' sequences,
   or read), gathered per output file into its sequences.
2. **groups**: the other columns are read a group of fragments at a time (about
   :data:`GROUP_ROWS` rows or :data:`GROUP_BYTES`) and joined with their slice of the key
   columns.  While the groups read so far fit :data:`SPILL_ABOVE_BYTES` they are held; beyond
   that (and when the task writes more than one file) every group is cut by the output file its
   rows go to (one take) and spilled to a temporary Arrow IPC file (one record batch per output
   file, in the system's temporary directory, removed when the task ends).
3. **files**: each output file's rows are gathered in key order (one take, from the held groups
   or from its spilled pieces) and written.

Memory: the key columns plus ~20 bytes per row for the order (~44 with stable row ids), and
the held rows (at most :data:`SPILL_ABOVE_BYTES`) or one group and one output file's rows
twice (its pieces and their ordered copy), however wide the rows are.
"""

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import pyarrow as pa

from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.ops.compaction.clustering import cluster_order, stable_order
from lance_ops.format.ops.compaction.small_fragments import ranged_meta
from lance_ops.format.ops.write import write_fragment_files
from lance_ops.format.read.scan import CREATED_AT, ROW_ID, UPDATED_AT, plan_scan, scan_fragment
from lance_ops.format.table import rowids
from lance_ops.format.table.fragment import FragmentMetadata
from lance_ops.format.table.manifest import Manifest

#: a group of fragments is cut by output file once it holds this many rows or bytes
GROUP_ROWS = 131_072
GROUP_BYTES = 16 << 20
#: a task holds its rows in memory up to this many bytes (Arrow), then spills them (external sort)
SPILL_ABOVE_BYTES = 64 << 20
#: rows per batch handed to the writer
WRITE_BATCH_ROWS = 65_536
_META = (ROW_ID, CREATED_AT, UPDATED_AT)


def file_bounds(rows: int, file_rows: Sequence[int]) -> np.ndarray:
    """Start of every output file and the end: files of ``file_rows`` rows in order (the last
    entry repeating, as :func:`.write.write_fragment_files` cuts them)."""
    bounds = [0]
    while bounds[-1] < rows:
        bounds.append(min(rows, bounds[-1] + int(file_rows[min(len(bounds) - 1, len(file_rows) - 1)])))
    return np.asarray(bounds, dtype=np.int64)


class _Spill:
    """Each output file's rows from every group, in one temporary IPC file per group (a record
    batch per output file it feeds); the directory is removed by :meth:`close`."""

    def __init__(self, files: int) -> None:
        self.files = files
        self.dir = tempfile.mkdtemp(prefix="lance_ops-cluster-")
        self.groups: list[tuple[str, dict[int, int]]] = []  # (path, file -> batch index)

    def add(self, group: pa.Table, start: int, file_of: np.ndarray, dest: np.ndarray) -> None:
        """A group of source rows ``[start, start + len)``, cut by the output file they go to
        (one take: rows grouped by file, in source order inside each)."""
        which = file_of[dest[start: start + group.num_rows]]
        group = group.take(stable_order(which))
        cuts = np.concatenate(([0], np.cumsum(np.bincount(which.astype(np.intp), minlength=self.files))))
        path = os.path.join(self.dir, f"group-{len(self.groups)}.arrow")
        where: dict[int, int] = {}
        with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, group.schema) as writer:
            for j in np.flatnonzero(np.diff(cuts)).tolist():
                where[j] = len(where)
                writer.write_batch(group.slice(int(cuts[j]), int(cuts[j + 1] - cuts[j])).combine_chunks()
                                   .to_batches()[0])
        self.groups.append((path, where))

    def rows(self, j: int, src: np.ndarray, schema: pa.Schema) -> pa.Table:
        """File ``j``'s rows in key order; ``src``: their source positions in key order."""
        batches = []
        for path, where in self.groups:
            if j in where:
                with pa.OSFile(path, "rb") as source:
                    batches.append(pa.ipc.open_file(source).get_batch(where[j]))
        # the pieces hold the file's rows in source order, so the k-th row written is the
        # piece row of src[k]'s rank
        rank = np.empty(src.size, dtype=np.int64)
        rank[stable_order(src.view(np.uint64))] = np.arange(src.size, dtype=np.int64)
        return pa.Table.from_batches(batches, schema=schema).combine_chunks().take(rank)

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def _read_keys(store: ObjectStore, manifest: Manifest, fragments: Sequence[FragmentMetadata],
               columns: Sequence[str]) -> pa.Table:
    """The ``columns`` of every live row of ``fragments``, in fragment order (a chunk per batch)."""
    plan = plan_scan(manifest.schema, list(columns), None, False, False)
    batches = [b for frag in fragments for b in scan_fragment(store, manifest, frag, plan)]
    schema = plan.out_schema
    return pa.Table.from_batches(batches, schema=schema)


def _meta_arrays(store: ObjectStore, manifest: Manifest, fragments: Sequence[FragmentMetadata]) -> list[np.ndarray]:
    """``_rowid`` and both version columns of every live row, in fragment order: from the
    sequences of a fragment that is one row-id range with single version runs and no deletions
    (:func:`.small_fragments.ranged_meta`), else from the scan's per-row columns."""
    parts: list[list[np.ndarray]] = [[], [], []]
    plan = None
    for frag in fragments:
        ranged = ranged_meta(frag, manifest.source)
        if ranged is not None:
            first, created, updated = ranged
            n = frag.physical_rows
            parts[0].append(np.arange(first, first + n, dtype=np.uint64))
            parts[1].append(np.full(n, created, dtype=np.uint64))
            parts[2].append(np.full(n, updated, dtype=np.uint64))
            continue
        plan = plan or plan_scan(manifest.schema, list(_META), None, False, False)
        for b in scan_fragment(store, manifest, frag, plan):
            for i, c in enumerate(_META):
                parts[i].append(b.column(c).to_numpy())
    return [np.concatenate(p) if p else np.zeros(0, dtype=np.uint64) for p in parts]


def _groups(store: ObjectStore, manifest: Manifest, fragments: Sequence[FragmentMetadata], rest: list[str],
            keys: pa.Table, names: list[str]) -> Iterator[tuple[int, pa.Table]]:
    """(first row, rows) of consecutive groups of live rows with columns ``names`` (in order):
    ``rest`` read from the fragments, the key columns sliced from ``keys``."""
    n = keys.num_rows
    if not rest:
        for start in range(0, n, GROUP_ROWS):
            yield start, keys.slice(start, GROUP_ROWS).select(names)
        return
    plan = plan_scan(manifest.schema, rest, None, False, False)
    pending: list[pa.RecordBatch] = []
    start = have = size = 0

    def joined() -> pa.Table:
        part = pa.Table.from_batches(pending, schema=plan.out_schema)
        cols = {c: part.column(c) for c in rest}
        for c in keys.column_names:
            cols[c] = keys.column(c).slice(start, have)
        return pa.table({c: cols[c] for c in names})

    for frag in fragments:
        for b in scan_fragment(store, manifest, frag, plan):
            pending.append(b)
            have += b.num_rows
            size += b.nbytes
            if have >= GROUP_ROWS or size >= GROUP_BYTES:
                yield start, joined()
                start, pending, have, size = start + have, [], 0, 0
    if have:
        yield start, joined()


def _combined(held: list[pa.Table], schema: pa.Schema) -> pa.Table:
    """The held groups as one chunk per column (a take across chunks costs up to twice as much),
    each column's chunks released as soon as it is joined: memory grows by one column."""
    chunks = {c: [ch for g in held for ch in g.column(c).chunks] for c in schema.names}
    held.clear()
    return pa.Table.from_arrays([pa.concat_arrays(chunks.pop(c)) for c in schema.names], schema=schema)


def _ordered_files(rows: Callable[[int, np.ndarray], pa.Table], order: np.ndarray, bounds: np.ndarray,
                   meta: list[np.ndarray] | None, metas: list[tuple[bytes, bytes, bytes]]) -> Iterator[pa.RecordBatch]:
    """Every output file's rows in key order (``rows(j, src)``: file ``j``'s rows, ``src`` their
    source positions in key order), batch by batch; with stable row ids (``meta``: the ids and
    both versions of every source row) each file's encoded row ids and version sequences are
    appended to ``metas``."""
    for j in range(len(bounds) - 1):
        src = order[bounds[j]: bounds[j + 1]]
        out = rows(j, src)
        if meta is not None:
            ids, created, updated = (m[src] for m in meta)
            metas.append((rowids.encode_row_ids(ids), rowids.encode_versions(created),
                          rowids.encode_versions(updated)))
        yield from out.to_batches(max_chunksize=WRITE_BATCH_ROWS)


def rewrite_clustered(
    store: ObjectStore,
    manifest: Manifest,
    fragments: Sequence[FragmentMetadata],
    *,
    columns: Sequence[str],
    strategy: str,
    file_version: str,
    target_rows_per_fragment: int,
    file_rows: Sequence[int],
) -> tuple[list[FragmentMetadata], np.ndarray]:
    """Write the live rows of ``fragments`` ordered by ``columns`` into new fragments (ids 0
    until commit); returns them and the order (``order[j]`` = position, in fragment order, of
    the row written at position ``j``; the index remap follows rows through it).

    With stable row ids each new fragment carries its rows' ids (one array segment) and both
    version sequences, permuted with the rows.  Memory: see the module docstring.
    """
    stable = manifest.uses_stable_row_ids
    names = [f.name for f in manifest.schema.top_level()]
    keys = _read_keys(store, manifest, fragments, list(columns))
    # row ids and versions stay in memory as NumPy (24 bytes a row), gathered per output file
    meta = _meta_arrays(store, manifest, fragments) if stable else None
    order = cluster_order(keys, columns, strategy)
    n = keys.num_rows
    bounds = file_bounds(n, file_rows)
    dest = np.empty(n, dtype=np.int64)  # output position of each source row
    dest[order] = np.arange(n, dtype=np.int64)
    rest = [c for c in names if c not in columns]
    files = len(bounds) - 1
    file_of = np.repeat(np.arange(files, dtype=np.uint32), np.diff(bounds))  # output position -> file
    held: list[pa.Table] = []  # groups in source order while they fit SPILL_ABOVE_BYTES
    held_bytes = 0
    spill: _Spill | None = None
    schema = None
    try:
        for start, group in _groups(store, manifest, fragments, rest, keys, names):
            schema = group.schema
            if spill is not None:
                spill.add(group, start, file_of, dest)
                continue
            held.append(group)
            held_bytes += group.nbytes
            if files > 1 and held_bytes > SPILL_ABOVE_BYTES:  # from here on: an external sort
                spill, at = _Spill(files), 0
                for g in held:
                    spill.add(g, at, file_of, dest)
                    at += g.num_rows
                held = []
        del keys, dest, file_of
        if schema is None:
            return [], order
        if spill is None:
            source = _combined(held, schema)
            del held
            rows = lambda _j, src: source.take(src)  # noqa: E731
        else:
            rows = lambda j, src: spill.rows(j, src, schema)  # noqa: E731
        metas: list[tuple[bytes, bytes, bytes]] = []
        frags = write_fragment_files(store, _ordered_files(rows, order, bounds, meta, metas),
                                     manifest.schema, version=file_version,
                                     max_rows_per_file=target_rows_per_fragment, file_rows=file_rows)
    finally:
        if spill is not None:
            spill.close()
    if stable:
        frags = [f.with_changes(row_ids=ids, created_at_versions=c, last_updated_at_versions=u)
                 for f, (ids, c, u) in zip(frags, metas, strict=True)]
    return frags, order

