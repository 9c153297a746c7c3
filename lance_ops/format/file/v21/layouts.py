"""Structural page layouts of Lance 2.1 / 2.2 (``lance.encodings21.PageLayout``).

Implemented: mini-block pages of one leaf layer (``ALL_VALID_ITEM`` / ``NULLABLE_ITEM``, i.e. no
lists or structs), constant / all-null pages.  Everything else raises
:class:`UnsupportedFeatureError` naming the file, column and layout/encoding.

Mini-block page buffers: ``[chunk meta, chunk data, (dictionary), (repetition index)]``.
Chunk meta: one word per chunk (u16 in 2.1, u32 when ``has_large_chunk``): low 4 bits = log2 of
the chunk's value count (the last chunk holds the rest), the rest = chunk bytes / 8 - 1.
A chunk: ``u16 num_levels``, ``u16 rep size`` (if rep), ``u16 def size`` (if def), one size per
value buffer (u16, or u32 with ``has_large_chunk``), padding to 8, then the rep, def and value
buffers, each padded to 8.
"""

from typing import Any

import numpy as np
import pyarrow as pa
from google.protobuf.message import DecodeError

from lance_ops.format._proto import encodings_v2_1_pb2 as pb
from lance_ops.format.errors import CorruptFileError, LevelsError, UnsupportedFeatureError
from lance_ops.format.file.v21 import fsst
from lance_ops.format.file.v21.chunks import decode_chunks
from lance_ops.format.file.v21.compression import (
    Where,
    fixed_block,
    fixed_chunk,
    full_zip_repetition_index,
    leaf_type_below,
    per_value_general,
    variable_block,
    variable_chunk,
)
from lance_ops.format.file.v21.fullzip import decode_full_zip_rep
from lance_ops.format.file.v21.nested_fsl import decode_nested_fsl_page, is_nested_fsl
from lance_ops.format.file.v21.repdef import is_list_layer, max_visible_level, unravel

__all__ = ["decode_page", "parse_layout"]

_ALIGN = 8
_ITEM_LAYERS = (pb.REPDEF_ALL_VALID_ITEM, pb.REPDEF_NULLABLE_ITEM)


def parse_layout(path: str, data: bytes, where: str) -> pb.PageLayout:
    try:
        return pb.PageLayout.FromString(data)
    except DecodeError as e:
        raise CorruptFileError(path, f"cannot decode 2.1 page layout of {where}: {e}") from e


def _pad(n: int) -> int:
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


def _is_var(dtype: pa.DataType) -> bool:
    return (
        pa.types.is_string(dtype) or pa.types.is_binary(dtype)
        or pa.types.is_large_string(dtype) or pa.types.is_large_binary(dtype)
    )


def _bits_of(dtype: pa.DataType) -> int | None:
    if pa.types.is_boolean(dtype):
        return 1
    try:
        return dtype.bit_width
    except ValueError:
        return None


def _check_layers(w: Where, layers: Any) -> bool:
    """True if the page has a nullable item layer; raise for lists/structs (rep/def > 1 layer)."""
    layers = list(layers)
    if len(layers) != 1 or layers[0] not in _ITEM_LAYERS:
        names = [pb.RepDefLayer.Name(x) for x in layers]
        raise w.unsupported(f"rep/def layers {names} (lists / nested structs)")
    return layers[0] == pb.REPDEF_NULLABLE_ITEM


def decode_page(
    path: str,
    column: int,
    layout: pb.PageLayout,
    num_rows: int,
    buffers: list[pa.Buffer],
    dtype: pa.DataType,
    version: str = "2.1+",
    keep: np.ndarray | None = None,
) -> pa.Array:
    """Decode one 2.1/2.2 page of a leaf column into an Arrow array of ``num_rows`` rows.

    ``keep``: the rows (a uint8 per row) the caller will keep; the strings of the others may
    come out empty (an FSST mini-block page then decompresses only the kept ones)."""
    w = Where(path, column, version)
    kind = layout.WhichOneof("layout")
    if is_nested_fsl(dtype):
        return decode_nested_fsl_page(w, layout, num_rows, buffers, dtype)
    if pa.types.is_dictionary(dtype):
        return _arrow_dictionary_page(w, layout, kind, num_rows, buffers, dtype, version)
    if kind == "constant_layout":
        return _constant(w, layout.constant_layout, num_rows, buffers, dtype)
    if kind == "mini_block_layout":
        if keep is not None and len(keep) == num_rows:
            w = Where(path, column, version, keep)
        return _mini_block(w, layout.mini_block_layout, num_rows, buffers, dtype)
    if kind == "full_zip_layout":
        return _full_zip(w, layout.full_zip_layout, num_rows, buffers, dtype)
    raise w.unsupported(f"page layout {kind}")


def _arrow_dictionary_page(
    w: Where, layout: pb.PageLayout, kind: str | None, n: int, buffers: list[pa.Buffer], dtype: pa.DataType,
    version: str,
) -> pa.Array:
    """An Arrow dictionary column: pylance stores it as its value type with a page dictionary
    (mini-block ``dictionary`` + indices) and reads back exactly that dictionary and those
    indices; a page without a dictionary is decoded as values and dictionary-encoded."""
    if not _is_var(dtype.value_type) and _bits_of(dtype.value_type) is None:
        raise w.unsupported(f"(any) for the Arrow dictionary type {dtype}")
    if kind == "mini_block_layout" and layout.mini_block_layout.HasField("dictionary"):
        if len(layout.mini_block_layout.layers) != 1:
            raise w.unsupported(f"nested pages of the Arrow dictionary type {dtype}")
        return _mini_block(w, layout.mini_block_layout, n, buffers, dtype)
    values = decode_page(w.path, w.column, layout, n, buffers, dtype.value_type, version)
    return values.dictionary_encode().cast(dtype)


def _dictionary_array(idx: np.ndarray, valid: np.ndarray | None, items: pa.Array, dtype: pa.DataType) -> pa.Array:
    """``dtype`` (an Arrow dictionary type) from a page dictionary and its indices."""
    index_type = dtype.index_type
    vb = pa.py_buffer(np.packbits(valid, bitorder="little")) if valid is not None else None
    indices = pa.Array.from_buffers(index_type, len(idx), [vb, pa.py_buffer(idx.astype(index_type.to_pandas_dtype()))])
    return pa.DictionaryArray.from_arrays(indices, items.cast(dtype.value_type))


# ---------------------------------------------------------------------------------- full-zip
def _full_zip(w: Where, fz: pb.FullZipLayout, n: int, buffers: list[pa.Buffer], dtype: pa.DataType) -> pa.Array:
    """Full-zip pages of one leaf layer: per item ``[control word][value]``.

    Control word = def level (bits_def bits, in 1/2/4 bytes); no rep for leaf layers.  Fixed
    width: every item carries its value (nulls too).  Variable width: a valid item carries a
    length prefix (bits_per_offset) and its bytes, a null item nothing; buffer 1 (the repetition
    index, ``rows + 1`` byte positions) gives each row's start.
    """
    layers = list(fz.layers)
    if fz.bits_rep:  # lists: see fullzip.py
        return decode_full_zip_rep(w, fz, n, buffers, dtype, _build_fixed, _build_var, _per_value_variable)
    chained = len(layers) > 1 and all(x in _ITEM_LAYERS for x in layers)
    if chained:
        nullable = pb.REPDEF_NULLABLE_ITEM in layers
        outer, dtype = dtype, leaf_type_below(w, dtype, len(layers) - 1)
    else:
        nullable = _check_layers(w, fz.layers)
    if fz.bits_def and not nullable:
        raise w.corrupt("full-zip definition bits on an all-valid layer")
    if int(fz.num_items) != n or int(fz.num_visible_items) != n:
        raise w.corrupt(f"full-zip page has {fz.num_items} items for {n} rows")
    cw = 0 if not fz.bits_def else (1 if fz.bits_def <= 8 else 2 if fz.bits_def <= 16 else 4)
    if not buffers:
        raise w.corrupt("full-zip page without a data buffer")
    raw = np.frombuffer(buffers[0], dtype=np.uint8)
    details = fz.WhichOneof("details")
    valid = None
    if details == "bits_per_value":
        bits = int(fz.bits_per_value)
        if bits % 8:
            raise w.unsupported(f"full-zip with {bits} bits per value")
        bpv = bits // 8
        stride = cw + bpv
        if len(raw) < n * stride:
            raise w.corrupt(f"full-zip buffer of {len(raw)} bytes, {n * stride} needed")
        items = raw[: n * stride].reshape(n, stride)
        levels = _cw_defs(items[:, :cw]) if cw else None
        values = np.ascontiguousarray(items[:, cw:]).reshape(-1)
        vals = fixed_chunk(w, fz.value_compression, [values], n)
        if chained:
            return _unravel(w, layers, None, levels, _build_fixed(w, [vals], None, n, dtype), outer, n)
        if levels is not None:
            valid = levels == 0
        return _build_fixed(w, [vals], None if valid is None or valid.all() else valid, n, dtype)
    if details == "bits_per_offset":
        if not _is_var(dtype):
            raise w.unsupported(f"full-zip variable-width values for type {dtype}")
        lb = int(fz.bits_per_offset) // 8
        if lb not in (1, 2, 4, 8) or len(buffers) < 2:
            raise w.unsupported(f"full-zip with {fz.bits_per_offset}-bit lengths / no repetition index")
        ri = full_zip_repetition_index(w, buffers[1], n, len(raw))
        if (np.diff(ri) < cw).any():
            raise w.corrupt("bad full-zip repetition index")
        starts = ri[:-1]
        levels = None
        if cw:
            cws = raw[starts[:, None] + np.arange(cw)[None, :]] if n else np.zeros((0, cw), np.uint8)
            levels = _cw_defs(cws)
            valid = levels == 0
        else:
            valid = np.ones(n, dtype=bool)
        body = starts + cw
        dstart = np.where(valid, body + lb, body)
        if (dstart > ri[1:]).any():
            raise w.corrupt("full-zip value shorter than its length prefix")
        lengths = ri[1:] - dstart
        if n and valid.any():
            vb = body[valid]
            declared = raw[vb[:, None] + np.arange(lb)[None, :]].copy().view(f"<u{lb}").reshape(-1)
            if (declared.astype(np.int64) != lengths[valid]).any():
                raise w.corrupt("full-zip value lengths disagree with the repetition index")
        keep = np.zeros(len(raw) + 1, dtype=np.int64)
        np.add.at(keep, dstart, 1)
        np.add.at(keep, ri[1:], -1)
        mask = np.cumsum(keep)[: len(raw)] > 0
        data = raw[mask]
        offs = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(lengths, out=offs[1:])
        offs, data = _per_value_variable(w, fz.value_compression, offs, data)
        leaf = _build_var(w, [(offs, data)], None if valid.all() else valid, n, dtype)
        if chained:
            return _unravel(w, layers, None, levels, leaf, outer, n)
        return leaf
    raise w.unsupported(f"full-zip details {details}")


def _cw_defs(cws: np.ndarray) -> np.ndarray:
    width = cws.shape[1]
    return np.ascontiguousarray(cws).view(f"<u{width}").reshape(-1)


def _per_value_variable(w: Where, enc: pb.CompressiveEncoding, offs: np.ndarray, data: np.ndarray):
    kind = enc.WhichOneof("compression")
    if kind == "variable":
        return offs, data
    if kind == "fsst":
        inner = _per_value_variable(w, enc.fsst.values, offs, data)
        try:
            return fsst.decompress(bytes(enc.fsst.symbol_table), *inner)
        except ValueError as e:
            raise w.corrupt(f"bad FSST data: {e}") from None
    if kind == "general":  # large values: each one compressed on its own (zstd / lz4)
        return per_value_general(w, enc.general.compression, offs, data)
    raise w.unsupported(f"{kind} (full-zip variable-width values)")


# ---------------------------------------------------------------------------------- constant
def _constant(w: Where, c: pb.ConstantLayout, n: int, buffers: list[pa.Buffer], dtype: pa.DataType) -> pa.Array:
    layers = list(c.layers)
    if len(layers) > 1:
        return _constant_nested(w, c, n, buffers, dtype, layers)
    if len(buffers) == 3:  # variable-width value in a buffer + levels (2.2)
        return _constant_nested(w, c, n, buffers, dtype, layers)
    nullable = _check_layers(w, c.layers)
    if c.HasField("rep_compression"):
        raise w.unsupported("constant layout with repetition levels")
    if len(buffers) == 2 and nullable and c.HasField("inline_value"):
        # buffers [rep (empty without lists), def]; def levels are raw u16 unless compressed
        if len(buffers[0]):
            raise w.unsupported("constant layout with repetition levels")
        raw = np.frombuffer(buffers[1], dtype=np.uint8)
        if c.HasField("def_compression"):
            levels = fixed_block(w, c.def_compression, raw, n)
        elif len(raw) == 2 * n:
            levels = raw.view("<u2")
        else:
            raise w.corrupt(f"constant layout def buffer of {len(raw)} bytes for {n} rows")
        if len(levels) != n or levels.max(initial=0) > 1:
            raise w.corrupt("bad def levels in constant layout")
        values = _constant(w, pb.ConstantLayout(layers=[pb.REPDEF_ALL_VALID_ITEM], inline_value=c.inline_value),
                           n, [], dtype)
        valid = levels == 0
        return values if valid.all() else _with_validity(values, valid)
    if c.HasField("def_compression"):
        raise w.unsupported("constant layout with definition levels")
    if buffers:
        if len(buffers) == 1 and not c.HasField("inline_value") and not nullable and _is_var(dtype):
            value = _constant_buffer_value(w, bytes(buffers[0]))
            return _repeat_var(w, value, n, dtype)
        raise w.unsupported(f"constant layout with {len(buffers)} buffers for type {dtype}")
    if not c.HasField("inline_value"):
        if not nullable:
            raise w.corrupt("constant layout without a value on a non-nullable layer")
        return pa.nulls(n, type=dtype)
    if nullable:
        raise w.unsupported("constant layout with a value and a nullable layer")
    value = bytes(c.inline_value)
    if _is_var(dtype):
        return _repeat_var(w, value, n, dtype)
    bits = _bits_of(dtype)
    if bits is None or bits == 1 or bits % 8:
        if bits == 1 and len(value) == 1 and value[0] in (0, 1):
            return pa.array(np.full(n, bool(value[0])), type=dtype)
        raise w.unsupported(f"constant layout for type {dtype}")
    if len(value) != bits // 8:
        raise w.corrupt(f"constant value of {len(value)} bytes for {dtype}")
    data = np.tile(np.frombuffer(value, dtype=np.uint8), n)
    return pa.Array.from_buffers(dtype, n, [None, pa.py_buffer(data)])


def _constant_nested(
    w: Where, c: pb.ConstantLayout, n: int, buffers: list[pa.Buffer], dtype: pa.DataType, layers: list[int]
) -> pa.Array:
    """Constant pages of nested columns: the levels are in buffers ``[rep, def]`` (raw u16 or
    ``rep_compression`` / ``def_compression``); visible items all hold the constant (or are null)."""
    leaf_type = leaf_type_below(w, dtype, len(layers) - 1)
    rep = defs = None
    if all(x == pb.REPDEF_ALL_VALID_ITEM for x in layers):  # no levels: any buffers hold the value
        inner = pb.ConstantLayout(layers=[layers[0]])
        if c.HasField("inline_value"):
            inner.inline_value = c.inline_value
        return _unravel(w, layers, None, None, _constant(w, inner, n, buffers, leaf_type), dtype, n)
    value_buffer = None
    if len(buffers) == 3:  # a variable-width constant in a buffer, then the levels
        value_buffer, buffers = buffers[0], buffers[1:]
    if buffers:
        if len(buffers) != 2:
            raise w.corrupt(f"constant layout with {len(buffers)} buffers")
        raws = [np.frombuffer(b, dtype=np.uint8) for b in buffers]
        levels = []
        for raw, comp, count in ((raws[0], "rep_compression", "num_rep_values"),
                                 (raws[1], "def_compression", "num_def_values")):
            if not len(raw):
                levels.append(None)
            elif c.HasField(comp):
                levels.append(fixed_block(w, getattr(c, comp), raw, int(getattr(c, count)) or len(raw) // 2))
            elif len(raw) % 2:
                raise w.corrupt(f"constant layout level buffer of {len(raw)} bytes")
            else:
                levels.append(raw.view("<u2"))
        rep, defs = levels
    if any(is_list_layer(x) for x in layers) and rep is None:
        raise w.corrupt("constant layout of a list column without repetition levels")
    size = len(rep) if rep is not None else len(defs) if defs is not None else n
    mv = max_visible_level(layers)
    vis = None if defs is None else (defs <= mv if mv is not None else np.ones(len(defs), dtype=bool))
    visible = size if vis is None else int(np.count_nonzero(vis))
    if value_buffer is not None:
        if not _is_var(leaf_type):
            raise w.unsupported(f"constant layout with a value buffer for type {leaf_type}")
        leaf = _repeat_var(w, _constant_buffer_value(w, bytes(value_buffer)), visible, leaf_type)
    elif c.HasField("inline_value"):
        leaf = _constant(w, pb.ConstantLayout(layers=[pb.REPDEF_ALL_VALID_ITEM], inline_value=c.inline_value),
                         visible, [], leaf_type)
    elif visible:
        if defs is None or (defs[vis] == 0).any():
            raise w.unsupported("constant layout of a nested column with valid items and no value")
        leaf = pa.nulls(visible, type=leaf_type)
    else:
        leaf = pa.array([], type=leaf_type)
    return _unravel(w, layers, rep, defs, leaf, dtype, n)


def _repeat_var(w: Where, value: bytes, n: int, dtype: pa.DataType) -> pa.Array:
    large = pa.types.is_large_string(dtype) or pa.types.is_large_binary(dtype)
    offsets = np.arange(n + 1, dtype=np.int64) * len(value)
    if not large and offsets[-1] >= 2**31:
        raise UnsupportedFeatureError(f"constant string page of {offsets[-1]} bytes for a 32-bit offset type")
    data = np.tile(np.frombuffer(value, dtype=np.uint8), n) if value else np.zeros(0, np.uint8)
    offs = pa.py_buffer(offsets if large else offsets.astype(np.int32))
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
        try:
            value.decode("utf-8")
        except UnicodeDecodeError as e:
            raise w.corrupt(f"constant string value is not valid UTF-8: {e}") from None
    return pa.Array.from_buffers(dtype, n, [None, offs, pa.py_buffer(data)])


def _constant_buffer_value(w: Where, raw: bytes) -> bytes:
    """A variable-width constant stored in a page buffer (pylance 14, observed): ``u32 2``,
    ``u32 offsets bytes``, ``u32 value bytes``, offsets ``[0, len]`` (u32 or u64), the value."""
    if len(raw) < 12 or int.from_bytes(raw[:4], "little") != 2:
        raise w.unsupported("constant layout buffer of an unknown form")
    olen = int.from_bytes(raw[4:8], "little")
    vlen = int.from_bytes(raw[8:12], "little")
    if olen not in (8, 16) or len(raw) != 12 + olen + vlen:
        raise w.unsupported("constant layout buffer of an unknown form")
    offs = np.frombuffer(raw[12 : 12 + olen], dtype=f"<u{olen // 2}")
    if offs[0] != 0 or offs[1] != vlen:
        raise w.unsupported("constant layout buffer of an unknown form")
    return raw[12 + olen :]


# ---------------------------------------------------------------------------------- mini-block
def _chunks(w: Where, mb: pb.MiniBlockLayout, meta: pa.Buffer, data: pa.Buffer, num_items: int):
    word = 4 if mb.has_large_chunk else 2
    if len(meta) % word:
        raise w.corrupt(f"mini-block chunk metadata of {len(meta)} bytes")
    words = np.frombuffer(meta, dtype=f"<u{word}").astype(np.int64)
    logs = words & 0xF
    sizes = ((words >> 4) + 1) * _ALIGN
    counts = np.left_shift(np.int64(1), logs)
    if len(words):
        counts[-1] = num_items - int(counts[:-1].sum())
        if counts[-1] < 0 or (logs[-1] and counts[-1] != 1 << int(logs[-1])):
            raise w.corrupt("mini-block chunk value counts do not add up to num_items")
    elif num_items:
        raise w.corrupt("mini-block page without chunks")
    starts = np.concatenate([[0], np.cumsum(sizes)])
    if starts[-1] > len(data):
        raise w.corrupt(f"mini-block chunks need {int(starts[-1])} bytes, buffer has {len(data)}")
    return [(int(starts[i]), int(sizes[i]), int(counts[i])) for i in range(len(words))]


def _mini_block(w: Where, mb: pb.MiniBlockLayout, n: int, buffers: list[pa.Buffer], dtype: pa.DataType) -> pa.Array:
    layers = list(mb.layers)
    if len(layers) != 1:  # items are not rows: every value decoded
        return _mini_block_nested(Where(w.path, w.column, w.version), mb, n, buffers, dtype, layers)
    nullable = _check_layers(w, mb.layers)
    if mb.HasField("rep_compression") or mb.repetition_index_depth:
        raise w.corrupt("repetition levels without a list layer")
    has_def = mb.HasField("def_compression")
    if has_def and not nullable:
        raise w.corrupt("definition levels on an all-valid layer")
    num_items = int(mb.num_items) or n
    if num_items != n:
        raise w.corrupt(f"mini-block page has {num_items} items for {n} rows without repetition")
    reps, defs, vals = _mini_block_chunks(w, mb, buffers, dtype, num_items)
    valid = None
    if has_def:
        levels = np.concatenate(defs) if defs else np.zeros(0, np.uint16)
        valid = levels == 0
        if valid.all():
            valid = None
    return _assemble(w, mb, buffers, vals, valid, n, dtype)


def _unravel(w: Where, layers: list[int], rep: np.ndarray | None, defs: np.ndarray | None, leaf: pa.Array,
             dtype: pa.DataType, n: int) -> pa.Array:
    try:
        return unravel(layers, rep, defs, leaf, dtype, n)
    except LevelsError as e:
        raise w.corrupt(f"bad rep/def levels: {e}") from None


def _mini_block_nested(
    w: Where, mb: pb.MiniBlockLayout, n: int, buffers: list[pa.Buffer], dtype: pa.DataType, layers: list[int]
) -> pa.Array:
    """Any stack of list / struct layers: decode the visible leaf items, then unravel the levels."""
    leaf_type = leaf_type_below(w, dtype, len(layers) - 1)
    has_rep = mb.HasField("rep_compression")
    if has_rep != any(is_list_layer(x) for x in layers):
        raise w.corrupt("repetition levels do not match the list layers")
    num_items = int(mb.num_items) if has_rep else (int(mb.num_items) or n)
    reps, defs, vals = _mini_block_chunks(w, mb, buffers, leaf_type, num_items)
    rep = (np.concatenate(reps) if reps else np.zeros(0, np.uint16)) if has_rep else None
    dl = (np.concatenate(defs) if defs else np.zeros(0, np.uint16)) if mb.HasField("def_compression") else None
    leaf = _assemble(w, mb, buffers, vals, None, num_items, leaf_type)
    return _unravel(w, layers, rep, dl, leaf, dtype, n)


def _mini_block_chunks(w: Where, mb: pb.MiniBlockLayout, buffers: list[pa.Buffer], dtype: pa.DataType, num_items: int):
    """Decode every chunk: lists of rep levels, def levels and values (fixed arrays or (offsets, data))."""
    has_rep = mb.HasField("rep_compression")
    has_def = mb.HasField("def_compression")
    has_dict = mb.HasField("dictionary")
    need = 2 + (1 if has_dict else 0)
    if len(buffers) < need:
        raise w.corrupt(f"mini-block page has {len(buffers)} buffers, {need} needed")
    meta, data = buffers[0], buffers[1]
    raw = np.frombuffer(data, dtype=np.uint8)
    nbuf = int(mb.num_buffers)
    big = mb.has_large_chunk
    var_values = _is_var(dtype) and not has_dict

    venc = mb.value_compression
    page_fsst = var_values and venc.WhichOneof("compression") == "fsst"
    if page_fsst:
        venc = venc.fsst.values
    vals: list[Any] = []
    defs: list[np.ndarray] = []
    reps: list[np.ndarray] = []
    table = bytes(mb.value_compression.fsst.symbol_table) if page_fsst else None
    fast = decode_chunks(w, mb, meta, data, num_items, var_values, venc, table) if num_items else None
    if fast is not None:  # all chunks at once (chunks.py)
        freps, fdefs, fvals, decompressed = fast
        page_fsst = page_fsst and not decompressed
        reps = [freps] if freps is not None else []
        defs = [fdefs] if fdefs is not None else []
        vals = [fvals]
    for start, size, count in (_chunks(w, mb, meta, data, num_items) if fast is None else ()):
        chunk = raw[start : start + size]
        pos = 0
        widths = [2] + [2] * has_rep + [2] * has_def + [4 if big else 2] * nbuf
        header = []
        for width in widths:
            if pos + width > len(chunk):
                raise w.corrupt("mini-block chunk header is truncated")
            header.append(int.from_bytes(chunk[pos : pos + width].tobytes(), "little"))
            pos += width
        num_levels = header[0]
        rep_size = header[1] if has_rep else 0
        def_size = header[1 + has_rep] if has_def else 0
        buf_sizes = header[1 + has_rep + has_def :]
        pos = _pad(pos)
        if not has_rep and has_def and num_levels != count:
            raise w.corrupt(f"chunk has {num_levels} def levels for {count} items")
        if has_rep:
            r = chunk[pos : pos + rep_size]
            pos = _pad(pos + rep_size)
            reps.append(fixed_block(w, mb.rep_compression, r, num_levels))
        if has_def:
            d = chunk[pos : pos + def_size]
            pos = _pad(pos + def_size)
            defs.append(fixed_block(w, mb.def_compression, d, num_levels))
        bufs = []
        for s in buf_sizes:
            if pos + s > len(chunk):
                raise w.corrupt("mini-block chunk buffer runs past the chunk")
            bufs.append(chunk[pos : pos + s])
            pos = _pad(pos + s)
        if var_values:
            vals.append(variable_chunk(w, venc, bufs, count))
        else:
            vals.append(fixed_chunk(w, venc, bufs, count))
    if page_fsst:  # one symbol table per page: decompress all chunks at once
        offs, data = _concat_var(vals)
        try:
            vals = [fsst.decompress(bytes(mb.value_compression.fsst.symbol_table), offs, data)]
        except ValueError as e:
            raise w.corrupt(f"bad FSST data: {e}") from None
    return reps, defs, vals


def _concat_var(vals: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    if not vals:
        return np.zeros(1, np.int64), np.zeros(0, np.uint8)
    if len(vals) == 1:
        return vals[0]
    data = np.concatenate([d for _, d in vals])
    sizes = np.concatenate([np.diff(o) for o, _ in vals])
    offs = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offs[1:])
    return offs, data


def _assemble(
    w: Where, mb: pb.MiniBlockLayout, buffers: list[pa.Buffer], vals: list[Any], valid: np.ndarray | None,
    n: int, dtype: pa.DataType,
) -> pa.Array:
    has_dict = mb.HasField("dictionary")
    var_values = _is_var(dtype) and not has_dict
    if has_dict:
        arrow_dict = pa.types.is_dictionary(dtype)
        idx = np.concatenate(vals) if vals else np.zeros(0, np.uint32)
        items = _dictionary(w, mb, buffers[2], dtype.value_type if arrow_dict else dtype)
        idx = idx.astype(np.int64)
        if valid is not None:
            idx = np.where(valid, idx, 0)
        if len(items) == 0 and n:
            if valid is None or valid.any():
                raise w.corrupt("dictionary indices into an empty dictionary")
            return pa.nulls(n, type=dtype)
        if idx.size and (idx.min() < 0 or idx.max() >= len(items)):
            raise w.corrupt("dictionary index out of range")
        if arrow_dict:
            return _dictionary_array(idx, valid, items, dtype)
        out = items.take(pa.array(idx))
        if valid is not None:
            out = _with_validity(out, valid)
        return out

    if var_values:
        return _build_var(w, vals, valid, n, dtype)
    return _build_fixed(w, vals, valid, n, dtype)


def _with_validity(arr: pa.Array, valid: np.ndarray) -> pa.Array:
    """``arr`` (whose own validity is replaced) with validity ``valid``."""
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little"))
    if arr.offset:
        arr = pa.concat_arrays([arr])
    if pa.types.is_fixed_size_list(arr.type):
        return pa.Array.from_buffers(arr.type, len(arr), [bitmap], children=[arr.values])
    bufs = arr.buffers()
    return pa.Array.from_buffers(arr.type, len(arr), [bitmap, *bufs[1:]])


def _build_fixed(w: Where, vals: list[np.ndarray], valid: np.ndarray | None, n: int, dtype: pa.DataType) -> pa.Array:
    if any(isinstance(x, np.ma.MaskedArray) for x in vals):  # fixed-size list items with validity
        mv = np.ma.concatenate(vals) if len(vals) > 1 else vals[0]
        item_valid = ~np.ma.getmaskarray(mv)
        arr = _build_fixed(w, [np.ma.getdata(mv)], valid, n, dtype)
        if item_valid.all() or not pa.types.is_fixed_size_list(dtype):
            return arr
        return _with_item_validity(arr, item_valid)
    if pa.types.is_fixed_size_list(dtype):
        dim = dtype.list_size
        child = _build_fixed(w, vals, None, n * dim, dtype.value_type)
        vb = pa.py_buffer(np.packbits(valid, bitorder="little")) if valid is not None else None
        return pa.Array.from_buffers(dtype, n, [vb], children=[child])
    bits = _bits_of(dtype)
    v = np.concatenate(vals) if len(vals) > 1 else (vals[0] if vals else np.zeros(0, np.uint8))
    if bits == 1:
        if v.dtype != bool:
            raise w.unsupported(f"{v.dtype.itemsize * 8}-bit values for bool")
        values = pa.py_buffer(np.packbits(v, bitorder="little"))
    else:
        if bits is None or (v.dtype == bool) or (v.ndim == 1 and v.dtype.itemsize * 8 != bits) or (
            v.ndim == 2 and v.shape[1] * 8 != bits
        ):
            raise w.unsupported(f"decoded {v.dtype} values for type {dtype}")
        values = pa.py_buffer(np.ascontiguousarray(v))
    if len(v) != n:
        raise w.corrupt(f"mini-block page decoded {len(v)} values, expected {n}")
    vb = pa.py_buffer(np.packbits(valid, bitorder="little")) if valid is not None else None
    return pa.Array.from_buffers(dtype, n, [vb, values])


def _with_item_validity(arr: pa.Array, item_valid: np.ndarray) -> pa.Array:
    """A fixed-size list ``arr`` whose items get validity ``item_valid``."""
    vb = arr.buffers()[0]
    return pa.Array.from_buffers(arr.type, len(arr), [vb], children=[_with_validity(arr.values, item_valid)])


def _build_var(w: Where, vals: list[tuple[np.ndarray, np.ndarray]], valid: np.ndarray | None, n: int, dtype: pa.DataType) -> pa.Array:
    if len(vals) == 1:  # one run of values (whole-page decoding): its offsets are the page's
        offs0, data = vals[0]
        if len(offs0) != n + 1:
            raise w.corrupt(f"mini-block page decoded {len(offs0) - 1} values, expected {n}")
        offsets = (offs0 - offs0[0] if offs0[0] else offs0).astype(np.int64, copy=False)
        if offsets[-1] > len(data) or (n and (offsets[1:] < offsets[:-1]).any()):  # (no diff temporary)
            raise w.corrupt("string offsets run past the page's bytes")
        if offsets[-1] != len(data):
            data = data[: offsets[-1]]
    else:
        lens = [o for o, _ in vals]
        datas = [d for _, d in vals]
        data = np.concatenate(datas) if datas else np.zeros(0, np.uint8)
        if lens:
            sizes = np.concatenate([np.diff(o) for o in lens])
        else:
            sizes = np.zeros(0, np.int64)
        if len(sizes) != n:
            raise w.corrupt(f"mini-block page decoded {len(sizes)} values, expected {n}")
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
    large = pa.types.is_large_string(dtype) or pa.types.is_large_binary(dtype)
    if not large:
        if offsets[-1] >= 2**31:
            raise w.unsupported("more than 2 GiB of string data in one page for a 32-bit offset type")
        offsets = offsets.astype(np.int32)
    vb = pa.py_buffer(np.packbits(valid, bitorder="little")) if valid is not None else None
    arr = pa.Array.from_buffers(dtype, n, [vb, pa.py_buffer(offsets), pa.py_buffer(data)])
    if (pa.types.is_string(dtype) or pa.types.is_large_string(dtype)) and not _is_ascii(data):
        try:
            arr.validate(full=True)
        except pa.ArrowInvalid as e:
            raise w.corrupt(f"string values are not valid UTF-8: {e}") from None
    return arr


_HIGH_BITS = np.uint64(0x8080808080808080)


def _is_ascii(data: np.ndarray) -> bool:
    """True if no byte has its high bit set: ASCII is valid UTF-8 (the offsets are checked
    separately), so only other data needs Arrow's full UTF-8 validation."""
    data = np.ascontiguousarray(data, dtype=np.uint8)
    n8 = len(data) // 8
    if n8 and np.bitwise_or.reduce(data[: n8 * 8].view("<u8")) & _HIGH_BITS:
        return False
    return not (data[n8 * 8 :] & 0x80).any()


def _dictionary(w: Where, mb: pb.MiniBlockLayout, buf: pa.Buffer, dtype: pa.DataType) -> pa.Array:
    k = int(mb.num_dictionary_items)
    raw = np.frombuffer(buf, dtype=np.uint8)
    if _is_var(dtype):
        offs, data = variable_block(w, mb.dictionary, raw, k)
        return _build_var(w, [(offs, data)], None, k, dtype)
    v = fixed_block(w, mb.dictionary, raw, k)
    return _build_fixed(w, [v], None, k, dtype)
