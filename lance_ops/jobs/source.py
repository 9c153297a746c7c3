"""The ``lance`` Spark data source (PySpark Python Data Source API).

Read::

    spark.read.format("lance").option("version", 3).load(uri)
    spark.read.format("lance").option("with_metadata", True).load(uri)     # + _rowid, _rowaddr, versions
    spark.read.format("lance").schema("id long, _rowid long").load(uri)    # pruned columns

One input partition per fragment (fragments larger than ``rows_per_partition`` are split by
physical row range); simple comparisons on integer, string, boolean and date columns (and on
the metadata columns) are pushed down; batches are cast exactly to the Arrow schema Spark
expects.  Options: ``version``, ``storage_options`` (JSON) or ``storage.<key>``,
``with_metadata``, ``rows_per_partition``, ``batch_size``, ``changed_between`` ("b,e": only rows
inserted or updated in versions ``(b, e]``, selected from metadata before any data is decoded;
used by the change feed).

Write::

    df.write.format("lance").mode("append" | "overwrite").save(uri)

Each task writes fragment files (``lance_ops.format.write_fragments``) and returns their
metadata; ``commit()`` on the driver commits one transaction (Append, or Overwrite / create).
``abort()`` deletes the files of the tasks that finished; a failing task deletes its own.  Only
the messages Spark hands to ``commit()`` are committed, so retried or speculative attempts
never add rows twice.  Options: ``max_rows_per_file``, ``enable_stable_row_ids``,
``data_storage_version``, ``storage_options``, ``write_id`` (stored in the transaction
properties as ``lance_ops.write_id``), and Delta's idempotent-write options ``txnAppId`` and
``txnVersion``: a job retried after an ambiguous failure (the same id and number) commits at
most once; a duplicate commits nothing and removes the files it wrote.

All the work happens in Python worker processes that Spark starts; everything they need
travels in the options (RECIPES.md §1 (c)).
"""

import datetime as dt
import json
import os
import posixpath
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringEndsWith,
    StringStartsWith,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    BooleanType,
    ByteType,
    DataType,
    DateType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructType,
)

from lance_ops.format import Append, FragmentMetadata, LanceSchema, Overwrite
from lance_ops.format.commit import commit_transaction
from lance_ops.format.commit_handler import try_open_latest
from lance_ops.format.errors import CommitStateUnknownError, DatasetAlreadyExistsError, SchemaError
from lance_ops.format.file.blobs import scan_schema
from lance_ops.format.idempotency import committed_by, with_idempotency
from lance_ops.format.maintenance.distributed import (
    DEFAULT_BATCH_SIZE,
    light_manifest,
    open_manifest,
    row_ranges,
    scan_fragment_range,
)
from lance_ops.format.manifest import Manifest
from lance_ops.format.scan import CREATED_AT, UPDATED_AT
from lance_ops.format.store import ObjectStore
from lance_ops.format.transaction import Transaction
from lance_ops.format.versions import normalize_storage_version, require_writable
from lance_ops.format.write import DEFAULT_MAX_ROWS_PER_FILE, write_fragment_files

from ._options import get_bool, get_int, storage_options
from ._types import META_COLUMNS, arrow_target, cast_batch, spark_schema

DEFAULT_ROWS_PER_PARTITION = 1_048_576
WRITE_ID_PROPERTY = "lance_ops.write_id"


def _path(options: Any) -> str:
    path = options.get("path")
    if not path:
        raise ValueError("the lance data source needs a path: .load(uri) / .save(uri)")
    return str(path)


def _open(options: Any) -> tuple[ObjectStore, Manifest]:
    store = ObjectStore(_path(options), storage_options(options))
    manifest, _ = open_manifest(store, get_int(options, "version", None))
    return store, manifest


class LanceDataSource(DataSource):
    """``format("lance")``: batch reads and writes of a Lance dataset."""

    @classmethod
    def name(cls) -> str:
        return "lance"

    def schema(self) -> StructType:
        _, manifest = _open(self.options)
        meta = META_COLUMNS if get_bool(self.options, "with_metadata", False) else ()
        return spark_schema(scan_schema(manifest.schema.to_arrow()), meta)  # blobs: descriptions

    def reader(self, schema: StructType) -> DataSourceReader:
        if get_bool(self.options, "pushdown", True):
            return LanceFilteringReader(self.options, schema)
        return LanceReader(self.options, schema)

    def writer(self, schema: StructType, overwrite: bool) -> "LanceWriter":
        return LanceWriter(self.options, schema, overwrite)


# --------------------------------------------------------------------------- reads


@dataclass(frozen=True)
class FragmentRange:
    """One input partition: physical rows ``[offset, offset+length)`` of a fragment."""

    fragment: FragmentMetadata
    offset: int
    length: int


_PUSHABLE = (ByteType, ShortType, IntegerType, LongType, StringType, BooleanType, DateType)
_CMP = {
    EqualTo: lambda c, v: c == v,
    GreaterThan: lambda c, v: c > v,
    GreaterThanOrEqual: lambda c, v: c >= v,
    LessThan: lambda c, v: c < v,
    LessThanOrEqual: lambda c, v: c <= v,
}


def filter_expression(f: Filter, types: dict[str, DataType], literal_type: Any) -> pc.Expression | None:
    """``f`` as a pyarrow expression with Spark's three-valued semantics, or None if not pushable.

    Floating-point columns are never pushed (Spark orders NaN above every number and equates
    NaN with NaN; Arrow comparisons with NaN are false).  ``literal_type(name)`` is the Arrow type
    literals are built with.
    """

    def column(attr: tuple[str, ...]) -> str | None:
        if len(attr) != 1 or attr[0] not in types or not isinstance(types[attr[0]], _PUSHABLE):
            return None
        return attr[0]

    def lit(name: str, value: Any) -> pa.Scalar | None:
        if value is None or isinstance(value, float | dt.datetime | list | tuple | dict):
            return None
        try:
            return pa.scalar(value, type=literal_type(name))
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError):
            return None

    if isinstance(f, Not):
        inner = f.child
        if isinstance(inner, In):
            name = column(inner.attribute)
            e = filter_expression(inner, types, literal_type)
            return None if e is None or name is None else ~e & pc.field(name).is_valid()
        e = filter_expression(inner, types, literal_type)
        return None if e is None else ~e
    if isinstance(f, IsNull | IsNotNull):
        name = column(f.attribute)
        if name is None:
            return None
        return pc.field(name).is_null() if isinstance(f, IsNull) else pc.field(name).is_valid()
    if isinstance(f, EqualNullSafe):
        name = column(f.attribute)
        if name is None:
            return None
        if f.value is None:
            return pc.field(name).is_null()
        v = lit(name, f.value)
        return None if v is None else pc.coalesce(pc.field(name) == v, pa.scalar(False))
    if type(f) in _CMP:
        cmp: Any = f
        name = column(cmp.attribute)
        v = lit(name, cmp.value) if name is not None else None
        return None if v is None or name is None else _CMP[type(f)](pc.field(name), v)
    if isinstance(f, In):
        name = column(f.attribute)
        if name is None or any(x is None for x in f.value):
            return None
        values = [lit(name, x) for x in f.value]
        if any(v is None for v in values):
            return None
        return pc.field(name).isin(pa.array([v.as_py() for v in values if v is not None], type=literal_type(name)))
    if isinstance(f, StringStartsWith | StringEndsWith | StringContains):
        name = column(f.attribute)
        if name is None or not isinstance(types[name], StringType) or not isinstance(f.value, str):
            return None
        fn = {StringStartsWith: pc.starts_with, StringEndsWith: pc.ends_with, StringContains: pc.match_substring}
        return fn[type(f)](pc.field(name), pattern=f.value)
    return None


def changed_rows(begin: int, end: int) -> pc.Expression:
    """Rows inserted or updated in ``(begin, end]`` (over the uint64 version columns)."""
    b, e = pa.scalar(begin, pa.uint64()), pa.scalar(end, pa.uint64())
    c, u = pc.field(CREATED_AT), pc.field(UPDATED_AT)
    return ((c > b) & (c <= e)) | ((c <= b) & (u > b) & (u <= e))


def _and(exprs: Sequence[pc.Expression | None]) -> pc.Expression | None:
    out = None
    for e in exprs:
        out = e if out is None else out & e
    return out


def _referenced(f: Filter) -> set[str]:
    if isinstance(f, Not):
        return _referenced(f.child)
    attr: tuple[str, ...] = tuple(getattr(f, "attribute", ()))
    return {attr[0]} if len(attr) == 1 else set()


class LanceReader(DataSourceReader):
    """Reads one pinned version; runs on the driver (planning) and on executors (``read``)."""

    def __init__(self, options: Any, schema: StructType) -> None:
        self.uri = _path(options)
        self.storage_options = storage_options(options)
        store = ObjectStore(self.uri, self.storage_options)
        manifest, _ = open_manifest(store, get_int(options, "version", None))
        self.version = manifest.version  # pinned: every partition reads this version
        self.manifest = light_manifest(manifest)  # no fragment list: the reader is shipped to every task
        user = {f.name for f in manifest.schema.top_level()}
        unknown = [f.name for f in schema.fields if f.name not in user and f.name not in META_COLUMNS]
        if unknown:
            raise SchemaError(f"{self.uri}: column(s) {unknown} are not in the dataset (version {self.version})")
        self.schema = schema
        self.full_schema = spark_schema(scan_schema(manifest.schema.to_arrow()), META_COLUMNS)
        self.rows_per_partition = get_int(options, "rows_per_partition", DEFAULT_ROWS_PER_PARTITION) or 1
        self.batch_size = get_int(options, "batch_size", DEFAULT_BATCH_SIZE) or DEFAULT_BATCH_SIZE
        self.pushed: list[Filter] = []
        between = options.get("changed_between")
        self.changed_between = tuple(int(x) for x in between.split(",")) if between else None

    def partitions(self) -> list[InputPartition]:
        store = ObjectStore(self.uri, self.storage_options)
        manifest, _ = open_manifest(store, self.version)
        out = [
            InputPartition(FragmentRange(f, off, n))
            for f in manifest.fragments
            for off, n in row_ranges(f, self.rows_per_partition)
            if f.num_rows > 0
        ]
        return out or [InputPartition(None)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        part = partition.value
        if part is None:
            return
        target = arrow_target(self.schema)
        wanted = list(self.schema.fieldNames())
        extra = sorted(set().union(*(_referenced(f) for f in self.pushed)) - set(wanted)) if self.pushed else []
        columns = wanted + extra
        by_name = {f.name: f for f in self.full_schema.fields}
        types = {f.name: f.dataType for f in self.full_schema.fields}
        read_target = arrow_target(StructType([by_name[c] for c in columns])) if extra else None
        spark_types = {f.name: f.type for f in arrow_target(self.full_schema)}
        exprs = [filter_expression(f, types, spark_types.__getitem__) for f in self.pushed]
        row_filter = _and([e for e in exprs if e is not None])
        meta_exprs = [
            filter_expression(f, types, lambda _n: pa.uint64())
            for f in self.pushed
            if _referenced(f) <= set(META_COLUMNS)
        ]
        if self.changed_between is not None:
            meta_exprs.append(changed_rows(*self.changed_between))
        meta_filter = _and([e for e in meta_exprs if e is not None])
        store = ObjectStore(self.uri, self.storage_options)
        for batch in scan_fragment_range(
            store, self.manifest, part.fragment, columns, offset=part.offset, length=part.length,
            batch_size=self.batch_size, meta_filter=meta_filter,
        ):
            if row_filter is None:
                yield cast_batch(batch, target)
                continue
            cast = cast_batch(batch, read_target if read_target is not None else target)
            kept = pa.Table.from_batches([cast]).filter(row_filter)
            if kept.num_rows == 0:
                continue
            for b in kept.combine_chunks().to_batches():
                yield pa.RecordBatch.from_arrays([b.column(n) for n in wanted], schema=target)


class LanceFilteringReader(LanceReader):
    """:class:`LanceReader` with filter pushdown.

    Needs ``spark.sql.python.filterPushdown.enabled=true`` (``lance_ops.jobs.register`` sets it;
    otherwise read with ``option("pushdown", False)``).
    """

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        types = {f.name: f.dataType for f in self.full_schema.fields}
        spark_types = {f.name: f.type for f in arrow_target(self.full_schema)}
        for f in filters:
            if filter_expression(f, types, spark_types.__getitem__) is not None:
                self.pushed.append(f)
            else:
                yield f


# --------------------------------------------------------------------------- writes


@dataclass
class LanceCommitMessage(WriterCommitMessage):
    """What one write task produced (uncommitted fragments, placeholder ids)."""

    fragments: list[FragmentMetadata] = field(default_factory=list)
    rows: int = 0
    partition_id: int = 0
    attempt: int = 0


def delete_fragment_files(store: ObjectStore, fragments: Sequence[FragmentMetadata]) -> None:
    """Best-effort removal of data files that never made it into a committed version."""
    for f in fragments:
        for df in f.files:
            try:
                store.delete(f"data/{df.path}")
            except Exception:  # pragma: no cover - cleanup must not hide the original error
                pass


STAGING_DIR = "_lance_ops_staging"


class StagingStore(ObjectStore):
    """An ObjectStore that leaves a marker ``_lance_ops_staging/<write_id>/<name>`` *before* it
    creates a data file, so the driver can find every file a job's tasks wrote, even those of
    tasks that were killed or lost to a speculative twin, and delete what it did not commit."""

    def __init__(self, uri: str, storage_options: Any, write_id: str) -> None:
        super().__init__(uri, storage_options)
        self.staging = f"{STAGING_DIR}/{write_id}"

    def open_output(self, rel: str) -> Any:
        if rel.startswith("data/"):
            self.put(f"{self.staging}/{posixpath.basename(rel)}", b"")
        return super().open_output(rel)


def sweep_staging(store: ObjectStore, write_id: str, keep: set[str]) -> None:
    """Delete the data files a job staged that are not in ``keep`` (file names), then the markers."""
    staging = f"{STAGING_DIR}/{write_id}"
    for name in store.list_dir(staging):
        try:
            if name not in keep:
                store.delete(f"data/{name}")
            store.delete(f"{staging}/{name}")
        except Exception:  # pragma: no cover - best effort; cleanup_old_versions removes orphans
            pass
    for rel in (staging, STAGING_DIR):
        try:
            if store.is_local:
                os.rmdir(store.full_path(rel))
            elif not store.list_dir(rel):
                store.fs.rm(store.full_path(rel), recursive=True)
        except Exception:  # not empty (another job is writing) or already gone
            pass


class LanceWriter(DataSourceArrowWriter):
    """Created on the driver (decides append / overwrite / create and the schema), shipped to tasks."""

    def __init__(self, options: Any, schema: StructType, overwrite: bool) -> None:
        self.uri = _path(options)
        self.storage_options = storage_options(options)
        self.max_rows_per_file = get_int(options, "max_rows_per_file", DEFAULT_MAX_ROWS_PER_FILE) or 1
        self.enable_stable_row_ids = get_bool(options, "enable_stable_row_ids", False)
        asked = options.get("data_storage_version") or None
        self.write_id = options.get("write_id") or uuid.uuid4().hex
        # extra transaction properties (e.g. the Dagster run id), JSON-encoded
        self.extra_properties = json.loads(options.get("transaction_properties") or "{}")
        app_id = options.get("txnAppId") or options.get("txnappid")
        if app_id:  # Delta's writer options; keys arrive lower-cased
            txn_version = get_int(options, "txnversion", None)
            if txn_version is None:
                txn_version = get_int(options, "txnVersion", None)
            self.extra_properties = with_idempotency(self.extra_properties, app_id, txn_version)
        reserved = [n for n in schema.fieldNames() if n in META_COLUMNS]
        if reserved:
            raise SchemaError(f"{self.uri}: column(s) {reserved} are reserved Lance metadata columns; rename or drop them")
        incoming = arrow_target(schema)
        existing = try_open_latest(ObjectStore(self.uri, self.storage_options))
        # new files have the dataset's file version (pylance refuses a mix); an overwrite or a
        # new dataset takes the asked one (an overwrite without one keeps the dataset's)
        if existing is not None and (not overwrite or asked is None):
            self.data_storage_version = require_writable(existing.data_storage_version, self.uri)
        else:
            self.data_storage_version = normalize_storage_version(asked)
        if existing is not None and not overwrite:
            self.mode = "append"
            self.lance_schema = existing.schema
            mine, theirs = set(existing.schema.to_arrow().names), set(incoming.names)
            if mine != theirs:
                raise SchemaError(
                    f"{self.uri}: appended data has columns {sorted(theirs)}, the dataset has {sorted(mine)} "
                    f"(missing {sorted(mine - theirs)}, unexpected {sorted(theirs - mine)})"
                )
        else:
            self.mode = "overwrite" if existing is not None else "create"
            self.lance_schema = LanceSchema.from_arrow(incoming)
        self.read_version = existing.version if existing is not None else 0

    def write(self, iterator: Iterator[pa.RecordBatch]) -> LanceCommitMessage:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        target = self.lance_schema.to_arrow()
        rows = 0

        def batches() -> Iterator[pa.RecordBatch]:
            nonlocal rows
            for b in iterator:
                rows += b.num_rows
                yield cast_batch(b, target)

        # write_fragment_files deletes whatever it wrote if the input (or anything else) fails;
        # the staging markers cover tasks that die without running that cleanup.
        store = StagingStore(self.uri, self.storage_options, self.write_id)
        frags = write_fragment_files(store, batches(), self.lance_schema, version=self.data_storage_version,
                                     max_rows_per_file=self.max_rows_per_file)
        return LanceCommitMessage(
            list(frags), rows, ctx.partitionId() if ctx else 0, ctx.attemptNumber() if ctx else 0
        )

    def _properties(self) -> dict[str, str]:
        return {**self.extra_properties, "lance_ops.writer": "spark", WRITE_ID_PROPERTY: self.write_id}

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        msgs = sorted((m for m in messages if isinstance(m, LanceCommitMessage)), key=lambda m: m.partition_id)
        frags = [f for m in msgs for f in m.fragments]
        store = ObjectStore(self.uri, self.storage_options)
        try:
            committed = self._commit(store, frags)
        except CommitStateUnknownError:
            # the version may exist and reference these files: remove nothing
            raise
        except BaseException:
            delete_fragment_files(store, frags)
            sweep_staging(store, self.write_id, set())
            raise
        if not committed:  # a duplicate of a write committed earlier (txnAppId/txnVersion)
            delete_fragment_files(store, frags)
            sweep_staging(store, self.write_id, set())
            return
        # files of failed, killed or speculative attempts that were not committed
        sweep_staging(store, self.write_id, {df.path for f in frags for df in f.files})

    def _commit(self, store: ObjectStore, frags: list[FragmentMetadata]) -> bool:
        """Commit; False when an earlier attempt of this write (same txnAppId) already did."""
        props = self._properties()
        if self.mode == "append":
            if frags:
                txn = Transaction(self.read_version, Append(frags), properties=props)
                return committed_by(commit_transaction(store, txn), txn)
            return True
        txn = Transaction(self.read_version, Overwrite(frags, self.lance_schema), properties=props)
        if self.mode == "overwrite":
            return committed_by(commit_transaction(store, txn), txn)
        try:
            return committed_by(commit_transaction(
                store, txn, create=True, enable_stable_row_ids=self.enable_stable_row_ids,
                data_storage_version=self.data_storage_version,
            ), txn)
        except DatasetAlreadyExistsError:
            # Someone created the dataset while we wrote: append to it instead (same columns only).
            existing = try_open_latest(store)
            assert existing is not None
            same = [(f.name, f.id) for f in existing.schema.fields] == [(f.name, f.id) for f in self.lance_schema.fields]
            if not same or existing.schema.to_arrow() != self.lance_schema.to_arrow():
                raise
            retry = Transaction(existing.version, Append(frags), properties=props)
            return committed_by(commit_transaction(store, retry), retry)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        store = ObjectStore(self.uri, self.storage_options)
        for m in messages:
            if isinstance(m, LanceCommitMessage):
                delete_fragment_files(store, m.fragments)
        sweep_staging(store, self.write_id, set())
