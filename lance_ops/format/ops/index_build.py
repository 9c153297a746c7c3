"""Plan / execute / commit for index segments: ``create_scalar_index`` and ``optimize_indices``
as pylance 14 has them (BTREE, BITMAP, LABEL_LIST, ZONEMAP, NGRAM, INVERTED with the call's
tokenizer params; IVF_FLAT / IVF_PQ and INVERTED segments over an existing index).

What pylance 14.0.2 does (checked on these machines; docs/FORMAT.md "Indices"):

- ``create_scalar_index(column, index_type, name=None, replace=True)``: one segment named
  ``<column>_idx`` by default over every fragment, committed as a ``CreateIndex`` whose
  ``removed_indices`` are the segments of an index of that name being replaced
  (``replace=False`` refuses an existing name).  ``dataset_version`` is the version read.
- ``optimize_indices(num_indices_to_merge=1, index_names=None)``: per index, the fragments no
  segment covers are indexed; ``num_indices_to_merge=0`` adds them as a new segment (same name,
  new uuid), ``N > 0`` rebuilds the newest ``N`` segments and the new fragments as one segment
  (removing those ``N``; its bitmap keeps only fragments that still exist).  With stable row
  ids and ``N > 0``, older segments covering a fragment with deletions are merged too.  Nothing
  new to index and at most one segment selected: nothing is committed.  A BTREE whose segments hold stable row ids
  (``index_version`` 0 on a dataset with stable row ids: lancedb's) is rewritten whole in
  pylance's own format, as pylance 14 does.

A merged segment is rebuilt from the data of its fragments rather than from the old segments'
files, so it is right whatever wrote them (pylance, lancedb, lance_ops).

Every step is picklable: :func:`plan_create_scalar_index` / :func:`plan_optimize_indices` on the
driver, :func:`execute_index_task` anywhere (writes ``_indices/<uuid>/``, commits nothing),
:func:`commit_index_build` on the driver (one ``CreateIndex`` through the commit loop; a failed
commit removes the written directories itself, :mod:`lance_ops.format.txn.orphans`).
"""

import time
import uuid as uuidlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from dataclasses import replace as replace_task
from typing import Any

import numpy as np
import pyarrow as pa

from lance_ops.format.errors import (
    ArgumentTypeError,
    ColumnNotFoundError,
    CorruptFileError,
    InvalidArgumentError,
    SchemaError,
    UnsupportedFeatureError,
    UnsupportedIndexTypeError,
)
from lance_ops.format.index.build import (
    BUILDABLE_KINDS,
    CREATABLE_KINDS,
    SEGMENT_KINDS,
    VECTOR_KINDS,
    SegmentInput,
    given_model,
    indexed_row_ids,
    unsupported_setting,
    write_segment,
)
from lance_ops.format.index.build.inverted_params import inverted_params
from lance_ops.format.index.metadata import IndexMetadata, decode_index_section, user_indices
from lance_ops.format.index.unreferenced import prune_empty_index_dirs
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.read.scan import ROW_ADDR, ROW_ID, plan_scan, scan, scan_fragment_rows
from lance_ops.format.table.manifest import Manifest
from lance_ops.format.txn.commit_loop import DEFAULT_MAX_RETRIES, commit_transaction
from lance_ops.format.txn.handlers import CommitHandler
from lance_ops.format.txn.operations import CreateIndex
from lance_ops.format.txn.transaction import Transaction


@dataclass(frozen=True)
class OptimizeIndicesOptions:
    """Options of ``optimize_indices`` as the engines (Spark, Dagster, the CLIs) expose them.

    ``num_indices_to_merge`` is pylance's default (1: the newest segment and the new fragments
    rebuilt as one segment; 0 adds a segment).  ``rows_per_task``: an engine's task, and a
    segment, per group of new fragments of about that many rows (with ``num_indices_to_merge=0``;
    a merge is one task per index); the in-process ``optimize_indices`` builds one task.
    """

    num_indices_to_merge: int = 1
    rows_per_task: int | None = 1_000_000


#: the defaults, for layers above that declare the same fields (Dagster config, argparse)
OPTIMIZE_INDICES_DEFAULTS = OptimizeIndicesOptions()


@dataclass(frozen=True)
class IndexTask:
    """One segment to build: ``name``'s ``kind`` index of ``column`` over ``fragment_ids``."""

    name: str
    kind: str
    column: str
    field_id: int
    fragment_ids: tuple[int, ...]
    uuid: str
    read_version: int
    file_version: str
    stable_row_ids: bool
    #: uuid of the segment whose model (IVF centroids, PQ codebook) a vector segment reuses
    reference_uuid: str | None = None
    #: the fragments no segment covered (the rest are re-read from merged segments' coverage)
    new_fragment_ids: tuple[int, ...] | None = None
    #: a vector index to train: ``{"metric", "num_partitions", "num_sub_vectors"}`` and, when given,
    #: ``"ivf_centroids"``, ``"pq_codebook"`` (lists), ``"target_partition_size"``
    train: Mapping[str, Any] | None = None
    #: INVERTED merges: the segments merged (pylance keeps their deleted rows' documents)
    merged_uuids: tuple[str, ...] = ()


@dataclass(frozen=True)
class IndexBuildPlan:
    """The segments to build and the segments they replace, planned on ``read_version``."""

    read_version: int
    tasks: tuple[IndexTask, ...] = ()
    removed: tuple[IndexMetadata, ...] = field(default=())


def _indices(manifest: Manifest) -> tuple[IndexMetadata, ...]:
    return decode_index_section(manifest.index_section, f"index section of version {manifest.version}")


def _task(
    manifest: Manifest,
    name: str,
    kind: str,
    column: str,
    fragment_ids: Sequence[int],
    reference: str | None = None,
    new: Sequence[int] | None = None,
) -> IndexTask:
    return IndexTask(
        name=name,
        kind=kind,
        column=column,
        field_id=field_at_path(manifest.schema, column).id,
        fragment_ids=tuple(sorted(int(f) for f in fragment_ids)),
        uuid=str(uuidlib.uuid4()),
        read_version=manifest.version,
        file_version=manifest.data_storage_version,
        stable_row_ids=manifest.uses_stable_row_ids,
        reference_uuid=reference,
        new_fragment_ids=None if new is None else tuple(sorted(int(f) for f in new)),
    )


def _nested_field(schema: Any, path: str) -> Any:
    """The struct child a dotted path names (``meta.lang``), or None."""
    top, *rest = path.split(".")
    try:
        f = schema.field(top)
    except SchemaError:
        return None
    for name in rest:
        f = next((c for c in schema.subtree(f.id) if c.parent_id == f.id and c.name == name), None)
        if f is None:
            return None
    return f


def field_path(schema: Any, field_id: int) -> str:
    """A field's dotted path (``meta.lang`` for a struct child)."""
    parts, fid = [], field_id
    while fid >= 0:
        f = schema.field_by_id(fid)
        parts.append(f.name)
        fid = f.parent_id
    return ".".join(reversed(parts))


def field_at_path(schema: Any, column: str) -> Any:
    """The field of a top-level column or of a struct child's dotted path."""
    names = [f.name for f in schema.top_level()]
    return schema.field(column) if column in names else (_nested_field(schema, column) or schema.field(column))


def fragment_groups(manifest: Manifest, fragment_ids: Sequence[int], rows_per_task: int | None) -> list[list[int]]:
    """``fragment_ids`` in id order, cut into groups of about ``rows_per_task`` physical rows
    (one group when None): one task, and one segment, per group."""
    ids = sorted(int(f) for f in fragment_ids)
    if rows_per_task is None:
        return [ids]
    if isinstance(rows_per_task, bool) or not isinstance(rows_per_task, int) or rows_per_task <= 0:
        raise InvalidArgumentError(f"rows_per_task must be a positive integer, got {rows_per_task!r}")
    rows = {f.id: f.physical_rows for f in manifest.fragments}
    groups: list[list[int]] = [[]]
    held = 0
    for fid in ids:
        if groups[-1] and held + rows.get(fid, 0) > rows_per_task:
            groups.append([])
            held = 0
        groups[-1].append(fid)
        held += rows.get(fid, 0)
    return groups


def plan_create_scalar_index(
    manifest: Manifest,
    column: str,
    index_type: str,
    *,
    name: str | None = None,
    replace: bool = True,
    rows_per_task: int | None = None,
    params: Mapping[str, Any] | None = None,
) -> IndexBuildPlan:
    """One task over every fragment (pylance's ``create_scalar_index``; ``params``: an INVERTED
    index's tokenizer keywords, :mod:`lance_ops.format.index.build.inverted_params`), or, with
    ``rows_per_task``, one per group of fragments of about that many rows: each task writes a
    segment of the index (same name, disjoint fragments) and all are committed as one
    ``CreateIndex``, as lance-spark builds indices on executors; pylance reads such an index as
    it reads the segments its own ``optimize_indices`` adds.

    Raises:
        UnsupportedFeatureError: an index type lance_ops does not build.
        SchemaError: no such column.
        InvalidArgumentError: ``replace=False`` and an index of that name exists.
    """
    kind = {"FTS": "INVERTED"}.get(str(index_type).upper(), str(index_type).upper())
    if kind not in CREATABLE_KINDS:
        raise UnsupportedFeatureError(f"create_scalar_index: lance_ops builds {', '.join(CREATABLE_KINDS)}, not {index_type!r}")
    train = {"params": inverted_params(params or {}).to_json()} if kind == "INVERTED" else None
    if params and kind != "INVERTED":
        raise ArgumentTypeError(f"create_scalar_index: unexpected keyword argument {sorted(params)[0]!r} for {kind}")
    name, existing = _index_target(manifest, column, name, replace, "create_scalar_index")
    groups = fragment_groups(manifest, [f.id for f in manifest.fragments], rows_per_task)
    tasks = (replace_task(_task(manifest, name, kind, column, g), train=train) for g in groups)
    return IndexBuildPlan(manifest.version, tuple(tasks), existing)


def _index_target(
    manifest: Manifest, column: str, name: str | None, replace: bool, what: str
) -> tuple[str, tuple[IndexMetadata, ...]]:
    """The index's name (default ``<column>_idx``) and the segments of that name it replaces.

    Raises:
        SchemaError: no such column.
        InvalidArgumentError: ``replace=False`` and an index of that name exists.
    """
    names = [f.name for f in manifest.schema.top_level()]
    if column not in names and _nested_field(manifest.schema, column) is None:
        raise ColumnNotFoundError(f"{what}: {column} not found in schema: column {column!r} is not in the "
                                  f"dataset schema {names}")
    name = name or f"{column}_idx"
    existing = tuple(i for i in _indices(manifest) if i.name == name)
    if existing and not replace:
        raise InvalidArgumentError(f"{what}: an index named {name!r} already exists (pass replace=True)")
    return name, existing


def plan_create_index(
    manifest: Manifest,
    column: str,
    index_type: str,
    *,
    name: str | None = None,
    metric: str = "L2",
    replace: bool = False,
    num_partitions: int | None = None,
    num_sub_vectors: int | None = None,
    model: Mapping[str, Any] | None = None,
) -> IndexBuildPlan:
    """One task training an IVF_FLAT / IVF_PQ index over every fragment (pylance's
    ``create_index``; ``num_partitions`` defaults to one per 8,192 rows; IVF_PQ needs
    ``num_sub_vectors``, as pylance 14's); ``model``: pylance's ``ivf_centroids``, ``pq_codebook``
    and ``target_partition_size`` when given.

    Raises:
        UnsupportedIndexTypeError: another index type (HNSW, SQ, ...); UnsupportedFeatureError:
            another metric.
        ColumnNotFoundError: no such column (a SchemaError and a KeyError).
        InvalidArgumentError: ``replace=False`` and an index of that name exists.
    """
    kind = str(index_type).upper()
    if kind not in VECTOR_KINDS:
        raise UnsupportedIndexTypeError(f"create_index: lance_ops trains {', '.join(VECTOR_KINDS)}, not {index_type!r}")
    if str(metric).lower() not in ("l2", "cosine", "dot"):
        raise UnsupportedFeatureError(f"create_index: lance_ops trains with metric l2, cosine or dot, not {metric!r}")
    if kind == "IVF_PQ" and num_sub_vectors is None:  # pylance 14 refuses it too
        raise InvalidArgumentError("create_index: num_partitions and num_sub_vectors are required for IVF_PQ")
    name, existing = _index_target(manifest, column, name, replace, "create_index")
    task = _task(manifest, name, kind, column, [f.id for f in manifest.fragments])
    train = {"metric": str(metric).lower(), "num_partitions": num_partitions, "num_sub_vectors": num_sub_vectors,
             **given_model(model or {})}
    return IndexBuildPlan(manifest.version, (replace_task(task, train=train),), existing)


def plan_optimize_indices(
    manifest: Manifest,
    *,
    num_indices_to_merge: int = 1,
    index_names: Sequence[str] | None = None,
    rows_per_task: int | None = None,
) -> IndexBuildPlan:
    """A task per index with fragments no segment covers (pylance's ``optimize_indices``); with
    ``num_indices_to_merge=0`` and ``rows_per_task``, one task (one new segment) per group of
    new fragments of about that many rows.

    IVF_FLAT / IVF_PQ segments reuse the index's model (centroids, codebook; pylance's default,
    no retraining); INVERTED segments the index's tokenizer params (docs/FORMAT.md "INVERTED
    segments").  Indices lance_ops does not extend (HNSW, SQ, BLOOMFILTER, a full-text index whose
    tokenizer it does not reproduce, ...) are left as they are when ``index_names`` is None.

    Raises:
        InvalidArgumentError: a negative ``num_indices_to_merge``.
        KeyError: a name in ``index_names`` that is no index of this version.
        UnsupportedFeatureError: an index named in ``index_names`` of a kind (or, full text, a
            tokenizer) lance_ops does not build.
    """
    if isinstance(num_indices_to_merge, bool) or not isinstance(num_indices_to_merge, int) or num_indices_to_merge < 0:
        raise InvalidArgumentError(f"num_indices_to_merge must be a non-negative integer, got {num_indices_to_merge!r}")
    by_name: dict[str, list[IndexMetadata]] = {}
    for idx in user_indices(_indices(manifest)):
        by_name.setdefault(idx.name, []).append(idx)
    for n in index_names or ():
        if n not in by_name:
            raise KeyError(f"version {manifest.version} has no index named {n!r} (has {sorted(by_name)})")
        if by_name[n][0].kind not in SEGMENT_KINDS:
            raise UnsupportedFeatureError(f"optimize_indices: index {n!r} is a {by_name[n][0].kind} index; lance_ops "
                                          f"adds segments to {', '.join(SEGMENT_KINDS)} indices only")
        setting = _unsupported(manifest, by_name[n][0])
        if setting:
            raise UnsupportedFeatureError(f"optimize_indices: full-text index {n!r} has {setting}; lance_ops tokenizes "
                                          "string columns with base_tokenizer 'simple', language English, without "
                                          "positions only")
    live = {f.id for f in manifest.fragments}
    tasks: list[IndexTask] = []
    removed: list[IndexMetadata] = []
    for n in index_names if index_names is not None else list(by_name):
        segments = by_name[n]
        kind = segments[0].kind
        if kind not in SEGMENT_KINDS or _unsupported(manifest, segments[0]):
            continue
        new = live - set().union(*(s.fragment_ids or () for s in segments))
        merged = _segments_to_merge(manifest, segments, num_indices_to_merge)
        if not new and len(merged) <= 1:
            continue  # nothing new, and rewriting one segment into itself is no change
        frags = new | (set().union(*(s.fragment_ids or () for s in merged)) & live)
        column = field_path(manifest.schema, segments[0].fields[0])
        ref = None if kind in BUILDABLE_KINDS else segments[0].uuid  # vector: the model; INVERTED: the params
        groups = fragment_groups(manifest, sorted(new), rows_per_task) if not merged else [sorted(frags)]
        made = [_task(manifest, n, kind, column, g, ref, set(g) & new) for g in groups]
        if kind == "INVERTED" and merged:
            made = [replace_task(t, merged_uuids=tuple(s.uuid for s in merged)) for t in made]
        tasks.extend(made)
        removed.extend(merged)
    return IndexBuildPlan(manifest.version, tuple(tasks), tuple(removed))


def optimizable_index_names(manifest: Manifest) -> tuple[str, ...]:
    """Names of the user indices of ``manifest`` whose kind ``optimize_indices`` extends
    (the others stay as they are, whatever their coverage)."""
    names = {i.name for i in user_indices(_indices(manifest))
             if i.kind in SEGMENT_KINDS and not _unsupported(manifest, i)}
    return tuple(sorted(names))


def _unsupported(manifest: Manifest, index: IndexMetadata) -> str | None:
    """What keeps lance_ops from extending ``index`` (a full-text tokenizer it does not
    reproduce, or a column other than text or a list of text: JSON), or None."""
    if index.kind != "INVERTED":
        return None
    field = manifest.schema.field_by_id(index.fields[0]) if index.fields else None
    children = manifest.schema.subtree(field.id)[1:] if field is not None else []
    text = ("string", "large_string")
    if field is not None and field.logical_type in ("list", "large_list") and len(children) == 1 \
            and children[0].logical_type in text:
        return unsupported_setting(index.details) if index.index_version == 2 else "an older file layout"
    if field is None or field.logical_type not in text:
        return f"a column of type {field.logical_type if field else 'unknown'} (lance_ops tokenizes plain strings)"
    if index.index_version != 2:  # 0 / 1: the older, unpartitioned layouts (docs/FORMAT.md 14a)
        return f"index_version {index.index_version} (an older file layout)"
    return unsupported_setting(index.details)


def _segments_to_merge(manifest: Manifest, segments: list[IndexMetadata], num: int) -> list[IndexMetadata]:
    """The newest ``num`` segments; for scalar kinds with stable row ids (and ``num > 0``) also
    every older one covering a fragment that has a deletion file -- an update tombstones a row and rewrites it
    under the same row id, so such a segment's stale entries must be rebuilt away (pylance's
    ``select_segments_to_merge``).  A BTREE holding stable row ids (lancedb's ``index_version``
    0) is merged whole, as pylance 14 rewrites it in its own format."""
    stable = manifest.uses_stable_row_ids
    if stable and segments[0].kind == "BTREE" and any(s.index_version == 0 for s in segments):
        return list(segments)
    tail = len(segments) - min(num, len(segments))
    if num == 0 or not stable or segments[0].kind not in BUILDABLE_KINDS:  # (vector merges: the plain tail)
        return segments[tail:]
    deleted = {f.id for f in manifest.fragments if f.deletion_file is not None}
    return [s for i, s in enumerate(segments) if i >= tail or (s.fragment_ids or frozenset()) & deleted]


def _segment_input(store: ObjectStore, manifest: Manifest, task: IndexTask) -> SegmentInput:
    top, *nested = task.column.split(".") if task.column not in manifest.schema.to_arrow().names else [task.column]
    plan = plan_scan(manifest.schema, [top], None, task.stable_row_ids, True)
    wanted = set(task.fragment_ids)
    frags = [f for f in manifest.fragments if f.id in wanted]
    # fixed-width values (numbers, vectors) decode at memory speed: read inline, as the hand-offs
    # to prefetch threads cost more CPU than they overlap (create_btree of 1M floats in 50
    # fragments: 47 -> 31 ms CPU); strings and lists keep the background decoders
    inline = _fixed_width(plan.out_schema.field(top).type)
    batches = scan(store, manifest, plan, fragments=frags, **({"prefetch_bytes": None} if inline else {}))
    values, addrs, ids = _gathered(batches, plan.out_schema.field(top), task.stable_row_ids,
                                     sum(f.num_rows for f in frags))
    new = None if task.new_fragment_ids is None else frozenset(task.new_fragment_ids)
    for name in nested:  # a struct's child (``meta.lang``): indexed by its dotted path, as pylance's
        values = values.field(name)
    if task.merged_uuids and not task.stable_row_ids:
        extra = _indexed_deleted_rows(store, manifest, task, frags, plan)
        if extra is not None:
            values = pa.concat_arrays([values, extra[0].cast(values.type)])
            addrs = np.concatenate([addrs, extra[1]])
            ids = addrs
    return SegmentInput(values, ids, addrs, new)


def _gathered(
    batches: Any, column: pa.Field, stable: bool, rows: int
) -> tuple[pa.Array, np.ndarray, np.ndarray]:
    """The scan's ``column`` as one array, its row addresses and its row ids (the addresses
    without stable row ids), each batch's metadata columns copied into arrays of ``rows``
    entries as it comes (a table of every batch, then its columns made contiguous, held
    each column twice)."""
    out = {ROW_ADDR: np.empty(rows, np.uint64), ROW_ID: np.empty(rows if stable else 0, np.uint64)}
    chunks: list[pa.Array] = []
    at = 0
    for batch in batches:
        n = batch.num_rows
        if at + n > rows:  # more rows than the metadata says: grow (never expected)
            out = {k: np.concatenate([v, np.empty(at + n - rows if len(v) else 0, np.uint64)]) for k, v in out.items()}
            rows = at + n
        for name, arr in out.items():
            if len(arr):
                arr[at : at + n] = batch.column(name).to_numpy()
        chunks.append(batch.column(column.name))
        at += n
    addrs = out[ROW_ADDR][:at]
    values = pa.concat_arrays(chunks) if chunks else pa.array([], column.type)
    return values, addrs, out[ROW_ID][:at] if stable else addrs


def _indexed_deleted_rows(
    store: ObjectStore, manifest: Manifest, task: IndexTask, frags: list, plan: Any
) -> tuple[pa.Array, np.ndarray] | None:
    """The deleted rows of live fragments that a merged full-text segment indexed, with their
    values (read past the deletion vector): pylance 14's merge keeps their documents (corpus
    statistics included; queries filter deleted rows), so the merged segment scores alike
    (docs/FORMAT.md "INVERTED segments").  Row addresses only (no stable row ids)."""
    indexed = [indexed_row_ids(store, s) for s in _indices(manifest) if s.uuid in task.merged_uuids]
    if not indexed:
        return None
    rows = np.unique(np.concatenate(indexed)) if indexed else np.zeros(0, np.uint64)
    values: list[pa.Array] = []
    addrs: list[np.ndarray] = []
    for frag in frags:
        if frag.deletion_file is None:
            continue
        mine = rows[(rows >> np.uint64(32)) == np.uint64(frag.id)] & np.uint64(0xFFFFFFFF)
        deleted = np.setdiff1d(mine, _live_offsets(store, manifest, frag)).astype(np.int64)
        if deleted.size == 0:
            continue
        t = pa.Table.from_batches(list(scan_fragment_rows(store, manifest, frag, plan, deleted)))
        values.append(t[task.column].combine_chunks())
        addrs.append((np.uint64(frag.id) << np.uint64(32)) | deleted.astype(np.uint64))
    if not values:
        return None
    return pa.concat_arrays(values), np.concatenate(addrs)


def _live_offsets(store: ObjectStore, manifest: Manifest, frag: Any) -> np.ndarray:
    plan = plan_scan(manifest.schema, [], None, False, True)
    t = pa.Table.from_batches(list(scan(store, manifest, plan, fragments=[frag])), schema=plan.out_schema)
    return (t[ROW_ADDR].to_numpy().astype(np.uint64) & np.uint64(0xFFFFFFFF)).astype(np.uint64)


def _fixed_width(t: pa.DataType) -> bool:
    if pa.types.is_fixed_size_list(t):
        return _fixed_width(t.value_type)
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_temporal(t) or pa.types.is_boolean(t)


def execute_index_task(store: ObjectStore, manifest: Manifest, task: IndexTask) -> IndexMetadata:
    """Write the segment's files (read from ``manifest``, the version the plan read); return the
    segment's metadata, uncommitted.  Nothing is left behind if it fails."""
    reference = None
    if task.reference_uuid is not None:
        reference = next((i for i in _indices(manifest) if i.uuid == task.reference_uuid), None)
        if reference is None:
            raise CorruptFileError(f"version {manifest.version}", f"index segment {task.reference_uuid} is gone")
    built = write_segment(
        store,
        task.uuid,
        task.kind,
        _segment_input(store, manifest, task),
        column=task.column,
        file_version=task.file_version,
        stable_row_ids=task.stable_row_ids,
        reference=reference,
        train=task.train,
    )
    return IndexMetadata(
        uuid=task.uuid,
        name=task.name,
        fields=(task.field_id,),
        dataset_version=task.read_version,
        fragment_ids=frozenset(task.fragment_ids),
        type_url=built.type_url,
        details=built.details,
        index_version=built.index_version,
        created_at_ms=int(time.time() * 1000),
        files=built.files,
    )


def discard_index_segments(store: ObjectStore, segments: Sequence[IndexMetadata]) -> None:
    """Remove the files (and emptied directories) of built segments that will not be committed
    (a failed sibling task; a failed commit removes its own, :mod:`lance_ops.format.txn.orphans`)."""
    removed = []
    for seg in segments:
        for f in seg.files or ():
            rel = f"{seg.directory}/{f.path}"
            store.delete(rel)
            removed.append(rel)
    prune_empty_index_dirs(store, removed)


def commit_index_build(
    store: ObjectStore,
    plan: IndexBuildPlan,
    segments: Sequence[IndexMetadata],
    *,
    handler: CommitHandler | None = None,
    known: Manifest | None = None,
    properties: dict[str, str] | None = None,
    max_retries: int = DEFAULT_MAX_RETRIES,
) -> Manifest:
    """Commit the built segments as one ``CreateIndex`` replacing ``plan.removed`` (retrying up
    to ``max_retries`` lost races)."""
    txn = Transaction(plan.read_version, CreateIndex(tuple(segments), plan.removed), properties=dict(properties or {}))
    return commit_transaction(store, txn, handler=handler, known=known, max_retries=max_retries)


def build_indices(
    store: ObjectStore,
    manifest: Manifest,
    plan: IndexBuildPlan,
    *,
    handler: CommitHandler | None = None,
    properties: dict[str, str] | None = None,
) -> Manifest | None:
    """Run every task of ``plan`` in this process and commit (the transaction carrying
    ``properties``); None when there was nothing to do.  Segments written before a failure are
    removed."""
    if not plan.tasks:
        return None
    done: list[IndexMetadata] = []
    try:
        for task in plan.tasks:
            done.append(execute_index_task(store, manifest, task))
    except BaseException:
        discard_index_segments(store, done)
        raise
    return commit_index_build(store, plan, done, handler=handler, known=manifest, properties=properties)
