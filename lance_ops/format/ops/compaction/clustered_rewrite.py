"""A clustered compaction task's rewrite: its live rows written in cluster-key order, with
memory bounded by one output file (an external sort by fragment groups; docs/FORMAT.md §18).

Every column is decoded once:

1. **keys**: the ``cluster_by`` columns of every live row, in fragment order, give the order
   (:func:`.clustering.cluster_order`) and each row's output position.
2. **groups**: the other columns (with stable row ids also ``_rowid`` and both version columns)
   are read a group of fragments at a time (about :data:`GROUP_ROWS` rows or
   :data:`GROUP_BYTES`), joined with their slice of the key columns and cut by the output file
   their rows go to (one take per group); when the task writes more than one file, each group's
   pieces go to a temporary Arrow IPC file (one record batch per output file, in the system's
   temporary directory, removed when the task ends), else they stay in memory.
3. **files**: each output file's pieces, read back from every group, are put in key order (one
   take) and written; its rows' ids and versions go into its fragment's sequences.

Memory: the key columns plus ~40 bytes per row for the order, one group, and one output file's
rows twice (its pieces and their ordered copy), whatever the task's size.
"""

import os
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.ops.compaction.clustering import cluster_order, stable_order
from lance_ops.format.ops.write import write_fragment_files
from lance_ops.format.read.scan import CREATED_AT, ROW_ID, UPDATED_AT, plan_scan, scan_fragment
from lance_ops.format.table import rowids
from lance_ops.format.table.fragment import FragmentMetadata
from lance_ops.format.table.manifest import Manifest

#: a group of fragments is cut by output file once it holds this many rows or bytes
GROUP_ROWS = 131_072
GROUP_BYTES = 16 << 20
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


@dataclass
class _Pieces:
    """Each output file's rows from every group so far: in memory (one output file) or in one
    temporary IPC file per group, a record batch per (group, output file)."""

    files: int
    spill_dir: str | None
    memory: list[list[pa.Table]] = field(default_factory=list)
    groups: list[tuple[str, dict[int, int]]] = field(default_factory=list)  # (path, file -> batch index)

    def add(self, table: pa.Table, cuts: np.ndarray) -> None:
        """A group's rows sorted by output file; ``cuts[j]:cuts[j + 1]`` go to file ``j``."""
        if self.spill_dir is None:
            if not self.memory:
                self.memory = [[] for _ in range(self.files)]
            for j in range(self.files):
                if cuts[j + 1] > cuts[j]:
                    self.memory[j].append(table.slice(int(cuts[j]), int(cuts[j + 1] - cuts[j])))
            return
        path = os.path.join(self.spill_dir, f"group-{len(self.groups)}.arrow")
        where: dict[int, int] = {}
        with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            for j in range(self.files):
                if cuts[j + 1] > cuts[j]:
                    where[j] = len(where)
                    writer.write_batch(table.slice(int(cuts[j]), int(cuts[j + 1] - cuts[j])).combine_chunks()
                                       .to_batches()[0])
        self.groups.append((path, where))

    def take(self, j: int, schema: pa.Schema) -> pa.Table:
        """File ``j``'s rows from every group, in group order (so in source order)."""
        if self.spill_dir is None:
            parts = self.memory[j] if self.memory else []
            if self.memory:
                self.memory[j] = []
            return pa.concat_tables(parts) if parts else schema.empty_table()
        batches = []
        for path, where in self.groups:
            if j in where:
                with pa.OSFile(path, "rb") as source:
                    batches.append(pa.ipc.open_file(source).get_batch(where[j]))
        return pa.Table.from_batches(batches, schema=schema)


def _read_keys(store: ObjectStore, manifest: Manifest, fragments: Sequence[FragmentMetadata],
               columns: Sequence[str]) -> pa.Table:
    """The ``columns`` of every live row of ``fragments``, in fragment order (a chunk per batch)."""
    plan = plan_scan(manifest.schema, list(columns), None, False, False)
    batches = [b for frag in fragments for b in scan_fragment(store, manifest, frag, plan)]
    schema = plan.out_schema
    return pa.Table.from_batches(batches, schema=schema)


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


def _ordered_files(pieces: _Pieces, order: np.ndarray, bounds: np.ndarray, schema: pa.Schema,
                   stable: bool, metas: list[tuple[bytes, bytes, bytes]]) -> Iterator[pa.RecordBatch]:
    """Every output file's rows in key order, batch by batch (data columns only); with stable
    row ids each file's encoded row ids and version sequences are appended to ``metas``."""
    data_names = [n for n in schema.names if n not in _META] if stable else schema.names
    for j in range(len(bounds) - 1):
        rows = pieces.take(j, schema)
        # the pieces hold the file's rows in source order; order[bounds[j]:bounds[j+1]] their
        # source positions in key order, so the k-th row written is the piece row of its rank
        src = order[bounds[j]: bounds[j + 1]]
        rank = np.empty(src.size, dtype=np.int64)
        rank[stable_order(src.view(np.uint64))] = np.arange(src.size, dtype=np.int64)
        out = rows.take(rank)
        del rows
        if stable:
            metas.append((rowids.encode_row_ids(out.column(ROW_ID).to_numpy()),
                          rowids.encode_versions(out.column(CREATED_AT).to_numpy()),
                          rowids.encode_versions(out.column(UPDATED_AT).to_numpy())))
            out = out.select(data_names)
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
    keys = _read_keys(store, manifest, fragments, columns)
    order = cluster_order(keys, columns, strategy)
    n = keys.num_rows
    bounds = file_bounds(n, file_rows)
    dest = np.empty(n, dtype=np.int64)  # output position of each source row
    dest[order] = np.arange(n, dtype=np.int64)
    all_names = names + (list(_META) if stable else [])
    rest = [c for c in all_names if c not in columns]
    files = len(bounds) - 1
    with tempfile.TemporaryDirectory(prefix="lance_ops-cluster-") if files > 1 else nullcontext() as spill:
        pieces = _Pieces(files, spill)
        schema = None
        file_of = np.repeat(np.arange(files, dtype=np.uint32), np.diff(bounds))  # output position -> file
        for start, group in _groups(store, manifest, fragments, rest, keys, all_names):
            schema = group.schema
            cuts = np.array([0, group.num_rows])
            if files > 1:
                which = file_of[dest[start: start + group.num_rows]]
                by_file = stable_order(which)
                group = group.take(by_file)
                cuts = np.concatenate(([0], np.cumsum(np.bincount(which.astype(np.intp), minlength=files))))
            pieces.add(group, cuts)
        del keys, dest
        metas: list[tuple[bytes, bytes, bytes]] = []
        if schema is None:
            return [], order
        frags = write_fragment_files(store, _ordered_files(pieces, order, bounds, schema, stable, metas),
                                     manifest.schema, version=file_version,
                                     max_rows_per_file=target_rows_per_fragment, file_rows=file_rows)
    if stable:
        frags = [f.with_changes(row_ids=ids, created_at_versions=c, last_updated_at_versions=u)
                 for f, (ids, c, u) in zip(frags, metas, strict=True)]
    return frags, order

