"""Background page reading and decoding for scans (:class:`PagePrefetcher`), used through
:meth:`lance_ops.format.file.reader.DataFileReader.read`."""

import os
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    from lance_ops.format.file.columns import Page, PagedColumn

__all__ = ["PagePrefetcher", "PREFETCH_THREADS"]

#: background readers per scan: two concurrent page reads nearly double the copy rate of a
#: 2-core machine (one thread alone barely overlaps with the consumer)
PREFETCH_THREADS = max(1, min(4, os.cpu_count() or 1))


class PagePrefetcher:
    """Reads and decodes the pages a scan will need next, in background threads, in read order.

    A sequential reader (:meth:`DataFileReader.read` with ``prefetch=``) schedules its pages in
    the order it will consume them; a scan may schedule the next file's pages while it still
    consumes the current one.  At most ``budget_bytes`` of submitted pages (by their decoded
    size, estimated: see :meth:`_estimate`) wait untaken, so memory stays bounded whatever the
    file and page sizes.  ``preadv``, the compiled kernels and NumPy/Arrow release the GIL, so
    I/O and decoding overlap with the consumer's work.

    Only the consuming thread calls :meth:`schedule`, :meth:`take` and :meth:`close`; worker
    threads only run ``DataFileReader._decode_page``.  Create one per scan and close it (the
    pool is per instance: a process forked mid-scan never inherits a half-dead shared pool).
    """

    def __init__(self, *, budget_bytes: int = 64 * 1024 * 1024, threads: int = PREFETCH_THREADS) -> None:
        if budget_bytes <= 0 or threads <= 0:
            raise ValueError(f"budget_bytes and threads must be positive, got {budget_bytes}, {threads}")
        self.budget_bytes = budget_bytes
        self._threads = threads
        self._pool: ThreadPoolExecutor | None = None
        self._pending: deque[tuple[PagedColumn, int, int]] = deque()
        # keyed by the column object itself (not its id: a freed column's id can be reused)
        self._futures: dict[tuple[PagedColumn, int], tuple[Future[Any], int]] = {}
        self._inflight = 0
        self._closed = False
        self._ratios: dict[int, float] = {}  # field id -> decoded / stored bytes of its pages

    def schedule(self, pages: Sequence[tuple["PagedColumn", int]]) -> None:
        """Queue ``(column, page index)`` pairs, in the order they will be taken."""
        for column, i in pages:
            nbytes = self._estimate(column, column.pages[i])
            self._pending.append((column, i, nbytes))
            column._scheduled.add(i)
        self._pump()

    def _estimate(self, column: "PagedColumn", page: "Page") -> int:
        """Bytes a page takes in memory while it waits decoded: its rows x value width for
        fixed-width values; for strings its stored bytes x the decoded/stored ratio seen on this
        field's earlier pages in the scan (2 at first: FSST pages decode to ~2-3x)."""
        stored = _stored(page)
        width = _fixed_width(column.dtype)
        if width:
            return max(stored, int(page.length * width))
        return int(stored * self._ratios.get(column.field.id, 2.0))

    def _learn(self, column: "PagedColumn", page: "Page", out: Any) -> None:
        if isinstance(out, pa.Array) and not _fixed_width(column.dtype):
            stored = _stored(page)
            if stored:
                self._ratios[column.field.id] = max(1.0, out.nbytes / stored)

    def _submit_head(self) -> None:
        column, i, nbytes = self._pending.popleft()
        if i not in column._scheduled:  # decoded directly meanwhile
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self._threads, thread_name_prefix="lance_ops-prefetch")
        fut = self._pool.submit(column.reader._decode_page, column.column, column.pages[i], column.dtype)
        self._futures[(column, i)] = (fut, nbytes)
        self._inflight += nbytes

    def _pump(self) -> None:
        while self._pending and not self._closed:
            if self._inflight and self._inflight + self._pending[0][2] > self.budget_bytes:
                return
            self._submit_head()

    def take(self, column: "PagedColumn", i: int) -> Any:
        """The decoded page ``i`` of ``column`` (waiting for it; submitting it first if needed)."""
        key = (column, i)
        if key not in self._futures and i in column._scheduled:
            # still queued (over budget, or read out of order): submit up to it
            while self._pending and not self._closed:
                head_column, head_i, _ = self._pending[0]
                self._submit_head()
                if head_column is column and head_i == i:
                    break
        column._scheduled.discard(i)
        entry = self._futures.pop(key, None)
        if entry is None:
            return column.reader._decode_page(column.column, column.pages[i], column.dtype)
        fut, nbytes = entry
        try:
            out = fut.result()
            self._learn(column, column.pages[i], out)
            return out
        finally:
            self._inflight -= nbytes
            self._pump()

    def close(self) -> None:
        """Drop what was not taken; running reads finish in the background and are discarded."""
        self._closed = True
        self._pending.clear()
        for fut, _ in self._futures.values():
            fut.cancel()
        self._futures.clear()
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def __enter__(self) -> "PagePrefetcher":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _stored(page: "Page") -> int:
    """Stored bytes of a page (of a part of a page: its share of the page's, estimated)."""
    if page.part is not None:
        return page.part.stored
    return sum(size for _, size in page.ranges)


def _fixed_width(dtype: pa.DataType) -> float:
    """Bytes per row of a fixed-width leaf type (0 for strings, lists, structs)."""
    if pa.types.is_boolean(dtype):
        return 0.125
    if pa.types.is_fixed_size_list(dtype):
        return dtype.list_size * _fixed_width(dtype.value_type)
    try:
        return dtype.bit_width / 8
    except ValueError:
        return 0
