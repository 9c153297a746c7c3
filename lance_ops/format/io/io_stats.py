"""Counters of what scans read, for ``analyze_plan`` (pylance's ``LanceRead`` metrics).

A :func:`counting` block registers a :class:`ScanStats`; while it is open every storage read
(:class:`~lance_ops.format.io.object_store.ObjectStore` reads and the data file reader's local
``preadv``) and every fragment a scan opens is added to it.  Counts are process-wide while the
block is open (reads of other threads in that time are counted too); with no block open a read
costs one list check.
"""

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

_LOCK = threading.Lock()
_ACTIVE: list["ScanStats"] = []


@dataclass
class ScanStats:
    """What a scan read: storage requests, ranges (``iops``), bytes, fragments and their rows."""

    bytes_read: int = 0
    iops: int = 0
    requests: int = 0
    fragments_scanned: int = 0
    rows_scanned: int = 0
    fragments_pruned: int = 0


def record_pruned(fragments: int) -> None:
    """Zone maps ruled out ``fragments`` fragments of a scan (they are not opened)."""
    if not _ACTIVE:
        return
    with _LOCK:
        for s in _ACTIVE:
            s.fragments_pruned += fragments


def record_read(nbytes: int, ranges: int = 1) -> None:
    """One storage request of ``ranges`` byte ranges, ``nbytes`` in all."""
    if not _ACTIVE:
        return
    with _LOCK:
        for s in _ACTIVE:
            s.bytes_read += nbytes
            s.iops += ranges
            s.requests += 1


def record_fragment(rows: int) -> None:
    """A scan opened a fragment of ``rows`` live rows (its filter is evaluated over them)."""
    if not _ACTIVE:
        return
    with _LOCK:
        for s in _ACTIVE:
            s.fragments_scanned += 1
            s.rows_scanned += rows


@contextmanager
def counting() -> Iterator[ScanStats]:
    """Count the reads and opened fragments of the enclosed block."""
    stats = ScanStats()
    with _LOCK:
        _ACTIVE.append(stats)
    try:
        yield stats
    finally:
        with _LOCK:
            _ACTIVE.remove(stats)
