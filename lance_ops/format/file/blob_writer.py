"""Writing blob columns as pylance 14 does (layouts in :mod:`.blobs`).

A blob column is written from its payloads: ``large_binary`` for a 2.0 blob column, the blob
v2 storage ``struct<data, uri, position, size>`` for 2.2.  Payloads go into the data file (64-byte
aligned buffers, written as the rows arrive, so a small file starts with them as pylance's do) or,
for blob v2, into sidecars beside it: up to 64 KiB inline, up to 4 MiB appended to the pack file
(blob id 1, a new pack after 1 GiB), larger ones in a dedicated file each (the next blob ids);
``uri`` values are kept as external references.  Descriptions are the column's pages.
"""

from collections.abc import Callable
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa
from google.protobuf import any_pb2

from lance_ops.format._proto import encodings_v2_0_pb2 as epb
from lance_ops.format._proto import encodings_v2_1_pb2 as pb
from lance_ops.format._proto import file_pb2
from lance_ops.format.errors import SchemaError, UnsupportedFeatureError
from lance_ops.format.file.blob_columns import (
    BLOB_KEY,
    KIND_DEDICATED,
    KIND_EXTERNAL,
    KIND_INLINE,
    KIND_PACKED,
    PACKED_KEY,
    is_blob_field,
    sidecar_name,
)
from lance_ops.format.schema import LanceField, LanceSchema

__all__ = [
    "BlobV1Encoder",
    "BlobV2Encoder",
    "blob_column_encoding",
    "file_schema_fields",
    "leaf_field_ids",
]

INLINE_MAX = 64 * 1024
PACKED_MAX = 4 * 1024 * 1024
PACK_FILE_MAX = 1024 * 1024 * 1024
_THRESHOLD_KEYS = (
    b"lance-encoding:blob-inline-size-threshold",
    b"lance-encoding:blob-dedicated-size-threshold",
    b"lance-encoding:blob-pack-file-size-threshold",
)

SidecarOpener = Callable[[str], BinaryIO]


def _blob_v2(f: LanceField) -> bool:
    return is_blob_field(f) and f.logical_type == "struct"


def file_schema_fields(schema: LanceSchema, version: str) -> list[file_pb2.Field]:
    """The FileDescriptor fields: the dataset schema, with each blob v2 field as pylance lists it in
    a data file (a struct with ``lance-encoding:blob``/``packed`` and five id -1 children)."""
    out: list[file_pb2.Field] = []
    skip: set[int] = set()
    for f in schema.fields:
        if f.id in skip:
            continue
        if version != "2.0" and _blob_v2(f):
            skip |= {d.id for d in schema.subtree(f.id) if d.id != f.id}
            p = file_pb2.Field(name=f.name, id=f.id, parent_id=f.parent_id, logical_type="struct", nullable=f.nullable)
            p.metadata[PACKED_KEY.decode()] = b"true"
            p.metadata[BLOB_KEY.decode()] = b"true"
            out.append(p)
            for name, lt, enc in (("kind", "uint8", 1), ("position", "uint64", 1), ("size", "uint64", 1),
                                  ("blob_id", "uint32", 1), ("blob_uri", "string", 2)):
                out.append(file_pb2.Field(name=name, id=-1, parent_id=-1, logical_type=lt, encoding=enc))  # type: ignore[arg-type]
            continue
        out.append(f.to_proto())
    return out


def leaf_field_ids(schema: LanceSchema) -> list[int]:
    """2.1+ columns: leaf fields in depth-first order, a blob v2 field being one leaf."""
    out, skip = [], set()
    for f in schema.fields:
        if f.id in skip:
            continue
        if _blob_v2(f):
            skip |= {d.id for d in schema.subtree(f.id)}
            out.append(f.id)
        elif not schema.children(f.id):
            out.append(f.id)
    return out


def blob_column_encoding() -> bytes:
    """The 2.0 ``ColumnEncoding`` of a blob column (``blob{inner{values{}}}``), as Any bytes."""
    ce = epb.ColumnEncoding()
    ce.blob.inner.values.SetInParent()
    return any_pb2.Any(type_url="/lance.encodings.ColumnEncoding", value=ce.SerializeToString()).SerializeToString()


def _thresholds(f: LanceField) -> tuple[int, int, int]:
    """Inline, dedicated and pack-file thresholds: pylance's defaults or the field's metadata."""
    vals = []
    for key, default in zip(_THRESHOLD_KEYS, (INLINE_MAX, PACKED_MAX, PACK_FILE_MAX), strict=True):
        raw = f.metadata.get(key.decode())
        vals.append(int(raw) if raw is not None and bytes(raw).strip().isdigit() else default)
    return vals[0], vals[1], vals[2]


class BlobV1Encoder:
    """A 2.0 blob column: payloads as buffers, pages of ``packed_struct{position u64, size u64}``."""

    def __init__(self, w: Any, fld: LanceField, column: int) -> None:
        self.w, self.fld, self.column = w, fld, column
        self.rows: list[np.ndarray] = []

    def add(self, arr: pa.Array) -> None:
        if len(arr) == 0:
            return
        if not (pa.types.is_large_binary(arr.type) or pa.types.is_binary(arr.type)):
            raise SchemaError(f"blob column {self.fld.name!r} needs binary payloads, got {arr.type}")
        if not self.fld.nullable and arr.null_count:
            raise SchemaError(f"field {self.fld.name!r} (id {self.fld.id}) is not nullable but the data has nulls")
        desc = np.empty((len(arr), 2), dtype="<u8")
        for i, v in enumerate(arr.to_pylist()):  # one buffer per payload: a write per blob, not per byte
            if v is None:
                desc[i] = (1, 0)
            else:
                desc[i] = self.w._sink.write_buffer(v)
        self.rows.append(desc)

    def flush(self, final: bool) -> None:
        if not self.rows:
            return
        desc = np.concatenate(self.rows)
        self.rows = []
        enc = epb.ArrayEncoding()
        for _ in range(2):
            inner = enc.packed_struct.inner.add()
            inner.nullable.no_nulls.values.flat.bits_per_value = 64
            inner.nullable.no_nulls.values.flat.buffer.SetInParent()
        enc.packed_struct.buffer.SetInParent()
        self.w._emit_page(self.column, len(desc), [desc.tobytes()], enc)


def _description_layout(n: int, nullable: bool) -> pb.PageLayout:
    layout = pb.PageLayout()
    fz = layout.full_zip_layout
    fz.bits_def = 1 if nullable else 0
    fz.bits_per_offset = 32
    fz.num_items = n
    fz.num_visible_items = n
    vps = fz.value_compression.variable_packed_struct
    for bits in (8, 64, 64, 32):
        f = vps.fields.add()
        f.value.flat.bits_per_value = bits
        f.bits_per_value = bits
    f = vps.fields.add()
    f.value.variable.offsets.flat.bits_per_value = 32
    f.bits_per_length = 32
    fz.layers.append(pb.REPDEF_NULLABLE_ITEM if nullable else pb.REPDEF_ALL_VALID_ITEM)
    return layout


class BlobV2Encoder:
    """A blob v2 column (2.2): payloads inline, packed or dedicated; full-zip description pages."""

    def __init__(self, w: Any, fld: LanceField, column: int, sidecar: SidecarOpener | None) -> None:
        self.w, self.fld, self.column, self.sidecar = w, fld, column, sidecar
        self.inline_max, self.packed_max, self.pack_file_max = _thresholds(fld)
        self.items: list[tuple[int, int, int, int, bytes] | None] = []
        self.next_blob_id = 1
        self.pack: BinaryIO | None = None
        self.pack_id = 0
        self.pack_pos = 0

    def _open(self, blob_id: int) -> BinaryIO:
        if self.sidecar is None:
            raise UnsupportedFeatureError(
                f"blob column {self.fld.name!r}: payloads over {self.inline_max} bytes need sidecar files, "
                "which this writer cannot create"
            )
        return self.sidecar(sidecar_name(blob_id))

    def _packed(self, data: bytes) -> tuple[int, int]:
        if self.pack is None or self.pack_pos + len(data) > self.pack_file_max:
            if self.pack is not None:
                self.pack.close()
            self.pack_id = self.next_blob_id
            self.next_blob_id += 1
            self.pack = self._open(self.pack_id)
            self.pack_pos = 0
        pos = self.pack_pos
        self.pack.write(data)
        self.pack_pos += len(data)
        return pos, self.pack_id

    def add(self, arr: pa.Array) -> None:
        if len(arr) == 0:
            return
        if not pa.types.is_struct(arr.type) or arr.type.get_field_index("data") < 0:
            raise SchemaError(f"blob column {self.fld.name!r} needs struct<data, uri, position, size>, got {arr.type}")
        if not self.fld.nullable and arr.null_count:
            raise SchemaError(f"field {self.fld.name!r} (id {self.fld.id}) is not nullable but the data has nulls")
        valid = arr.is_valid().to_pylist()
        data = arr.field("data").to_pylist()
        uri = arr.field("uri").to_pylist() if arr.type.get_field_index("uri") >= 0 else [None] * len(arr)
        has_range = arr.type.get_field_index("position") >= 0
        pos = arr.field("position").to_pylist() if has_range else [None] * len(arr)
        size = arr.field("size").to_pylist() if has_range else [None] * len(arr)
        for i in range(len(arr)):  # one write per blob (payloads are large), not per byte
            if not valid[i]:
                self.items.append(None)
            elif data[i] is not None:
                d = data[i]
                if len(d) <= self.inline_max:
                    p, _ = self.w._sink.write_buffer(d)
                    self.items.append((KIND_INLINE, p, len(d), 0, b""))
                elif len(d) <= self.packed_max:
                    p, bid = self._packed(d)
                    self.items.append((KIND_PACKED, p, len(d), bid, b""))
                else:
                    bid = self.next_blob_id
                    self.next_blob_id += 1
                    with self._open(bid) as f:
                        f.write(d)
                    self.items.append((KIND_DEDICATED, 0, len(d), bid, b""))
            elif uri[i] is not None:
                self.items.append((KIND_EXTERNAL, int(pos[i] or 0), int(size[i] or 0), 0, uri[i].encode()))
            else:
                raise SchemaError(f"blob column {self.fld.name!r}: a non-null blob without data or uri")

    def flush(self, final: bool) -> None:
        if final and self.pack is not None:
            self.pack.close()
            self.pack = None
        if not self.items:
            return
        items, self.items = self.items, []
        n = len(items)
        nullable = any(x is None for x in items)
        parts, ends = [], np.zeros(n + 1, dtype=np.int64)
        total = 0
        for i, it in enumerate(items):
            if it is None:
                chunk = b"\x01"
            else:
                kind, p, s, bid, u = it
                body = (np.array([kind], "<u1").tobytes() + np.array([p, s], "<u8").tobytes()
                        + np.array([bid, len(u)], "<u4").tobytes() + u)
                chunk = (b"\x00" if nullable else b"") + np.array([len(body)], "<u4").tobytes() + body
            parts.append(chunk)
            total += len(chunk)
            ends[i + 1] = total
        width = next(w for w in (1, 2, 4, 8) if total < 1 << (8 * w))
        ri = ends.astype(f"<u{width}").tobytes()
        self.w._emit_page21(self.column, n, [b"".join(parts), ri], _description_layout(n, nullable))
