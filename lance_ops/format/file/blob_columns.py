"""Blob columns: descriptions in the data file, payloads beside them (verified with pylance 14).

Two generations, both read as pylance's ``to_table`` returns them (descriptions, not payloads):

- **2.0** (``large_binary`` with field metadata ``lance-encoding:blob=true``): column encoding
  ``blob{inner}``; each page is a ``packed_struct`` of two u64 per row, ``position`` and
  ``size`` of the payload, which is a buffer of the same data file (64-byte aligned).  A null
  is ``(1, 0)``.  Read as ``struct<position: uint64, size: uint64>``.
- **blob v2** (2.2; the ``lance.blob.v2`` extension, whose storage is
  ``struct<data, uri, position, size>``; a 2.2 ``lance-encoding:blob`` column is stored as one
  too): the data file's schema gives the field metadata ``lance-encoding:blob`` and
  ``lance-encoding:packed`` and five children with field id -1 (``kind: u8``, ``position: u64``,
  ``size: u64``, ``blob_id: u32``, ``blob_uri: string``), stored as ONE column of full-zip pages
  whose values are ``variable_packed_struct`` rows.  ``kind`` 0 = inline (a buffer of the data
  file), 1 = packed (``position``/``size`` inside the sidecar ``data/<stem>/<blob_id>.blob``),
  2 = dedicated (the whole sidecar), 3 = external (``blob_uri``).  Sidecar names are the 32 bits
  of ``blob_id``, least significant first (``1`` -> ``1000...0.blob``).  pylance 14 keeps a
  payload inline up to 64 KiB, packs it up to 4 MiB, and gives larger ones their own file.
"""

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from lance_ops.format.errors import CorruptFileError, UnsupportedFeatureError

__all__ = [
    "V1_DESCRIPTION",
    "as_blob_storage",
    "V2_DESCRIPTION",
    "decode_description_page",
    "description_type",
    "is_blob_field",
    "is_description_type",
    "scan_schema",
    "sidecar_name",
    "strip_packed_children",
]

BLOB_KEY = b"lance-encoding:blob"
PACKED_KEY = b"lance-encoding:packed"
EXT_KEY = b"ARROW:extension:name"
BLOB_V2 = b"lance.blob.v2"

V1_DESCRIPTION = pa.struct([pa.field("position", pa.uint64()), pa.field("size", pa.uint64())])
V2_DESCRIPTION = pa.struct(
    [
        pa.field("kind", pa.uint8(), nullable=False),
        pa.field("position", pa.uint64(), nullable=False),
        pa.field("size", pa.uint64(), nullable=False),
        pa.field("blob_id", pa.uint32(), nullable=False),
        pa.field("blob_uri", pa.string(), nullable=False),
    ]
)
KIND_INLINE, KIND_PACKED, KIND_DEDICATED, KIND_EXTERNAL = 0, 1, 2, 3


def _meta(md: Any) -> dict[bytes, bytes]:
    return {(k.encode() if isinstance(k, str) else k): (v.encode() if isinstance(v, str) else v) for k, v in (md or {}).items()}


def is_blob_field(f: Any) -> bool:
    """A Lance or Arrow field that is a blob column (either generation)."""
    md = _meta(getattr(f, "metadata", None))
    if md.get(BLOB_KEY) == b"true" or md.get(EXT_KEY) == BLOB_V2:
        return True
    return getattr(f, "extension_name", "") == BLOB_V2.decode()


def description_type(f: Any) -> pa.DataType:
    """What a scan returns for blob field ``f`` (pylance's ``to_table``)."""
    md = _meta(getattr(f, "metadata", None))
    t = getattr(f, "type", None)
    if md.get(EXT_KEY) == BLOB_V2 or md.get(PACKED_KEY) == b"true" or (t is not None and pa.types.is_struct(t)):
        return V2_DESCRIPTION
    if getattr(f, "logical_type", "") == "struct":
        return V2_DESCRIPTION
    return V1_DESCRIPTION


def as_blob_storage(arr: pa.Array, target: pa.DataType) -> pa.Array | None:
    """``arr`` as the blob v2 storage struct ``target`` (``struct<data, uri[, position, size]>``)
    when pylance would take it for such a column: a ``lance.blob.v2`` extension array with that
    storage, or payloads as ``binary``/``large_binary``; None otherwise."""
    if not pa.types.is_struct(target) or target.get_field_index("data") < 0:
        return None
    if isinstance(arr.type, pa.ExtensionType) and arr.type.storage_type == target:
        return arr.storage
    if not (pa.types.is_binary(arr.type) or pa.types.is_large_binary(arr.type)):
        return None
    children = [arr.cast(c.type) if c.name == "data" else pa.nulls(len(arr), c.type) for c in target]
    return pa.StructArray.from_arrays(children, fields=list(target), mask=arr.is_null())


def is_description_type(t: pa.DataType) -> bool:
    return t == V1_DESCRIPTION or t == V2_DESCRIPTION


def _scan_field(f: pa.Field) -> pa.Field:
    if not is_blob_field(f):
        return f
    md = {BLOB_KEY: b"true"}
    dtype = description_type(f)
    if dtype == V2_DESCRIPTION:
        md[PACKED_KEY] = b"true"
    return pa.field(f.name, dtype, f.nullable, metadata=md)


def scan_schema(schema: pa.Schema) -> pa.Schema:
    """``schema`` with blob columns as the descriptions scans return (as pylance)."""
    if not any(is_blob_field(f) for f in schema):
        return schema
    return pa.schema([_scan_field(f) for f in schema], metadata=schema.metadata)


def strip_packed_children(fields: Iterable[Any]) -> list[Any]:
    """A data file schema without the id -1 children pylance lists after a packed blob field."""
    out = []
    for f in fields:
        if f.id == -1 and f.parent_id == -1 and out and _meta(out[-1].metadata).get(PACKED_KEY) == b"true":
            continue
        out.append(f)
    return out


def sidecar_name(blob_id: int) -> str:
    """``<32 bits of blob_id, least significant first>.blob``."""
    return "".join("1" if blob_id >> i & 1 else "0" for i in range(32)) + ".blob"


# ------------------------------------------------------------------------------- decoding
def _gather(raw: np.ndarray, starts: np.ndarray, width: int) -> np.ndarray:
    if not len(starts):
        return np.zeros(0, dtype=f"<u{width}")
    return np.ascontiguousarray(raw[starts[:, None] + np.arange(width)[None, :]]).view(f"<u{width}").reshape(-1)


def decode_description_page(
    path: str, column: int, encoding: Any, n: int, buffers: Sequence[pa.Buffer], dtype: pa.DataType
) -> pa.Array:
    """One page of blob descriptions (see the module docstring for both layouts)."""
    kind = encoding.WhichOneof("array_encoding") if hasattr(encoding, "WhichOneof") and hasattr(
        encoding, "packed_struct") else None
    if dtype == V1_DESCRIPTION:
        if kind != "packed_struct" or len(buffers) != 1:
            raise UnsupportedFeatureError(f"{path}: column {column}: blob description page encoding {kind}")
        raw = np.frombuffer(buffers[0], dtype=np.uint8)
        if len(raw) < 16 * n:
            raise CorruptFileError(path, f"column {column}: blob description page of {len(raw)} bytes for {n} rows")
        rows = raw[: 16 * n].view("<u8").reshape(n, 2)
        return pa.StructArray.from_arrays(
            [pa.array(rows[:, 0].copy()), pa.array(rows[:, 1].copy())], fields=list(V1_DESCRIPTION)
        )
    return _decode_v2(path, column, encoding, n, buffers)


def _decode_v2(path: str, column: int, layout: Any, n: int, buffers: Sequence[pa.Buffer]) -> pa.Array:
    what = layout.WhichOneof("layout")
    if what == "constant_layout" and not buffers and not layout.constant_layout.HasField("inline_value"):
        return pa.nulls(n, type=V2_DESCRIPTION)  # every blob null
    fz = layout.full_zip_layout
    if what != "full_zip_layout" or fz.value_compression.WhichOneof("compression") != "variable_packed_struct":
        raise UnsupportedFeatureError(f"{path}: column {column}: blob v2 descriptions in a {what} page")
    fields = fz.value_compression.variable_packed_struct.fields
    layout_ok = (
        len(fields) == 5
        and [f.WhichOneof("layout") for f in fields] == ["bits_per_value"] * 4 + ["bits_per_length"]
        and [int(f.bits_per_value) for f in fields[:4]] == [8, 64, 64, 32]
        and int(fields[4].bits_per_length) == 32
        and all(f.value.WhichOneof("compression") in ("flat", "variable") for f in fields)
    )
    if not layout_ok or fz.bits_rep or len(buffers) < 2 or int(fz.bits_per_offset) != 32:
        raise UnsupportedFeatureError(f"{path}: column {column}: blob v2 description layout {fz}")
    raw = np.frombuffer(buffers[0], dtype=np.uint8)
    cw = 0 if not fz.bits_def else (1 if fz.bits_def <= 8 else 2 if fz.bits_def <= 16 else 4)
    ri_raw = np.frombuffer(buffers[1], dtype=np.uint8)
    width = len(ri_raw) // (n + 1) if n + 1 else 0
    if width not in (1, 2, 4, 8) or width * (n + 1) != len(ri_raw):
        raise CorruptFileError(path, f"column {column}: blob description repetition index of {len(ri_raw)} bytes")
    ri = ri_raw.view(f"<u{width}").astype(np.int64)
    if np.any(np.diff(ri) < cw) or ri[-1] > len(raw):
        raise CorruptFileError(path, f"column {column}: bad blob description repetition index")
    starts = ri[:-1]
    valid = np.ones(n, dtype=bool) if not cw else _gather(raw, starts, cw).astype(np.int64) == 0
    body = starts[valid] + cw + 4  # after the control word and the u32 length of the packed row
    if len(body) and np.any(body + 25 > ri[1:][valid]):
        raise CorruptFileError(path, f"column {column}: blob description shorter than its fixed part")
    kinds = raw[body] if len(body) else np.zeros(0, np.uint8)
    pos = _gather(raw, body + 1, 8)
    size = _gather(raw, body + 9, 8)
    bid = _gather(raw, body + 17, 4)
    ulen = _gather(raw, body + 21, 4).astype(np.int64)
    ustart = body + 25
    if len(body) and np.any(ustart + ulen > ri[1:][valid]):
        raise CorruptFileError(path, f"column {column}: blob description uri runs past its value")
    offs = np.zeros(len(body) + 1, dtype=np.int64)
    np.cumsum(ulen, out=offs[1:])
    total = int(offs[-1])
    if total:
        idx = np.repeat(ustart - offs[:-1], ulen) + np.arange(total)
        udata = raw[idx]
    else:
        udata = np.zeros(0, np.uint8)
    uris = pa.Array.from_buffers(pa.string(), len(body), [None, pa.py_buffer(offs.astype(np.int32)), pa.py_buffer(udata)])
    cols = [pa.array(kinds, pa.uint8()), pa.array(pos, pa.uint64()), pa.array(size, pa.uint64()),
            pa.array(bid, pa.uint32()), uris]
    inner = pa.StructArray.from_arrays(cols, fields=list(V2_DESCRIPTION))
    if valid.all():
        return inner
    # spread the valid rows over the page (nulls: zeroed children, as pylance's nulls carry none)
    take = np.cumsum(valid) - 1
    take[~valid] = 0
    if len(inner) == 0:
        return pa.nulls(n, type=V2_DESCRIPTION)
    spread = inner.take(pa.array(take))
    mask = pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(V2_DESCRIPTION, n, [mask], children=[spread.field(i) for i in range(5)])
