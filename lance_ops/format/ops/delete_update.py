"""Row mutations: delete and update (spec "Deletion", docs/FORMAT.md §8.1-§8.3, §11).

Both work fragment by fragment on live rows only: a predicate is evaluated per fragment with
``_rowaddr``; deleted rows go into the fragment's deletion file (the union with its old one);
a fragment whose rows are all deleted leaves the manifest.  Update with stable row ids writes
the new rows to new fragments that keep each row's ``_rowid`` and ``_row_created_at_version``.
"""

from collections import deque
from collections.abc import Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.acero as acero
import pyarrow.compute as pc
import pyarrow.dataset as pads

from lance_ops.format.errors import ArgumentTypeError, InvalidArgumentError, SchemaError
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.ops.delete_match import matching_offsets, predicate_columns
from lance_ops.format.ops.write import DEFAULT_MAX_ROWS_PER_FILE, write_fragment_files
from lance_ops.format.read.blob_payloads import has_blob_columns, with_payloads
from lance_ops.format.read.scan import (
    CREATED_AT,
    META_COLUMNS,
    ROW_ADDR,
    ROW_ID,
    filter_schema,
    plan_scan,
    resolve_filter,
    scan,
    scan_fragment,
)
from lance_ops.format.sql import sql_expression
from lance_ops.format.table import rowids
from lance_ops.format.table.deletion import with_deletions
from lance_ops.format.table.file_versions import require_writable
from lance_ops.format.table.fragment import FragmentMetadata
from lance_ops.format.table.manifest import Manifest

LOCAL_MASK = np.uint64(0xFFFFFFFF)


#: a delete evaluates its predicate on this many rows (or bytes of the predicate's columns) at once
DELETE_GROUP_ROWS = 1 << 18
DELETE_GROUP_BYTES = 8 << 20
#: read-ahead of a delete's scan on an object store (pages fetched and decoded in background
#: threads); local files are read inline: measured on 2 cores, the threads' GIL hand-offs cost
#: more than the overlap gains for a predicate column of a few MB per fragment
DELETE_PREFETCH_BYTES = 8 << 20
#: deletion files an object-store delete writes at once (one request each); local files are
#: written in line (a file create costs ~20 us; the threads cost more, as above)
DELETE_WRITERS_REMOTE = 16


def _matching_addresses(
    store: ObjectStore, manifest: Manifest, predicate: pc.Expression
) -> Iterator[tuple[int, np.ndarray]]:
    """``(fragment id, sorted local offsets)`` of the live rows matching ``predicate``, fragment
    after fragment (fragments without a match are left out).

    Only the predicate's columns are read (with ``_rowaddr``), by one scan over the fragments
    (reading ahead on object stores); the predicate is evaluated by Acero on groups of whole
    batches (up to :data:`DELETE_GROUP_ROWS` rows), not once per batch.
    """
    probe = plan_scan(manifest.schema, [ROW_ADDR], predicate, False, False)
    columns = [*(c for c in probe.filter_columns if c != ROW_ADDR), ROW_ADDR]
    plan = plan_scan(manifest.schema, columns, None, False, False)
    group: list[pa.RecordBatch] = []
    rows = size = 0
    pending: dict[int, list[np.ndarray]] = {}
    order: list[int] = []

    def evaluate() -> None:
        nonlocal rows, size
        hit = _filter(pa.Table.from_batches(group, schema=plan.out_schema), predicate)
        group.clear()
        rows = size = 0
        for chunk in hit.column(ROW_ADDR).chunks:
            addr = chunk.to_numpy()
            if not addr.size:
                continue
            fids = addr >> np.uint64(32)
            cuts = np.flatnonzero(fids[1:] != fids[:-1]) + 1
            for part in np.split(addr, cuts):
                fid = int(part[0] >> np.uint64(32))
                if fid not in pending:
                    pending[fid] = []
                    order.append(fid)
                pending[fid].append((part & LOCAL_MASK).astype(np.uint32))

    def done(keep: int | None) -> Iterator[tuple[int, np.ndarray]]:
        while order and order[0] != keep:
            fid = order.pop(0)
            parts = pending.pop(fid)
            yield fid, parts[0] if len(parts) == 1 else np.concatenate(parts)

    for b in scan(store, manifest, plan, prefetch_bytes=None if store.is_local else DELETE_PREFETCH_BYTES):
        if not b.num_rows:
            continue
        group.append(b)
        rows += b.num_rows
        size += b.nbytes
        if rows >= DELETE_GROUP_ROWS or size >= DELETE_GROUP_BYTES:
            current = int(b.column(ROW_ADDR)[0].as_py()) >> 32  # may continue in the next group
            evaluate()
            yield from done(current)
    if group:
        evaluate()
    yield from done(None)


def plan_delete(
    store: ObjectStore, manifest: Manifest, predicate: pc.Expression | str | None
) -> tuple[list[FragmentMetadata], list[int], int]:
    """Write deletion files for the rows matching ``predicate`` (a SQL string or an Expression).

    Deletion files (each the union with the fragment's old one) are written as the scan goes
    on: on an object store by a pool of threads, a bounded number in flight; like pylance's
    they are not fsynced (nothing references them before the commit).

    Returns:
        (updated fragments, ids of fragments deleted entirely, number of rows deleted), in the
        manifest's fragment order.
    """
    if predicate is None:
        raise InvalidArgumentError("delete needs a predicate (pc.scalar(True) deletes every row)")
    predicate = resolve_filter(manifest.schema, predicate, "delete predicate")
    assert predicate is not None
    by_id = {f.id: f for f in manifest.fragments}
    results: dict[int, FragmentMetadata | None] = {}
    total = 0
    names = predicate_columns(manifest, predicate) if store.is_local else None
    matches = (matching_offsets(store, manifest, predicate, names) if names is not None
               else _matching_addresses(store, manifest, predicate))
    if store.is_local:
        for fid, offsets in matches:
            total += int(offsets.size)
            results[fid] = with_deletions(store, by_id[fid], offsets, manifest.version, bases=manifest.bases)
    else:
        inflight: deque[tuple[int, Future[FragmentMetadata | None]]] = deque()
        with ThreadPoolExecutor(max_workers=DELETE_WRITERS_REMOTE, thread_name_prefix="lance-ops-delete") as pool:
            try:
                for fid, offsets in matches:
                    total += int(offsets.size)
                    inflight.append((fid, pool.submit(
                        with_deletions, store, by_id[fid], offsets, manifest.version, bases=manifest.bases
                    )))
                    while len(inflight) > 2 * DELETE_WRITERS_REMOTE:  # bounded: offsets wait in memory
                        done_id, fut = inflight.popleft()
                        results[done_id] = fut.result()
                while inflight:
                    done_id, fut = inflight.popleft()
                    results[done_id] = fut.result()
            finally:
                for _, fut in inflight:
                    fut.cancel()
    updated, removed = [], []
    for f in manifest.fragments:
        if f.id in results:
            r = results[f.id]
            if r is None:
                removed.append(f.id)
            else:
                updated.append(r)
    return updated, removed, total


def _filter(table: pa.Table, predicate: pc.Expression) -> pa.Table:
    """``table.filter(predicate)`` on the calling thread (the scan's threads keep the cores busy)."""
    return acero.Declaration.from_sequence([
        acero.Declaration("table_source", acero.TableSourceNodeOptions(table)),
        acero.Declaration("filter", acero.FilterNodeOptions(predicate)),
    ]).to_table(use_threads=False)


def _typed_scalar(value: Any, typ: pa.DataType, name: str) -> pa.Scalar:
    """``value`` (a Python value or a ``pa.Scalar``) as a scalar of the column's type."""
    try:
        scalar = value if isinstance(value, pa.Scalar) else pa.scalar(value, type=typ)
        return scalar if scalar.type == typ else scalar.cast(typ)
    except (pa.ArrowException, TypeError, ValueError, OverflowError) as e:
        raise SchemaError(f"update: value {value!r} does not fit column {name!r} of type {typ}: {e}") from e


def _repeat(scalar: pa.Scalar, n: int) -> pa.Array:
    """``pa.repeat`` that also gives an empty array: for list-like scalars pyarrow's ``repeat(s, 0)``
    raises "Must pass at least one array" (an update touching no row of a fragment)."""
    return pa.repeat(scalar, n) if n else pa.array([], type=scalar.type)


def _evaluate(table: pa.Table, values: Mapping[str, Any], schema: pa.Schema) -> pa.Table:
    """``table`` with the SET columns replaced by their expressions or scalars (vectorised).

    Scalars (typed nulls of any type included: lists, structs, maps, dictionaries, fixed-size
    lists) become whole columns with ``pa.repeat``; expressions are projected by Acero.
    """
    exprs: dict[str, Any] = {}
    for name in table.column_names:
        v = values.get(name, None) if name in values else None
        if name in values and isinstance(v, pc.Expression):
            exprs[name] = v.cast(schema.field(name).type)
    try:
        out = pads.dataset(table).to_table(columns=exprs) if exprs else None
        cols = []
        for name in table.column_names:
            typ = schema.field(name).type
            if name not in values:
                cols.append(table.column(name))
            elif out is not None and name in exprs:
                cols.append(out.column(name).cast(typ))
            else:
                cols.append(_repeat(_typed_scalar(values[name], typ, name), table.num_rows))
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as e:
        msg = str(e).split("\n", 1)[0]
        set_ = {k: str(v) for k, v in values.items()}
        raise SchemaError(f"update: the values {set_} cannot be computed on the dataset's columns "
                          f"{[f'{f.name}: {f.type}' for f in schema]}: {msg}") from None
    for n, col in zip(table.column_names, cols, strict=True):
        if n in values and not schema.field(n).nullable and col.null_count:
            raise SchemaError(f"update: column {n!r} is not nullable but the value {values.get(n)!r} gives nulls")
    return pa.Table.from_arrays(cols, schema=table.schema)


def sql_values(manifest: Manifest, values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` with SQL strings translated to Expressions over the dataset's columns."""
    names = filter_schema(manifest.schema)
    types = {f.name: f.type for f in names}
    return {k: sql_expression(v, names, what=f"update value of {k!r}", metadata_columns=META_COLUMNS,
                              target=types.get(k))
            if isinstance(v, str) else v
            for k, v in values.items()}


def plan_update(
    store: ObjectStore,
    manifest: Manifest,
    values: Mapping[str, Any],
    where: pc.Expression | str | None,
    *,
    max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
) -> tuple[list[int], list[FragmentMetadata], list[FragmentMetadata], int]:
    """Rewrite the matching rows with new values.

    ``values`` maps a column to a SQL expression string (``"b + 1"``, ``"'text'"``, as pylance),
    a ``pyarrow.compute.Expression`` or a Python/Arrow scalar; ``where`` is a SQL string or an
    Expression.

    Returns:
        (removed fragment ids, updated fragments, new fragments, rows updated)
    """
    file_version = require_writable(manifest.data_storage_version, store.uri)
    arrow = manifest.schema.to_arrow()
    if not isinstance(values, Mapping):
        raise ArgumentTypeError(f"update values must be a mapping of column name to value, got {type(values).__name__}")
    for name in values:
        if not isinstance(name, str) or name not in arrow.names:
            raise SchemaError(f"update: column {name!r} is not in the dataset schema {arrow.names}")
    if not values:
        raise InvalidArgumentError("update needs at least one column to set")
    where = resolve_filter(manifest.schema, where, "update where")
    values = sql_values(manifest, values)
    # values checked against the schema before any data is read or written
    _evaluate(pa.Table.from_batches([], schema=arrow), values, arrow)
    stable = manifest.uses_stable_row_ids
    user_cols = list(arrow.names)
    meta = [ROW_ADDR] + ([ROW_ID, CREATED_AT] if stable else [])
    plan = plan_scan(manifest.schema, user_cols + meta, where, False, False)
    removed: list[int] = []
    updated: list[FragmentMetadata] = []
    kept_ids: list[np.ndarray] = []
    kept_created: list[np.ndarray] = []
    total = 0

    blobs = has_blob_columns(manifest)

    def new_rows() -> Iterator[pa.RecordBatch]:
        nonlocal total
        for frag in manifest.fragments:
            offsets = []
            for b in scan_fragment(store, manifest, frag, plan):
                if blobs:  # blob descriptions -> the payloads they point at, written anew
                    b = with_payloads(store, manifest, frag, b)
                offsets.append(b.column(ROW_ADDR).to_numpy() & LOCAL_MASK)
                if stable:
                    kept_ids.append(b.column(ROW_ID).to_numpy())
                    kept_created.append(b.column(CREATED_AT).to_numpy())
                t = pa.Table.from_batches([b.select(user_cols)])
                yield from _evaluate(t, values, arrow).to_batches()
            if not offsets:
                continue
            off = np.concatenate(offsets).astype(np.uint32)
            total += int(off.size)
            new = with_deletions(store, frag, off, manifest.version, bases=manifest.bases)
            if new is None:
                removed.append(frag.id)
            else:
                updated.append(new)

    frags = write_fragment_files(store, new_rows(), manifest.schema, version=file_version,
                                 max_rows_per_file=max_rows_per_file)
    if stable and frags:
        ids = np.concatenate(kept_ids).astype(np.uint64)
        created = np.concatenate(kept_created).astype(np.uint64)
        pos = 0
        out = []
        for f in frags:
            n = f.physical_rows
            out.append(
                f.with_changes(
                    row_ids=rowids.encode_row_ids(ids[pos : pos + n]),
                    created_at_versions=rowids.encode_versions(created[pos : pos + n]),
                )
            )
            pos += n
        frags = out
    return removed, updated, frags, total
