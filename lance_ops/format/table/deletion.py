"""Deletion files: the local row offsets deleted from a fragment (docs/FORMAT.md §11, §2).

``_deletions/{fragment_id}-{read_version}-{id}.arrow`` holds fewer than 5000 offsets as an Arrow
IPC *file* with one batch and the exact schema ``row_id: uint32 not null``; from 5000 offsets on,
``.bin`` holds a portable 32-bit Roaring bitmap.  A fragment has at most one deletion file, which
always lists every deleted row of that fragment (a new delete rewrites it as a union).
"""

import array
import secrets
from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
from pyroaring import BitMap

from lance_ops.format._proto import table_pb2
from lance_ops.format.errors import (
    ArgumentTypeError,
    CorruptFileError,
    InvalidArgumentError,
    UnsupportedFeatureError,
)
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.table.bases import BasePath, deletion_file_location
from lance_ops.format.table.fragment import DeletionFile, FragmentMetadata

__all__ = [
    "DELETIONS_DIR",
    "DELETION_BITMAP_THRESHOLD",
    "DELETION_SCHEMA",
    "deletion_file_name",
    "deletion_file_path",
    "deleted_offsets",
    "deletion_mask",
    "read_deletion_file",
    "with_deletions",
    "write_deletion_file",
]

#: At or above this many deleted rows pylance writes a Roaring ``.bin`` instead of ``.arrow``.
DELETION_BITMAP_THRESHOLD = 5000
DELETIONS_DIR = "_deletions"
#: pylance compares the whole schema (names, nullability, metadata) with this one.
DELETION_SCHEMA = pa.schema([pa.field("row_id", pa.uint32(), nullable=False)])

_ARROW = table_pb2.DeletionFile.ARROW_ARRAY
_BITMAP = table_pb2.DeletionFile.BITMAP
_SUFFIX = {_ARROW: "arrow", _BITMAP: "bin"}


def deletion_file_path(fragment_id: int, df: table_pb2.DeletionFile) -> str:
    """``_deletions/{fragment_id}-{read_version}-{id}.{arrow|bin}``, relative to the dataset root.

    Raises:
        UnsupportedFeatureError: an unknown ``file_type``, or a ``base_id`` (the file then lives
            under another base path, which lance_ops does not support).
    """
    suffix = _SUFFIX.get(df.file_type)
    if suffix is None:
        raise UnsupportedFeatureError(
            f"deletion file of fragment {fragment_id}: unknown file_type {df.file_type}"
        )
    if df.HasField("base_id"):
        raise UnsupportedFeatureError(
            f"deletion file of fragment {fragment_id} lives under base path {df.base_id}; "
            "resolve it with the manifest's base paths (read_deletion_file(..., bases=...))"
        )
    return deletion_file_name(fragment_id, df)


def deletion_file_name(fragment_id: int, df: table_pb2.DeletionFile) -> str:
    """``_deletions/{fragment_id}-{read_version}-{id}.{arrow|bin}`` relative to the root of the
    dataset (or base path) holding it, whatever its ``base_id``."""
    suffix = _SUFFIX.get(df.file_type)
    if suffix is None:
        raise UnsupportedFeatureError(
            f"deletion file of fragment {fragment_id}: unknown file_type {df.file_type}"
        )
    return f"{DELETIONS_DIR}/{fragment_id}-{df.read_version}-{df.id}.{suffix}"


def _schema_is_exact(schema: pa.Schema) -> bool:
    if not schema.equals(DELETION_SCHEMA, check_metadata=True):
        return False
    return not schema.metadata and not schema.field(0).metadata


def _read_arrow(data: bytes, path: str) -> np.ndarray:
    try:
        reader = ipc.open_file(pa.py_buffer(data), options=ipc.IpcReadOptions(use_threads=False))
    except (pa.ArrowException, OSError, ValueError) as e:
        raise CorruptFileError(path, f"not an Arrow IPC file: {e}") from e
    if not _schema_is_exact(reader.schema):
        raise CorruptFileError(
            path,
            f"deletion file schema must be exactly `row_id: uint32 not null` without "
            f"metadata, found {reader.schema.to_string(show_schema_metadata=True)!r}",
        )
    if reader.num_record_batches != 1:
        raise CorruptFileError(
            path, f"expected exactly one record batch in deletion file, found {reader.num_record_batches}"
        )
    try:
        batch = reader.get_batch(0)
        batch.validate(full=True)
    except (pa.ArrowException, OSError, ValueError) as e:
        raise CorruptFileError(path, f"cannot read the record batch: {e}") from e
    column = batch.column(0)
    if column.null_count:
        raise CorruptFileError(path, f"deletion file holds {column.null_count} null row ids")
    return np.asarray(column.to_numpy(zero_copy_only=False), dtype=np.uint32)


def _read_bitmap(data: bytes, path: str) -> BitMap:
    try:
        return BitMap.deserialize(data)
    except (ValueError, IndexError, OverflowError, MemoryError) as e:
        raise CorruptFileError(path, f"not a portable 32-bit Roaring bitmap: {e}") from e


def read_deletion_file(
    store: ObjectStore,
    fragment_id: int,
    df: table_pb2.DeletionFile,
    *,
    physical_rows: int | None = None,
    bases: Mapping[int, BasePath] | None = None,
) -> np.ndarray:
    """Deleted local row offsets of a fragment.

    Args:
        store: the dataset's object store.
        fragment_id: id of the fragment the file belongs to (part of its name).
        df: the fragment's ``DeletionFile`` message from the manifest.
        physical_rows: the fragment's row count; when given, every offset must be below it.  Pass
            it: together with ``num_deleted_rows`` it is checked before a bitmap is expanded.
        bases: the manifest's base paths (``Manifest.bases``), for a file with a ``base_id``
            (one a branch shares with the version it was created from).

    Returns:
        Sorted, unique uint32 offsets.

    Raises:
        CorruptFileError: missing or undecodable file, wrong Arrow schema, not exactly one batch,
            nulls, a count other than ``df.num_deleted_rows`` (0 there means unknown, as in
            pylance), or an offset ``>= physical_rows``.
        UnsupportedFeatureError: see :func:`deletion_file_path`.
    """
    if df.HasField("base_id"):
        store = deletion_file_location(store, bases, df.base_id)
    rel = deletion_file_name(fragment_id, df)
    path = store.full_path(rel)
    try:
        data = store.read(rel)
    except FileNotFoundError as e:
        raise CorruptFileError(path, "deletion file named by the manifest does not exist") from e
    if df.file_type == _ARROW:
        offsets = np.unique(_read_arrow(data, path))
        count, highest = int(offsets.size), int(offsets[-1]) if offsets.size else None
    else:
        # a few hundred KiB of run containers can claim 2**32 rows: check before materialising
        bitmap = _read_bitmap(data, path)
        count, highest = len(bitmap), bitmap.max() if bitmap else None
    if df.num_deleted_rows and count != df.num_deleted_rows:
        raise CorruptFileError(
            path, f"deletion file lists {count} rows, the manifest says {df.num_deleted_rows}"
        )
    if physical_rows is not None and highest is not None and highest >= physical_rows:
        raise CorruptFileError(
            path, f"deleted row offset {highest} is not below the fragment's {physical_rows} rows"
        )
    if df.file_type == _ARROW:
        return offsets
    offsets = np.frombuffer(bitmap.to_array(), dtype=np.uint32)
    if offsets.size > 1 and bool(np.any(offsets[1:] <= offsets[:-1])):
        raise CorruptFileError(path, "roaring bitmap containers are not in ascending order")
    return offsets


#: per number of deleted rows: the Arrow IPC file's bytes before and after its one data buffer
#: (a delete writes many files of equal size; the pyarrow writer costs ~15-60 us a file, this ~1 us)
_IPC_TEMPLATES: dict[int, tuple[bytes, bytes] | None] = {}


def _arrow_bytes(offsets: np.ndarray) -> bytes:
    """The deletion file of ``offsets`` (uint32): an Arrow IPC file of one ``row_id`` column."""
    n = int(offsets.size)
    if n not in _IPC_TEMPLATES:
        if len(_IPC_TEMPLATES) >= 256:
            _IPC_TEMPLATES.clear()
        _IPC_TEMPLATES[n] = _ipc_template(n)
    hit = _IPC_TEMPLATES[n]
    if hit is None:
        return _arrow_bytes_written(offsets)
    head, tail = hit
    return b"".join((head, offsets.astype("<u4", copy=False).tobytes(), tail))


def _ipc_template(n: int) -> tuple[bytes, bytes] | None:
    """The bytes around the data buffer of an ``n``-row deletion file, found by writing a
    distinctive probe and proven on a second one; None when they cannot be told apart."""
    if n < 2:
        return None
    probe = (np.arange(n, dtype=np.uint32) | np.uint32(0xA5C30000)).astype("<u4")
    data, raw = _arrow_bytes_written(probe), probe.tobytes()
    pos = data.find(raw)
    if pos < 0 or data.find(raw, pos + 1) >= 0:
        return None
    head, tail = data[:pos], data[pos + len(raw):]
    other = (probe ^ np.uint32(0x0F0F0000)).astype("<u4")
    if head + other.tobytes() + tail != _arrow_bytes_written(other):
        return None
    return head, tail


def _arrow_bytes_written(offsets: np.ndarray) -> bytes:
    sink = pa.BufferOutputStream()
    batch = pa.record_batch([pa.array(offsets, type=pa.uint32())], schema=DELETION_SCHEMA)
    # Uncompressed: pylance reads both; at < 5000 u32 values compression saves little and costs most
    # of the write time.
    with ipc.new_file(sink, DELETION_SCHEMA) as writer:
        writer.write_batch(batch)
    return bytes(sink.getvalue())


def write_deletion_file(
    store: ObjectStore, fragment_id: int, read_version: int, offsets: np.ndarray
) -> table_pb2.DeletionFile:
    """Write a fragment's deletion file and return its manifest entry.

    Args:
        store: the dataset's object store.
        fragment_id: the fragment.
        read_version: the version the deleting operation read (part of the file name).
        offsets: the FULL set of deleted local row offsets (the caller unions with the old file).

    Returns:
        The ``DeletionFile`` message: ``file_type``, ``read_version``, a random u64 ``id`` and
        ``num_deleted_rows``.

    Raises:
        ValueError: no offsets (a fragment without deletions has no deletion file), or offsets
            that are negative or do not fit u32.
        TypeError: non-integer offsets.
    """
    a = np.asarray(offsets)
    if a.ndim != 1:
        raise InvalidArgumentError(f"offsets must be one-dimensional, got shape {a.shape}")
    if a.size and a.dtype.kind not in "iu":
        raise ArgumentTypeError(f"offsets must be integers, got dtype {a.dtype}")
    if a.size == 0:
        raise InvalidArgumentError(f"no deleted rows for fragment {fragment_id}: write no deletion file instead")
    if int(a.min()) < 0 or int(a.max()) > 0xFFFFFFFF:
        raise InvalidArgumentError(f"deleted row offsets must lie in [0, 2**32), got [{int(a.min())}, {int(a.max())}]")
    # Offsets usually arrive sorted and unique (row addresses in scan order): skip the hash-based unique.
    if a.size > 1 and not bool(np.all(a[1:] > a[:-1])):
        a = np.unique(a)
    unique = a.astype(np.uint32, copy=False)
    df = table_pb2.DeletionFile(
        read_version=read_version, id=secrets.randbits(64), num_deleted_rows=int(unique.size)
    )
    if unique.size < DELETION_BITMAP_THRESHOLD:
        df.file_type = _ARROW
        data = _arrow_bytes(unique)
    else:
        df.file_type = _BITMAP
        data = BitMap(array.array("I", unique.tobytes())).serialize()
    # unique random name, referenced only once a manifest commits: no temp file needed
    store.put(deletion_file_path(fragment_id, df), data, atomic=False)
    return df


def deletion_mask(deleted: np.ndarray, physical_rows: int) -> np.ndarray:
    """Boolean array of ``physical_rows`` entries, True where the row is live.

    Raises:
        ValueError: an offset is negative or ``>= physical_rows``.
    """
    mask = np.ones(physical_rows, dtype=bool)
    d = np.asarray(deleted)
    if d.size:
        if int(d.min()) < 0 or int(d.max()) >= physical_rows:
            raise InvalidArgumentError(
                f"deleted offsets must lie in [0, {physical_rows}), got [{int(d.min())}, {int(d.max())}]"
            )
        mask[d.astype(np.intp)] = False
    return mask


def deleted_offsets(
    store: ObjectStore, frag: FragmentMetadata, *, bases: Mapping[int, BasePath] | None = None
) -> np.ndarray:
    """The fragment's currently deleted local offsets (sorted uint32); ``bases`` as in
    :func:`read_deletion_file`."""
    if frag.deletion_file is None:
        return np.empty(0, dtype=np.uint32)
    return read_deletion_file(
        store, frag.id, frag.deletion_file.to_proto(), physical_rows=frag.physical_rows, bases=bases
    )


def with_deletions(
    store: ObjectStore,
    frag: FragmentMetadata,
    new_offsets: np.ndarray,
    read_version: int,
    *,
    bases: Mapping[int, BasePath] | None = None,
) -> FragmentMetadata | None:
    """``frag`` with ``new_offsets`` added to its deletion vector; None when every row is gone.

    The new deletion file is written under ``store`` (the dataset or branch writing it, no
    ``base_id``); the old one is read through ``bases`` when it lives elsewhere.
    """
    new = new_offsets.astype(np.uint32, copy=False)
    if new.size > 1 and not bool(np.all(new[1:] > new[:-1])):
        new = np.unique(new)
    merged = np.union1d(deleted_offsets(store, frag, bases=bases), new) if frag.deletion_file is not None else new
    if merged.size >= frag.physical_rows:
        return None
    df = write_deletion_file(store, frag.id, read_version, merged)
    return frag.with_changes(deletion_file=DeletionFile.from_proto(df))
