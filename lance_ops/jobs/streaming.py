"""The ``lance_changes`` data source: a Lance dataset's change feed as a stream (or a batch).

Stream::

    (spark.readStream.format("lance_changes").option("startingVersion", 2).load(uri)
         .writeStream.trigger(availableNow=True)...)

Offsets are Lance versions, ``{"version": v}``; a micro-batch ``(start, end]`` emits the change
feed of those versions (``lance_ops.jobs.change_feed`` semantics: every user column, ``_rowid``,
``_change_type``, ``_commit_version``, ``_commit_timestamp``).  ``startingVersion`` is the first
version whose changes are read (default 1: every row ever inserted, then every change;
``latest``: only commits made after the query starts).  ``maxVersionsPerTrigger`` caps the
versions per micro-batch (a Lance version counts as one "file" for Spark's read limits).
Trigger.AvailableNow is supported (the target is the latest version when the query starts).

Batch (same rows as ``lance_ops.jobs.change_feed``)::

    spark.read.format("lance_changes").option("startingVersion", 3).option("endingVersion", 7).load(uri)

Planning reads metadata only (manifests, row id sequences, deletion files) in the driver-side
reader; each partition is one :class:`~lance_ops.format.distributed.ChangeFeedTask`
run on an executor.  The dataset needs stable row ids.
"""

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxFiles,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

from lance_ops.format.distributed import (
    CommitHandler,
    ObjectStore,
    commit_handler_for,
    execute_change_feed_task,
    open_manifest,
    plan_change_feed,
    resolve_uri,
)
from lance_ops.format.errors import UnsupportedFeatureError
from lance_ops.jobs._error_transport import carried
from lance_ops.jobs._leases import LEASE_OPTIONS, ReadLease, lease_settings
from lance_ops.jobs._options import check_options, get_int, storage_options
from lance_ops.jobs._types import arrow_target, cast_batch, spark_schema
from lance_ops.jobs.errors import InvalidOptionError


def change_feed_spark_schema(user: pa.Schema) -> StructType:
    """Spark schema of the change feed for a dataset whose user columns are ``user``.

    The user columns are nullable: pre-images and deleted rows come from earlier versions,
    where a column added since is null."""
    fields = [StructField(f.name, f.dataType, True, f.metadata) for f in spark_schema(user).fields] + [
        StructField("_rowid", LongType(), False),
        StructField("_change_type", StringType(), False),
        StructField("_commit_version", LongType(), False),
        StructField("_commit_timestamp", TimestampType(), True),
    ]
    return StructType(fields)


#: ``format("lance_changes")`` options (Delta's change data feed names)
CHANGES_OPTIONS = {
    "path": "dataset URI (.load(uri))",
    "startingVersion": "first version whose changes are read (default 1; streams: or 'latest')",
    "endingVersion": "last version (batch reads; default the latest)",
    "maxVersionsPerTrigger": "versions per micro-batch (streams)",
    "on_schema_change": "evolve (default: rows of earlier versions mapped onto the end version's columns) or fail",
    "storage_options": "JSON object for the storage",
    "storage.<key>": "one storage option",
    "manifest_store": "external manifest store the dataset commits through (SQLite path or sqlite:/// URL): "
    "the latest version is its latest, and a commit whose writer stopped before finalising is finalised",
    **LEASE_OPTIONS,
}


def _uri(options: Any) -> str:
    """The dataset URI, resolved once on the driver, after checking the options."""
    path = options.get("path")
    if not path:
        raise InvalidOptionError("the lance_changes data source needs a path: .load(uri)")
    uri = resolve_uri(str(path))
    check_options(options, CHANGES_OPTIONS, "lance_changes", uri)
    return uri


class LanceChangesDataSource(DataSource):
    """``format("lance_changes")``: the change feed as a stream or a batch read."""

    @classmethod
    def name(cls) -> str:
        return "lance_changes"

    def schema(self) -> StructType:
        store = ObjectStore(_uri(self.options), storage_options(self.options))
        manifest, _ = open_manifest(store, get_int(self.options, "endingversion", None))
        if not manifest.uses_stable_row_ids:
            raise UnsupportedFeatureError(
                f"{store.uri}: the change feed needs stable row ids (create the dataset with enable_stable_row_ids=True)"
            )
        return change_feed_spark_schema(manifest.schema.to_arrow())

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return LanceChangesStreamReader(self.options, schema)

    def reader(self, schema: StructType) -> DataSourceReader:
        return LanceChangesBatchReader(self.options, schema)


def _on_schema_change(options: Any) -> str:
    value = str(options.get("on_schema_change") or "evolve").strip().lower()
    if value not in ("evolve", "fail"):
        raise InvalidOptionError(f"option on_schema_change must be 'evolve' or 'fail', got {value!r}")
    return value


def _handler(options: Any, uri: str, so: dict[str, Any]) -> CommitHandler:
    """The dataset's commit handler (the ``manifest_store`` option's store, else the listing)."""
    return commit_handler_for(ObjectStore(uri, so), options.get("manifest_store") or None)


@dataclass
class LeasedTask:
    """A change-feed task and the lease on the versions of its range (renewed by the task)."""

    task: Any
    lease: ReadLease | None


class _ChangeReading:
    uri: str
    storage_options: dict[str, Any]
    schema: StructType
    on_schema_change: str = "evolve"
    lease_ttl: float | None = None

    def _lease(self, begin: int, end: int) -> ReadLease | None:
        """A lease on versions ``begin..end`` (the pre-images are read at ``begin``)."""
        if self.lease_ttl is None or end <= begin:
            return None
        return ReadLease.acquire(self.uri, self.storage_options, end, first_version=begin, ttl=self.lease_ttl,
                                 holder="spark lance_changes")

    def _partitions(self, begin: int, end: int, lease: ReadLease | None = None) -> list[InputPartition]:
        if end <= begin:
            return []
        plan = plan_change_feed(self.uri, begin, end, storage_options=self.storage_options,
                                on_schema_change=self.on_schema_change)
        return [InputPartition(LeasedTask(t, lease)) for t in plan.tasks]

    @carried
    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if partition.value is None:
            return
        task, lease = partition.value.task, partition.value.lease
        target = arrow_target(self.schema)
        with lease.holding() if lease is not None else contextlib.nullcontext():
            for batch in execute_change_feed_task(task):
                yield cast_batch(batch, target)


class LanceChangesBatchReader(_ChangeReading, DataSourceReader):
    """Changes of ``(startingVersion - 1, endingVersion]`` (ending: latest by default)."""

    def __init__(self, options: Any, schema: StructType) -> None:
        self.uri = _uri(options)
        self.storage_options = storage_options(options)
        self.schema = schema
        self.on_schema_change = _on_schema_change(options)
        store = ObjectStore(self.uri, self.storage_options)
        end, _ = open_manifest(store, get_int(options, "endingversion", None),
                               _handler(options, self.uri, self.storage_options))
        self.end = end.version
        start = get_int(options, "startingversion", 1)
        assert start is not None
        self.begin = max(0, start - 1)
        self.lease_ttl = lease_settings(options)
        self.lease = self._lease(self.begin, self.end)  # renewed by the tasks, expires after them

    def partitions(self) -> list[InputPartition]:
        return self._partitions(self.begin, self.end, self.lease) or [InputPartition(None)]


class LanceChangesStreamReader(_ChangeReading, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Lance versions as offsets; lives in one long-lived Python worker on the driver."""

    def __init__(self, options: Any, schema: StructType) -> None:
        self.uri = _uri(options)
        self.storage_options = storage_options(options)
        self.schema = schema
        self.on_schema_change = _on_schema_change(options)
        raw = str(options.get("startingversion") or "1").strip().lower()
        self.starting = None if raw == "latest" else int(raw)
        if self.starting is not None and self.starting < 1:
            raise ValueError(f"startingVersion must be >= 1 or 'latest', got {raw!r}")
        self.max_versions = get_int(options, "maxversionspertrigger", None)
        if self.max_versions is not None and self.max_versions <= 0:
            raise ValueError(f"maxVersionsPerTrigger must be positive, got {self.max_versions}")
        self.target: int | None = None
        self.lease_ttl = lease_settings(options)
        #: leases of the micro-batches planned and not committed yet, by end version
        self.held: dict[int, ReadLease] = {}
        # a string, not the handler: the reader is pickled into the driver's Python worker
        self.manifest_store: str | None = options.get("manifest_store") or None

    def _latest(self) -> int:
        store = ObjectStore(self.uri, self.storage_options)
        return commit_handler_for(store, self.manifest_store).latest_version()

    def initialOffset(self) -> dict:
        if self.starting is None:
            return {"version": self._latest()}
        return {"version": self.starting - 1}

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = self._latest()

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxFiles(self.max_versions) if self.max_versions else ReadAllAvailable()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = int(start["version"])
        end = self._latest() if self.target is None else self.target
        if isinstance(limit, ReadMaxFiles):
            end = min(end, begin + int(limit.max_files))
        end = max(begin, end)
        self._release_through(begin)  # Spark plans from ``begin``: the batches before it are done
        self._hold(begin, end)  # from the moment the range is decided until Spark commits it
        return {"version": end}

    def _release_through(self, version: int) -> None:
        for stop in [v for v in self.held if v <= version]:
            self.held.pop(stop).release()

    def _hold(self, begin: int, end: int) -> ReadLease | None:
        """The lease of the micro-batch ``(begin, end]``, acquired once."""
        lease = self.held.get(end)
        if lease is None or lease.first_version != begin:
            lease = self._lease(begin, end)
            if lease is not None:
                self.held[end] = lease
        return lease

    def reportLatestOffset(self) -> dict:
        return {"version": self._latest()}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        """The micro-batch ``(start, end]``, leased until Spark commits it (``commit``)."""
        begin, stop = int(start["version"]), int(end["version"])
        return self._partitions(begin, stop, self._hold(begin, stop))

    def commit(self, end: dict) -> None:
        """Release the leases of the micro-batches up to ``end`` (their rows are written)."""
        self._release_through(int(end["version"]))

    def stop(self) -> None:
        """The query stops: release what it still holds."""
        for lease in self.held.values():
            lease.release()
        self.held.clear()
