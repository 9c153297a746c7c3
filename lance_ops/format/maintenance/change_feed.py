"""Change data feed between two versions (spec 004 "change data feed"; Delta CDF names).

Rows of the feed: every user column plus ``_rowid``, ``_change_type`` in {insert,
update_preimage, update_postimage, delete}, ``_commit_version`` and ``_commit_timestamp``.
Semantics: ``begin`` exclusive, ``end`` inclusive, evaluated on the ``end`` version:

- insert: live at ``end`` with ``begin < _row_created_at_version <= end``;
- update: live at ``end``, created at or before ``begin`` and ``begin < last_updated <= end``;
  the post-image comes from ``end``, the pre-image from ``begin`` (by row id);
- delete: live at ``begin``, gone at ``end``, with the full row from ``begin``.

Compaction and deletion materialisation keep row ids and versions, so they add no rows.
``_commit_version`` is the row's version column for inserts/updates and, for deletes, the
first version in ``(begin, end]`` whose manifest no longer has the row.

Across schema evolution (``on_schema_change="evolve"``, the default) the output has the end
version's columns: pre-images and deleted rows, read from ``begin``, are matched to them by
field id (:mod:`.evolution`): a column added later is null there, a renamed column takes the end
version's name, a dropped column is absent, a cast column is cast.  A schema change updates
rows only when pylance rewrote them (``add_columns``, ``merge`` and casts set every row's
``_row_last_updated_at_version``; renames and drops do not).  ``on_schema_change="fail"``
raises :class:`~lance_ops.format.errors.SchemaChangeError` instead.
"""

from collections.abc import Callable, Iterator, Sequence
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..commit_handler import CommitHandler, checkout_manifest
from ..errors import InvalidArgumentError, UnsupportedFeatureError
from ..file.blobs import scan_schema
from ..manifest import Manifest
from ..scan import CREATED_AT, ROW_ID, UPDATED_AT, plan_scan, scan
from ..store import ObjectStore
from .evolution import column_map, conform, refuse_schema_changes

OnSchemaChange = Literal["evolve", "fail"]

CHANGE_TYPES = ("insert", "update_preimage", "update_postimage", "delete")


def change_feed_schema(user_schema: pa.Schema) -> pa.Schema:
    """The feed's columns: the user columns as scans return them (blob columns: descriptions),
    then ``_rowid``, ``_change_type``, ``_commit_version``, ``_commit_timestamp``."""
    return pa.schema(
        list(scan_schema(user_schema))
        + [
            pa.field(ROW_ID, pa.uint64()),
            pa.field("_change_type", pa.string()),
            pa.field("_commit_version", pa.uint64()),
            pa.field("_commit_timestamp", pa.timestamp("us", tz="UTC")),
        ]
    )


def _batches(
    store: ObjectStore, manifest: Manifest, columns: Sequence[str], filter: pc.Expression | None = None
) -> Iterator[pa.RecordBatch]:
    return scan(store, manifest, plan_scan(manifest.schema, columns, filter, False, False))


def _live_ids(store: ObjectStore, manifest: Manifest) -> np.ndarray:
    parts = [b.column(0).to_numpy() for b in _batches(store, manifest, [ROW_ID])]
    return np.sort(np.concatenate(parts)) if parts else np.empty(0, dtype=np.uint64)


def change_feed_batches(
    store: ObjectStore,
    handler: CommitHandler,
    begin_version: int,
    end_version: int,
    *,
    on_schema_change: OnSchemaChange = "evolve",
) -> Iterator[pa.RecordBatch]:
    """Stream the change feed of ``(begin_version, end_version]`` of the dataset at ``store``.

    Raises:
        SchemaChangeError: ``on_schema_change="fail"`` and a version in the range changed the schema.
    """
    if begin_version < 0 or end_version < begin_version:
        raise InvalidArgumentError(f"need 0 <= begin_version <= end_version, got ({begin_version}, {end_version}]")
    if on_schema_change not in ("evolve", "fail"):
        raise InvalidArgumentError(f"on_schema_change must be 'evolve' or 'fail', got {on_schema_change!r}")
    end, _ = checkout_manifest(store, end_version, handler)
    if not end.uses_stable_row_ids:
        raise UnsupportedFeatureError(
            f"{store.uri}: the change feed needs stable row ids (create the dataset with enable_stable_row_ids=True)"
        )
    schema = change_feed_schema(end.schema.to_arrow())
    user = schema.names[: len(schema.names) - 4]
    if begin_version == end_version:
        return

    # version -> commit time in microseconds (truncated as pylance does), as one lookup table
    lut = np.zeros(end_version + 1, dtype=np.int64)
    in_range: dict[int, Manifest] = {end_version: end}
    for v in handler.list_versions()[1]:
        if begin_version < v < end_version:
            in_range[v] = handler.read_manifest(v).manifest
        if begin_version < v <= end_version:
            lut[v] = in_range[v].timestamp_ns // 1000
    if begin_version > 0:
        in_range[begin_version] = checkout_manifest(store, begin_version, handler)[0]
        if on_schema_change == "fail":
            refuse_schema_changes(store.uri, begin_version, end_version, in_range.__getitem__, sorted(in_range))

    def emit(batch: pa.RecordBatch, kind: str, versions: np.ndarray) -> pa.RecordBatch:
        n = batch.num_rows
        v = np.asarray(versions, dtype=np.uint64)
        cols = [batch.column(name) for name in user] + [
            batch.column(ROW_ID),
            pa.array([kind], type=pa.string()).take(pa.array(np.zeros(n, dtype=np.int32))),
            pa.array(v, type=pa.uint64()),
            pa.array(lut[np.minimum(v, end_version).astype(np.intp)], type=pa.timestamp("us", tz="UTC")),
        ]
        return pa.RecordBatch.from_arrays(cols, schema=schema)

    b = pa.scalar(begin_version, pa.uint64())
    e = pa.scalar(end_version, pa.uint64())
    created, updated = pc.field(CREATED_AT), pc.field(UPDATED_AT)
    cols = user + [ROW_ID, CREATED_AT, UPDATED_AT]
    post_ids: list[np.ndarray] = []
    for batch in _batches(store, end, cols, (created > b) & (created <= e)):
        yield emit(batch, "insert", batch.column(CREATED_AT).to_numpy())
    upd_filter = (created <= b) & (updated > b) & (updated <= e)
    post_versions: list[np.ndarray] = []
    for batch in _batches(store, end, cols, upd_filter):
        post_ids.append(batch.column(ROW_ID).to_numpy())
        post_versions.append(batch.column(UPDATED_AT).to_numpy())
        yield emit(batch, "update_postimage", batch.column(UPDATED_AT).to_numpy())
    if begin_version == 0:
        return
    start = in_range[begin_version]
    between = [in_range[v].schema for v in sorted(in_range) if begin_version < v < end_version]
    cmap = column_map(start.schema, end.schema, between)

    def begin_batches(filter: pc.Expression | None = None) -> Iterator[pa.RecordBatch]:
        """Rows of ``begin`` as the end version's columns (matched by field id) + ``_rowid``."""
        for batch in _batches(store, start, cmap.read_columns + [ROW_ID], filter):
            yield conform(batch, cmap, [ROW_ID])

    if post_ids:
        ids = np.concatenate(post_ids)
        vers = np.concatenate(post_versions)
        order = np.argsort(ids)
        ids, vers = ids[order], vers[order]
        id_set = pa.array(ids, type=pa.uint64())
        for batch in begin_batches(pc.field(ROW_ID).isin(id_set)):
            rid = batch.column(ROW_ID).to_numpy()
            yield emit(batch, "update_preimage", vers[np.searchsorted(ids, rid)])
    # deletes: ids live at begin and not at end
    end_ids = _live_ids(store, end)
    gone_versions = _deletion_versions(store, handler, begin_version, end_version)
    for batch in begin_batches():
        rid = batch.column(ROW_ID).to_numpy()
        pos = np.searchsorted(end_ids, rid)
        pos = np.clip(pos, 0, max(len(end_ids) - 1, 0))
        alive = (end_ids[pos] == rid) if len(end_ids) else np.zeros(len(rid), dtype=bool)
        if alive.all():
            continue
        dead = batch.filter(pa.array(~alive))
        dead_ids = dead.column(ROW_ID).to_numpy()
        yield emit(dead, "delete", gone_versions(dead_ids))


def _deletion_versions(
    store: ObjectStore, handler: CommitHandler, begin: int, end: int
) -> Callable[[np.ndarray], np.ndarray]:
    """A function: row ids deleted in (begin, end] -> the first version without them."""
    cache: dict[int, np.ndarray] = {}

    def ids_at(v: int) -> np.ndarray:
        if v not in cache:
            cache[v] = _live_ids(store, checkout_manifest(store, v, handler)[0])
        return cache[v]

    def lookup(dead: np.ndarray) -> np.ndarray:
        out = np.full(len(dead), end, dtype=np.uint64)
        if end - begin <= 1:
            return out
        pending = np.ones(len(dead), dtype=bool)
        for v in range(begin + 1, end + 1):
            live = ids_at(v)
            pos = np.clip(np.searchsorted(live, dead), 0, max(len(live) - 1, 0))
            present = (live[pos] == dead) if len(live) else np.zeros(len(dead), dtype=bool)
            newly = pending & ~present
            out[newly] = v
            pending &= present
            if not pending.any():
                break
        return out

    return lookup
