"""Copy a Lance v2 file with some columns (and global buffers) replaced, the rest byte for byte.

A v2 file is ``[data buffers][column metadata][CMO table][GBO table][footer]``, and every page
names its buffers by absolute position.  Replacing one column therefore does not touch the
other columns' bytes: the new file is the old data region copied verbatim, the replaced
column's new pages appended after it, then fresh metadata in which the other columns' metadata
is copied unchanged and the replaced column's points at the new pages.  The old pages of the
replaced column stay in the copied region as dead bytes.

This is how index files get new row addresses cheaply: an IVF_PQ ``auxiliary.idx`` keeps its
PQ codes, an inverted index's ``part_<p>_docs.lance`` its token counts, without decoding or
re-encoding them (docs/FORMAT.md §3-§5 for the layout).
"""

import io
import struct
from collections.abc import Callable, Mapping
from typing import BinaryIO

import numpy as np
import pyarrow as pa

from lance_ops.format._proto import file2_pb2
from lance_ops.format.errors import CorruptFileError, UnsupportedFeatureError
from lance_ops.format.file.reader import DataFileReader
from lance_ops.format.file.writer import ALIGN, FOOTER, MAGIC, PAD_BYTE, DataFileWriter, data_file_field_info
from lance_ops.format.io.object_store import ObjectStore

_VERSIONS = {(2, 0): "2.0", (2, 1): "2.1", (2, 2): "2.2"}
_COPY_CHUNK = 8 << 20


def _meta_start(r: DataFileReader) -> int:
    """Where the column metadata starts: everything before it (data and global buffers,
    the FileDescriptor included) is copied verbatim."""
    if r.num_columns:
        return int(r._cmo[:, 0].min())
    return int((r._gbo[:, 0] + r._gbo[:, 1]).max())


def _encode_column(
    r: DataFileReader, name: str, fn: Callable[[pa.Array], pa.Array], version: str, batch_size: int
) -> tuple[bytes, list[file2_pb2.ColumnMetadata]]:
    """The replaced column written alone: (its data bytes, its column metadata protos)."""
    fld = r.schema.field(name)
    sub_schema = r.schema.project([name])
    buf = io.BytesIO()
    w = DataFileWriter(buf, sub_schema, version=version)
    for batch in r.read([fld.id], batch_size=batch_size):
        col = fn(batch.column(0))
        w.write_batch(pa.RecordBatch.from_arrays([col], schema=pa.schema([batch.schema.field(0)])))
    w.finish()
    data = buf.getvalue()
    a, b, c, ngb, ncols, _major, _minor, _magic = FOOTER.unpack_from(data, len(data) - FOOTER.size)
    cmo = np.frombuffer(data[b : b + 16 * ncols], dtype="<u8").reshape(ncols, 2)
    gbo0 = struct.unpack_from("<Q", data, c)[0]
    metas = [file2_pb2.ColumnMetadata.FromString(data[int(p) : int(p) + int(s)]) for p, s in cmo]
    return data[: min(a, gbo0)], metas


def replace_columns(
    store: ObjectStore,
    src_rel: str,
    dst_rel: str,
    columns: Mapping[str, Callable[[pa.Array], pa.Array]],
    *,
    global_buffers: Mapping[int, bytes] | None = None,
    file_size: int | None = None,
    batch_size: int = 1 << 20,
) -> int:
    """Write ``dst_rel``: ``src_rel`` with each top-level leaf column ``name`` replaced by
    ``fn(old values)`` (batch by batch, same length and type) and the global buffers in
    ``global_buffers`` replaced; return the new file's size.

    Raises:
        UnsupportedFeatureError: a column that is not a top-level leaf, or a file whose global
            buffers do not precede its column metadata (not how pylance or lance_ops write).
        CorruptFileError: the source does not decode.
    """
    r = DataFileReader(store, src_rel, file_size=file_size)
    version = _VERSIONS.get(r.version)
    if version is None:
        raise UnsupportedFeatureError(f"{r.path}: file version {r.version} cannot be patched")
    meta_start = _meta_start(r)
    if any(int(p) + int(s) > meta_start for p, s in r._gbo):
        raise UnsupportedFeatureError(f"{r.path}: global buffers after the column metadata")
    leaf_ids = data_file_field_info(r.schema, version)[0]
    replaced: dict[int, tuple[bytes, list[file2_pb2.ColumnMetadata]]] = {}
    for name, fn in columns.items():
        fld = r.schema.field(name)
        if r.schema.children(fld.id):
            raise UnsupportedFeatureError(f"{r.path}: column {name!r} is not a leaf column")
        replaced[leaf_ids.index(fld.id)] = _encode_column(r, name, fn, version, batch_size)
    with store.open_output(dst_rel) as f:
        out = _Out(f)
        for pos in range(0, meta_start, _COPY_CHUNK):
            chunk = store.read_range(src_rel, pos, min(_COPY_CHUNK, meta_start - pos))
            if not chunk:
                raise CorruptFileError(r.path, f"short read at {pos} of {meta_start} bytes (truncated?)")
            out.write(chunk)
        metas: list[bytes] = []
        for i in range(r.num_columns):
            if i not in replaced:
                pos, size = (int(x) for x in r._cmo[i])
                metas.append(r._meta_bytes(pos, size))
                continue
            data, cms = replaced[i]
            out.align()
            shift = out.pos
            out.write(data)
            cm = cms[0]
            for page in cm.pages:
                page.buffer_offsets[:] = [o + shift for o in page.buffer_offsets]
            cm.buffer_offsets[:] = [o + shift for o in cm.buffer_offsets]
            metas.append(cm.SerializeToString())
        gbo = [(int(p), int(s)) for p, s in r._gbo]
        for k, data in (global_buffers or {}).items():
            if not 0 < k < len(gbo):
                raise ValueError(f"{r.path}: no global buffer {k} to replace (file has {len(gbo)})")
            out.align()
            gbo[k] = (out.pos, len(data))
            out.write(data)
        column_meta_start = out.pos
        cmo = []
        for m in metas:
            cmo.append((out.pos, len(m)))
            out.write(m)
        cmo_offset = out.pos
        out.write(b"".join(struct.pack("<QQ", p, s) for p, s in cmo))
        gbo_offset = out.pos
        out.write(b"".join(struct.pack("<QQ", p, s) for p, s in gbo))
        major, minor = r.footer_version
        out.write(FOOTER.pack(column_meta_start, cmo_offset, gbo_offset, len(gbo), len(cmo), major, minor, MAGIC))
        return out.pos


class _Out:
    """A write position over a binary stream."""

    def __init__(self, f: BinaryIO) -> None:
        self.f = f
        self.pos = 0

    def write(self, data: bytes) -> None:
        self.f.write(data)
        self.pos += len(data)

    def align(self) -> None:
        self.write(PAD_BYTE * (-self.pos % ALIGN))
