"""What pylance's scans add beyond the stored rows, computed around lance_ops' scan:

- the ``_rowoffset`` column: a row's position among the live rows of the whole dataset version
  (fragments in manifest order), whatever the scan's filter, limit or fragments; from
  ``_rowaddr``: the live rows of the fragments before the row's one, plus its physical offset
  less the deleted rows before it;
- ``include_deleted_rows``: the rows a deletion file hides but the data files still hold, with
  ``_rowid`` and ``_rowaddr`` null (the version scanned as if it had no deletion files).
"""

from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_ops.format.errors import InvalidArgumentError
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.read.scan import ROW_ADDR, ROW_ID
from lance_ops.format.table.deletion import deleted_offsets
from lance_ops.format.table.manifest import Manifest

ROW_OFFSET = "_rowoffset"


def split_row_offset(
    store: ObjectStore, manifest: Manifest, columns: object
) -> tuple[object, Callable[[pa.RecordBatch], pa.RecordBatch] | None]:
    """``(columns to scan, step adding _rowoffset)`` for a projection; the step is None when
    ``columns`` does not name ``_rowoffset`` (a list of names is the only form that may)."""
    if not isinstance(columns, list | tuple) or ROW_OFFSET not in columns:
        return columns, None
    names = list(columns)
    at = names.index(ROW_OFFSET)
    del names[at]
    added = ROW_ADDR not in names
    if added:
        names.append(ROW_ADDR)
    offsets = _RowOffsets(store, manifest)

    def step(batch: pa.RecordBatch) -> pa.RecordBatch:
        out = batch.add_column(at, ROW_OFFSET, offsets.of(batch.column(ROW_ADDR)))
        return out.drop_columns([ROW_ADDR]) if added else out

    return names, step


class _RowOffsets:
    """Offsets of row addresses in one version; each fragment's deletions read once."""

    def __init__(self, store: ObjectStore, manifest: Manifest) -> None:
        self._store, self._manifest = store, manifest
        self._frags = {f.id: f for f in manifest.fragments}
        live = np.array([f.num_rows for f in manifest.fragments], dtype=np.uint64)
        self._base = dict(zip(self._frags, np.concatenate([[0], np.cumsum(live)[:-1]]).astype(np.uint64),
                              strict=True))
        self._deleted: dict[int, np.ndarray] = {}

    def _deleted_of(self, frag_id: int) -> np.ndarray:
        if frag_id not in self._deleted:
            self._deleted[frag_id] = deleted_offsets(self._store, self._frags[frag_id], bases=self._manifest.bases)
        return self._deleted[frag_id]

    def deleted(self, addresses: pa.Array) -> np.ndarray:
        """Whether each row address is one a deletion file names."""
        addr = addresses.to_numpy(zero_copy_only=False).astype(np.uint64)
        frag_ids, local = addr >> np.uint64(32), addr & np.uint64(0xFFFFFFFF)
        out = np.zeros(len(addr), dtype=bool)
        for fid in np.unique(frag_ids):
            sel = frag_ids == fid
            out[sel] = np.isin(local[sel], self._deleted_of(int(fid)))
        return out

    def of(self, addresses: pa.Array) -> pa.Array:
        addr = addresses.to_numpy(zero_copy_only=False).astype(np.uint64)
        frag_ids = addr >> np.uint64(32)
        local = addr & np.uint64(0xFFFFFFFF)
        out = np.empty(len(addr), dtype=np.uint64)
        for fid in np.unique(frag_ids):
            sel = frag_ids == fid
            before = np.searchsorted(self._deleted_of(int(fid)), local[sel]).astype(np.uint64)
            out[sel] = self._base[int(fid)] + local[sel] - before
        return pa.array(out, pa.uint64())


def names_with_offset(columns: Sequence[str] | None) -> bool:
    """Whether a projection names ``_rowoffset``."""
    return isinstance(columns, list | tuple) and ROW_OFFSET in columns


def include_deleted_rows(
    store: ObjectStore, manifest: Manifest, columns: object, with_row_id: bool
) -> tuple[Manifest, Callable[[pa.RecordBatch], pa.RecordBatch]]:
    """``(manifest to scan, step nulling the ids of deleted rows)`` of pylance's
    ``include_deleted_rows=True``: ``manifest`` without deletion files, the step marking the
    rows the real deletion files name (by ``_rowaddr``, which the scan must then yield).

    Raises:
        InvalidArgumentError: no ``_rowid`` asked for (pylance's message).
    """
    asked = list(columns) if isinstance(columns, list | tuple) else []
    if not with_row_id and ROW_ID not in asked:
        raise InvalidArgumentError("Invalid user input: include_deleted_rows is set but with_row_id is false")
    offsets = _RowOffsets(store, manifest)
    bare = manifest.with_changes(fragments=tuple(f.with_changes(deletion_file=None) for f in manifest.fragments))

    def step(batch: pa.RecordBatch) -> pa.RecordBatch:
        deleted = pa.array(offsets.deleted(batch.column(ROW_ADDR)))
        for name in (ROW_ID, ROW_ADDR):
            if name in batch.schema.names:
                i = batch.schema.get_field_index(name)
                batch = batch.set_column(i, name, pc.if_else(deleted, pa.scalar(None, pa.uint64()),
                                                             batch.column(i)))
        return batch

    return bare, step
