"""Row-range decoding of big 2.1/2.2 pages (:class:`PagePart`).

pylance writes pages of up to ~1M rows per column; decoded whole, one 1M-row file costs ~40 MB
at once (and a scan holds two files).  The chunks of a mini-block page are independent (the
chunk metadata buffer gives each chunk's byte size and value count; a dictionary or FSST
symbol table belongs to the page and serves every chunk), and the rows of a full-zip page
without repetition sit at positions a stride or the repetition index gives.  So a column splits
each such page into parts of :data:`PART_ROWS` rows: a part reads only the bytes of the chunks
(rows) it covers and decodes them with the page's own layout, whose ``num_items`` is set to the
rows read.

The split needs no I/O: parts have fixed row boundaries.  A mini-block part reads the page's
chunk metadata on first use (a few KiB, once per page and column object, shared by its parts),
decodes the chunks overlapping its rows and slices off the rows of the boundary chunks that
belong to its neighbours.  Pages of lists (repetition levels), structs (more than one layer),
Arrow dictionary and nested fixed-size-list types, blob descriptions and 2.0 pages are decoded
whole as before.
"""

import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from lance_ops.format._proto import encodings_v2_1_pb2 as e21
from lance_ops.format.errors import CorruptFileError, LanceOpsError
from lance_ops.format.file import blob_columns as blobs
from lance_ops.format.file import v21
from lance_ops.format.file.columns import Page, is_var_type

__all__ = ["PART_ROWS", "PagePart", "split_pages", "decode_part", "chunked", "take_chunks"]

#: rows of one part: four of the scans' 64K batches (a batch is a slice of one part), a quarter of
#: pylance's 1M-row pages.  Each part costs ~40 us of Python (GIL held) in the prefetch threads, so
#: smaller parts scan slower on a loaded 2-core machine (10M rows at load 6, min of 9: 64K parts
#: ~1.4x, 128K 1.25x, 256K 0.93x, 512K 0.97x the time of whole pages)
PART_ROWS = 262144
#: decoded bytes of one part of a fixed-width column: such a column's parts hold at least
#: :data:`PART_ROWS` rows and up to this many bytes, so a 1M-row page of 8-byte values (8 MiB
#: decoded, a fifth of a 1M-row string page) is decoded whole: cutting it cost 12-25% more time
#: (per-part reads, set-up and output allocation) and saved little memory
PART_BYTES = 8 << 20

_ITEM_LAYERS = (e21.REPDEF_ALL_VALID_ITEM, e21.REPDEF_NULLABLE_ITEM)
_ALIGN = 8


class _Chunks:
    """The chunk table of one mini-block page, read on first use (thread-safe)."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self._lock = threading.Lock()
        self._table: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self.layouts: dict[int, e21.PageLayout] = {}

    def table(self, reader: Any, column: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(words, first row of each chunk + end, first byte of each chunk + end)``."""
        if self._table is None:
            with self._lock:
                if self._table is None:
                    self._table = self._read(reader, column)
        return self._table

    def _read(self, reader: Any, column: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        mb = self.page.encoding.mini_block_layout
        word = 4 if mb.has_large_chunk else 2
        (meta,) = reader.read_buffers(self.page.ranges[:1])
        where = f"column {column} page at row {self.page.row_start}"
        if len(meta) % word or not len(meta):
            raise CorruptFileError(reader.path, f"{where}: mini-block chunk metadata of {len(meta)} bytes")
        words = np.frombuffer(meta, dtype=f"<u{word}").copy()
        w64 = words.astype(np.int64)
        counts = np.left_shift(np.int64(1), w64 & 0xF)
        n = self.page.length
        counts[-1] = n - int(counts[:-1].sum())
        if counts[-1] < 0 or (int(w64[-1]) & 0xF and counts[-1] != 1 << (int(w64[-1]) & 0xF)):
            raise CorruptFileError(reader.path, f"{where}: mini-block chunk value counts do not add up to {n} rows")
        rows = np.zeros(len(words) + 1, dtype=np.int64)
        np.cumsum(counts, out=rows[1:])
        starts = np.zeros(len(words) + 1, dtype=np.int64)
        np.cumsum(((w64 >> 4) + 1) * _ALIGN, out=starts[1:])
        if starts[-1] > self.page.ranges[1][1]:
            raise CorruptFileError(
                reader.path, f"{where}: mini-block chunks need {int(starts[-1])} bytes, "
                f"the data buffer has {self.page.ranges[1][1]}"
            )
        return words, rows, starts

    def layout(self, rows: int) -> e21.PageLayout:
        """The page's layout with ``num_items`` = ``rows`` (parts of equal size share one)."""
        hit = self.layouts.get(rows)
        if hit is None:
            hit = e21.PageLayout()
            hit.CopyFrom(self.page.encoding)
            hit.mini_block_layout.num_items = rows
            self.layouts[rows] = hit
        return hit


@dataclass
class PagePart:
    """Rows ``[lo, hi)`` of ``source`` (a page of the file's page table)."""

    source: Page
    lo: int
    hi: int
    kind: str  # "mini_block" or "full_zip"
    chunks: _Chunks | None = None
    stored: int = 0  # estimated stored bytes (for the prefetch budget)
    cache: dict = field(default_factory=dict)


def part_rows(dtype: pa.DataType) -> int:
    """Rows per part of a column of ``dtype``: :data:`PART_ROWS`, more for narrow fixed-width
    values (up to :data:`PART_BYTES` decoded)."""
    width = _byte_width(dtype)
    return max(PART_ROWS, PART_BYTES // width) if width else PART_ROWS


def _byte_width(dtype: pa.DataType) -> int:
    """Decoded bytes per row of a fixed-width ``dtype`` (0 when the width varies)."""
    if pa.types.is_fixed_size_list(dtype):
        return dtype.list_size * _byte_width(dtype.value_type)
    if pa.types.is_boolean(dtype) or is_var_type(dtype):
        return 0
    try:
        return dtype.bit_width // 8
    except ValueError:
        return 0


def _splittable(page: Page, dtype: pa.DataType, rows: int) -> str | None:
    """The kind of part a page of ``dtype`` splits into (parts of ``rows`` rows), or None
    (decoded whole)."""
    enc = page.encoding
    if not isinstance(enc, e21.PageLayout) or page.length <= rows + rows // 2:
        return None
    kind = enc.WhichOneof("layout")
    if kind == "mini_block_layout":
        mb = enc.mini_block_layout
        if (len(mb.layers) != 1 or mb.layers[0] not in _ITEM_LAYERS or mb.HasField("rep_compression")
                or mb.repetition_index_depth or len(page.ranges) < 2
                or (mb.num_items and int(mb.num_items) != page.length)):
            return None
        return "mini_block"
    if kind == "full_zip_layout":
        fz = enc.full_zip_layout
        if (fz.bits_rep or len(fz.layers) != 1 or fz.layers[0] not in _ITEM_LAYERS
                or int(fz.num_items) != page.length or int(fz.num_visible_items) != page.length):
            return None
        details = fz.WhichOneof("details")
        if details == "bits_per_value" and fz.bits_per_value % 8 == 0 and len(page.ranges) == 1:
            return "full_zip"
        if details == "bits_per_offset" and len(page.ranges) == 2 and is_var_type(dtype):
            return "full_zip_var"
    return None


def _plain_type(dtype: pa.DataType) -> bool:
    return not (
        pa.types.is_dictionary(dtype) or v21.is_nested_fsl(dtype) or blobs.is_description_type(dtype)
        or pa.types.is_nested(dtype) and not pa.types.is_fixed_size_list(dtype)
    )


def split_pages(pages: list[Page], dtype: pa.DataType) -> list[Page]:
    """``pages`` with every big mini-block / full-zip leaf page replaced by its parts
    (consecutive pages of :func:`part_rows` rows, the last one taking the rest)."""
    rows = part_rows(dtype)
    if not _plain_type(dtype) or not any(p.length > rows + rows // 2 for p in pages):
        return pages
    out: list[Page] = []
    for page in pages:
        kind = _splittable(page, dtype, rows)
        if kind is None:
            out.append(page)
            continue
        chunks = _Chunks(page) if kind == "mini_block" else None
        stored = sum(size for _, size in page.ranges)
        cuts = list(range(0, page.length - rows // 2, rows)) + [page.length]
        for lo, hi in zip(cuts[:-1], cuts[1:], strict=True):
            part = PagePart(page, lo, hi, kind, chunks, stored * (hi - lo) // page.length)
            out.append(Page(row_start=page.row_start + lo, length=hi - lo, ranges=[], encoding=page.encoding,
                            part=part))
    return out


def decode_part(reader: Any, column: int, page: Page, dtype: pa.DataType) -> pa.Array:
    """Decode the rows of one part (reading only their bytes)."""
    part: PagePart = page.part
    if part.kind == "mini_block":
        decode = _mini_block_part
    elif part.kind == "full_zip":
        decode = _full_zip_part
    else:
        decode = _full_zip_var_part
    where = f"rows {part.lo}-{part.hi} of the page at row {part.source.row_start} of column {column}"
    return checked_decode(reader.path, where, page.length, lambda: decode(reader, column, part, dtype))


def checked_decode(path: str, where: str, length: int, decode: Any) -> Any:
    """``decode()``, which must give ``length`` rows of the page (part) ``where`` in ``path``:
    bytes that contradict the page layout in a way no explicit check caught become a
    :class:`CorruptFileError` naming them, as does a wrong number of rows."""
    try:
        out = decode()
    except LanceOpsError:
        raise
    except (ValueError, IndexError, KeyError, TypeError, OverflowError, pa.ArrowException) as e:
        raise CorruptFileError(path, f"{where} does not decode: {type(e).__name__}: {e}") from e
    if len(out) != length:
        raise CorruptFileError(path, f"{where} decoded {len(out)} rows, expected {length}")
    return out


def _version(reader: Any) -> str:
    return f"{reader.version[0]}.{reader.version[1]}"


def _mini_block_part(reader: Any, column: int, part: PagePart, dtype: pa.DataType) -> pa.Array:
    assert part.chunks is not None
    words, rows, starts = part.chunks.table(reader, column)
    i = int(np.searchsorted(rows, part.lo, side="right")) - 1
    j = int(np.searchsorted(rows, part.hi, side="left"))
    first, count = int(rows[i]), int(rows[j] - rows[i])
    src = part.source
    data_pos = src.ranges[1][0]
    ranges = [(data_pos + int(starts[i]), int(starts[j] - starts[i])), *src.ranges[2:]]
    buffers = [pa.py_buffer(words[i:j]), *reader.read_buffers(ranges)]
    keep = reader.kept_rows(src.row_start + first, count)
    out = v21.decode_page(reader.path, column, part.chunks.layout(count), count, buffers, dtype, _version(reader),
                          keep)
    if len(out) != count:
        raise CorruptFileError(reader.path, f"chunks {i}-{j} of column {column} decoded {len(out)} rows, not {count}")
    if part.lo != first or count != part.hi - part.lo:
        out = out.slice(part.lo - first, part.hi - part.lo)
    return out


def _full_zip_layout(part: PagePart, rows: int) -> e21.PageLayout:
    hit = part.cache.get("layout")
    if hit is None:
        hit = e21.PageLayout()
        hit.CopyFrom(part.source.encoding)
        hit.full_zip_layout.num_items = rows
        hit.full_zip_layout.num_visible_items = rows
        part.cache["layout"] = hit
    return hit


def _control_bytes(fz: e21.FullZipLayout) -> int:
    return 0 if not fz.bits_def else (1 if fz.bits_def <= 8 else 2 if fz.bits_def <= 16 else 4)


def _full_zip_part(reader: Any, column: int, part: PagePart, dtype: pa.DataType) -> pa.Array:
    """Fixed-width full-zip: every row is ``control word + value`` bytes."""
    fz = part.source.encoding.full_zip_layout
    stride = _control_bytes(fz) + int(fz.bits_per_value) // 8
    pos, size = part.source.ranges[0]
    n = part.hi - part.lo
    if part.hi * stride > size:
        raise CorruptFileError(reader.path, f"full-zip page of column {column}: {size} bytes for {part.hi} rows")
    buffers = reader.read_buffers([(pos + part.lo * stride, n * stride)])
    layout = _full_zip_layout(part, n)
    return v21.decode_page(reader.path, column, layout, n, buffers, dtype, _version(reader))


def _full_zip_var_part(reader: Any, column: int, part: PagePart, dtype: pa.DataType) -> pa.Array:
    """Variable-width full-zip: the repetition index (``rows + 1`` positions) locates the rows."""
    src = part.source
    (dpos, dsize), (ipos, isize) = src.ranges
    if isize % (src.length + 1):
        raise CorruptFileError(reader.path, f"full-zip repetition index of {isize} bytes for {src.length} rows")
    width = isize // (src.length + 1)
    if width not in (1, 2, 4, 8):
        raise CorruptFileError(reader.path, f"full-zip repetition index with {width}-byte entries")
    n = part.hi - part.lo
    (index,) = reader.read_buffers([(ipos + part.lo * width, (n + 1) * width)])
    ri = np.frombuffer(index, dtype=f"<u{width}")
    first, last = int(ri[0]), int(ri[-1])
    if last < first or last > dsize:
        raise CorruptFileError(reader.path, f"bad full-zip repetition index in column {column}")
    (data,) = reader.read_buffers([(dpos + first, last - first)])
    rebased = pa.py_buffer((ri - ri.dtype.type(first)).astype(ri.dtype))
    layout = _full_zip_layout(part, n)
    return v21.decode_page(reader.path, column, layout, n, [data, rebased], dtype, _version(reader))


def chunked(page: Page, dtype: pa.DataType) -> PagePart | None:
    """``page`` as one part whose mini-block chunks can be read alone (a part already, or a
    whole page of a plain leaf type with one item layer), else None."""
    if page.part is not None:
        return page.part if page.part.kind == "mini_block" else None
    if not _plain_type(dtype) or _splittable(page, dtype, -1) != "mini_block":
        return None
    return PagePart(page, 0, page.length, "mini_block", _Chunks(page), sum(size for _, size in page.ranges))


#: a take reads only the chunks holding its rows while they are at most this share of the
#: part's chunks; above it, decoding the whole part (kept for the next rows) costs less
TAKE_CHUNK_SHARE = 0.5


def take_chunks(reader: Any, column: int, part: PagePart, dtype: pa.DataType, rows: np.ndarray) -> pa.Array | None:
    """Rows ``rows`` (ascending offsets in ``part.source``, inside the part) decoded from only
    the mini-block chunks holding them, in one decode: the chunks are independent, so the chosen
    ones (their metadata words and bytes) form a smaller page.  None when they are over
    :data:`TAKE_CHUNK_SHARE` of the part's chunks (decode the part instead)."""
    assert part.chunks is not None
    words, first_rows, starts = part.chunks.table(reader, column)
    ci = np.searchsorted(first_rows, rows, side="right") - 1
    sel = np.unique(ci)
    lo = int(np.searchsorted(first_rows, part.lo, side="right")) - 1
    hi = int(np.searchsorted(first_rows, part.hi, side="left"))
    if sel.size > TAKE_CHUNK_SHARE * (hi - lo):
        return None
    counts = first_rows[sel + 1] - first_rows[sel]
    total = int(counts.sum())
    src = part.source
    data_pos = src.ranges[1][0]
    breaks = np.flatnonzero(np.diff(sel) != 1) + 1
    run_a = sel[np.concatenate([[0], breaks])]
    run_b = sel[np.concatenate([breaks - 1, [sel.size - 1]])] + 1
    lo_b, hi_b = starts[run_a], starts[run_b]
    span = int(hi_b[-1] - lo_b[0])
    if run_a.size > 8 and span <= 8 * int((hi_b - lo_b).sum()):
        # many runs close together: one read of their whole span, the chunks gathered from it
        whole, *extra = reader.read_buffers([(data_pos + int(lo_b[0]), span), *src.ranges[2:]])
        view = np.frombuffer(whole, dtype=np.uint8)
        rel_a, rel_b = (lo_b - lo_b[0]).tolist(), (hi_b - lo_b[0]).tolist()
        data = pa.py_buffer(np.concatenate([view[a:b] for a, b in zip(rel_a, rel_b, strict=True)]))
    else:
        ranges = [(data_pos + int(a), int(b - a)) for a, b in zip(lo_b, hi_b, strict=True)]
        got = reader.read_buffers(ranges + list(src.ranges[2:]))
        data = got[0] if len(ranges) == 1 else pa.py_buffer(b"".join(got[: len(ranges)]))
        extra = got[len(ranges):]
    buffers = [pa.py_buffer(words[sel]), data, *extra]
    where = f"chunks of the page at row {src.row_start} of column {column}"
    out = checked_decode(reader.path, where, total, lambda: v21.decode_page(
        reader.path, column, part.chunks.layout(total), total, buffers, dtype, _version(reader)))
    # each row's place among the chosen chunks' rows
    vstart = np.concatenate([[0], np.cumsum(counts)[:-1]])
    pos = vstart[np.searchsorted(sel, ci)] + (rows - first_rows[ci])
    return out.take(pa.array(pos))
