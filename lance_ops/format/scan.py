"""Scanning fragments: projection, deletion vectors, metadata columns, filter, limit/offset.

Rows come out fragment by fragment, batch by batch (bounded memory).  Metadata columns
(spec "Row ID and lineage"): ``_rowid`` (stable id, or the row address without stable ids),
``_rowaddr`` = ``fragment_id << 32 | offset``, ``_row_created_at_version`` and
``_row_last_updated_at_version`` (1 where a fragment carries no sequence, as pylance).
"""

import os
import queue
import re
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import rowids
from .deletion import read_deletion_file
from .errors import SchemaError
from .file.reader import DataFileReader
from .fragment import FragmentMetadata
from .manifest import Manifest
from .schema import LanceSchema
from .store import ObjectStore

ROW_ID = "_rowid"
ROW_ADDR = "_rowaddr"
CREATED_AT = "_row_created_at_version"
UPDATED_AT = "_row_last_updated_at_version"
META_COLUMNS = (ROW_ID, ROW_ADDR, CREATED_AT, UPDATED_AT)
DEFAULT_BATCH_SIZE = 65536


@dataclass(frozen=True)
class ScanPlan:
    """What to read: user columns, metadata columns, filter, output order."""

    data_columns: tuple[str, ...]  # user columns to read (projection + filter references)
    meta_columns: tuple[str, ...]  # metadata columns to compute
    output: tuple[str, ...]  # final column order
    filter: pc.Expression | None
    out_schema: pa.Schema  # schema of every batch yielded


def plan_scan(
    schema: LanceSchema,
    columns: Sequence[str] | None,
    filter: pc.Expression | None,
    with_row_id: bool,
    with_row_address: bool,
) -> ScanPlan:
    names = [f.name for f in schema.top_level()]
    if columns is None:
        output = list(names)
    else:
        if isinstance(columns, str):
            raise TypeError(f"columns must be a list of names, got the string {columns!r}")
        output = list(columns)
        for c in output:
            if c not in names and c not in META_COLUMNS:
                raise SchemaError(f"column {c!r} is not in the dataset schema {names}")
    if with_row_id and ROW_ID not in output:
        output.append(ROW_ID)
    if with_row_address and ROW_ADDR not in output:
        output.append(ROW_ADDR)
    needed = set(output)
    if filter is not None:
        if isinstance(filter, str):
            raise TypeError("filter must be a pyarrow.compute.Expression (SQL strings are not supported)")
        # A superset of the referenced columns: every name that occurs as a token of the expression.
        text = str(filter)
        tokens = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))
        needed |= {n for n in (*names, *META_COLUMNS) if n in tokens or f'"{n}"' in text}
    data_cols = tuple(n for n in names if n in needed)
    meta_cols = tuple(m for m in META_COLUMNS if m in needed)
    arrow = schema.to_arrow()
    out_schema = pa.schema(
        [pa.field(n, pa.uint64()) if n in META_COLUMNS else arrow.field(n) for n in output], metadata=arrow.metadata
    )
    return ScanPlan(data_cols, meta_cols, tuple(output), filter, out_schema)


def _rechunk(batches: Iterator[pa.RecordBatch], size: int) -> Iterator[pa.RecordBatch]:
    """Batches of exactly ``size`` rows (the last may be shorter)."""
    pending: list[pa.RecordBatch] = []
    have = 0
    for b in batches:
        pending.append(b)
        have += b.num_rows
        while have >= size:
            t = pa.Table.from_batches(pending)
            head = t.slice(0, size).combine_chunks().to_batches()
            yield head[0] if head else pa.RecordBatch.from_pylist([], schema=t.schema)
            rest = t.slice(size)
            pending = rest.combine_chunks().to_batches() if rest.num_rows else []
            have -= size
    if have:
        t = pa.Table.from_batches(pending).combine_chunks()
        yield from t.to_batches()


def _fragment_data(
    store: ObjectStore,
    manifest: Manifest,
    frag: FragmentMetadata,
    names: Sequence[str],
    batch_size: int,
) -> Iterator[pa.RecordBatch]:
    """Batches of the fragment's physical rows (deleted rows included) with the given columns."""
    schema = manifest.schema
    wanted = schema.project(list(names)) if names else None
    target = wanted.to_arrow() if wanted is not None else pa.schema([])
    top_ids = [schema.field(n).id for n in names]
    sources = []
    covered: dict[int, int] = {}
    for i, df in enumerate(frag.files):
        ids = [fid for fid in top_ids if fid in set(df.fields) and fid not in covered]
        if ids:
            for fid in ids:
                covered[fid] = i
            sources.append((df, ids))
    if not names or not sources:
        done = 0
        while done < frag.physical_rows:
            n = min(batch_size, frag.physical_rows - done)
            cols = [pa.nulls(n, type=f.type) for f in target]
            yield pa.RecordBatch.from_arrays(cols, schema=target) if names else pa.RecordBatch.from_pydict(
                {"__n": pa.nulls(n)}
            ).select([])
            done += n
        return
    streams = []
    for df, ids in sources:
        reader = DataFileReader(store, f"data/{df.path}", file_size=df.file_size_bytes or None)
        if reader.num_rows != frag.physical_rows:
            from .errors import CorruptFileError

            raise CorruptFileError(
                store.full_path(f"data/{df.path}"),
                f"file has {reader.num_rows} rows but fragment {frag.id} says {frag.physical_rows}",
            )
        gen = reader.read(ids, batch_size=batch_size)
        streams.append((ids, gen if len(sources) == 1 else _rechunk(gen, batch_size)))
    if len(streams) == 1 and len(top_ids) == len(streams[0][0]):
        for b in streams[0][1]:
            yield pa.RecordBatch.from_arrays(b.columns, schema=target)
        return
    iters = [s[1] for s in streams]
    while True:
        parts = [next(it, None) for it in iters]
        if parts[0] is None:
            return
        by_id: dict[int, pa.Array] = {}
        for (ids, _), b in zip(streams, parts, strict=True):
            assert b is not None
            for fid, col in zip(ids, b.columns, strict=True):
                by_id[fid] = col
        n = parts[0].num_rows
        cols = [by_id[fid] if fid in by_id else pa.nulls(n, type=target.field(j).type) for j, fid in enumerate(top_ids)]
        yield pa.RecordBatch.from_arrays(cols, schema=target)


def scan_fragment(
    store: ObjectStore,
    manifest: Manifest,
    frag: FragmentMetadata,
    plan: ScanPlan,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
) -> Iterator[pa.RecordBatch]:
    """Live rows of one fragment with ``plan.output`` columns, filter applied."""
    live = None
    if frag.deletion_file is not None:
        deleted = read_deletion_file(store, frag.id, frag.deletion_file.to_proto(), physical_rows=frag.physical_rows)
        live = np.ones(frag.physical_rows, dtype=bool)
        live[deleted] = False
    meta = set(plan.meta_columns)
    ids = versions_c = versions_u = None
    if ROW_ID in meta and manifest.uses_stable_row_ids:
        if frag.row_ids is None:
            from .errors import CorruptFileError

            raise CorruptFileError(store.uri, f"fragment {frag.id} has no row ids but the dataset uses stable row ids")
        ids = rowids.decode_row_ids(frag.row_ids, expected_len=frag.physical_rows)
    if CREATED_AT in meta and frag.created_at_versions is not None:
        versions_c = rowids.decode_versions(frag.created_at_versions, expected_len=frag.physical_rows)
    if UPDATED_AT in meta and frag.last_updated_at_versions is not None:
        versions_u = rowids.decode_versions(frag.last_updated_at_versions, expected_len=frag.physical_rows)

    start = 0
    for batch in _fragment_data(store, manifest, frag, plan.data_columns, batch_size):
        n = batch.num_rows
        stop = start + n
        cols = dict(zip(batch.schema.names, batch.columns, strict=True))
        if meta:
            addr = (np.uint64(frag.id) << np.uint64(32)) + np.arange(start, stop, dtype=np.uint64)
            if ROW_ADDR in meta:
                cols[ROW_ADDR] = pa.array(addr, type=pa.uint64())
            if ROW_ID in meta:
                cols[ROW_ID] = pa.array(ids[start:stop] if ids is not None else addr, type=pa.uint64())
            one = None
            for name, seq in ((CREATED_AT, versions_c), (UPDATED_AT, versions_u)):
                if name in meta:
                    if seq is not None:
                        cols[name] = pa.array(seq[start:stop], type=pa.uint64())
                    else:
                        one = one if one is not None else pa.array(np.ones(n, dtype=np.uint64))
                        cols[name] = one
        out = pa.RecordBatch.from_pydict(cols) if cols else batch
        if live is not None:
            mask = live[start:stop]
            if not mask.all():
                out = out.filter(pa.array(mask))
        start = stop
        if plan.filter is not None and out.num_rows:
            out = pa.Table.from_batches([out]).filter(plan.filter).combine_chunks()
            if out.num_rows == 0:
                continue
            out = out.to_batches()[0]
        if out.num_rows == 0:
            continue
        yield pa.RecordBatch.from_arrays([out.column(n) for n in plan.output], schema=plan.out_schema)


#: fragments read concurrently by :func:`scan` (the one being consumed plus read-ahead)
FRAGMENT_READAHEAD = max(2, min(4, os.cpu_count() or 2))
#: decoded batches a read-ahead fragment may hold before it waits for the consumer
BATCH_READAHEAD = 4

_DONE = object()


class _Failed:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


class _FragmentProducer:
    """Runs one fragment's :func:`scan_fragment` in a thread, batches into a bounded queue.

    File reads (``preadv``) and the NumPy/Arrow kernels release the GIL, so fragments decode in
    parallel with the consumer.  Memory per producer: ``BATCH_READAHEAD`` batches plus the
    pages it is decoding.
    """

    def __init__(self, batches: Iterator[pa.RecordBatch], stop: threading.Event) -> None:
        self.queue: queue.Queue[object] = queue.Queue(maxsize=BATCH_READAHEAD)
        self._batches = batches
        self._stop = stop
        self._thread = threading.Thread(target=self._run, name="lance_ops-scan", daemon=True)
        self._thread.start()

    def _put(self, item: object) -> bool:
        while not self._stop.is_set():
            try:
                self.queue.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def _run(self) -> None:
        try:
            for b in self._batches:
                if not self._put(b):
                    return
        except BaseException as e:  # handed to the consumer, which re-raises it
            self._put(_Failed(e))
            return
        finally:
            close = getattr(self._batches, "close", None)
            if close is not None and self._stop.is_set():
                close()
        self._put(_DONE)

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        while True:
            item = self.queue.get()
            if item is _DONE:
                return
            if isinstance(item, _Failed):
                raise item.exc
            yield item  # type: ignore[misc]


def _read_ahead(
    frags: Sequence[FragmentMetadata],
    read: Callable[[FragmentMetadata], Iterator[pa.RecordBatch]],
    depth: int,
) -> Iterator[tuple[FragmentMetadata, Iterator[pa.RecordBatch]]]:
    """``(fragment, its batches)`` in order, with up to ``depth`` fragments decoding at once."""
    if depth <= 1 or len(frags) <= 1:
        for f in frags:
            yield f, read(f)
        return
    stop = threading.Event()
    running: deque[tuple[FragmentMetadata, _FragmentProducer]] = deque()
    nxt = 0
    try:
        while nxt < len(frags) or running:
            while nxt < len(frags) and len(running) < depth:
                running.append((frags[nxt], _FragmentProducer(read(frags[nxt]), stop)))
                nxt += 1
            frag, producer = running.popleft()
            yield frag, iter(producer)
    finally:
        stop.set()  # producers of fragments nobody will read stop at their next batch


def scan(
    store: ObjectStore,
    manifest: Manifest,
    plan: ScanPlan,
    *,
    fragments: Sequence[FragmentMetadata] | None = None,
    limit: int | None = None,
    offset: int | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    readahead: int = FRAGMENT_READAHEAD,
) -> Iterator[pa.RecordBatch]:
    """Stream the dataset (or the given fragments) with limit/offset over the filtered rows.

    Batches come out in fragment order; up to ``readahead`` fragments are read and decoded
    concurrently in background threads (bounded memory: a few batches and pages each).
    """
    skip = offset or 0
    remaining = limit
    if remaining is not None and remaining <= 0:
        return
    todo = []
    for frag in fragments if fragments is not None else manifest.fragments:
        if plan.filter is None and skip >= frag.num_rows and frag.num_rows >= 0:
            skip -= frag.num_rows
            continue
        todo.append(frag)
    if remaining is not None and plan.filter is None:
        # without a filter the fragments needed are known up front: no wasted read-ahead
        need, cut = remaining + skip, 0
        while cut < len(todo) and need > 0:
            need -= todo[cut].num_rows
            cut += 1
        todo = todo[:cut]

    def read(frag: FragmentMetadata) -> Iterator[pa.RecordBatch]:
        return scan_fragment(store, manifest, frag, plan, batch_size=batch_size)

    for _frag, batches in _read_ahead(todo, read, readahead):
        for b in batches:
            if skip:
                if skip >= b.num_rows:
                    skip -= b.num_rows
                    continue
                b = b.slice(skip)
                skip = 0
            if remaining is not None:
                if b.num_rows >= remaining:
                    yield b.slice(0, remaining)
                    return
                remaining -= b.num_rows
            yield b
