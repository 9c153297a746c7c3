"""merge_insert: update, insert and delete rows by key in one ``Update`` commit (pylance 14's
``LanceDataset.merge_insert`` builder and semantics).

The operation has three parts, usable in one process (:class:`MergeInsertBuilder`) or spread
over executors (``jobs.upsert``):

- **execute** (driver or in-process): the target's keys with ``_rowaddr`` (and ``_rowid``,
  ``_row_created_at_version`` with stable row ids) are scanned from the pinned manifest and
  joined with the source keys by ``pyarrow.Table.join`` (a null key never matches).  Source rows
  matching a target row are *matched*, the other source rows *not matched*, target rows no source
  row matches *not matched by source*.
- **tasks** (executor side, small picklable results): :func:`write_matched_rows` writes one
  target fragment's matched rows to new fragments that keep the rows' ``_rowid`` and
  ``_row_created_at_version`` and writes the fragment's new deletion file;
  :func:`write_inserted_rows` writes not-matched rows (new row ids at commit);
  :func:`write_source_deletions` writes the deletion file of one fragment's not-matched-by-source
  rows.  Each returns a :class:`MergeTaskResult`.
- **commit** (driver): :func:`commit_merge_insert` assembles one ``Update`` from the results and
  commits it through the dataset's commit handler; when the commit fails definitively
  (``CommitConflictError``, ``CommitFailedError``) every data and deletion file the operation
  wrote is deleted (nothing on ``CommitStateUnknownError``: the commit may have landed).

Index coverage (as upstream ``rust/lance/src/dataset/write/merge_insert/exec/write.rs``): the
``Update`` has ``update_mode`` REWRITE_ROWS, ``fields_modified`` empty, and
``fields_for_preserving_frag_bitmap`` = **every field id of the schema in pre-order** (nested
leaves included), because a merge_insert rewrites whole rows.  So no index is extended over the
new fragments that carry the updated rows: every index loses the rewritten rows from its
coverage (they show up as unindexed) until it is rebuilt or optimised.

Matched rows move to new fragments (pylance does the same; in one process they share them with
the inserted rows, as pylance's, docs/FORMAT.md §16): they keep ``_rowid`` and
``_row_created_at_version``; ``_row_last_updated_at_version`` becomes the new version.  A target
row matched by several source rows is an :class:`~.errors.AmbiguousMergeInsertError`.
"""

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads

from lance_ops.format.errors import (
    AmbiguousMergeInsertError,
    ArgumentTypeError,
    CommitConflictError,
    CommitFailedError,
    InvalidArgumentError,
    MergeInsertMatchedError,
    SchemaError,
    UnsupportedFeatureError,
)
from lance_ops.format.file.blob_columns import is_blob_field
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.ops.inputs import check_fits
from lance_ops.format.ops.merge_insert_plan import explain_merge_insert, merge_insert_metrics
from lance_ops.format.ops.write import (
    DEFAULT_MAX_ROWS_PER_FILE,
    conform_batch,
    discard_files,
    iter_batches,
    write_fragment_files,
)
from lance_ops.format.read.blob_payloads import has_blob_columns
from lance_ops.format.read.scan import CREATED_AT, ROW_ADDR, ROW_ID, plan_scan, resolve_filter, scan
from lance_ops.format.schema import LanceSchema
from lance_ops.format.sql import sql_filter
from lance_ops.format.table.bases import BasePath
from lance_ops.format.table.deletion import deletion_file_path, with_deletions
from lance_ops.format.table.file_versions import require_writable
from lance_ops.format.table.fragment import FragmentMetadata
from lance_ops.format.table.manifest import Manifest, is_detached_version
from lance_ops.format.table.rowids import encode_row_ids, encode_versions
from lance_ops.format.txn.commit_loop import commit_transaction
from lance_ops.format.txn.handlers import CommitHandler
from lance_ops.format.txn.idempotency import committed_by, idempotency_key
from lance_ops.format.txn.operations import Update
from lance_ops.format.txn.transaction import Transaction

LOCAL_MASK = np.uint64(0xFFFFFFFF)
_SRC = "__merge_source_row"


# --------------------------------------------------------------------------- plan data


@dataclass(frozen=True)
class MergeInsertParams:
    """What to do with each category of rows (pylance's builder state)."""

    on: tuple[str, ...]
    update_matched: bool = False
    matched_condition: pc.Expression | None = None
    insert_not_matched: bool = False
    delete_not_matched_by_source: bool = False
    delete_condition: pc.Expression | None = None
    target_filter: pc.Expression | None = None
    fail_matched: bool = False


@dataclass(frozen=True)
class MergeInsertContext:
    """What the task functions need about the target version (picklable, sent to executors)."""

    uri: str
    on: tuple[str, ...]
    schema: LanceSchema
    read_version: int
    file_version: str
    stable_row_ids: bool
    bases: Mapping[int, BasePath] = field(default_factory=dict)
    max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE

    @classmethod
    def for_manifest(
        cls, uri: str, manifest: Manifest, on: Sequence[str], *, max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
        blob_payloads: bool = False,
    ) -> "MergeInsertContext":
        """The context of a merge into ``manifest`` (checks the keys and that lance_ops can write it).

        ``blob_payloads``: the caller's source holds blob payloads (as pylance's ``merge_insert``
        takes them); without it a dataset with blob columns is refused (a source read through a
        scan, as Spark's, would hold descriptions)."""
        on = check_keys(uri, manifest, on)
        if has_blob_columns(manifest) and not blob_payloads:
            blobs = [f.name for f in manifest.schema.top_level() if is_blob_field(f)]
            raise UnsupportedFeatureError(
                f"{uri}: merge_insert into a dataset with blob columns {blobs} is not supported by lance_ops; "
                "nothing was written"
            )
        return cls(uri, tuple(on), manifest.schema, manifest.version,
                   require_writable(manifest.data_storage_version, uri), manifest.uses_stable_row_ids,
                   dict(manifest.bases), max_rows_per_file)

    @property
    def meta_columns(self) -> list[str]:
        """Target metadata columns a matched row carries into its task."""
        return [ROW_ADDR, ROW_ID, CREATED_AT] if self.stable_row_ids else [ROW_ADDR]


@dataclass(frozen=True)
class MergeTaskResult:
    """What one task wrote: a target fragment's new state and/or new fragments, and row counts."""

    fragment_id: int | None = None
    updated_fragment: FragmentMetadata | None = None
    removed: bool = False
    new_fragments: tuple[FragmentMetadata, ...] = ()
    num_updated_rows: int = 0
    num_inserted_rows: int = 0
    num_deleted_rows: int = 0


def check_keys(uri: str, manifest: Manifest, on: str | Iterable[str] | None) -> list[str]:
    """``on`` as a list of top-level columns of ``manifest``.

    Raises:
        InvalidArgumentError: no key column.  SchemaError: a key that is not a column.
    """
    keys = [on] if isinstance(on, str) else list(on or [])
    if not keys:
        raise InvalidArgumentError(f"{uri}: merge_insert needs at least one key column in `on`, got {on!r}")
    names = [f.name for f in manifest.schema.top_level()]
    missing = [k for k in keys if k not in names]
    if missing:
        raise SchemaError(f"{uri}: merge_insert key column(s) {missing} are not columns of version "
                          f"{manifest.version} (columns: {names})")
    return keys


def merge_update_fields(schema: LanceSchema) -> list[int]:
    """``fields_for_preserving_frag_bitmap`` of a merge_insert: every field id, in pre-order."""
    return [f.id for f in schema.fields]


# --------------------------------------------------------------------------- tasks


def _ambiguous(ctx: MergeInsertContext, rows: pa.Table, index: int) -> AmbiguousMergeInsertError:
    key = ", ".join(f"{k} = {rows.column(k)[index].as_py()!r}" for k in ctx.on)
    return AmbiguousMergeInsertError(
        f"{ctx.uri} version {ctx.read_version}: Ambiguous merge inserts are prohibited: multiple source rows "
        f"match the same target row on ({key}). Please ensure each target row is matched by at most one source row."
    )


def check_unambiguous(ctx: MergeInsertContext, rows: pa.Table) -> None:
    """Raise :class:`AmbiguousMergeInsertError` if two of ``rows`` (matched rows) share a ``_rowaddr``."""
    addr = rows.column(ROW_ADDR).to_numpy().astype(np.uint64, copy=False)
    if addr.size < 2:
        return
    order = np.argsort(addr, kind="stable")
    dup = np.flatnonzero(addr[order][1:] == addr[order][:-1])
    if dup.size:
        raise _ambiguous(ctx, rows, int(order[dup[0] + 1]))


def _write_rows(store: ObjectStore, ctx: MergeInsertContext, rows: pa.Table, keep_ids: bool) -> list[FragmentMetadata]:
    """``rows`` (the dataset's columns, plus ``_rowid`` / ``_row_created_at_version`` when
    ``keep_ids``) as new fragments; with stable row ids and ``keep_ids`` they carry those ids."""
    target = ctx.schema.to_arrow()
    batches = iter(rows.select(target.names).to_batches())
    frags = write_fragment_files(store, batches, ctx.schema, version=ctx.file_version,
                                 max_rows_per_file=ctx.max_rows_per_file)
    if not (keep_ids and ctx.stable_row_ids) or not frags:
        return frags
    ids = rows.column(ROW_ID).to_numpy().astype(np.uint64, copy=False)
    created = rows.column(CREATED_AT).to_numpy().astype(np.uint64, copy=False)
    bounds = np.cumsum([0] + [f.physical_rows for f in frags])
    return [f.with_changes(row_ids=encode_row_ids(ids[a:b]), created_at_versions=encode_versions(created[a:b]))
            for f, a, b in zip(frags, bounds[:-1], bounds[1:], strict=True)]


def _local_offsets(addr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    return (np.asarray(addr).astype(np.uint64, copy=False) & LOCAL_MASK).astype(np.uint32)


def _fragment_deletions(store: ObjectStore, ctx: MergeInsertContext, fragment: FragmentMetadata,
                        offsets: np.ndarray, *, updated: int) -> MergeTaskResult:
    """``fragment`` with ``offsets`` added to its deletion file; the first ``updated`` of them
    are matched rows moved to new fragments, the others rows deleted."""
    new = with_deletions(store, fragment, offsets, ctx.read_version, bases=ctx.bases)
    return MergeTaskResult(fragment.id, new, new is None,
                           num_updated_rows=updated, num_deleted_rows=int(offsets.size) - updated)


def write_source_deletions(
    store: ObjectStore, ctx: MergeInsertContext, fragment: FragmentMetadata, offsets: np.ndarray
) -> MergeTaskResult:
    """Executor side: one fragment's not-matched-by-source rows (local offsets) deleted."""
    return _fragment_deletions(store, ctx, fragment, offsets.astype(np.uint32, copy=False), updated=0)


def write_matched_rows(
    store: ObjectStore, ctx: MergeInsertContext, fragment: FragmentMetadata, rows: pa.Table,
    deleted_offsets: np.ndarray | None = None,
) -> MergeTaskResult:
    """Executor side: the matched source rows of one target fragment -> new fragments keeping the
    matched rows' ``_rowid`` and ``_row_created_at_version``, and the fragment's deletion file
    (those rows plus ``deleted_offsets``, its not-matched-by-source rows).

    ``rows``: the dataset's columns (source values) and :attr:`MergeInsertContext.meta_columns`
    of the target rows they replace.  A failure deletes the files this task wrote.

    Raises:
        AmbiguousMergeInsertError: two rows replace the same target row.
    """
    check_unambiguous(ctx, rows)
    offsets = _local_offsets(rows.column(ROW_ADDR))
    new = _write_rows(store, ctx, rows, keep_ids=True)
    try:
        both = offsets if deleted_offsets is None else np.concatenate([offsets, deleted_offsets.astype(np.uint32)])
        out = _fragment_deletions(store, ctx, fragment, both, updated=int(offsets.size))
    except BaseException:
        discard_files(store, new)
        raise
    return replace(out, new_fragments=tuple(new))


def _write_merged(store: ObjectStore, ctx: MergeInsertContext, matched: pa.Table | None,
                  inserted: pa.Table | None) -> MergeTaskResult:
    """Matched rows (target order), then inserted rows (source order) into the same new
    fragments, as pylance writes them. With stable row ids a fragment's row-id sequence holds its
    matched rows' ids only; the commit gives the rows after them fresh ids (docs/FORMAT.md §16)."""
    names = ctx.schema.to_arrow().names
    parts = [t for t in (matched, inserted) if t is not None and t.num_rows]
    n_inserted = inserted.num_rows if inserted is not None else 0
    if not parts:
        return MergeTaskResult(num_inserted_rows=0)
    batches = (b for t in parts for b in t.select(names).to_batches())
    frags = write_fragment_files(store, batches, ctx.schema, version=ctx.file_version,
                                 max_rows_per_file=ctx.max_rows_per_file)
    if not ctx.stable_row_ids or matched is None or not matched.num_rows:
        return MergeTaskResult(new_fragments=tuple(frags), num_inserted_rows=n_inserted)
    ids = matched.column(ROW_ID).to_numpy().astype(np.uint64, copy=False)
    created = matched.column(CREATED_AT).to_numpy().astype(np.uint64, copy=False)
    out, start = [], 0
    for f in frags:
        kept = min(max(ids.size - start, 0), f.physical_rows)
        if kept:
            f = f.with_changes(row_ids=encode_row_ids(ids[start:start + kept]),
                               created_at_versions=encode_versions(created[start:start + kept]))
        out.append(f)
        start += f.physical_rows
    return MergeTaskResult(new_fragments=tuple(out), num_inserted_rows=n_inserted)


def write_inserted_rows(store: ObjectStore, ctx: MergeInsertContext, rows: pa.Table) -> MergeTaskResult:
    """Executor side: not-matched source rows -> new fragments (row ids assigned at commit)."""
    new = _write_rows(store, ctx, rows, keep_ids=False) if rows.num_rows else []
    return MergeTaskResult(new_fragments=tuple(new), num_inserted_rows=rows.num_rows)


# --------------------------------------------------------------------------- commit


def merge_stats(results: Iterable[MergeTaskResult]) -> dict[str, int]:
    """pylance's statistics dict of a merge_insert."""
    results = list(results)
    return {"num_inserted_rows": sum(r.num_inserted_rows for r in results),
            "num_updated_rows": sum(r.num_updated_rows for r in results),
            "num_deleted_rows": sum(r.num_deleted_rows for r in results)}


def merge_insert_operation(schema: LanceSchema, results: Iterable[MergeTaskResult]) -> Update:
    """The ``Update`` the results make: updated/removed fragments, then the matched rows' new
    fragments, then the inserted rows' (their row ids continue ``next_row_id`` at commit)."""
    results = sorted(results, key=lambda r: (r.fragment_id is None, r.fragment_id or 0))
    removed = [r.fragment_id for r in results if r.removed and r.fragment_id is not None]
    updated = [r.updated_fragment for r in results if r.updated_fragment is not None]
    new = [f for r in results if r.num_inserted_rows == 0 for f in r.new_fragments]
    new += [f for r in results if r.num_inserted_rows for f in r.new_fragments]
    return Update(removed, updated, new, fields_modified=(),
                  fields_for_preserving_frag_bitmap=merge_update_fields(schema))


def discard_written(store: ObjectStore, results: Iterable[MergeTaskResult]) -> None:
    """Best-effort removal of every data and deletion file the tasks wrote (never committed)."""
    results = list(results)
    discard_files(store, [f for r in results for f in r.new_fragments])
    for r in results:
        df = r.updated_fragment.deletion_file if r.updated_fragment is not None else None
        if df is not None:
            try:
                store.delete(deletion_file_path(r.updated_fragment.id, df.to_proto()))  # type: ignore[union-attr]
            except Exception:  # noqa: BLE001 - never hide the commit's error; cleanup removes orphans
                pass


def commit_merge_insert(
    store: ObjectStore,
    manifest: Manifest,
    results: Sequence[MergeTaskResult],
    *,
    handler: CommitHandler | None = None,
    properties: Mapping[str, str] | None = None,
) -> Manifest:
    """Driver side: commit the tasks' results as one ``Update`` on top of ``manifest``.

    Returns:
        The new version's manifest.

    Raises:
        CommitConflictError, CommitFailedError: after deleting every file the tasks wrote.
        CommitStateUnknownError: nothing deleted (the commit may have landed).
    """
    if is_detached_version(manifest.version):
        raise UnsupportedFeatureError(f"{store.uri}: version {manifest.version} is detached; merge_insert "
                                      "commits on top of the latest version only")
    txn = Transaction(manifest.version, merge_insert_operation(manifest.schema, results),
                      properties=dict(properties or {}))
    try:
        out = commit_transaction(store, txn, handler=handler, known=manifest)
    except (CommitConflictError, CommitFailedError):
        discard_written(store, results)
        raise
    if not committed_by(out, txn):  # a retry of a merge already committed under the same key
        discard_written(store, results)
    return out


# --------------------------------------------------------------------------- in-process execution


def read_source(data: Any, ctx: MergeInsertContext, schema: pa.Schema | None = None) -> tuple[pa.Table, list[str]]:
    """The source as one Table of the dataset's columns and types (any input pylance's
    ``execute`` takes, :mod:`.inputs`; lossless casts applied), and the nullable columns the
    source lacks (null in the table: inserted rows keep the nulls, matched rows take the
    target's values, as pylance).

    Raises:
        SchemaError: an extra column, a missing non-nullable one, or a type that does not widen to
            the dataset's.
    """
    data_schema, batches = iter_batches(data, schema)
    target = ctx.schema.to_arrow()
    where = f"{ctx.uri}: merge_insert source"
    check_fits(data_schema, target, where)
    missing = [n for n in target.names if n not in data_schema.names]
    return pa.Table.from_batches([conform_batch(b, target, where) for b in batches], schema=target), missing


def _scan_target(store: ObjectStore, manifest: Manifest, ctx: MergeInsertContext,
                 params: MergeInsertParams, keep: Sequence[str] = ()) -> pa.Table:
    """Keys and metadata columns of the target (plus the columns the conditions read, and
    ``keep``: columns the source lacks, whose values matched rows keep)."""
    names = [f.name for f in manifest.schema.top_level()]
    extra: list[str] = list(keep)
    if params.matched_condition is not None:
        extra = names
    elif params.delete_condition is not None:
        probe = plan_scan(manifest.schema, [ROW_ADDR], params.delete_condition, False, False)
        extra += [c for c in probe.filter_columns if c in names]
    cols = list(dict.fromkeys([*ctx.on, *extra])) + ctx.meta_columns
    plan = plan_scan(manifest.schema, cols, params.target_filter, False, False)
    return pa.Table.from_batches(list(scan(store, manifest, plan)), schema=plan.out_schema)


def _filter(table: pa.Table, predicate: pc.Expression, what: str) -> np.ndarray:
    """Indices of the rows of ``table`` where ``predicate`` is true (null = false)."""
    try:
        mask = pads.dataset(table).to_table(columns={"m": predicate}).column("m")
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as e:
        raise SchemaError(f"{what} {predicate} cannot be evaluated: {str(e).splitlines()[0]}") from None
    return np.flatnonzero(pc.fill_null(mask, False).to_numpy(zero_copy_only=False))


def _matched_condition(ctx: MergeInsertContext, params: MergeInsertParams, target: pa.Table, source: pa.Table,
                       matched: pa.Table) -> pa.Table:
    """The matched rows whose ``when_matched_update_all`` condition holds."""
    if params.matched_condition is None:
        return matched
    names = ctx.schema.to_arrow().names
    t = target.take(matched.column("__tpos").combine_chunks())
    s = source.take(matched.column(_SRC).combine_chunks())
    both = pa.table({"target": pa.StructArray.from_arrays([t.column(n).combine_chunks() for n in names], names),
                     "source": pa.StructArray.from_arrays([s.column(n).combine_chunks() for n in names], names)})
    keep = _filter(both, params.matched_condition, f"{ctx.uri}: when_matched_update_all condition")
    return matched.take(pa.array(keep))


def _fail_on_match(matched: pa.Table, on: Sequence[str]) -> None:
    """``when_matched_fail()``: refuse the merge when a source row matches (before any file is written)."""
    if matched.num_rows:
        first = matched.slice(0, 1).to_pylist()[0]
        keys = ", ".join(f"{k} = {first[k]}" for k in on)
        raise MergeInsertMatchedError(f"Merge insert failed: found matching row with key values: {keys} "
                                      f"({matched.num_rows} source rows match target rows)")


def plan_merge_insert(
    store: ObjectStore, manifest: Manifest, params: MergeInsertParams, data: Any, *,
    schema: pa.Schema | None = None, max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
) -> list[MergeTaskResult]:
    """Run the merge in this process: join, write every file; nothing is committed.

    Returns:
        One result per touched target fragment (deletion files) and one for the new fragments:
        the matched rows (target order) then the inserted rows (source order) in one stream, as
        pylance writes them (executors in ``jobs.upsert`` write them per task instead).
    """
    ctx = MergeInsertContext.for_manifest(store.uri, manifest, params.on, max_rows_per_file=max_rows_per_file,
                                          blob_payloads=True)
    source, missing = read_source(data, ctx, schema)
    keep = missing if params.update_matched else []
    target = _scan_target(store, manifest, ctx, params, keep)
    # target positions only where target values are read back (8 bytes a target row otherwise)
    by_pos = bool(keep) or params.matched_condition is not None or params.delete_condition is not None
    if by_pos:
        target = target.append_column("__tpos", pa.array(np.arange(target.num_rows, dtype=np.int64)))
    keys = source.select(list(ctx.on)).append_column(_SRC, pa.array(np.arange(source.num_rows, dtype=np.int64)))
    how = "full outer" if params.delete_not_matched_by_source else "right outer"
    probe = [*ctx.on, *ctx.meta_columns, *(["__tpos"] if by_pos else [])]
    joined = target.select(probe).join(keys, keys=list(ctx.on), join_type=how)
    has_target, has_source = pc.is_valid(joined.column(ROW_ADDR)), pc.is_valid(joined.column(_SRC))
    if params.fail_matched:
        _fail_on_match(joined.filter(pc.and_(has_target, has_source)), ctx.on)
    results: list[MergeTaskResult] = []
    matched_rows: pa.Table | None = None
    inserted: pa.Table | None = None
    updates: dict[int, list[np.ndarray]] = {}
    deletes: dict[int, list[np.ndarray]] = {}
    try:
        if params.update_matched:
            matched = _matched_condition(ctx, params, target, source, joined.filter(pc.and_(has_target, has_source)))
            rows = source.take(matched.column(_SRC).combine_chunks())
            if keep:  # columns the source lacks keep the target's values (pylance's partial update)
                kept = target.take(matched.column("__tpos").combine_chunks())
                for c in keep:
                    rows = rows.set_column(rows.schema.get_field_index(c), rows.schema.field(c), kept.column(c))
            for c in ctx.meta_columns:
                rows = rows.append_column(c, matched.column(c))
            check_unambiguous(ctx, rows)
            matched_rows = rows.take(pc.sort_indices(rows.column(ROW_ADDR)))  # target order, as pylance
            _group(rows.column(ROW_ADDR), updates)
        if params.insert_not_matched:
            idx = np.sort(joined.filter(pc.invert(has_target)).column(_SRC).to_numpy())
            inserted = source.take(pa.array(idx, pa.int64()))
        results.append(_write_merged(store, ctx, matched_rows, inserted))
        if params.delete_not_matched_by_source:
            gone = joined.filter(pc.invert(has_source))
            if params.delete_condition is not None:
                gone = gone.take(pa.array(_filter(target.take(gone.column("__tpos").combine_chunks()),
                                                  params.delete_condition, f"{ctx.uri}: delete condition")))
            _group(gone.column(ROW_ADDR), deletes)
        by_id = {f.id: f for f in manifest.fragments}
        empty = np.empty(0, np.uint32)
        for fid in sorted(updates.keys() | deletes.keys()):
            upd = np.concatenate(updates.get(fid, [empty]))
            offsets = np.concatenate([upd, *deletes.get(fid, [])])
            results.append(_fragment_deletions(store, ctx, by_id[fid], offsets, updated=int(upd.size)))
    except BaseException:
        discard_written(store, results)
        raise
    return results


def _group(addr: pa.ChunkedArray, into: dict[int, list[np.ndarray]]) -> None:
    """Add row addresses, as local offsets, to ``into`` per fragment id (vectorised split)."""
    a = np.asarray(addr).astype(np.uint64, copy=False)
    if not a.size:
        return
    a = np.sort(a)
    fids = (a >> np.uint64(32)).astype(np.int64)
    cuts = np.flatnonzero(fids[1:] != fids[:-1]) + 1
    for part in np.split(a, cuts):
        into.setdefault(int(part[0] >> np.uint64(32)), []).append((part & LOCAL_MASK).astype(np.uint32))


# --------------------------------------------------------------------------- builder


def _expression(value: Any, what: str, schema: pa.Schema) -> pc.Expression | None:
    """A condition as an Expression: SQL (pylance's dialect) is translated over ``schema``."""
    if value is None or isinstance(value, pc.Expression):
        return value
    if isinstance(value, str):
        return sql_filter(value, schema, what=what)
    raise ArgumentTypeError(f"{what} must be a SQL string, a pyarrow.compute.Expression or None, "
                            f"got {type(value).__name__}")


def _both_sides(schema: pa.Schema) -> pa.Schema:
    """What a matched condition names: ``target.<col>`` and ``source.<col>``."""
    return pa.schema([pa.field("target", pa.struct(list(schema))), pa.field("source", pa.struct(list(schema)))])


class MergeInsertBuilder:
    """``LanceDataset.merge_insert(on)``: pylance's builder (``when_*`` clauses, then ``execute``).

    Conditions are SQL strings as pylance takes them (``"target.x < source.x"``) or
    ``pyarrow.compute.Expression``s.  As pylance's, ``execute`` moves the handle the builder
    came from to the version it commits (``on_commit`` receives that version's manifest).
    """

    def __init__(self, store: ObjectStore, manifest: Manifest, handler: CommitHandler, on: Any, *,
                 target_filter: pc.Expression | str | None = None,
                 max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
                 on_commit: Callable[[Manifest], None] | None = None) -> None:
        target_filter = resolve_filter(manifest.schema, target_filter, "merge_insert target_filter")
        self._store, self._manifest, self._handler = store, manifest, handler
        self._params = MergeInsertParams(tuple(check_keys(store.uri, manifest, on)), target_filter=target_filter)
        self._max_rows_per_file = max_rows_per_file
        self._on_commit = on_commit
        self._use_index = True

    def _with(self, **changes: Any) -> "MergeInsertBuilder":
        self._params = replace(self._params, **changes)
        return self

    def when_matched_update_all(self, condition: pc.Expression | str | None = None) -> "MergeInsertBuilder":
        """Replace matched target rows by their source rows (only where ``condition`` holds:
        SQL ``"target.x < source.x"``, or ``pc.field("target", c)`` / ``pc.field("source", c)``)."""
        sides = _both_sides(self._manifest.schema.to_arrow())
        return self._with(update_matched=True,
                          matched_condition=_expression(condition, "when_matched_update_all condition", sides))

    def when_matched_fail(self) -> "MergeInsertBuilder":
        """Fail the merge (nothing written) when any source row matches a target row, as pylance's."""
        return self._with(fail_matched=True, update_matched=False)

    def retry_timeout(self, timeout: Any) -> "MergeInsertBuilder":
        """pylance's retry time budget: accepted and not used (execute keeps its own conflict handling)."""
        return self

    def conflict_retries(self, retries: int) -> "MergeInsertBuilder":
        """pylance's conflict retry count: checked, accepted and not used (execute keeps its own conflict handling)."""
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ArgumentTypeError(f"conflict_retries must be a non-negative integer, got {retries!r}")
        return self

    def when_not_matched_insert_all(self) -> "MergeInsertBuilder":
        """Insert source rows that match no target row."""
        return self._with(insert_not_matched=True)

    def when_not_matched_by_source_delete(self, expr: pc.Expression | str | None = None) -> "MergeInsertBuilder":
        """Delete target rows no source row matches (only those where ``expr``, SQL or an
        Expression over the target's columns, holds, if given)."""
        cond = resolve_filter(self._manifest.schema, expr, "when_not_matched_by_source_delete expr")
        return self._with(delete_not_matched_by_source=True, delete_condition=cond)

    def use_index(self, use_index: bool) -> "MergeInsertBuilder":
        """pylance's switch for answering the join from a scalar index on the key (lance_ops always
        joins by hash; the switch only changes what :meth:`explain_plan` may explain, as pylance's)."""
        self._use_index = bool(use_index)
        return self

    def explain_plan(self, schema: pa.Schema | None = None, verbose: bool = False) -> str:
        """The merge's plan as text (:mod:`.merge_insert_plan`); nothing is read or written."""
        self._check_configured()
        return explain_merge_insert(self._manifest, self._params, schema, use_index=self._use_index, verbose=verbose)

    def analyze_plan(self, data: Any, *, schema: pa.Schema | None = None) -> str:
        """Run the merge of ``data`` without committing it (its files are deleted again) and return
        the plan with its ``metrics=[...]`` (rows inserted, updated, deleted; files and bytes written)."""
        self._check_configured()
        results = plan_merge_insert(self._store, self._manifest, self._params, data, schema=schema,
                                    max_rows_per_file=self._max_rows_per_file)
        files = [df for r in results for f in r.new_fragments for df in f.files]
        written = {"bytes_written": sum(df.file_size_bytes for df in files), "num_files_written": len(files)}
        discard_written(self._store, results)
        return merge_insert_metrics(self._manifest, self._params, merge_stats(results), written)

    def _check_configured(self) -> None:
        """Refuse a merge that can change nothing (no clause given), as pylance does.

        Raises:
            InvalidArgumentError: no ``when_*`` clause (pylance's ``ValueError`` message).
        """
        p = self._params
        if not (p.update_matched or p.insert_not_matched or p.delete_not_matched_by_source or p.fail_matched):
            raise InvalidArgumentError("Invalid user input: The merge insert job is not configured to change the "
                                       "data in any way")

    def execute_uncommitted(self, data: Any, *, schema: pa.Schema | None = None) -> tuple[Transaction, dict[str, int]]:
        """Write every file and return ``(transaction, stats)``; ``lance_ops.format.commit(uri,
        transaction)`` commits it."""
        self._check_configured()
        results = plan_merge_insert(self._store, self._manifest, self._params, data, schema=schema,
                                    max_rows_per_file=self._max_rows_per_file)
        return Transaction(self._manifest.version, merge_insert_operation(self._manifest.schema, results)), \
            merge_stats(results)

    def execute(self, data: Any, *, schema: pa.Schema | None = None,
                transaction_properties: Mapping[str, str] | None = None) -> dict[str, int]:
        """Merge ``data``, commit one ``Update`` (also when nothing changed, as pylance) and move the
        handle the builder came from to it.

        Returns:
            ``{"num_inserted_rows", "num_updated_rows", "num_deleted_rows"}``.
        """
        idempotency_key(dict(transaction_properties or {}))  # refused before anything is written
        self._check_configured()
        results = plan_merge_insert(self._store, self._manifest, self._params, data, schema=schema,
                                    max_rows_per_file=self._max_rows_per_file)
        manifest = commit_merge_insert(self._store, self._manifest, results, handler=self._handler,
                                       properties=transaction_properties)
        if self._on_commit is not None:
            self._on_commit(manifest)
        return merge_stats(results)
