"""What every scalar index builder shares: its input, its result, the Lance files it writes,
the sort order pylance keys by and the row-address sets it stores.

Facts (pylance 14.0.2, checked by building the same index with it on the same data and reading
both back with :mod:`lance_ops.format.file.reader`; docs/FORMAT.md "Indices"):

- Index files are Lance files of the dataset's own file version (2.0 data -> 2.0 index files,
  2.2 -> 2.2), in ``_indices/<uuid>/``, with string schema metadata and global buffers.
- Keys sort nulls first and floating-point NaN last (after every number).
- Row sets (BITMAP and LABEL_LIST bitmaps, null rows) are ``RowAddrTreeMap``s: ``u32`` count,
  then per fragment (high word) ``u32 key, u32 size`` and a portable 32-bit roaring bitmap of
  the low words, never run-optimised (cookie 12346).
"""

import json
import shutil
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap

from lance_ops.format.file.writer import DataFileWriter
from lance_ops.format.index.metadata import INDICES_DIR, IndexFile
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.schema import LanceSchema

HIGH_SHIFT = np.uint64(32)
#: page size of index files: the encoder holds a few times a page while it encodes one; pylance
#: reads index files by row ranges, whatever their pages
PAGE_BYTES = 2 << 20
LOW_MASK = np.uint64(0xFFFFFFFF)


@dataclass(frozen=True)
class SegmentInput:
    """The rows one index segment covers, in fragment order (deleted rows left out).

    ``row_ids`` is what the index stores for a row (its stable row id on datasets with stable
    row ids, else its address); ``row_addrs`` its address (``fragment_id << 32 | offset``).
    """

    values: pa.Array
    row_ids: np.ndarray
    row_addrs: np.ndarray
    #: fragments no segment indexed before (a merge also re-reads the merged segments' fragments)
    new_fragments: frozenset[int] | None = None

    @property
    def num_rows(self) -> int:
        return len(self.values)


@dataclass(frozen=True)
class BuiltSegment:
    """The files of one written segment and what its ``IndexMetadata`` says about them."""

    files: tuple[IndexFile, ...]
    type_url: str
    details: bytes
    index_version: int


class SegmentWriter:
    """Writes the Lance files of ``_indices/<uuid>/``; :meth:`discard` removes them all."""

    def __init__(self, store: ObjectStore, uuid: str, file_version: str) -> None:
        self.store = store
        self.directory = f"{INDICES_DIR}/{uuid}"
        self.file_version = file_version
        self.files: list[IndexFile] = []

    def write(
        self,
        name: str,
        table: pa.Table,
        *,
        metadata: dict[str, str] | None = None,
        global_buffers: tuple[bytes, ...] = (),
    ) -> None:
        """One Lance file ``name`` holding ``table`` (schema metadata and global buffers 1..n)."""
        schema = LanceSchema.from_arrow(table.schema)
        schema = replace(schema, metadata={k: v.encode() for k, v in (metadata or {}).items()})
        self.write_as(name, table, schema, global_buffers)

    def write_as(self, name: str, table: pa.Table, schema: LanceSchema, global_buffers: tuple[bytes, ...] = ()) -> None:
        """Like :meth:`write`, with a given Lance schema (another file's: ids, metadata kept)."""
        with self.store.open_output(f"{self.directory}/{name}") as f:
            w = DataFileWriter(f, schema, version=self.file_version, max_page_bytes=PAGE_BYTES)
            for buf in global_buffers:
                w.add_global_buffer(buf)
            if table.num_rows:
                w.write_batch(table)
            self.files.append(IndexFile(name, w.finish()))

    def discard(self) -> None:
        """Remove every file written so far (a half-written one too)."""
        for rel, _size, _mtime in list(self.store.list_files(self.directory)):
            self.store.delete(rel)
        if self.store.is_local:
            shutil.rmtree(self.store.full_path(self.directory), ignore_errors=True)


def _numeric(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_temporal(t) or pa.types.is_boolean(t)


#: columns this long are sampled for their number of distinct values
_SAMPLE_FROM = 1 << 16
_SAMPLE = 4096
_FEW_DISTINCT = 1024


def _few_distinct(values: pa.Array) -> bool:
    """A strided sample of ``values`` holds few distinct values (a category-like column)."""
    if len(values) < _SAMPLE_FROM:
        return False
    step = len(values) // _SAMPLE
    return len(pc.unique(values.take(pa.array(np.arange(0, len(values), step))))) <= _FEW_DISTINCT


def sort_order(values: pa.Array) -> np.ndarray:
    """Ascending order of ``values`` as pylance keys them: nulls first, NaN last.

    Rows of equal value come in no particular order (pylance 14's do not either).  A column of
    few distinct values is sorted by its dictionary codes (hash, sort the dictionary, radix sort
    the 16-bit codes: ~8x a comparison sort of 1M floats); others with NumPy's introsort.
    """
    if _few_distinct(values):
        _, codes = dictionary_codes(values)
        narrow = codes.dtype == np.uint16 or (codes.size and codes.max() < 1 << 16)
        return np.argsort(codes.astype(np.uint16, copy=False) if narrow else codes, kind="stable")
    return _comparison_order(values)


def _comparison_order(values: pa.Array) -> np.ndarray:
    if _numeric(values.type) and not pa.types.is_float16(values.type):
        nulls = values.is_null().to_numpy(zero_copy_only=False)
        if not nulls.any():
            return np.argsort(values.to_numpy(zero_copy_only=False))
        valid = np.flatnonzero(~nulls)
        v = values.filter(pa.array(~nulls)).to_numpy(zero_copy_only=False)
        return np.concatenate([np.flatnonzero(nulls), valid[np.argsort(v)]])
    return pc.array_sort_indices(values, order="ascending", null_placement="at_start").to_numpy()


def dictionary_codes(values: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """The distinct values in key order (null first if any, NaN last) and each row's code
    into them."""
    enc = pc.dictionary_encode(values, null_encoding="encode")
    dictionary = enc.dictionary
    order = _comparison_order(dictionary)
    # the narrowest codes (uint16 below 65,536 keys: 2 bytes a row, and NumPy's radix sort),
    # looked up by the Arrow indices as they are (no widened copy)
    rank = np.empty(len(order), dtype=np.uint16 if len(order) <= 1 << 16 else np.int64)
    rank[order] = np.arange(len(order), dtype=rank.dtype)
    codes = rank[enc.indices.to_numpy(zero_copy_only=False)]
    return dictionary.take(pa.array(order)), codes


def _portable(low: np.ndarray) -> bytes:
    return bytes(BitMap(low.astype(np.uint32, copy=False)).serialize())


def encode_row_set(ids: np.ndarray) -> bytes:
    """A ``RowAddrTreeMap`` of ``ids`` (any order, duplicates allowed) as pylance writes it."""
    ids = np.unique(ids.astype(np.uint64, copy=False))
    highs = (ids >> HIGH_SHIFT).astype(np.uint32)
    keys, starts = np.unique(highs, return_index=True)
    bounds = [*starts.tolist(), len(ids)]
    out = [np.uint32(len(keys)).tobytes()]
    for k, key in enumerate(keys.tolist()):
        body = _portable(ids[bounds[k] : bounds[k + 1]] & LOW_MASK)
        out.append(np.array([key, len(body)], dtype="<u4").tobytes())
        out.append(body)
    return b"".join(out)


def index_stats(num_bitmaps: int) -> str:
    return json.dumps({"num_bitmaps": num_bitmaps}, separators=(",", ":"))
