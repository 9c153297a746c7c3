"""Schema evolution planned as pylance 14 plans it: ``add_columns``, ``alter_columns``, ``drop_columns``.

What each commits (checked against pylance 14's transactions):

- new columns computed from SQL expressions or a batch UDF: one more data file per fragment
  holding the new field ids (``max_field_id + 1, ...``), committed as a ``Merge`` of every
  fragment and the new schema; with stable row ids the rows' ``_row_last_updated_at_version``
  becomes the new version (``build``);
- all-null columns (a ``pa.Field`` / list of fields / ``pa.Schema``): a ``Merge`` with the
  fragments unchanged, metadata only (readers synthesise the nulls);
- renames and nullability: a ``Project`` (metadata only);
- casts (integer to integer, float to float, string/binary widths, decimals, lists of those, as
  pylance's ``is_upcast_downcast``): the column rewritten under a new field id in one more data
  file per fragment, a ``Merge``; data files left with no field of the schema are dropped;
- ``drop_columns``: a ``Project``; data files left with no field are dropped when applied.

The planners write data files but commit nothing; a failure while writing removes the files
this call wrote.
"""

import dataclasses
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.acero as acero
import pyarrow.compute as pc

from lance_ops.format.errors import (
    InvalidArgumentError,
    SchemaError,
    SchemaEvolutionError,
    UnsupportedFeatureError,
)
from lance_ops.format.index.metadata import decode_index_section
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.ops.column_stream import STREAM_PAGE_BYTES, physical_batches
from lance_ops.format.ops.udf_checkpoint import UdfCheckpoint
from lance_ops.format.ops.write import RESERVED_COLUMNS, discard_files, write_fragment_files
from lance_ops.format.read.scan import (
    DEFAULT_BATCH_SIZE,
    META_COLUMNS,
    ROW_ADDR,
    ROW_ID,
    plan_scan,
    scan_fragment,
)
from lance_ops.format.schema import LanceField, LanceSchema, rust_type_name
from lance_ops.format.table.fragment import FragmentMetadata
from lance_ops.format.table.manifest import Manifest
from lance_ops.format.txn.operations import Merge, Project

#: what ``add_columns`` takes: SQL expressions by name, all-null fields, or a batch UDF
NewColumns = Mapping[str, "str | pc.Expression"] | pa.Field | Sequence[pa.Field] | pa.Schema | Callable[..., Any]
_Compute = Callable[[pa.Table], pa.Table]


def manifest_max_field_id(m: Manifest) -> int:
    """The largest field id the schema or any data file uses (a new field gets the next one),
    as pylance's ``Manifest::max_field_id``: ids of dropped columns are never reused."""
    in_files = (fid for f in m.fragments for df in f.files for fid in df.fields)
    return max(m.schema.max_field_id(), max(in_files, default=-1))


def field_at(schema: LanceSchema, path: str) -> LanceField:
    """The field at a dotted ``path`` (``"s.x"``: child ``x`` of struct ``s``).

    Raises:
        InvalidArgumentError: no such column, with pylance's message.
    """
    parts = path.split(".")
    candidates = schema.top_level()
    found: LanceField | None = None
    for part in parts:
        found = next((c for c in candidates if c.name == part), None)
        if found is None:
            raise InvalidArgumentError(f"Column {path} does not exist in the dataset")
        candidates = schema.children(found.id)
    assert found is not None
    return found


# ------------------------------------------------------------------ add_columns
def plan_add_columns(
    store: ObjectStore,
    manifest: Manifest,
    transforms: NewColumns,
    read_columns: Sequence[str] | None = None,
    *,
    batch_size: int | None = None,
    sql: Callable[[str, pa.Schema], pc.Expression] | None = None,
    reader_schema: pa.Schema | None = None,
    fragments: Sequence[FragmentMetadata] | None = None,
) -> Merge:
    """The ``Merge`` adding the columns ``transforms`` defines (see the module docstring).

    Args:
        transforms: ``{name: SQL string or pc.Expression}``; a ``pa.Field``, list of fields or
            ``pa.Schema`` of all-null columns; or a callable taking a RecordBatch of
            ``read_columns`` (live rows only, as pylance) and returning a RecordBatch (or Table)
            of the new columns, same row count; or a ``RecordBatchReader`` (or an iterable of
            RecordBatches with ``reader_schema``) of the new columns, one row per live row in
            scan order.
        sql: translates a SQL string over the dataset's Arrow schema to an expression.
        fragments: only these fragments of ``manifest`` (pylance's ``LanceFragment.merge_columns``);
            the new field ids still follow every id of the dataset.

    Raises:
        InvalidArgumentError: a name already in the dataset, a reserved name, an unknown column
            in ``read_columns``, a UDF returning the wrong number of rows.
        SchemaError: an expression that cannot be computed on the dataset's columns.
    """
    first_id = manifest_max_field_id(manifest) + 1
    if fragments is not None:
        manifest = manifest.with_changes(fragments=tuple(fragments))
    if isinstance(transforms, pa.Table):  # pylance's ReaderLike: the values of the live rows, in order
        transforms = transforms.to_reader()
    if isinstance(transforms, pa.Schema | pa.Field) or _is_field_list(transforms):
        return _all_null_merge(manifest, _as_schema(transforms), first_id)
    if isinstance(transforms, Mapping):
        return _sql_merge(store, manifest, transforms, batch_size, sql, first_id)
    if isinstance(transforms, pa.RecordBatchReader) or (reader_schema is not None and not callable(transforms)):
        return _reader_merge(store, manifest, transforms, reader_schema, first_id)
    if callable(transforms):
        return _udf_merge(store, manifest, transforms, read_columns, batch_size, first_id)
    raise InvalidArgumentError(
        f"add_columns takes a dict of name -> SQL expression, a pyarrow Field/Schema of all-null columns or a "
        f"batch UDF, got {type(transforms).__name__}"
    )


def _is_field_list(x: object) -> bool:
    return isinstance(x, list | tuple) and len(x) > 0 and all(isinstance(f, pa.Field) for f in x)


def _as_schema(x: pa.Schema | pa.Field | Sequence[pa.Field]) -> pa.Schema:
    if isinstance(x, pa.Schema):
        return x
    return pa.schema([x] if isinstance(x, pa.Field) else list(x))


def _check_new_names(manifest: Manifest, names: Iterable[str]) -> None:
    existing = {f.name for f in manifest.schema.top_level()}
    names = list(names)
    if len(set(names)) != len(names):
        raise InvalidArgumentError(f"add_columns: new column names {names} repeat a name")
    for n in names:
        if n in existing:
            raise InvalidArgumentError(f"Column {n} already exists in the dataset {manifest.source or ''}".rstrip())
        if n in RESERVED_COLUMNS:
            raise InvalidArgumentError(f"add_columns: column name {n!r} is reserved for Lance metadata columns")


def _new_fields(first_id: int, arrow: pa.Schema) -> LanceSchema:
    """``arrow`` as Lance fields numbered from ``first_id`` (after every id the dataset ever used)."""
    return LanceSchema.from_arrow(arrow, start_id=first_id)


def _merged(manifest: Manifest, added: LanceSchema) -> LanceSchema:
    return dataclasses.replace(manifest.schema, fields=(*manifest.schema.fields, *added.fields))


def _all_null_merge(manifest: Manifest, arrow: pa.Schema, first_id: int) -> Merge:
    _check_new_names(manifest, arrow.names)
    bad = [f.name for f in arrow if not f.nullable]
    if bad:
        raise InvalidArgumentError(f"All-null columns must be nullable, but field '{bad[0]}' is not.")
    added = _new_fields(first_id, pa.schema(list(arrow)))
    return Merge(list(manifest.fragments), _merged(manifest, added))


def referenced_columns(schema: LanceSchema, exprs: Iterable[pc.Expression]) -> list[str]:
    """Top-level columns an expression may read: every column whose name is a token of it
    (a superset, as the scan planner's filter columns)."""
    text = " ".join(str(e) for e in exprs)
    tokens = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))
    return [f.name for f in schema.top_level() if f.name in tokens or f'"{f.name}"' in text]


def _sql_merge(
    store: ObjectStore,
    manifest: Manifest,
    transforms: Mapping[str, Any],
    batch_size: int | None,
    sql: Callable[[str, pa.Schema], pc.Expression] | None,
    first_id: int,
) -> Merge:
    _check_new_names(manifest, transforms)
    arrow = manifest.schema.to_arrow()
    exprs: dict[str, pc.Expression] = {}
    for name, e in transforms.items():
        if isinstance(e, pc.Expression):
            exprs[name] = e
        elif isinstance(e, str):
            if sql is None:
                raise UnsupportedFeatureError(
                    f"add_columns: SQL string {e!r} for column {name!r}: SQL strings are not supported yet; "
                    "pass a pyarrow.compute.Expression"
                )
            exprs[name] = sql(e, arrow)
        else:
            raise InvalidArgumentError(
                f"add_columns: column {name!r} must be a SQL string or a pyarrow.compute.Expression, "
                f"got {type(e).__name__}"
            )
    reads = referenced_columns(manifest.schema, exprs.values())
    out_schema = _project(arrow.empty_table(), exprs, "").schema
    if not reads and _all_null(exprs):  # ``CAST(NULL AS INT)``: metadata only, as pylance
        return _all_null_merge(manifest, pa.schema([pa.field(f.name, f.type, True) for f in out_schema]), first_id)
    # DataFusion's rule: nullable if an input column is (pylance: ``x * 2`` of a non-nullable x is
    # not nullable); an expression naming a null literal may produce nulls whatever its inputs
    nullable = {
        n: any(manifest.schema.field(c).nullable for c in referenced_columns(manifest.schema, [e]))
        or "null" in str(e).lower()
        for n, e in exprs.items()
    }
    out_schema = pa.schema([pa.field(f.name, f.type, nullable[f.name]) for f in out_schema])
    added = _new_fields(first_id, out_schema)

    def compute(t: pa.Table) -> pa.Table:
        return _project(t, exprs, manifest.source)

    frags = add_column_files(store, manifest, added, compute, reads, batch_size=batch_size)
    return Merge(frags, _merged(manifest, added))


def _project(table: pa.Table, exprs: Mapping[str, pc.Expression], where: str) -> pa.Table:
    try:
        return acero.Declaration.from_sequence([
            acero.Declaration("table_source", acero.TableSourceNodeOptions(table)),
            acero.Declaration("project", acero.ProjectNodeOptions(list(exprs.values()), list(exprs))),
        ]).to_table(use_threads=False)  # (callers run fragments in parallel; one output chunk)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as e:
        msg = str(e).split("\n", 1)[0]
        shown = {k: str(v) for k, v in exprs.items()}
        raise SchemaError(f"add_columns{' on ' + where if where else ''}: {shown} cannot be computed on the "
                          f"columns {[f'{f.name}: {f.type}' for f in table.schema]}: {msg}") from None


def _udf_merge(
    store: ObjectStore,
    manifest: Manifest,
    udf: Callable[..., Any],
    read_columns: Sequence[str] | None,
    batch_size: int | None,
    first_id: int,
) -> Merge:
    names = [f.name for f in manifest.schema.top_level()]
    reads = list(names if read_columns is None else read_columns)
    unknown = [c for c in reads if c not in names and c not in META_COLUMNS]  # pylance reads _rowid too
    if unknown:
        raise InvalidArgumentError(f"add_columns: read_columns {unknown} are not in the dataset (columns {names})")
    first = next((f for f in manifest.fragments if f.num_rows > 0), None)
    if first is None:
        raise InvalidArgumentError("add_columns: a batch UDF needs at least one row to learn its output schema")
    out_schema = getattr(udf, "output_schema", None)
    if out_schema is None:  # learnt from the first batch, as pylance (a UDF may ignore its input's rows)
        live = read_live(store, manifest, first, reads, None)[0]
        out_schema = _call_udf(udf, live.slice(0, batch_size or DEFAULT_BATCH_SIZE)).schema
    _check_new_names(manifest, out_schema.names)
    added = _new_fields(first_id, out_schema)
    target = added.to_arrow()

    def compute(t: pa.Table) -> pa.Table:
        out = _call_udf(udf, t)
        if out.schema.names != target.names:
            raise InvalidArgumentError(f"Output schema of function does not match the expected schema: the UDF "
                                       f"returned columns {out.schema.names}, expected {target.names}")
        return out.cast(target)

    checkpoint = getattr(udf, "cache", None)
    if checkpoint is None:
        frags = add_column_files(store, manifest, added, compute, reads, batch_size=batch_size or DEFAULT_BATCH_SIZE)
        return Merge(frags, _merged(manifest, added))
    cache = UdfCheckpoint(checkpoint)  # pylance's resumable UDF: batches computed before are read back
    try:
        frags = add_column_files(store, manifest, added, cache.cached(compute), reads,
                                 batch_size=batch_size or DEFAULT_BATCH_SIZE)
    except BaseException:
        cache.close(remove=False)
        raise
    cache.close(remove=True)
    return Merge(frags, _merged(manifest, added))


def _all_null(exprs: Mapping[str, pc.Expression]) -> bool:
    """Every expression (reading no column) evaluates to null."""
    one = _project(pa.table({"__one": [0]}), exprs, "")
    return all(c.null_count == len(c) for c in one.columns)


def plan_merge(
    store: ObjectStore,
    manifest: Manifest,
    right: pa.Table,
    left_on: str,
    right_on: str,
    *,
    fragments: Sequence[FragmentMetadata] | None = None,
) -> Merge:
    """pylance's ``merge`` (a left join): the columns of ``right`` but ``right_on`` become new
    columns of every fragment (of ``fragments`` if given), the row whose ``right_on`` equals the
    row's ``left_on`` (the last such row, nulls matching nulls, as pylance's hash joiner), null
    where none does.  One more data file per fragment, committed as a ``Merge``.

    Raises:
        SchemaEvolutionError: a key column missing on either side, key types that differ, a
            right column the dataset already has (pylance's ``OSError`` messages).
    """
    names = [f.name for f in manifest.schema.top_level()]
    if left_on not in names and left_on not in (ROW_ID, ROW_ADDR):  # pylance also joins on row ids / addresses
        raise SchemaEvolutionError(f"Invalid user input: Column {left_on} does not exist in the left side dataset")
    if right_on not in right.column_names:
        raise SchemaEvolutionError(f"Invalid user input: Column {right_on} does not exist in the right side dataset")
    left_type = manifest.schema.to_arrow().field(left_on).type if left_on in names else pa.uint64()
    right_type = right.schema.field(right_on).type
    if left_type != right_type:
        raise SchemaEvolutionError(f"Invalid user input: Index column type mismatch: expected "
                                   f"{rust_type_name(right_type)}, got {rust_type_name(left_type)}")
    both = [n for n in right.column_names if n != right_on and n in names]
    if both:
        raise SchemaEvolutionError(f"Invalid user input: Column {both[0]} exists in both sides of the dataset")
    values = right.drop_columns([right_on])
    _check_new_names(manifest, values.column_names)
    added = _new_fields(manifest_max_field_id(manifest) + 1,
                        pa.schema([f.with_nullable(True) for f in values.schema]))
    target = added.to_arrow()
    flipped = right.column(right_on).combine_chunks()[::-1]  # the first match in it is the last one
    values = values.cast(target)
    last = len(flipped) - 1

    def compute(t: pa.Table) -> pa.Table:
        pos = pc.index_in(t.column(0), value_set=flipped, skip_nulls=False)
        return values.take(pc.subtract(last, pos))

    scope = manifest if fragments is None else manifest.with_changes(fragments=tuple(fragments))
    frags = add_column_files(store, scope, added, compute, [left_on])
    return Merge(frags, _merged(manifest, added))


class _RowStream:
    """Consecutive slices of a stream of record batches, ``take(n)`` rows at a time."""

    def __init__(self, batches: Iterator[pa.RecordBatch], schema: pa.Schema) -> None:
        self._batches, self._schema, self._pending = batches, schema, pa.Table.from_batches([], schema=schema)

    def take(self, n: int) -> pa.Table:
        parts, have = [self._pending], self._pending.num_rows
        while have < n:
            b = next(self._batches, None)
            if b is None:
                raise SchemaEvolutionError("Invalid user input: Stream ended before producing values for all rows "
                                           f"in dataset (after {have} rows of a fragment)")
            parts.append(pa.Table.from_batches([b]).cast(self._schema))
            have += b.num_rows
        t = pa.concat_tables(parts)
        self._pending = t.slice(n)
        return t.slice(0, n)

    def check_exhausted(self) -> None:
        if self._pending.num_rows or next(self._batches, None) is not None:
            raise SchemaEvolutionError("Invalid user input: Stream produced more values than expected for dataset")


def _reader_merge(
    store: ObjectStore, manifest: Manifest, data: Any, reader_schema: pa.Schema | None, first_id: int
) -> Merge:
    """New columns from a stream of batches: fragment by fragment, in scan order (streamed)."""
    schema = reader_schema if reader_schema is not None else data.schema
    _check_new_names(manifest, schema.names)
    added = _new_fields(first_id, schema)
    stream = _RowStream(iter(data), added.to_arrow())
    frags, written = [], []
    try:
        for frag in manifest.fragments:
            _, offsets = read_live(store, manifest, frag, [], None)
            live = frag.physical_rows if offsets is None else len(offsets)
            full = to_physical(stream.take(live), offsets, frag.physical_rows)
            new = write_fragment_files(store, iter(full.combine_chunks().to_batches()), added,
                                       version=manifest.data_storage_version,
                                       max_rows_per_file=max(frag.physical_rows, 1), background=False)
            written.append(new[0])
            frags.append(frag.with_changes(files=(*frag.files, new[0].files[0])))
        stream.check_exhausted()
    except BaseException:
        discard_files(store, written)
        raise
    return Merge(frags, _merged(manifest, added))


class BatchUDF:
    """A batch function for ``add_columns`` with its output schema, as pylance's ``BatchUDF``."""

    def __init__(
        self, func: Callable[[pa.RecordBatch], Any], output_schema: pa.Schema | None = None, cache: Any = None
    ) -> None:
        #: ``cache``: pylance's checkpoint file (:mod:`.udf_checkpoint`)
        self.func, self.output_schema, self.cache = func, output_schema, cache

    def __call__(self, batch: pa.RecordBatch) -> Any:
        return self.func(batch)


def batch_udf(
    output_schema: pa.Schema | None = None, checkpoint_file: Any = None
) -> Callable[[Callable[[pa.RecordBatch], Any]], BatchUDF]:
    """pylance's ``@lance.batch_udf(output_schema=..., checkpoint_file=...)`` decorator; with a
    ``checkpoint_file`` the computed batches are kept there until ``add_columns`` succeeds
    (:mod:`.udf_checkpoint`)."""
    return lambda func: BatchUDF(func, output_schema, checkpoint_file)


def _call_udf(udf: Callable[..., Any], t: pa.Table) -> pa.Table:
    batch = t.combine_chunks().to_batches()[0] if t.num_rows else pa.RecordBatch.from_pylist([], schema=t.schema)
    out = getattr(udf, "func", udf)(batch)  # pylance's @batch_udf keeps the function as ``func``
    if (hasattr(out, "to_batches") or hasattr(out, "to_records")) and not isinstance(out, pa.Table | pa.RecordBatch):
        # a pandas DataFrame (pylance's batch UDFs may return one)
        out = pa.Table.from_pandas(out, preserve_index=False)
    if isinstance(out, pa.RecordBatch):
        out = pa.Table.from_batches([out])
    if not isinstance(out, pa.Table):
        raise InvalidArgumentError(f"add_columns: the UDF returned {type(out).__name__}, not a pyarrow RecordBatch")
    if out.num_rows != t.num_rows:
        raise InvalidArgumentError(
            f"add_columns: the UDF returned {out.num_rows} rows for a batch of {t.num_rows}; it must return one row per row"
        )
    return out


def schema_with_new_columns(manifest: Manifest, incoming: pa.Schema) -> LanceSchema:
    """The dataset's schema with the columns of ``incoming`` it lacks appended as nullable
    fields (Delta's ``mergeSchema``); the dataset's own schema object when nothing is new.

    Columns present in both keep the dataset's type (the writer casts to it); a column of the
    dataset missing from ``incoming`` is not removed.

    Raises:
        InvalidArgumentError: a new column with a reserved name.
    """
    existing = {f.name for f in manifest.schema.top_level()}
    new = [f.with_nullable(True) for f in incoming if f.name not in existing]
    if not new:
        return manifest.schema
    _check_new_names(manifest, [f.name for f in new])
    return _merged(manifest, _new_fields(manifest_max_field_id(manifest) + 1, pa.schema(new)))


# ------------------------------------------------------------- per-fragment files
def read_live(
    store: ObjectStore, manifest: Manifest, frag: FragmentMetadata, columns: Sequence[str], batch_size: int | None
) -> tuple[pa.Table, np.ndarray | None]:
    """Live rows of ``frag`` (``columns`` only) and their physical offsets (None: no deletions)."""
    # row addresses only where rows are missing (or no column is read: they carry the row count)
    asked = ROW_ADDR in columns  # a merge keyed on ``_rowaddr`` reads it as a column
    with_addr = (frag.deletion_file is not None or not columns) and not asked
    plan = plan_scan(manifest.schema, list(columns), None, False, with_addr)
    size = batch_size or max(frag.physical_rows, 1)
    batches = list(scan_fragment(store, manifest, frag, plan, batch_size=size))
    t = pa.Table.from_batches(batches, schema=plan.out_schema)
    offsets = None
    if frag.deletion_file is not None:
        addr = t.column(ROW_ADDR).to_numpy()
        offsets = (addr & np.uint64(0xFFFFFFFF)).astype(np.int64)
    return (t.drop_columns([ROW_ADDR]) if with_addr else t), offsets


def to_physical(values: pa.Table, offsets: np.ndarray | None, physical_rows: int) -> pa.Table:
    """Values of the live rows placed at their offsets, null at deleted rows (pylance's updater
    writes one value per physical row)."""
    if offsets is None:
        return values
    idx = np.full(physical_rows, -1, dtype=np.int64)
    idx[offsets] = np.arange(len(offsets), dtype=np.int64)
    return values.take(pa.array(idx, mask=idx < 0))


def add_column_files(
    store: ObjectStore,
    manifest: Manifest,
    added: LanceSchema,
    compute: _Compute,
    read_columns: Sequence[str],
    *,
    batch_size: int | None = None,
) -> list[FragmentMetadata]:
    """Every fragment of ``manifest`` with one more data file: ``compute`` of its live rows'
    ``read_columns`` (in batches of ``batch_size``, else slices of the scan; streamed), written with the
    field ids of ``added``.  Two fragments at a time (decoding, kernels and encoding release
    the GIL); on failure every file written is removed."""
    target = added.to_arrow()
    version = manifest.data_storage_version

    def one(frag: FragmentMetadata) -> FragmentMetadata:
        values = physical_batches(store, manifest, frag, read_columns, compute, target, batch_size)
        # encoded on this worker's thread: the two workers are the parallelism (through the
        # one shared encoder thread they waited for each other)
        new = write_fragment_files(store, values, added, version=version,
                                   max_rows_per_file=max(frag.physical_rows, 1), background=False,
                                   page_bytes=STREAM_PAGE_BYTES)
        return frag.with_changes(files=(*frag.files, new[0].files[0]))

    workers = max(1, min(2, os.cpu_count() or 1, len(manifest.fragments)))
    with ThreadPoolExecutor(workers, thread_name_prefix="lance_ops-add-columns") as pool:
        futures = [pool.submit(one, f) for f in manifest.fragments]
        wait(futures)
    failed = next((f.exception() for f in futures if f.exception() is not None), None)
    if failed is not None:
        done = [f.result() for f in futures if f.exception() is None]
        discard_files(store, [d.with_changes(files=d.files[-1:]) for d in done])
        raise failed
    return [f.result() for f in futures]


# ----------------------------------------------------------------- alter_columns
def _castable(src: pa.DataType, dst: pa.DataType) -> bool:
    """pylance's ``is_upcast_downcast``: a cast within one family of types."""
    t = pa.types
    if t.is_integer(src):
        return t.is_integer(dst)
    if t.is_floating(src):
        return t.is_floating(dst)
    if t.is_string(src) or t.is_large_string(src):
        return t.is_string(dst) or t.is_large_string(dst)
    if t.is_binary(src) or t.is_large_binary(src):
        return t.is_binary(dst) or t.is_large_binary(dst)
    if t.is_decimal(src):
        return t.is_decimal(dst)
    if t.is_list(src) or t.is_large_list(src) or t.is_fixed_size_list(src):
        if t.is_list(dst) or t.is_large_list(dst) or t.is_fixed_size_list(dst):
            return _castable(src.value_type, dst.value_type)
    return False


def plan_alter_columns(
    store: ObjectStore, manifest: Manifest, alterations: Sequence[Mapping[str, Any]]
) -> Merge | Project:
    """The ``Project`` (renames, nullability) or ``Merge`` (with casts) of pylance's
    ``alter_columns``: each alteration a dict with ``path`` and any of ``name``,
    ``nullable``, ``data_type``.

    Raises:
        InvalidArgumentError: unknown column or key, a cast pylance refuses, nulls in a column
            made non-nullable, a duplicate name after renaming.
    """
    schema = manifest.schema
    fields = {f.id: f for f in schema.fields}
    casts: list[tuple[LanceField, pa.DataType]] = []
    for alt in alterations:
        if not isinstance(alt, Mapping) or "path" not in alt:
            raise InvalidArgumentError(f"alter_columns: each alteration is a dict with a 'path', got {alt!r}")
        extra = sorted(set(alt) - {"path", "name", "nullable", "data_type"})
        if extra:  # pylance's messages
            raise InvalidArgumentError(f"Unknown key: {extra[0]}. Valid keys are name, nullable, and data_type.")
        if all(alt.get(k) is None for k in ("name", "nullable", "data_type")):
            raise InvalidArgumentError("At least one of name, nullable, or data_type must be specified")
        try:
            src = field_at(schema, alt["path"])
        except InvalidArgumentError:
            raise SchemaEvolutionError(f'Invalid user input: Column "{alt["path"]}" does not exist in the dataset') from None
        f = fields[src.id]
        if alt.get("name") is not None:
            f = dataclasses.replace(f, name=str(alt["name"]))
        if alt.get("nullable") is not None:
            if src.nullable and not alt["nullable"]:
                _check_no_nulls(store, manifest, alt["path"])
            f = dataclasses.replace(f, nullable=bool(alt["nullable"]))
        fields[src.id] = f
        if alt.get("data_type") is not None:
            casts.append((src, alt["data_type"]))
    renamed = dataclasses.replace(schema, fields=tuple(fields[f.id] for f in schema.fields))
    _check_unique_siblings(renamed)
    if not casts:
        return Project(renamed)
    return _cast_merge(store, manifest, renamed, casts)


def _check_unique_siblings(schema: LanceSchema) -> None:
    seen: set[tuple[int, str]] = set()
    for f in schema.fields:
        if (f.parent_id, f.name) in seen:
            raise InvalidArgumentError(f"alter_columns: two columns would be named {f.name!r}")
        seen.add((f.parent_id, f.name))


def _check_no_nulls(store: ObjectStore, manifest: Manifest, path: str) -> None:
    top = path.split(".")[0]
    for frag in manifest.fragments:
        live, _ = read_live(store, manifest, frag, [top], None)
        col = live.column(top)
        for part in path.split(".")[1:]:
            col = pc.struct_field(col, part)
        if col.null_count:
            raise InvalidArgumentError(f'Column "{path}" contains NULL values and cannot be made non-nullable')


def _cast_column(col: pa.ChunkedArray, to: pa.DataType) -> pa.ChunkedArray:
    """``col`` cast to ``to`` without loss; else pylance's "Can't cast value 1024 to type Int8"."""
    try:
        return col.cast(to, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        bad = None
        try:  # the first value that does not survive the round trip
            back = col.cast(to, safe=False).cast(col.type, safe=False)
            diff = pc.fill_null(pc.not_equal(back, col), False)
            bad = col.filter(diff)[0].as_py() if pc.any(diff).as_py() else None
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass
        what = f"value {bad}" if bad is not None else "a value"
        raise SchemaEvolutionError(f"Cast error: Can't cast {what} to type {rust_type_name(to)} ({e})") from None


def _check_not_indexed(manifest: Manifest, casts: list[tuple[LanceField, pa.DataType]]) -> None:
    """pylance refuses to cast a column an index covers (the cast would invalidate it)."""
    if not manifest.index_section:
        return
    ids = {src.id for src, _ in casts}
    names = sorted({i.name for i in decode_index_section(manifest.index_section, f"version {manifest.version}")
                    if ids.intersection(i.fields)})
    if names:
        cols = ", ".join(src.name for src, _ in casts)
        raise SchemaEvolutionError(
            f"Invalid user input: Cannot cast column(s) [{cols}] to a new type: they have {len(names)} index(es) "
            f"attached: [{', '.join(names)}]. Cast rewrites column data and invalidates any index on the affected "
            "column(s). Drop the index(es) with drop_index() before altering, then recreate them after the cast "
            "completes.")


def _cast_merge(
    store: ObjectStore, manifest: Manifest, schema: LanceSchema, casts: list[tuple[LanceField, pa.DataType]]
) -> Merge:
    _check_not_indexed(manifest, casts)
    next_id = manifest_max_field_id(manifest) + 1
    replaced: dict[int, tuple[LanceField, ...]] = {}
    reads: list[str] = []
    for src, dtype in casts:
        if src.parent_id != -1:
            raise UnsupportedFeatureError(f"alter_columns: casting nested field {src.name!r} is not supported")
        old_type = manifest.schema.arrow_field(src.id).type
        if not (_castable(old_type, dtype)):
            raise SchemaEvolutionError(f'Invalid user input: Cannot cast column "{src.name}" from '
                                       f'{rust_type_name(old_type)} to {rust_type_name(dtype)}')
        cur = schema.field_by_id(src.id)
        new = LanceSchema.from_arrow(pa.schema([pa.field(cur.name, dtype, cur.nullable)]), start_id=next_id)
        next_id = new.max_field_id() + 1
        replaced[src.id] = new.fields
        reads.append(src.name)
    gone = {g.id for sid in replaced for g in schema.subtree(sid)}
    out: list[LanceField] = []
    for f in schema.fields:
        if f.id in replaced:
            out.extend(replaced[f.id])
        elif f.id not in gone:
            out.append(f)
    new_schema = dataclasses.replace(schema, fields=tuple(out))
    added = LanceSchema(fields=tuple(x for sid in replaced for x in replaced[sid]), metadata={})
    target = added.to_arrow()
    names = dict(zip(reads, target.names, strict=True))

    def compute(t: pa.Table) -> pa.Table:
        return pa.Table.from_arrays([_cast_column(t.column(r), target.field(names[r]).type) for r in reads],
                                    schema=target)

    frags = add_column_files(store, manifest, added, compute, reads)
    keep = set(new_schema.field_ids())
    frags = [f.with_changes(files=tuple(df for df in f.files if keep.intersection(df.fields))) for f in frags]
    return Merge(frags, new_schema)


# ------------------------------------------------------------------ drop_columns
def plan_drop_columns(manifest: Manifest, columns: Sequence[str]) -> Project:
    """The ``Project`` of pylance's ``drop_columns`` (dotted paths drop struct children).

    Raises:
        InvalidArgumentError: an unknown column, or every column dropped.
    """
    if isinstance(columns, str):
        raise InvalidArgumentError(f"drop_columns takes a list of column names, got the string {columns!r}")
    schema = manifest.schema
    gone: set[int] = set()
    for c in columns:
        gone.update(f.id for f in schema.subtree(field_at(schema, c).id))
    kept = tuple(f for f in schema.fields if f.id not in gone)
    if not any(f.parent_id == -1 for f in kept):
        raise InvalidArgumentError("Cannot drop all columns from a dataset")
    return Project(dataclasses.replace(schema, fields=kept))
