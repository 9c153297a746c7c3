"""Rewriting index files after a compaction moved rows (datasets without stable row ids).

Design note -- why remap the index files instead of recording a fragment reuse index:
pylance can defer the remap (``compact_files(defer_index_remap=True)``): the manifest then
keeps every index as it was and gains the system index ``__lance_frag_reuse``, which maps old
row addresses to new ones at query time.  lance_ops could write that index cheaply, but
pylance 14.0.2 does not read it correctly across its own later operations: after a deferred
compaction, an append, a delete and pylance's own ``compact_files`` (which then remaps), BTREE,
NGRAM and INVERTED answer wrongly (e.g. ``id = 123`` finds 0 of 1 rows), even after
``optimize_indices``.  Remapped index files (what pylance's default ``compact_files`` writes)
stay right through append, delete, ``optimize_indices``, ``compact_files`` and
``cleanup_old_versions``.  So lance_ops remaps: a new ``_indices/<new uuid>/`` directory whose
files are the old ones with every moved row's address replaced, recorded in the Rewrite's
``rewritten_indices`` as pylance records its remaps.

What each kind stores and what is rewritten (files are Lance files; lance_ops reads and writes
them with the data file reader/writer, keeping schema, metadata and global buffers):

========================  ==========================================  =========================
kind                      row addresses live in                       deleted rows
========================  ==========================================  =========================
BTREE                     ``page_data.lance`` column ``ids``          dropped (pages re-cut)
BITMAP                    ``bitmap_page_lookup.lance`` ``bitmaps``     dropped
LABEL_LIST                same, plus the null-rows global buffer      dropped
NGRAM                     ``ngram_postings.lance`` ``posting_list``    dropped
INVERTED                  ``part_<p>_docs.lance`` column ``_rowid``    kept (tombstone)
IVF_* (incl. HNSW)        ``auxiliary.idx`` column ``_rowid``          kept (tombstone)
ZONEMAP, BLOOMFILTER      not remapped: pylance 14 drops their coverage of rewritten fragments
========================  ==========================================  =========================

Which indices are remapped is decided by (kind, ``index_version``, row-id mode) in
:mod:`.handling`: with stable row ids only pylance 14's BTREE (``index_version`` 1) holds row
addresses; lancedb's BTREE (version 0) and the other kinds hold row ids, which a compaction
keeps.

BTREE pages are re-cut: page ``i`` of ``page_data.lance`` is rows ``[i*batch_size,
(i+1)*batch_size)`` (``batch_size`` from the lookup file's metadata), so after dropping rows
the pages and their lookup rows (first value, last value, null count -- nulls sort first, as
pylance writes them) are rebuilt.  Dropping a row from an inverted index's documents or an HNSW
graph would mean renumbering postings (and their BM25 statistics) or rebuilding the graph, as
pylance does.  Instead those rows keep their old address, which names a fragment that no
longer exists; the remapped index keeps that fragment id in its bitmap, and pylance then masks
every address of it -- exactly its state after a delete that removed a whole fragment, which
pylance handles routinely (its deletion mask blocks "missing" fragments of an index's bitmap).
``optimize_indices`` later rewrites the index without them.

If pylance deferred earlier remaps to its fragment reuse index, an index's files may still hold
the addresses those rewrites moved: :class:`~.rowaddr.AddressMap` maps through the reuse
index's versions first (:mod:`.reuse`), then through this compaction.
"""

import json
import os
import shutil
import uuid as uuidlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lance_ops.format.errors import CorruptFileError, UnsupportedFeatureError
from lance_ops.format.file.patch import replace_columns
from lance_ops.format.file.reader import DataFileReader
from lance_ops.format.file.writer import DataFileWriter
from lance_ops.format.index.handling import TOMBSTONE_KINDS, IndexAction, handling
from lance_ops.format.index.metadata import INDICES_DIR, IndexFile, IndexMetadata
from lance_ops.format.index.rowaddr import (
    AddressMap,
    decode_row_addr_treemap,
    decode_treemap,
    encode_row_addr_treemap,
    encode_treemap,
)
from lance_ops.format.io.object_store import ObjectStore

_FILE_VERSIONS = {(2, 0): "2.0", (2, 1): "2.1", (2, 2): "2.2"}
_BATCH = 65536


@dataclass(frozen=True)
class RemappedIndex:
    """A remapped copy of one index (pylance's ``RewrittenIndex`` plus the new segment)."""

    old: IndexMetadata
    new_uuid: str
    files: tuple[IndexFile, ...]
    keeps_tombstones: bool


def index_file_names(store: ObjectStore, index: IndexMetadata) -> list[str]:
    """The files of an index directory (from the metadata, else by listing)."""
    if index.files:
        return [f.path for f in index.files]
    return sorted(store.list_dir(index.directory))


class _Rewriter:
    """Writes ``_indices/<new uuid>/`` file by file; removes it all if anything fails."""

    def __init__(self, store: ObjectStore, old: IndexMetadata, new_uuid: str) -> None:
        self.store = store
        self.old = old
        self.dir = f"{INDICES_DIR}/{new_uuid}"
        self.files: list[IndexFile] = []

    def reader(self, name: str) -> DataFileReader:
        size = next((f.size_bytes for f in self.old.files or () if f.path == name), None)
        return DataFileReader(self.store, f"{self.old.directory}/{name}", file_size=size)

    def copy(self, name: str) -> None:
        src, dst = f"{self.old.directory}/{name}", f"{self.dir}/{name}"
        if self.store.is_local:
            os.makedirs(self.store.full_path(self.dir), exist_ok=True)
            shutil.copyfile(self.store.full_path(src), self.store.full_path(dst))
        else:
            self.store.copy(src, dst)
        self.files.append(IndexFile(name, self.store.size(dst)))

    def patch(
        self,
        name: str,
        column: str,
        fn: Callable[[pa.Array], pa.Array],
        *,
        global_buffers: dict[int, bytes] | None = None,
    ) -> None:
        """Copy Lance file ``name`` with ``column`` replaced by ``fn(column)`` (other columns'
        bytes copied as they are, see :mod:`lance_ops.format.file.patch`)."""
        size = next((f.size_bytes for f in self.old.files or () if f.path == name), None)
        src = f"{self.old.directory}/{name}"
        r = self.reader(name)
        if column not in r.schema.to_arrow().names:
            raise CorruptFileError(r.path, f"index file has no column {column!r}")
        new = replace_columns(self.store, src, f"{self.dir}/{name}", {column: fn},
                              global_buffers=global_buffers, file_size=size)
        self.files.append(IndexFile(name, new))

    def discard(self) -> None:
        """Remove everything written so far (a file half written when the failure came too)."""
        for rel, _size, _mtime in list(self.store.list_files(self.dir)):
            self.store.delete(rel)
        if self.store.is_local:
            shutil.rmtree(self.store.full_path(self.dir), ignore_errors=True)


def _map_u64(amap: AddressMap, where: str) -> Callable[[pa.Array], pa.Array]:
    def fn(col: pa.Array) -> pa.Array:
        if col.null_count:
            raise CorruptFileError(where, "the row-address column has nulls")
        return pa.array(amap.apply(col.to_numpy(zero_copy_only=False)), type=col.type)

    return fn


def _map_binary(recode: Callable[[bytes], bytes]) -> Callable[[pa.Array], pa.Array]:
    """One value per distinct key (a bitmap, a posting list): decoded, mapped, encoded."""

    def fn(col: pa.Array) -> pa.Array:
        return pa.array([None if v is None else recode(v) for v in col.to_pylist()], type=col.type)

    return fn


def _remap_row_addr_set(amap: AddressMap, where: str) -> Callable[[bytes], bytes]:
    return lambda b: encode_row_addr_treemap(amap.apply_set(decode_row_addr_treemap(b, where)))


def _remap_treemap(amap: AddressMap, where: str) -> Callable[[bytes], bytes]:
    return lambda b: encode_treemap(amap.apply_dropping(decode_treemap(b, where)))


def _files_except(names: list[str], *done: str) -> Iterator[str]:
    return (n for n in names if n not in done)


def _remap_btree(rw: _Rewriter, names: list[str], amap: AddressMap) -> None:
    data, lookup = "page_data.lance", "page_lookup.lance"
    lr = rw.reader(lookup)
    meta = lr.schema.metadata or {}
    try:
        page = int(meta.get("batch_size", "4096"))
    except ValueError as e:
        raise CorruptFileError(lr.path, f"bad batch_size metadata: {e}") from e
    if page <= 0:
        raise CorruptFileError(lr.path, f"batch_size {page} is not positive")
    dr = rw.reader(data)
    if dr.schema.to_arrow().names != ["values", "ids"]:
        raise CorruptFileError(dr.path, f"unexpected BTREE page columns {dr.schema.to_arrow().names}")
    lookup_arrow = lr.schema.to_arrow()
    stats: dict[str, list] = {"min": [], "max": [], "null_count": [], "page_idx": []}

    def pages() -> Iterator[pa.RecordBatch]:
        pending: list[pa.RecordBatch] = []
        held = 0

        def emit(t: pa.Table) -> pa.RecordBatch:
            b = t.combine_chunks().to_batches()[0] if t.num_rows else None
            assert b is not None
            vals = b.column(0)
            stats["min"].append(vals[0])
            stats["max"].append(vals[len(vals) - 1])
            stats["null_count"].append(vals.null_count)
            stats["page_idx"].append(len(stats["page_idx"]))
            return b

        for batch in dr.read(batch_size=_BATCH):
            ids = batch.column(1).to_numpy(zero_copy_only=False)
            mapped = amap.apply(ids)
            keep = ~np.isin((mapped >> np.uint64(32)).astype(np.int64), np.fromiter(amap.gone_fragments, np.int64))
            b = pa.RecordBatch.from_arrays(
                [batch.column(0).filter(pa.array(keep)), pa.array(mapped[keep], type=pa.uint64())],
                schema=batch.schema,
            )
            pending.append(b)
            held += b.num_rows
            while held >= page:
                t = pa.Table.from_batches(pending)
                yield emit(t.slice(0, page))
                rest = t.slice(page)
                pending, held = rest.to_batches(), rest.num_rows
        if held:
            yield emit(pa.Table.from_batches(pending))

    version = _FILE_VERSIONS[dr.version]
    with rw.store.open_output(f"{rw.dir}/{data}") as f:
        w = DataFileWriter(f, dr.schema, version=version)
        for i in range(1, dr._gbo.shape[0]):
            w.add_global_buffer(dr.global_buffer(i))
        for b in pages():
            w.write_batch(b)
        rw.files.append(IndexFile(data, w.finish()))
    vtype = lookup_arrow.field("min").type
    table = pa.table(
        {
            "min": pa.array([v.as_py() for v in stats["min"]], type=vtype),
            "max": pa.array([v.as_py() for v in stats["max"]], type=vtype),
            "null_count": pa.array(stats["null_count"], type=pa.uint32()),
            "page_idx": pa.array(stats["page_idx"], type=pa.uint32()),
        },
        schema=lookup_arrow,
    )
    with rw.store.open_output(f"{rw.dir}/{lookup}") as f:
        w = DataFileWriter(f, lr.schema, version=_FILE_VERSIONS[lr.version])
        for i in range(1, lr._gbo.shape[0]):
            w.add_global_buffer(lr.global_buffer(i))
        if table.num_rows:
            w.write_batch(table)
        rw.files.append(IndexFile(lookup, w.finish()))
    for n in _files_except(names, data, lookup):
        rw.copy(n)


def _remap_bitmap(rw: _Rewriter, names: list[str], amap: AddressMap) -> None:
    name = "bitmap_page_lookup.lance"
    where = f"{rw.old.directory}/{name}"
    r = rw.reader(name)
    meta = r.schema.metadata or {}
    buffers: dict[int, bytes] = {}
    if "lance:label_list_nulls" in meta:  # LABEL_LIST: the rows whose list is null
        try:
            k = int(meta["lance:label_list_nulls"])
        except ValueError as e:
            raise CorruptFileError(where, f"bad lance:label_list_nulls metadata: {e}") from e
        buffers[k] = _remap_row_addr_set(amap, where)(r.global_buffer(k))
    rw.patch(name, "bitmaps", _map_binary(_remap_row_addr_set(amap, where)), global_buffers=buffers)
    for n in _files_except(names, name):
        rw.copy(n)


def _remap_ngram(rw: _Rewriter, names: list[str], amap: AddressMap) -> None:
    name = "ngram_postings.lance"
    rw.patch(name, "posting_list", _map_binary(_remap_treemap(amap, f"{rw.old.directory}/{name}")))
    for n in _files_except(names, name):
        rw.copy(n)


def _remap_inverted(rw: _Rewriter, names: list[str], amap: AddressMap) -> None:
    meta = rw.reader("metadata.lance").schema.metadata or {}
    try:
        parts = [int(p) for p in json.loads(meta.get("partitions", "[]"))]
    except (ValueError, TypeError) as e:
        raise CorruptFileError(f"{rw.old.directory}/metadata.lance", f"bad 'partitions' metadata: {e}") from e
    docs = [f"part_{p}_docs.lance" for p in parts]
    missing = [d for d in docs if d not in names]
    if missing:
        raise CorruptFileError(rw.old.directory, f"inverted index lacks {missing}")
    for d in docs:
        rw.patch(d, "_rowid", _map_u64(amap, f"{rw.old.directory}/{d}"))
    for n in _files_except(names, *docs):
        rw.copy(n)


def _remap_ivf(rw: _Rewriter, names: list[str], amap: AddressMap) -> None:
    rw.patch("auxiliary.idx", "_rowid", _map_u64(amap, f"{rw.old.directory}/auxiliary.idx"))
    for n in _files_except(names, "auxiliary.idx"):
        rw.copy(n)


_REMAPPERS = {
    "BTREE": _remap_btree,
    "BITMAP": _remap_bitmap,
    "LABEL_LIST": _remap_bitmap,
    "NGRAM": _remap_ngram,
    "INVERTED": _remap_inverted,
}


def remap_index(store: ObjectStore, index: IndexMetadata, amap: AddressMap, *, stable: bool) -> RemappedIndex:
    """Write a remapped copy of ``index`` under a new uuid; nothing is committed.

    Raises:
        UnsupportedFeatureError: the index does not hold row addresses lance_ops can remap
            (its (kind, index_version, row-id mode) is not ``REMAP`` in :mod:`.handling`).
        CorruptFileError: an index file does not decode.
    """
    kind = index.kind
    how = handling(index, stable=stable)
    if how.action is not IndexAction.REMAP:
        raise UnsupportedFeatureError(
            f"index {index.name!r} ({kind}, index_version {index.index_version}) is not remapped by lance_ops: "
            f"{how.reason or how.action.value}"
        )
    new_uuid = str(uuidlib.uuid4())
    rw = _Rewriter(store, index, new_uuid)
    names = index_file_names(store, index)
    remapper = _REMAPPERS.get(kind, _remap_ivf)
    try:
        remapper(rw, names, amap)
    except BaseException:
        rw.discard()
        raise
    return RemappedIndex(index, new_uuid, tuple(rw.files), kind in TOMBSTONE_KINDS)
