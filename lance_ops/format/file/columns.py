"""Column decoders of a data file: one object per top-level field reads rows ``[start, end)``
as Arrow chunks (2.0 pages of leaves, lists and structs; 2.1/2.2 structural trees through
:mod:`.v21`).  :class:`~.reader.DataFileReader` builds them; they call back into it for pages.
"""

import bisect
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from lance_ops.format.errors import CorruptFileError, UnsupportedFeatureError
from lance_ops.format.file.encodings import (
    ListPage,
    bool_to_bitmap,
)
from lance_ops.format.schema import LanceField


@dataclass
class Page:
    row_start: int
    length: int
    ranges: list[tuple[int, int]]
    encoding: Any  # epb.ArrayEncoding (2.0) or e21.PageLayout (2.1/2.2)
    item_start: int = 0  # list offsets pages: index of the page's first item in the item column
    num_items: int = 0
    part: Any = None  # a parts.PagePart: rows of a bigger page, decoded on their own

def concat_chunks(chunks: list[pa.Array], dtype: pa.DataType) -> pa.Array:
    if not chunks:
        return pa.array([], type=dtype)
    if len(chunks) == 1:
        return chunks[0]
    return pa.concat_arrays(chunks)


class Column:
    """Reads rows ``[start, end)`` of one field (and its subtree) as Arrow chunks."""

    dtype: pa.DataType
    num_rows: int

    def read_chunks(self, start: int, end: int) -> list[pa.Array]:
        raise NotImplementedError

    def read(self, start: int, end: int) -> pa.Array:
        return concat_chunks(self.read_chunks(start, end), self.dtype)

    def expect_rows(self, n: int) -> None:
        """Check (from metadata only) that this column and its children hold ``n`` rows."""
        raise NotImplementedError


class PagedColumn(Column):
    """A column with pages; decoded pages are cached while a scan is still inside them."""

    def __init__(self, reader: Any, column: int, fld: LanceField, dtype: pa.DataType) -> None:
        self.reader = reader
        self.column = column
        self.field = fld
        self.dtype = dtype
        self.pages = reader._column_pages(column)
        self.starts = [p.row_start for p in self.pages]
        self.num_rows = self.pages[-1].row_start + self.pages[-1].length if self.pages else 0
        self._cache: dict[int, Any] = {}
        self._prefetch: Any = None  # the reader's PagePrefetcher while a scan prefetches
        self._scheduled: set[int] = set()

    def expect_rows(self, n: int) -> None:
        if self.num_rows != n:
            raise CorruptFileError(
                self.reader.path,
                f"column {self.column} (field {self.field.name!r}) has {self.num_rows} rows in its pages, expected {n}",
            )

    def _check_range(self, start: int, end: int) -> None:
        if end > self.num_rows:
            raise CorruptFileError(
                self.reader.path,
                f"column {self.column} (field {self.field.name!r}) has {self.num_rows} rows, {end} needed",
            )

    def _decoded(self, i: int) -> Any:
        hit = self._cache.get(i)
        if hit is not None:
            return hit
        try:
            if self._prefetch is not None and i in self._scheduled:
                out = self._prefetch.take(self, i)
            else:
                out = self.reader._decode_page(self.column, self.pages[i], self.dtype)
        except UnsupportedFeatureError as e:  # name the field too (the encodings know only the file)
            if repr(self.field.name) in str(e):
                raise
            raise UnsupportedFeatureError(f"{e} (field {self.field.name!r}, column {self.column})") from None
        self._cache[i] = out
        return out

    def pages_overlapping(self, start: int, end: int) -> list[int]:
        if start >= end or not self.pages:
            return []
        i = max(bisect.bisect_right(self.starts, start) - 1, 0)
        j = bisect.bisect_left(self.starts, end)
        return [k for k in range(i, j) if self.pages[k].length]

    def _overlapping(self, start: int, end: int) -> Iterator[tuple[int, int, int]]:
        """(page index, first row in page, end row in page) for pages overlapping [start, end)."""
        i = max(bisect.bisect_right(self.starts, start) - 1, 0)
        keep: dict[int, Any] = {}
        while i < len(self.pages) and self.pages[i].row_start < end:
            p = self.pages[i]
            lo = max(start, p.row_start) - p.row_start
            hi = min(end, p.row_start + p.length) - p.row_start
            if hi > lo:
                yield i, lo, hi
                if p.row_start + p.length > end and i in self._cache:
                    keep[i] = self._cache[i]
            i += 1
        # a sequential scan resumes inside the last page; anything before it is done
        self._cache = keep


class LeafColumn(PagedColumn):
    def __init__(self, reader: Any, column: int, fld: LanceField, dtype: pa.DataType) -> None:
        super().__init__(reader, column, fld, dtype)
        # big 2.1/2.2 pages are read in row ranges (parts.py)
        split = getattr(reader, "_split_pages", None)
        if split is not None:
            pages = split(self.pages, dtype)
            if pages is not self.pages:
                self.pages = pages
                self.starts = [p.row_start for p in pages]

    def read_chunks(self, start: int, end: int) -> list[pa.Array]:
        self._check_range(start, end)
        out = []
        for i, lo, hi in self._overlapping(start, end):
            arr = self._decoded(i)
            out.append(arr if (lo == 0 and hi == len(arr)) else arr.slice(lo, hi - lo))
        return out


class ListColumn(PagedColumn):
    def __init__(
        self, reader: Any, column: int, fld: LanceField, dtype: pa.DataType, child: Column
    ) -> None:
        super().__init__(reader, column, fld, dtype)
        self.child = child
        self.large = pa.types.is_large_list(dtype)
        item = 0
        for p in self.pages:
            kind = p.encoding.WhichOneof("array_encoding")
            if kind != "list":
                raise CorruptFileError(reader.path, f"column {column} is a list but has a {kind!r} page")
            p.item_start = item
            p.num_items = int(p.encoding.list.num_items)
            item += p.num_items
        self.total_items = item

    def expect_rows(self, n: int) -> None:
        super().expect_rows(n)
        self.child.expect_rows(self.total_items)

    def read_chunks(self, start: int, end: int) -> list[pa.Array]:
        self._check_range(start, end)
        out = []
        for i, lo, hi in self._overlapping(start, end):
            lp: ListPage = self._decoded(i)
            page = self.pages[i]
            if lp.ends.size != page.length:
                raise CorruptFileError(
                    self.reader.path, f"list page of column {self.column} decoded {lp.ends.size} rows"
                )
            first = int(lp.ends[lo - 1]) if lo else 0
            last = int(lp.ends[hi - 1])
            items = self.child.read(page.item_start + first, page.item_start + last)
            n = hi - lo
            offsets = np.empty(n + 1, dtype=np.int64 if self.large else np.int32)
            offsets[0] = 0
            offsets[1:] = lp.ends[lo:hi] - np.uint64(first)
            vbuf = bool_to_bitmap(lp.valid[lo:hi]) if lp.valid is not None else None
            out.append(pa.Array.from_buffers(self.dtype, n, [vbuf, pa.py_buffer(offsets)], children=[items]))
        return out


class StructColumn(Column):
    def __init__(self, dtype: pa.DataType, children: list[Column]) -> None:
        self.dtype = dtype
        self.children = children

    def expect_rows(self, n: int) -> None:
        for c in self.children:
            c.expect_rows(n)

    def read_chunks(self, start: int, end: int) -> list[pa.Array]:
        kids = [c.read(start, end) for c in self.children]
        arr = pa.Array.from_buffers(self.dtype, end - start, [None], null_count=0, children=kids)
        return [arr]


class Tree21Column(Column):
    """A nested field of a 2.1/2.2 file (structs and lists): one leaf column per leaf below it.

    Each leaf page decodes (with its rep/def levels) into a *chain* rooted at this field: the
    field's type narrowed to the path of that leaf (single-child structs, lists).  The chains are
    then merged level by level; validity and list offsets come from the first leaf below each
    node (every leaf below a node carries the same levels for it).
    """

    def __init__(self, dtype: pa.DataType, tree: Any, leaves: list[LeafColumn], path: str) -> None:
        self.dtype = dtype
        self.tree = tree  # (dtype, [(subtree, number of leaves)] or None for a leaf)
        self.leaves = leaves
        self.path = path

    def expect_rows(self, n: int) -> None:
        for c in self.leaves:
            c.expect_rows(n)

    def read_chunks(self, start: int, end: int) -> list[pa.Array]:
        chains = [c.read(start, end) for c in self.leaves]
        return [merge_chains(self.tree, chains, self.path)]


def merge_chains(tree: Any, chains: list[pa.Array], path: str) -> pa.Array:
    dtype, kids = tree
    if kids is None:
        (leaf,) = chains
        return leaf
    first = chains[0]
    if first.offset or (len(chains) > 1 and any(c.offset for c in chains)):
        chains = [pa.concat_arrays([c]) if c.offset else c for c in chains]
        first = chains[0]
    valid = first.buffers()[0] if first.null_count else None
    if any(len(c) != len(first) for c in chains):
        raise CorruptFileError(path, f"the leaf columns of a {dtype} field disagree on its length")
    if pa.types.is_struct(dtype):
        children = []
        k = 0
        for sub, count in kids:
            children.append(merge_chains(sub, [c.field(0) for c in chains[k : k + count]], path))
            k += count
        return pa.StructArray.from_buffers(dtype, len(first), [valid], children=children)
    # a list: every chain has the same offsets; merge the items
    ((sub, _),) = kids
    offsets = first.offsets
    if any(not c.offsets.equals(offsets) for c in chains[1:]):
        raise CorruptFileError(path, f"the leaf columns of a {dtype} field disagree on its list offsets")
    child = merge_chains(sub, [c.values for c in chains], path)
    return pa.Array.from_buffers(dtype, len(first), [valid, first.buffers()[1]], children=[child])


def flat_fsl(dtype: pa.DataType) -> bool:
    """A fixed-size list of fixed-width primitives (one 2.1 leaf column)."""
    child = dtype.value_type
    return not (pa.types.is_nested(child) or pa.types.is_boolean(child)) and getattr(child, "bit_width", 0) % 8 == 0 and (
        child.bit_width > 0
    ) if not is_var_type(child) else False


def is_var_type(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_binary(t) or pa.types.is_large_string(t) or pa.types.is_large_binary(t)
