"""Fixed-size lists of fixed-size lists (``fixed_size_list<fixed_size_list<...<primitive>>>``)
in 2.1/2.2 mini-block pages, as pylance 14 writes them (verified byte by byte).

The page is one leaf column: rows carry their validity in the def levels of one item layer; the
value encoding nests ``fixed_size_list{items_per_value, values, has_validity}`` per level.  A
chunk holds, after its levels, one buffer per level that has item validity (outermost first:
``rows * dim`` bits, then ``rows * dim * dim2`` bits, ...), then the values buffer.
"""

from typing import Any

import numpy as np
import pyarrow as pa

from lance_ops.format._proto import encodings_v2_1_pb2 as pb
from lance_ops.format.file.v21.compression import Where, fixed_block, fixed_chunk

__all__ = ["decode_nested_fsl_page", "encode_nested_fsl_page", "is_nested_fsl", "row_bytes"]


_ALIGN = 8


def is_nested_fsl(dtype: pa.DataType) -> bool:
    """A fixed-size list of fixed-size lists of fixed-width (byte-sized) primitives."""
    if not (pa.types.is_fixed_size_list(dtype) and pa.types.is_fixed_size_list(dtype.value_type)):
        return False
    t = dtype
    while pa.types.is_fixed_size_list(t):
        t = t.value_type
    if pa.types.is_nested(t) or pa.types.is_boolean(t) or pa.types.is_dictionary(t):
        return False
    try:
        return t.bit_width % 8 == 0 and t.bit_width > 0
    except ValueError:
        return False


def _levels(enc: pb.CompressiveEncoding, w: Where) -> list[tuple[int, bool]]:
    """``(items_per_value, has_validity)`` per nesting level, and the innermost encoding."""
    out = []
    while enc.WhichOneof("compression") == "fixed_size_list":
        out.append((int(enc.fixed_size_list.items_per_value), bool(enc.fixed_size_list.has_validity)))
        enc = enc.fixed_size_list.values
    if not out:
        raise w.corrupt("nested fixed-size list without fixed_size_list encoding")
    return out


def _inner(enc: pb.CompressiveEncoding) -> pb.CompressiveEncoding:
    while enc.WhichOneof("compression") == "fixed_size_list":
        enc = enc.fixed_size_list.values
    return enc


def decode_nested_fsl_page(
    w: Where, layout: pb.PageLayout, n: int, buffers: list[pa.Buffer], dtype: pa.DataType
) -> pa.Array:
    """One mini-block page of a nested fixed-size list column (or an all-null constant page)."""
    c = layout.constant_layout
    if (layout.WhichOneof("layout") == "constant_layout" and not buffers and not c.HasField("inline_value")
            and list(c.layers) == [pb.REPDEF_NULLABLE_ITEM]):
        return pa.nulls(n, type=dtype)
    if layout.WhichOneof("layout") != "mini_block_layout":
        raise w.unsupported(f"{layout.WhichOneof('layout')} pages of nested fixed-size lists ({dtype})")
    mb = layout.mini_block_layout
    layers = list(mb.layers)
    if len(layers) != 1 or layers[0] not in (pb.REPDEF_ALL_VALID_ITEM, pb.REPDEF_NULLABLE_ITEM):
        raise w.unsupported(f"rep/def layers {layers} of a nested fixed-size list")
    if mb.HasField("dictionary") or mb.HasField("rep_compression") or len(buffers) < 2:
        raise w.unsupported("nested fixed-size list page with a dictionary or repetition levels")
    levels = _levels(mb.value_compression, w)
    inner = _inner(mb.value_compression)
    dims = [d for d, _ in levels]
    leaf = dtype
    for _ in dims:
        leaf = leaf.value_type
    if list(_dims(dtype)) != dims:
        raise w.corrupt(f"page dimensions {dims} do not match the type {dtype}")
    has_def = mb.HasField("def_compression")
    word = 4 if mb.has_large_chunk else 2
    meta = np.frombuffer(buffers[0], dtype=f"<u{word}").astype(np.int64)
    raw = np.frombuffer(buffers[1], dtype=np.uint8)
    sizes = ((meta >> 4) + 1) * _ALIGN
    counts = np.left_shift(np.int64(1), meta & 0xF)
    if len(meta):
        counts[-1] = n - int(counts[:-1].sum())
    nbuf = int(mb.num_buffers)
    defs, valids, values = [], [[] for _ in levels], []
    start = 0
    for size, count in zip(sizes.tolist(), counts.tolist(), strict=True):
        chunk = raw[start : start + size]
        start += size
        widths = [2] + [2] * has_def + [word] * nbuf
        head, pos = [], 0
        for width in widths:
            head.append(int.from_bytes(chunk[pos : pos + width].tobytes(), "little"))
            pos += width
        pos = -(-pos // _ALIGN) * _ALIGN
        if has_def:
            dsz = head[1]
            defs.append(fixed_block(w, mb.def_compression, chunk[pos : pos + dsz], count))
            pos = -(-(pos + dsz) // _ALIGN) * _ALIGN
        bufs = []
        for s in head[1 + has_def :]:
            bufs.append(chunk[pos : pos + s])
            pos = -(-(pos + s) // _ALIGN) * _ALIGN
        k, items = 0, count
        for li, (dim, has_validity) in enumerate(levels):
            items *= dim
            if has_validity:
                valids[li].append(np.unpackbits(bufs[k], bitorder="little", count=items).astype(bool))
                k += 1
        values.append(fixed_chunk(w, inner, bufs[k:], items))
    row_valid = (np.concatenate(defs) == 0) if has_def and defs else None
    flat = np.concatenate(values) if values else np.zeros(0, np.uint8)
    arr = pa.Array.from_buffers(leaf, len(flat), [None, pa.py_buffer(np.ascontiguousarray(flat))])
    for li in range(len(levels) - 1, -1, -1):
        t = _type_at(dtype, li)
        count = len(arr) // dims[li]
        valid = np.concatenate(valids[li]) if valids[li] else None
        if valid is not None:  # the validity of the items of level li: the arrays just built
            arr = _with_validity(arr, valid)
        arr = pa.FixedSizeListArray.from_arrays(arr, type=t) if count or len(arr) == 0 else arr
    if row_valid is not None and not row_valid.all():
        arr = _with_validity(arr, row_valid)
    return arr


def _dims(t: pa.DataType) -> list[int]:
    out = []
    while pa.types.is_fixed_size_list(t):
        out.append(t.list_size)
        t = t.value_type
    return out


def _type_at(t: pa.DataType, depth: int) -> pa.DataType:
    for _ in range(depth):
        t = t.value_type
    return t


def _with_validity(arr: Any, valid: np.ndarray) -> pa.Array:
    if valid.all():
        return arr
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little"))
    if pa.types.is_fixed_size_list(arr.type):
        return pa.Array.from_buffers(arr.type, len(arr), [bitmap], children=[arr.values])
    return pa.Array.from_buffers(arr.type, len(arr), [bitmap, *arr.buffers()[1:]])


# ------------------------------------------------------------------------------- encoding
_MAX_CHUNK_BYTES = 32 * 1024
_MAX_CHUNK_ROWS = 4096


def row_bytes(dtype: pa.DataType) -> float:
    """Bytes one row of a nested fixed-size list takes in a chunk (values and validity bits)."""
    dims = _dims(dtype)
    leaf = _type_at(dtype, len(dims))
    items, bits = 1, 0.0
    for d in dims:
        items *= d
        bits += items
    return items * leaf.bit_width / 8 + bits / 8


def _validity_bits(arr: pa.Array) -> np.ndarray:
    if arr.null_count == 0:
        return np.ones(len(arr), dtype=bool)
    return np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)


def encode_nested_fsl_page(arr: pa.Array, version: str) -> tuple[list[Any], pb.PageLayout]:
    """Buffers and layout of one mini-block page of a nested fixed-size list column, as pylance
    writes it: def levels ``flat{16}`` when rows are null, every level with item validity."""
    dtype = arr.type
    dims = _dims(dtype)
    leaf = _type_at(dtype, len(dims))
    n = len(arr)
    if arr.offset:
        arr = pa.concat_arrays([arr])
    row_valid = _validity_bits(arr)
    nullable = not row_valid.all()
    # per level: the item validity of that level's children, and the innermost values
    level_valid, cur = [], arr
    for _ in dims:
        child = cur.values.slice(cur.offset * cur.type.list_size, len(cur) * cur.type.list_size)
        level_valid.append(_validity_bits(child))
        cur = child
    if cur.offset:
        cur = pa.concat_arrays([cur])
    width = leaf.bit_width // 8
    values = np.frombuffer(cur.buffers()[1], dtype=np.uint8)[: len(cur) * width]
    per_row = [int(np.prod(dims[: i + 1])) for i in range(len(dims))]
    rb = row_bytes(dtype) + 2 * nullable
    rows = 1
    while rows * 2 <= _MAX_CHUNK_ROWS and (rows * 2) * rb + 64 + 8 * len(dims) <= _MAX_CHUNK_BYTES:
        rows *= 2
    large = version != "2.1"
    meta, parts = [], []
    for r0 in range(0, n, rows):
        k = min(rows, n - r0)
        last = r0 + k >= n
        body = []
        head = [k]
        if nullable:
            d = (~row_valid[r0 : r0 + k]).astype("<u2").tobytes()
            head.append(len(d))
            body.append(d)
        sizes = []
        for li, per in enumerate(per_row):
            b = np.packbits(level_valid[li][r0 * per : (r0 + k) * per], bitorder="little").tobytes()
            sizes.append(len(b))
            body.append(b)
        v = values[r0 * per_row[-1] * width : (r0 + k) * per_row[-1] * width].tobytes()
        sizes.append(len(v))
        body.append(v)
        blob = bytearray(np.asarray(head, "<u2").tobytes() + np.asarray(sizes, "<u4" if large else "<u2").tobytes())
        blob += b"\0" * (-len(blob) % _ALIGN)
        for b in body:
            blob += b
            blob += b"\0" * (-len(blob) % _ALIGN)
        log = 0 if last else k.bit_length() - 1
        meta.append(((len(blob) // _ALIGN - 1) << 4) | log)
        parts.append(bytes(blob))
    layout = pb.PageLayout()
    mb = layout.mini_block_layout
    if nullable:
        mb.def_compression.flat.bits_per_value = 16
    enc = mb.value_compression
    for d in dims:
        enc.fixed_size_list.items_per_value = d
        enc.fixed_size_list.has_validity = True
        enc = enc.fixed_size_list.values
    enc.flat.bits_per_value = leaf.bit_width
    mb.layers.append(pb.REPDEF_NULLABLE_ITEM if nullable else pb.REPDEF_ALL_VALID_ITEM)
    mb.num_buffers = len(dims) + 1
    mb.num_items = n
    mb.has_large_chunk = large
    return [np.asarray(meta, "<u4" if large else "<u2").tobytes(), b"".join(parts)], layout
