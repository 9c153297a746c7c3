"""Blob payloads: where a description points, and ``take_blobs`` as pylance has it.

A scan returns blob descriptions (:mod:`.file.blobs`); the payload of a row lives in the data
file holding the column (inline), in a sidecar beside it (``data/<stem>/<blob id>.blob``,
packed or dedicated), or at an external URI.  :func:`take_blobs` hands out file-like
:class:`BlobFile` objects that read their bytes on demand (memory stays bounded whatever the
blob size); :func:`payload_locations` is the building block for maintenance that must carry
payloads over into new files.
"""

import io
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from lance_ops.format.errors import (
    CorruptFileError,
    DeletedRowsTakeError,
    SchemaError,
    UnsupportedFeatureError,
)
from lance_ops.format.file.blob_columns import (
    KIND_DEDICATED,
    KIND_EXTERNAL,
    KIND_INLINE,
    KIND_PACKED,
    V1_DESCRIPTION,
    is_blob_field,
    sidecar_name,
)
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.read.scan import ROW_ADDR, ROW_ID, fields_in_file, plan_scan, scan
from lance_ops.format.table.bases import data_file_location
from lance_ops.format.table.fragment import FragmentMetadata
from lance_ops.format.table.manifest import Manifest

__all__ = ["BlobFile", "BlobLocation", "has_blob_columns", "payload_locations", "take_blobs", "with_payloads"]


@dataclass(frozen=True)
class BlobLocation:
    """Where one payload lives: ``(store, path relative to it, offset, size)``; ``size`` None =
    the whole object."""

    store: ObjectStore
    rel: str
    position: int
    size: int | None
    kind: int
    uri: str | None = None  # the description's URI, for an external blob


class BlobFile(io.RawIOBase):
    """A read-only, seekable file over one blob payload (as pylance's ``BlobFile``)."""

    def __init__(self, loc: BlobLocation) -> None:
        super().__init__()
        self._loc = loc
        self._size = loc.size if loc.size is not None else loc.store.size(loc.rel)
        self._pos = 0

    def size(self) -> int:
        return self._size

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, b: Any) -> int:
        n = min(len(b), self._size - self._pos)
        if n <= 0:
            return 0
        data = self._loc.store.read_range(self._loc.rel, self._loc.position + self._pos, n)
        if len(data) != n:
            raise CorruptFileError(self._loc.store.full_path(self._loc.rel), f"blob payload ends early ({len(data)} of {n} bytes)")
        b[:n] = data
        self._pos += n
        return n

    def readall(self) -> bytes:
        return self.read(self._size - self._pos) or b""

    def __repr__(self) -> str:
        return f"BlobFile({self._loc.store.full_path(self._loc.rel)!r}, size={self._size})"


def _field_file(store: ObjectStore, manifest: Manifest, frag: FragmentMetadata, field_id: int) -> tuple[ObjectStore, str]:
    for df in frag.files:
        if field_id in fields_in_file(manifest.schema, df):
            return data_file_location(store, manifest.bases, df)
    raise CorruptFileError(store.uri, f"fragment {frag.id} has no data file holding field {field_id}")


def payload_locations(
    store: ObjectStore, manifest: Manifest, frag: FragmentMetadata, column: str, descriptions: pa.Array
) -> list[BlobLocation | None]:
    """Where each description (of ``column``, rows of ``frag``) keeps its payload; None for nulls."""
    fld = manifest.schema.field(column)
    fstore, rel = _field_file(store, manifest, frag, fld.id)
    out: list[BlobLocation | None] = []
    if descriptions.type == V1_DESCRIPTION:
        pos = descriptions.field("position").to_numpy(zero_copy_only=False)
        size = descriptions.field("size").to_numpy(zero_copy_only=False)
        for p, s in zip(pos.tolist(), size.tolist(), strict=True):
            out.append(None if (p, s) == (1, 0) else BlobLocation(fstore, rel, int(p), int(s), KIND_INLINE))
        return out
    valid = descriptions.is_valid().to_numpy(zero_copy_only=False)
    kinds = descriptions.field("kind").fill_null(0).to_numpy(zero_copy_only=False)
    pos = descriptions.field("position").fill_null(0).to_numpy(zero_copy_only=False)
    size = descriptions.field("size").fill_null(0).to_numpy(zero_copy_only=False)
    bid = descriptions.field("blob_id").fill_null(0).to_numpy(zero_copy_only=False)
    uri = descriptions.field("blob_uri").to_pylist()
    sidecars = rel[: -len(".lance")] if rel.endswith(".lance") else rel
    for i in range(len(descriptions)):
        if not valid[i]:
            out.append(None)
            continue
        k, p, s = int(kinds[i]), int(pos[i]), int(size[i])
        if k == KIND_INLINE:
            out.append(BlobLocation(fstore, rel, p, s, k))
        elif k == KIND_PACKED:
            out.append(BlobLocation(fstore, f"{sidecars}/{sidecar_name(int(bid[i]))}", p, s, k))
        elif k == KIND_DEDICATED:
            out.append(BlobLocation(fstore, f"{sidecars}/{sidecar_name(int(bid[i]))}", 0, s or None, k))
        elif k == KIND_EXTERNAL:
            u = uri[i] or ""
            if "://" not in u and not u.startswith("/"):
                raise UnsupportedFeatureError(f"{store.uri}: blob of column {column!r} at relative external URI {u!r}")
            ext = ObjectStore(posixpath.dirname(u), store.storage_options)
            out.append(BlobLocation(ext, posixpath.basename(u), p, s or None, k, u))
        else:
            raise UnsupportedFeatureError(f"{store.uri}: blob of column {column!r} has unknown kind {k}")
    return out


def take_blobs(
    store: ObjectStore,
    manifest: Manifest,
    column: str,
    *,
    ids: Sequence[int] | pa.Array | None = None,
    addresses: Sequence[int] | pa.Array | None = None,
    indices: Sequence[int] | pa.Array | None = None,
) -> list[BlobFile | None]:
    """The payloads of ``column`` for the given rows, as pylance's ``take_blobs``: exactly one of
    ``ids`` (``_rowid``), ``addresses`` (``_rowaddr``) or ``indices`` (row offsets of this
    version).  Returns one :class:`BlobFile` per row in the order asked, None for a null blob.

    Raises:
        SchemaError: ``column`` is not a blob column.  ValueError: a row does not exist.
    """
    if sum(x is not None for x in (ids, addresses, indices)) != 1:
        raise ValueError("exactly one of ids, addresses or indices must be given")
    fld = manifest.schema.field(column)
    if not is_blob_field(fld):
        raise SchemaError(f"{store.uri}: column {column!r} is not a blob column")
    wanted = np.asarray(pa.array(next(x for x in (ids, addresses, indices) if x is not None), pa.uint64()))
    key = ROW_ID if ids is not None else ROW_ADDR
    plan = plan_scan(manifest.schema, [column, ROW_ADDR, ROW_ID], None, False, False)
    found: dict[int, BlobLocation | None] = {}
    offset = 0
    by_id = {f.id: f for f in manifest.fragments}
    for batch in scan(store, manifest, plan):
        n = batch.num_rows
        keys = (np.arange(offset, offset + n, dtype=np.uint64) if indices is not None
                else batch.column(key).to_numpy())
        offset += n
        hit = np.flatnonzero(np.isin(keys, wanted))
        if not hit.size:
            continue
        sub = batch.take(pa.array(hit))
        addr = sub.column(ROW_ADDR).to_numpy()
        for fid in np.unique(addr >> np.uint64(32)).tolist():
            in_frag = np.flatnonzero((addr >> np.uint64(32)) == fid)
            part = sub.take(pa.array(in_frag))
            locs = payload_locations(store, manifest, by_id[int(fid)], column, part.column(column).combine_chunks()
                                     if isinstance(part.column(column), pa.ChunkedArray) else part.column(column))
            for k, loc in zip(keys[hit][in_frag].tolist(), locs, strict=True):
                found[int(k)] = loc
    missing = [int(w) for w in wanted.tolist() if int(w) not in found]
    if missing:
        raise DeletedRowsTakeError(
            f"{store.uri}: A take operation that includes row addresses must not target deleted (or missing) "
            f"rows: no rows {missing[:10]} ({'ids' if ids is not None else key})")
    return [BlobFile(found[int(w)]) if found[int(w)] is not None else None for w in wanted.tolist()]  # type: ignore[arg-type]



def has_blob_columns(manifest: Manifest, names: Sequence[str] | None = None) -> bool:
    top = manifest.schema.top_level()
    return any(is_blob_field(f) and (names is None or f.name in names) for f in top)


def _read_payloads(locs: list[BlobLocation | None]) -> list[bytes | None]:
    """Payload bytes, one ranged read per file for the inline and packed ones."""
    out: list[bytes | None] = [None] * len(locs)
    by_file: dict[tuple[int, str], list[int]] = {}
    for i, loc in enumerate(locs):
        if loc is not None and loc.kind != KIND_EXTERNAL:
            by_file.setdefault((id(loc.store), loc.rel), []).append(i)
    for (_sid, rel), idx in by_file.items():
        store = locs[idx[0]].store  # type: ignore[union-attr]
        whole = [i for i in idx if locs[i].size is None]  # type: ignore[union-attr]
        ranged = [i for i in idx if locs[i].size is not None]  # type: ignore[union-attr]
        if ranged:
            datas = store.read_ranges(rel, [(locs[i].position, locs[i].size) for i in ranged])  # type: ignore[union-attr,misc]
            for i, d in zip(ranged, datas, strict=True):
                if len(d) != locs[i].size:  # type: ignore[union-attr]
                    raise CorruptFileError(store.full_path(rel), f"blob payload ends early ({len(d)} bytes)")
                out[i] = bytes(d)
        for i in whole:
            out[i] = store.read(rel)
    return out


def with_payloads(store: ObjectStore, manifest: Manifest, frag: FragmentMetadata, batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` (rows of ``frag``, blob columns as descriptions) with each blob column as the
    payloads it describes, in the column's own type: ``large_binary`` (2.0) or the blob v2
    storage ``struct<data, uri, position, size>`` (external blobs keep their URI).  What
    maintenance writes back; memory grows with the payloads of one batch."""
    arrow = manifest.schema.to_arrow()
    cols, fields = [], []
    for name, col in zip(batch.schema.names, batch.columns, strict=True):
        f = arrow.field(name) if name in arrow.names else None
        if f is None or not is_blob_field(f):
            cols.append(col)
            fields.append(batch.schema.field(name))
            continue
        locs = payload_locations(store, manifest, frag, name, col)
        datas = _read_payloads(locs)
        if col.type == V1_DESCRIPTION:
            new = pa.array(datas, type=f.type)
        else:
            ext = [loc if loc is not None and loc.kind == KIND_EXTERNAL else None for loc in locs]
            t = f.type
            # pylance 14 stores a 2.2 ``lance-encoding:blob`` large_binary as ``struct<data, uri>``
            # (no position/size children): fill only the children the column has
            values = {"data": datas, "uri": [e.uri if e is not None else None for e in ext],
                      "position": [e.position if e is not None else None for e in ext],
                      "size": [e.size if e is not None else None for e in ext]}
            unknown = [c.name for c in t if c.name not in values]
            if unknown:
                raise UnsupportedFeatureError(f"{store.uri}: blob column {name!r} has children {unknown} (expected data, uri, position, size)")
            children = [pa.array(values[c.name], type=c.type) for c in t]
            mask = pa.py_buffer(np.packbits(np.array([loc is not None for loc in locs], dtype=bool), bitorder="little"))
            new = pa.Array.from_buffers(t, len(locs), [mask], children=children)
        cols.append(new)
        fields.append(pa.field(name, new.type, f.nullable, f.metadata))
    return pa.RecordBatch.from_arrays(cols, schema=pa.schema(fields, metadata=batch.schema.metadata))
