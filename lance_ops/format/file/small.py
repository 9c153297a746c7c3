"""Many small 2.1/2.2 data files read as one: what compacting streamed-in fragments reads.

A fragment of a few hundred rows costs :class:`~.reader.DataFileReader` a fixed ~0.5 ms in
Python (open, parse the footer and page tables, then ~10 NumPy/Arrow calls per page), far more
than its bytes.  Here the files of a group are each read with one ``read`` call, their metadata
(footer, page tables, layouts) is parsed once per distinct metadata bytes (equal-sized files of
one writer repeat it byte for byte), and every column is decoded for all files at once: the
mini-block chunks of all their pages form one chunk table over the concatenated file bytes, and
the values of all chunks are decoded by the same whole-page helpers as one big page
(:mod:`.v21.chunks`), so the per-call cost is paid once per group instead of once per page.

Anything else (FSST or dictionary pages, nested or list columns, more than one value buffer,
2.0 files, bytes that do not decode) is not an error here: :func:`open_small` or
:func:`decode_small` return None and the caller reads those files with ``DataFileReader``,
which raises the precise, named errors.  Results are the arrays the ordinary path decodes.
"""

import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from lance_ops.format._proto import encodings_v2_1_pb2 as pb
from lance_ops.format.errors import CorruptFileError, LanceOpsError
from lance_ops.format.file.columns import LeafColumn, Page
from lance_ops.format.file.reader import FOOTER, MAGIC, TAIL_BYTES, DataFileReader
from lance_ops.format.file.v21.chunks import _fixed, _le, _pad, _slices, _variable
from lance_ops.format.file.v21.compression import Where
from lance_ops.format.file.v21.layouts import _build_fixed, _build_var, _is_var
from lance_ops.format.io.object_store import ObjectStore, open_regular

__all__ = ["SmallFile", "decode_small", "open_small", "SMALL_FILE_BYTES"]

#: files up to this size are read whole (as ``DataFileReader`` reads them with its tail read)
SMALL_FILE_BYTES = TAIL_BYTES
_GBO = struct.Struct("<QQ")
_ALIGN = 64  # each file starts at a multiple of this in the group's buffer (keeps word alignment)

#: parsed metadata by (file size, metadata bytes): identical for files of equal layout
_PLANS: dict[tuple[int, bytes], "_Plan"] = {}
_PLAN_CACHE_ENTRIES = 1024
_PLAN_KEY_MAX_BYTES = 16 << 10  # metadata bigger than this is parsed per file, not cached
#: per layout object: its batch signature (None: not batchable), layout kept alive with it
_SIGS: dict[int, tuple[Any, Any]] = {}


class _BytesReader(DataFileReader):
    """A ``DataFileReader`` over bytes already in memory (parsing and page decoding only)."""

    def __init__(self, path: str, data: bytes) -> None:  # noqa: D107 - parses the metadata
        self.store = None  # type: ignore[assignment]
        self.rel_path = self.path = path
        self._local_path = None
        self._data: bytes | None = data
        self._open(None, path, len(data))  # type: ignore[arg-type]
        self._data = None  # cached plans keep the metadata (``_buf``), not the whole file

    @classmethod
    def served(cls, path: str, data: bytes, version: tuple[int, int]) -> "_BytesReader":
        """A reader of ``data`` for page decoding only (metadata parsed elsewhere)."""
        r = cls.__new__(cls)
        r.path = r.rel_path = path
        r._data = data
        r.version = version
        r.__dict__["_whole"] = None
        return r

    def _read_meta_range(self, start: int, length: int) -> bytes:
        assert self._data is not None
        return self._data[start : start + length]

    def _meta_bytes(self, pos: int, length: int) -> bytes:
        data, base = self._data, 0
        if data is None:  # after parsing: the metadata kept in ``_buf``
            data, base = self._buf, self._base
        if pos < base or pos - base + length > len(data):
            raise CorruptFileError(self.path, f"short read of {length} bytes at {pos}")
        return data[pos - base : pos - base + length]

    def read_buffers(self, ranges: Sequence[tuple[int, int]]) -> list[pa.Buffer]:
        assert self._data is not None
        buf = pa.py_buffer(self._data)
        out = []
        for pos, size in ranges:
            if pos < 0 or pos + size > len(self._data):
                raise CorruptFileError(self.path, f"short read of page buffer at {pos}: {size} bytes")
            out.append(buf.slice(pos, size))
        return out


@dataclass
class _Plan:
    """What a file's metadata says (shared by every file with the same metadata bytes)."""

    reader: _BytesReader  # the first file parsed with these bytes (its pages, schema, columns)
    projections: dict[tuple[int, ...], Any] = field(default_factory=dict)

    def projection(self, field_ids: tuple[int, ...]) -> Any:
        """``(arrow schema, [(column, dtype, pages)])`` when every field is one leaf column of
        a type decoded here, else None."""
        hit = self.projections.get(field_ids, 0)
        if hit != 0:
            return hit
        out = None
        try:
            schema, cols = self.reader._columns(list(field_ids))
            leaves = [c for c in cols if type(c) is LeafColumn and _batchable_type(c.dtype)]
            if len(leaves) == len(cols):
                out = (schema, [(c.column, c.dtype, c.pages) for c in leaves])
        except LanceOpsError:
            out = None
        self.projections[field_ids] = out
        return out


def _batchable_type(t: pa.DataType) -> bool:
    if _is_var(t):
        return True
    if pa.types.is_dictionary(t) or pa.types.is_nested(t) or pa.types.is_null(t) or isinstance(t, pa.ExtensionType):
        return False
    try:
        bits = t.bit_width
    except ValueError:
        return False
    return bits == 1 or bits in (8, 16, 32, 64)


@dataclass
class SmallFile:
    """One small file's bytes and parsed metadata."""

    path: str
    data: bytes
    plan: _Plan

    @property
    def num_rows(self) -> int:
        return self.plan.reader.num_rows


def open_small(store: ObjectStore, rel_path: str, file_size: int | None = None) -> SmallFile | None:
    """The whole file (one read) and its parsed metadata, or None when it is not a small 2.1/2.2
    file of a plain local store or does not parse (``DataFileReader`` then reports why)."""
    if type(store) is not ObjectStore or not store.is_local:
        return None
    if file_size is not None and file_size > SMALL_FILE_BYTES:
        return None
    try:
        path = store.full_path(rel_path)
        fd = open_regular(path)
        try:
            if file_size is None and os.fstat(fd).st_size > SMALL_FILE_BYTES:
                return None  # a big file: not read here
            data = os.read(fd, SMALL_FILE_BYTES + 1)
        finally:
            os.close(fd)
    except (OSError, LanceOpsError):
        return None
    n = len(data)
    if n > SMALL_FILE_BYTES or n < FOOTER.size or (file_size is not None and file_size != n):
        return None
    a, b, c, ngb, ncols, major, minor, magic = FOOTER.unpack_from(data, n - FOOTER.size)
    if magic != MAGIC or (major, minor) not in ((2, 1), (2, 2)) or ngb < 1 or c + 16 > n:
        return None
    lo = min(a, b, c, _GBO.unpack_from(data, c)[0])
    if lo > n:
        return None
    key = (n, data[lo:])
    plan = _PLANS.get(key)
    if plan is None:
        try:
            reader = _BytesReader(path, data)
        except (LanceOpsError, ValueError, IndexError, struct.error):
            return None
        plan = _Plan(reader)
        if reader._base >= lo and len(key[1]) <= _PLAN_KEY_MAX_BYTES:  # every byte the parse read is in the key
            if len(_PLANS) >= _PLAN_CACHE_ENTRIES:
                _PLANS.clear()
            _PLANS[key] = plan
    return SmallFile(path, data, plan)


def decode_small(files: Sequence[SmallFile], field_ids: Sequence[int]) -> tuple[pa.Schema, list[pa.Array]] | None:
    """``(schema, one array per field)`` of every row of ``files`` in order, or None when a
    file's projection is not decoded here or its bytes do not decode (the caller then reads
    them one by one and gets the error).  The files' projections must share one schema."""
    ids = tuple(field_ids)
    projs = [f.plan.projection(ids) for f in files]
    if not files or any(p is None for p in projs):
        return None
    schema = projs[0][0]
    if any(p[0] is not schema and not p[0].equals(schema) for p in projs[1:]):
        return None
    sizes = [len(f.data) for f in files]
    bases = np.zeros(len(files) + 1, dtype=np.int64)
    np.cumsum([-(-s // _ALIGN) * _ALIGN for s in sizes], out=bases[1:])
    big = np.zeros(int(bases[-1]), dtype=np.uint8)
    for f, base in zip(files, bases[:-1].tolist(), strict=True):
        big[base : base + len(f.data)] = np.frombuffer(f.data, dtype=np.uint8)
    arrays = []
    try:
        for j, (_, dtype, _) in enumerate(projs[0][1]):
            arr = _column(files, projs, j, dtype, big, bases)
            if arr is None:
                return None
            arrays.append(arr)
    except (LanceOpsError, ValueError, IndexError, KeyError, TypeError, OverflowError, pa.ArrowException):
        return None
    return schema, arrays


def _signature(layout: Any) -> Any:
    """What a page's decoding depends on besides its bytes and item count, or None when the
    page is not a one-layer mini-block page with one value buffer and no dictionary/FSST."""
    hit = _SIGS.get(id(layout))
    if hit is not None and hit[0] is layout:
        return hit[1]
    sig = None
    if isinstance(layout, pb.PageLayout) and layout.WhichOneof("layout") == "mini_block_layout":
        mb = layout.mini_block_layout
        layers = list(mb.layers)
        if (
            len(layers) == 1 and layers[0] in (pb.REPDEF_ALL_VALID_ITEM, pb.REPDEF_NULLABLE_ITEM)
            and not mb.HasField("rep_compression") and not mb.repetition_index_depth
            and not mb.HasField("dictionary") and int(mb.num_buffers) == 1
            and _plain_values(mb.value_compression)
            and (not mb.HasField("def_compression") or (
                layers[0] == pb.REPDEF_NULLABLE_ITEM and _plain_values(mb.def_compression)
            ))
        ):
            shape = pb.MiniBlockLayout()
            shape.CopyFrom(mb)
            shape.num_items = 0
            sig = shape.SerializeToString()
    if len(_SIGS) >= 4096:
        _SIGS.clear()
    _SIGS[id(layout)] = (layout, sig)
    return sig


def _plain_values(enc: pb.CompressiveEncoding) -> bool:
    """Encodings the whole-page chunk helpers decode (``flat`` 1/8/16/32/64 bits, inline
    bit-packing, ``variable`` with flat offsets)."""
    kind = enc.WhichOneof("compression")
    if kind == "flat":
        return not enc.flat.HasField("data") and enc.flat.bits_per_value in (1, 8, 16, 32, 64)
    if kind == "inline_bitpacking":
        return not enc.inline_bitpacking.HasField("values") and enc.inline_bitpacking.uncompressed_bits_per_value in (
            8, 16, 32, 64)
    if kind == "variable":
        off = enc.variable.offsets
        return (not enc.variable.HasField("values") and off.WhichOneof("compression") == "flat"
                and off.flat.bits_per_value in (32, 64))
    return False


def _column(files: Sequence[SmallFile], projs: list[Any], j: int, dtype: pa.DataType, big: np.ndarray,
            bases: np.ndarray) -> pa.Array | None:
    """Column ``j`` of every file: runs of pages with one signature decoded together, any other
    page alone (as ``DataFileReader`` decodes it)."""
    parts: list[pa.Array] = []
    run: list[tuple[int, Page]] = []
    run_sig: Any = None
    for i, p in enumerate(projs):
        column, _, pages = p[1][j]
        for page in pages:
            if not page.length:
                continue
            sig = _signature(page.encoding)
            if sig is None or (run and sig != run_sig) or len(page.ranges) < 2:
                if run:
                    parts.append(_decode_run(run, files, dtype, big, bases))
                    run = []
                if sig is None or len(page.ranges) < 2:
                    f = files[i]
                    r = _BytesReader.served(f.path, f.data, f.plan.reader.version)
                    parts.append(r._decode_page(column, page, dtype))
                    continue
            run.append((i, page))
            run_sig = sig
    if run:
        parts.append(_decode_run(run, files, dtype, big, bases))
    if not parts:
        return pa.array([], type=dtype)
    return parts[0] if len(parts) == 1 else pa.concat_arrays(parts)


def _decode_run(run: list[tuple[int, Page]], files: Sequence[SmallFile], dtype: pa.DataType, big: np.ndarray,
                bases: np.ndarray) -> pa.Array:
    """Pages of one signature (one per file or several) decoded as one mini-block page."""
    mb = run[0][1].encoding.mini_block_layout
    base = bases[[i for i, _ in run]]
    meta = np.array([p.ranges[0] for _, p in run], dtype=np.int64).reshape(-1, 2)
    data = np.array([p.ranges[1] for _, p in run], dtype=np.int64).reshape(-1, 2)
    items = np.array([int(p.encoding.mini_block_layout.num_items) or p.length for _, p in run], dtype=np.int64)
    lengths = np.array([p.length for _, p in run], dtype=np.int64)
    w = Where(files[run[0][0]].path, 0, "2.1+")
    if (items != lengths).any():
        raise w.corrupt("mini-block page item count differs from its rows")
    word = 4 if mb.has_large_chunk else 2
    if (meta[:, 1] % word).any() or (meta[:, 1] == 0).any():
        raise w.corrupt("mini-block chunk metadata size")
    has_def = mb.HasField("def_compression")
    # the chunk table of every page: chunk words, each chunk's page, its value count and start
    nwords = meta[:, 1] // word
    words = _slices(big, base + meta[:, 0], meta[:, 1]).view(f"<u{word}").astype(np.int64)
    page_of = np.repeat(np.arange(len(run)), nwords)
    last = np.cumsum(nwords) - 1
    first = last - nwords + 1
    logs = words & 0xF
    sizes = ((words >> 4) + 1) * 8
    counts = np.left_shift(np.int64(1), logs)
    before_last = np.add.reduceat(counts, first) - counts[last]
    counts[last] = items - before_last
    if (counts[last] < 0).any() or ((logs[last] != 0) & (counts[last] != np.left_shift(1, logs[last]))).any():
        raise w.corrupt("mini-block chunk value counts do not add up to num_items")
    ends = np.cumsum(sizes)
    within = ends - sizes - (ends - sizes)[first][page_of]
    if ((ends - (ends - sizes)[first][page_of])[last] > data[:, 1]).any():
        raise w.corrupt("mini-block chunks run past the data buffer")
    starts = (base + data[:, 0])[page_of] + within
    bw = 4 if mb.has_large_chunk else 2
    head = 2 + 2 * has_def + bw
    if (sizes < head).any():
        raise w.corrupt("mini-block chunk header is truncated")
    vsize = _le(big, starts + 2 + 2 * has_def, bw)
    body = starts + (head + 7) // 8 * 8
    valid = None
    if has_def:
        levels_n = _le(big, starts, 2)
        if (levels_n != counts).any():
            raise w.corrupt("chunk def level counts differ from its item counts")
        dsize = _le(big, starts + 2, 2)
        defs = _fixed(w, mb.def_compression, big, body, counts)
        if defs is None:
            raise w.unsupported("def levels")
        body = body + _pad(dsize)
        valid = defs == 0
        if valid.all():
            valid = None
    if (body + vsize > starts + sizes).any():
        raise w.corrupt("mini-block chunk buffer runs past the chunk")
    n = int(counts.sum())
    if _is_var(dtype):
        got = _variable(w, mb.value_compression, big, body, vsize, counts)
        if got is None:
            raise w.unsupported("values")
        return _build_var(w, [got[:2]], valid, n, dtype)
    vals = _fixed(w, mb.value_compression, big, body, counts)
    if vals is None:
        raise w.unsupported("values")
    return _build_fixed(w, [vals], valid, n, dtype)

