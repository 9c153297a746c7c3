"""The ``lance`` Spark data source (PySpark Python Data Source API).

Read::

    spark.read.format("lance").load(uri)                                   # latest version
    spark.read.format("lance").option("versionAsOf", 3).load(uri)          # or a tag name (Delta name;
    spark.read.format("lance").option("timestampAsOf", "2026-11-24").load(uri)  # lance-spark: version)
    spark.read.format("lance").option("with_metadata", True).load(uri)     # + _rowid, _rowaddr, versions
    spark.read.format("lance").option("columns", "id,_rowid").load(uri)    # only these are decoded
    spark.read.format("lance").schema("id long, _rowid long").load(uri)    # the same, with types

PySpark 4.3's Python data sources get filter pushdown (``pushFilters``) but no column pruning:
the reader always receives the full schema, whatever the query selects.  So the projection
travels in the ``columns`` option or a user schema; only those columns are decoded.

One input partition per fragment (fragments larger than ``rows_per_partition`` are split by
physical row range).  Simple comparisons on integer, string, boolean and date columns and on
the metadata columns are pushed down; partitions whose metadata proves a pushed metadata-column
filter false (``_rowid``, ``_rowaddr``, ``_row_created_at_version``,
``_row_last_updated_at_version`` ranges) are not planned, nor fragments whose ZONEMAP indices
show no zone can match the pushed comparisons, ``IN`` and ``IS NULL`` on user columns
(``prune_fragments``, as the in-process scanner prunes), and inside a partition those filters
run before any data page is decoded.  Batches are cast exactly to the Arrow schema Spark
expects.  Options: :data:`~lance_ops.jobs._options.READ_OPTIONS` (an unknown one is an error
listing them).

Write::

    df.write.format("lance").mode("append" | "overwrite").save(uri)
    CREATE TABLE t USING lance LOCATION '<uri>'; INSERT INTO t ...; INSERT OVERWRITE t ...

Appends are strict (``_compat``): Spark's ANSI store assignment narrowed to safe widening,
checked on the driver before any task writes.  Each task writes fragment files and returns
their metadata; ``commit()`` on the driver commits one transaction (Append, or Overwrite /
create).  ``abort()`` deletes the files of the tasks that finished; a failing task deletes its
own; a task still running when the job failed writes no further file and deletes what it wrote,
and ``abort()`` sweeps the staged names twice, Spark's task kill timeout apart.  Only the messages Spark hands to ``commit()`` are committed, so retried or speculative
attempts never add rows twice.  Options: :data:`~lance_ops.jobs._options.WRITE_OPTIONS`, among
them Delta's idempotent-write options ``txnAppId`` and ``txnVersion``: a job retried after an
ambiguous failure (the same id and number) commits at most once; a duplicate commits nothing
and removes the files it wrote.

All the work happens in Python worker processes that Spark starts; everything they need
travels in the options (docs/RECIPES.md §1 (c)).  The URI is resolved once, when the driver plans
(:func:`lance_ops.format.distributed.resolve_uri`), so executors never resolve a relative path in
their own working directory.
"""

import contextlib
import json
import os
import posixpath
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    Filter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import StructField, StructType

import lance_ops.format as lf
from lance_ops.format import COMMIT_DEFAULTS, DEFAULT_MAX_ROWS_PER_FILE, FragmentMetadata, LanceSchema
from lance_ops.format.distributed import (
    DEFAULT_BATCH_SIZE,
    CommitHandler,
    Manifest,
    NamingScheme,
    ObjectStore,
    commit_handler_for,
    idempotency_key,
    light_manifest,
    load_transaction,
    normalize_storage_version,
    open_manifest,
    prune_fragments,
    require_writable,
    resolve_uri,
    row_ranges,
    scan_fragment_range,
    scan_schema,
    try_open_latest,
    with_idempotency,
    write_fragment_files,
)
from lance_ops.format.errors import (
    CommitStateUnknownError,
    DatasetAlreadyExistsError,
    SchemaError,
    VersionRemovedError,
)
from lance_ops.jobs._compat import check_store_assignment
from lance_ops.jobs._error_transport import carried
from lance_ops.jobs._filters import (
    FragmentRange,
    _and,
    _referenced,
    changed_rows,
    filter_expression,
    may_match,
    meta_filters,
    zone_filter_sql,
)
from lance_ops.jobs._leases import ReadLease, lease_settings
from lance_ops.jobs._options import (
    READ_OPTIONS,
    WRITE_OPTIONS,
    InvalidOptionError,
    check_options,
    first,
    get_bool,
    get_int,
    storage_options,
)
from lance_ops.jobs._types import META_COLUMNS, arrow_target, cast_batch, spark_schema
from lance_ops.jobs.errors import JobAbortedError
from lance_ops.jobs.time_travel import TIMESTAMP_KEYS, VERSION_KEYS, requested_version

DEFAULT_ROWS_PER_PARTITION = DEFAULT_MAX_ROWS_PER_FILE  # one input partition per default-sized file
WRITE_ID_PROPERTY = "lance_ops.write_id"
#: keys Spark adds to the options when it creates a catalog table (not the user's options)
_CATALOG_KEYS = {"location", "provider", "owner"}

__all__ = ["FragmentRange", "LanceDataSource", "LanceReader", "LanceWriter", "filter_expression"]


def _path(options: Any) -> str:
    """The dataset URI of the options, resolved (absolute) here, on the driver."""
    path = options.get("path")
    if not path:
        raise InvalidOptionError(
            "the lance data source got no path: use .load(uri) / .save(uri), or a table created with "
            "CREATE TABLE t USING lance LOCATION '<uri>' (no column list: the schema is read from the "
            "dataset, and Spark hands Python data sources a table's location only that way)"
        )
    return resolve_uri(str(path))


#: Field metadata key of catalog tables: Spark does not pass a table's LOCATION (or OPTIONS) to a
#: Python data source when it reads or writes the table, only the schema stored in the catalog;
#: ``schema()`` stores what later scans need in it when Spark creates the table.
TABLE_KEY = "lance_ops.table"


def _table_options(options: Any, uri: str) -> dict[str, str]:
    keep = {"path": uri}
    for k, v in options.items():
        if k.lower() == "storage_options" or k.lower().startswith("storage."):
            keep[k] = str(v)
    return keep


def with_table_options(options: Any, schema: StructType | None) -> dict[str, Any]:
    """``options``, completed from the catalog schema's :data:`TABLE_KEY` metadata (given options win)."""
    out = dict(options)
    if schema is not None and not out.get("path"):
        for f in schema.fields:
            raw = (f.metadata or {}).get(TABLE_KEY)
            if raw:
                for k, v in json.loads(raw).items():
                    out.setdefault(k, v)
                break
    return out


def _open_read(options: Any) -> tuple[str, ObjectStore, Manifest]:
    """(uri, store, manifest of the version the options ask for), after checking the options."""
    uri = _path(options)
    check_options(options, READ_OPTIONS, "read", uri)
    store = ObjectStore(uri, storage_options(options))
    handler = _handler(options, store)
    manifest, _ = open_manifest(store, requested_version(store, options, handler), handler)
    return uri, store, manifest


def _open_leased(options: Any) -> tuple[str, Manifest, ReadLease | None]:
    """(uri, manifest, lease on its version; None with ``lease=false``). Reading the latest
    version, a lease refused because cleanup removed that version after it was opened opens the
    new latest and leases that (three tries); a version asked for by time travel fails with
    ``VersionRemovedError``."""
    ttl = lease_settings(options)
    for attempt in range(3):
        uri, _, manifest = _open_read(options)
        if not ttl:
            return uri, manifest, None
        try:
            # leased while the query reads: tasks renew it, cleanup keeps this version's files
            return uri, manifest, ReadLease.acquire(uri, storage_options(options), manifest.version, ttl=ttl,
                                                    holder="spark read")
        except VersionRemovedError:
            if attempt == 2 or first(options, *VERSION_KEYS, *TIMESTAMP_KEYS) is not None:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def _handler(options: Any, store: ObjectStore) -> CommitHandler:
    """The dataset's commit handler: the ``manifest_store`` option's store, else conditional put."""
    return commit_handler_for(store, options.get("manifest_store") or None)


def read_schema(options: Any, manifest: Manifest, uri: str) -> StructType:
    """The Spark schema a read returns: the ``columns`` option, or every user column (+ the
    metadata columns with ``with_metadata``)."""
    arrow = scan_schema(manifest.schema.to_arrow())  # blob columns: their descriptions
    full = spark_schema(arrow, META_COLUMNS)
    hit = first(options, "columns")
    if hit is None:
        meta = META_COLUMNS if get_bool(options, "with_metadata", False) else ()
        return spark_schema(arrow, meta)
    names = [c.strip() for c in hit[1].split(",") if c.strip()]
    by_name = {f.name: f for f in full.fields}
    unknown = [c for c in names if c not in by_name]
    if not names or unknown:
        raise SchemaError(
            f"{uri}: option columns={hit[1]!r}: column(s) {unknown or names} are not in version {manifest.version} "
            f"(columns: {[f.name for f in full.fields]})"
        )
    return StructType([by_name[c] for c in names])


class LanceDataSource(DataSource):
    """``format("lance")``: batch reads and writes of a Lance dataset."""

    @classmethod
    def name(cls) -> str:
        return "lance"

    def schema(self) -> StructType:
        keys = {k.lower() for k in self.options}
        if "location" not in keys:
            uri, _, manifest = _open_read(self.options)
            return read_schema(self.options, manifest, uri)
        # CREATE TABLE t USING lance [OPTIONS (...)] LOCATION '<uri>': Spark adds its catalog keys
        # and prefixes the table's OPTIONS with "option.".  Only storage options can be kept
        # with a table (a table pinned to a version or a projection would be a view).
        options = {k[len("option."):] if k.lower().startswith("option.") else k: v
                   for k, v in self.options.items() if k.lower() not in _CATALOG_KEYS}
        for k in options:
            if k.lower() not in ("path", "storage_options") and not k.lower().startswith("storage."):
                raise InvalidOptionError(
                    f"CREATE TABLE ... USING lance: option {k!r} cannot be kept with a table; only the "
                    "storage options (storage_options, storage.<key>) can (read with spark.read to time travel)"
                )
        uri, _, manifest = _open_read(options)
        meta = json.dumps(_table_options(options, uri), sort_keys=True)
        return StructType([StructField(f.name, f.dataType, f.nullable, {**(f.metadata or {}), TABLE_KEY: meta})
                           for f in read_schema(options, manifest, uri).fields])

    def reader(self, schema: StructType) -> DataSourceReader:
        options = with_table_options(self.options, schema)
        if get_bool(options, "pushDownFilters", True, "pushdown"):
            return LanceFilteringReader(options, schema)
        return LanceReader(options, schema)

    def writer(self, schema: StructType, overwrite: bool) -> "LanceWriter":
        return LanceWriter(with_table_options(self.options, schema), schema, overwrite)


# --------------------------------------------------------------------------- reads


class LanceReader(DataSourceReader):
    """Reads one pinned version; runs on the driver (planning) and on executors (``read``)."""

    def __init__(self, options: Any, schema: StructType) -> None:
        self.uri, manifest, self.lease = _open_leased(options)
        self.storage_options = storage_options(options)
        self.version = manifest.version  # pinned: every partition reads this version
        self.manifest = light_manifest(manifest)  # no fragment list: the reader is shipped to every task
        user = {f.name for f in manifest.schema.top_level()}
        unknown = [f.name for f in schema.fields if f.name not in user and f.name not in META_COLUMNS]
        if unknown:
            raise SchemaError(f"{self.uri}: column(s) {unknown} are not in the dataset (version {self.version})")
        self.schema = schema
        self.full_schema = spark_schema(scan_schema(manifest.schema.to_arrow()), META_COLUMNS)
        self.rows_per_partition = get_int(options, "rows_per_partition", DEFAULT_ROWS_PER_PARTITION, minimum=1)
        self.batch_size = get_int(options, "batch_size", DEFAULT_BATCH_SIZE, minimum=1)
        self.pushed: list[Filter] = []
        between = options.get("changed_between")
        self.changed_between: tuple[int, int] | None = None
        if between:
            b, e = (int(x) for x in between.split(","))
            self.changed_between = (b, e)

    def partitions(self) -> list[InputPartition]:
        store = ObjectStore(self.uri, self.storage_options)
        manifest, _ = open_manifest(store, self.version)
        filters = meta_filters(self.pushed)
        fragments = manifest.fragments
        zone_sql = zone_filter_sql(self.pushed, {f.name for f in manifest.schema.top_level()})
        if zone_sql is not None:  # ZONEMAP indices rule out fragments (as the in-process scanner does)
            fragments = prune_fragments(store, manifest, zone_sql, fragments)
        out = []
        for f in fragments:
            if f.num_rows <= 0:
                continue
            for off, n in row_ranges(f, self.rows_per_partition or DEFAULT_ROWS_PER_PARTITION):
                part = FragmentRange(f, off, n)
                if may_match(manifest, part, filters, self.changed_between):  # else metadata rules it out
                    out.append(InputPartition(part))
        return out or [InputPartition(None)]

    @carried
    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        part = partition.value
        if part is None:
            return
        with self.lease.holding() if self.lease is not None else contextlib.nullcontext():
            yield from self._read(part)

    def _read(self, part: FragmentRange) -> Iterator[pa.RecordBatch]:
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
            batch_size=self.batch_size or DEFAULT_BATCH_SIZE, meta_filter=meta_filter,
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
    otherwise read with ``option("pushDownFilters", False)``).
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
        self.write_id = write_id
        self.staging = f"{STAGING_DIR}/{write_id}"

    def open_output(self, rel: str) -> Any:
        if rel.startswith("data/"):
            marker = f"{self.staging}/{posixpath.basename(rel)}"
            self.put(marker, b"")
            # after the staging marker: abort() puts its marker before it lists the staging
            # markers, so either this task sees the abort or the abort sees this file's marker
            if self.exists(aborted_marker(self.write_id)):
                self.delete(marker)
                raise JobAbortedError(f"{self.uri}: Spark write {self.write_id} was aborted "
                                      "(another task of the job failed); this task writes no more files")
        return super().open_output(rel)


#: how long ``abort()`` waits before its last sweep: Spark's ``spark.python.task.killTimeout``
#: (2 s) after which a killed task's Python worker is gone, with a margin
ABORT_GRACE_S = 3.0


def aborted_marker(write_id: str) -> str:
    """Left by ``abort()`` before it sweeps: a task of the job still running when the job failed
    finds it when it finishes and removes what it wrote (its message would be discarded)."""
    return f"{STAGING_DIR}/{write_id}.aborted"


def sweep_staging(store: ObjectStore, write_id: str, keep: set[str], *, markers: bool = True) -> None:
    """Delete the data files a job staged that are not in ``keep`` (file names), then (unless
    ``markers`` is False) the markers."""
    staging = f"{STAGING_DIR}/{write_id}"
    for name in store.list_dir(staging):
        try:
            if name not in keep:
                store.delete(f"data/{name}")
            if markers:
                store.delete(f"{staging}/{name}")
        except Exception:  # pragma: no cover - best effort; cleanup_old_versions removes orphans
            pass
    if not markers:
        return
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
        check_options(options, WRITE_OPTIONS, "write", self.uri)
        self.storage_options = storage_options(options)
        self.max_rows_per_file = get_int(options, "max_rows_per_file", DEFAULT_MAX_ROWS_PER_FILE, "max_row_per_file",
                                         minimum=1) or DEFAULT_MAX_ROWS_PER_FILE
        self.enable_stable_row_ids = get_bool(options, "enable_stable_row_ids", False)
        hit = first(options, "data_storage_version", "file_format_version")
        asked = hit[1] if hit else None
        self.write_id = options.get("write_id") or uuid.uuid4().hex
        self.max_retries = get_int(options, "max_retries", COMMIT_DEFAULTS.max_retries, minimum=0)
        # extra transaction properties (e.g. the Dagster run id), JSON-encoded
        try:
            self.extra_properties = json.loads(options.get("transaction_properties") or "{}")
        except json.JSONDecodeError as e:
            raise InvalidOptionError(f"{self.uri}: option transaction_properties must be a JSON object: {e}") from None
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
        # a string, not the handler: the writer is pickled to the executors, which never commit
        self.manifest_store: str | None = options.get("manifest_store") or None
        store = ObjectStore(self.uri, self.storage_options)
        existing = try_open_latest(store, commit_handler_for(store, self.manifest_store))  # refuses first
        # new files have the dataset's file version (pylance refuses a mix); an overwrite or a
        # new dataset takes the asked one (an overwrite without one keeps the dataset's)
        if existing is not None and (not overwrite or asked is None):
            self.data_storage_version = require_writable(existing.data_storage_version, self.uri)
        else:
            self.data_storage_version = normalize_storage_version(asked)
        if existing is not None and not overwrite:
            self.mode = "append"
            self.lance_schema = existing.schema
            if get_bool(options, "mergeSchema", False):
                # the new columns and the rows land in one Merge commit (or not at all)
                self.lance_schema = lf.schema_with_new_columns(existing, incoming)
                if self.lance_schema is not existing.schema:
                    self.mode = "append_new_columns"
            check_store_assignment(schema, self.lance_schema.to_arrow(), self.uri)
        else:
            self.mode = "overwrite" if existing is not None else "create"
            self.lance_schema = LanceSchema.from_arrow(incoming)
        self.read_version = existing.version if existing is not None else 0

    @carried
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
        if store.exists(aborted_marker(self.write_id)):  # the job failed while this task wrote
            delete_fragment_files(store, frags)
            for f in frags:
                for df in f.files:
                    store.delete(f"{store.staging}/{df.path}")
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
            sweep_staging(store, self.write_id, set())
            raise
        if not committed:  # a duplicate of a write committed earlier (txnAppId/txnVersion)
            sweep_staging(store, self.write_id, set())
            return
        # files of failed, killed or speculative attempts that were not committed
        sweep_staging(store, self.write_id, {df.path for f in frags for df in f.files})

    def _commit(self, store: ObjectStore, frags: list[FragmentMetadata]) -> bool:
        """Commit through ``lf.commit``; False when an earlier attempt of this write (same
        txnAppId/txnVersion) already did."""
        props = self._properties()
        handler = commit_handler_for(store, self.manifest_store)
        common: dict[str, Any] = {"storage_options": self.storage_options, "transaction_properties": props,
                                  "manifest_store": self.manifest_store, "max_retries": self.max_retries}
        if self.mode == "append_new_columns":
            read = handler.read_manifest(self.read_version).manifest
            op = lf.Merge(list(read.fragments), self.lance_schema, new_fragments=frags)
            ds = lf.commit(self.uri, op, read_version=self.read_version, **common)
            return idempotency_key(props) is None or self._committed_here(store, handler, ds.version)
        if self.mode == "append":
            if not frags:
                return True
            ds = lf.commit(self.uri, lf.Append(frags), read_version=self.read_version, **common)
        elif self.mode == "overwrite":
            ds = lf.commit(self.uri, lf.Overwrite(frags, self.lance_schema), read_version=self.read_version, **common)
        else:
            try:
                ds = lf.commit(self.uri, lf.Overwrite(frags, self.lance_schema), read_version=self.read_version,
                               create=True, enable_stable_row_ids=self.enable_stable_row_ids,
                               data_storage_version=self.data_storage_version, **common)
            except DatasetAlreadyExistsError:
                # Someone created the dataset while we wrote: append to it instead (same columns only).
                existing = try_open_latest(store, handler)
                assert existing is not None
                same = [(f.name, f.id) for f in existing.schema.fields] == [(f.name, f.id) for f in self.lance_schema.fields]
                if not same or existing.schema.to_arrow() != self.lance_schema.to_arrow():
                    raise
                ds = lf.commit(self.uri, lf.Append(frags), read_version=existing.version, **common)
        return idempotency_key(props) is None or self._committed_here(store, handler, ds.version)

    def _committed_here(self, store: ObjectStore, handler: CommitHandler, version: int) -> bool:
        """Whether ``version`` is this write's commit (not an earlier one under the same txnAppId)."""
        txn = load_transaction(store, version, handler.cached_scheme() or NamingScheme.V2, handler=handler)
        return txn.properties.get(WRITE_ID_PROPERTY) == self.write_id

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        store = ObjectStore(self.uri, self.storage_options)
        # first the marker, then the sweep: a task finishing later sees the marker, one that
        # finished before has its staging markers swept
        store.put(aborted_marker(self.write_id), b"")
        for m in messages:
            if isinstance(m, LanceCommitMessage):
                delete_fragment_files(store, m.fragments)
        # Spark does not wait for the failed stage's other tasks to stop before it calls abort():
        # one may be creating a file it staged before the marker (or finishing an upload) while
        # this sweeps. Sweep, give killed tasks Spark's kill timeout to stop, sweep again.
        sweep_staging(store, self.write_id, set(), markers=False)
        time.sleep(ABORT_GRACE_S)
        sweep_staging(store, self.write_id, set())
        try:
            store.delete(aborted_marker(self.write_id))
            if store.is_local:
                os.rmdir(store.full_path(STAGING_DIR))
        except Exception:  # another job is writing, or already gone
            pass
