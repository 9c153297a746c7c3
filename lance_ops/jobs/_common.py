"""Helpers shared by the jobs: reading a pinned version, sources, finding our commit, typed errors."""

import importlib
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from lance_ops.format import COMMIT_DEFAULTS, CommitOptions, Transaction, resolve_version
from lance_ops.format.distributed import (
    CommitHandler,
    Manifest,
    ObjectStore,
    list_versions,
    load_transaction,
    open_for_write,
    scan_schema,
)
from lance_ops.format.errors import InvalidArgumentError, LanceOpsError, SchemaError
from lance_ops.jobs._error_transport import carried_error_in
from lance_ops.jobs._options import source_options
from lance_ops.jobs._types import META_COLUMNS, spark_schema


def read_version(
    spark: SparkSession,
    uri: str,
    manifest: Manifest,
    columns: Sequence[str],
    *,
    storage_options: Mapping[str, Any] | None = None,
    **options: Any,
) -> DataFrame:
    """``columns`` (user and metadata) of the version ``manifest`` through the lance data source."""
    full = spark_schema(scan_schema(manifest.schema.to_arrow()), META_COLUMNS)
    by_name = {f.name: f for f in full.fields}
    missing = [c for c in columns if c not in by_name]
    if missing:
        raise SchemaError(f"{uri}: column(s) {missing} are not in version {manifest.version}")
    schema = StructType([by_name[c] for c in columns])
    opts = source_options(storage_options=storage_options, version=manifest.version, **options)
    return spark.read.format("lance").schema(schema).options(**opts).load(uri)


def as_dataframe(
    spark: SparkSession, source: Any, format: str | None, options: Mapping[str, Any] | None
) -> DataFrame:
    """A DataFrame, or a path read with ``format`` (parquet, json, csv, lance, ...)."""
    if isinstance(source, DataFrame):
        return source
    if not isinstance(source, str):
        raise TypeError(f"source must be a DataFrame or a path, got {type(source).__name__}")
    if not format:
        raise ValueError(f"reading {source!r} needs a format (parquet, json, csv, lance, ...)")
    reader = spark.read.format(format)
    for k, v in dict(options or {}).items():
        reader = reader.option(k, str(v).lower() if isinstance(v, bool) else str(v))
    return reader.load(source)


def latest(
    uri: str, storage_options: Mapping[str, Any] | None, commit: CommitOptions = COMMIT_DEFAULTS
) -> tuple[ObjectStore, CommitHandler, Manifest]:
    """Open the latest version for writing through ``commit``'s handler (external manifest store
    or conditional put); refuses (ManifestStoreRequiredError) before the job writes anything."""
    store = ObjectStore(uri, storage_options)
    handler = commit.handler(store)
    manifest, _ = open_for_write(store, handler)
    return store, handler, manifest


def commit_options(
    transaction_properties: Mapping[str, str] | None, manifest_store: Any, commit: CommitOptions | None = None
) -> CommitOptions:
    """A job's commit options: ``commit`` (or the defaults) with the job's keywords over it."""
    return (commit or COMMIT_DEFAULTS).replace(
        transaction_properties={**dict((commit.transaction_properties if commit else None) or {}),
                                **dict(transaction_properties or {})} or None,
        manifest_store=manifest_store,
    )


def find_commit(store: ObjectStore, after: int, key: str, value: str) -> tuple[int, Transaction] | None:
    """The version after ``after`` whose transaction has property ``key`` = ``value``."""
    scheme, versions = list_versions(store)
    if scheme is None:
        return None
    for v in reversed([v for v in versions if v > after]):
        txn = load_transaction(store, v, scheme)
        if txn.properties.get(key) == value:
            return v, txn
    return None


def referenced_columns(sql: str, names: Sequence[str]) -> list[str]:
    """Columns of ``names`` that may occur in the SQL text ``sql`` (a superset: every identifier token)."""
    tokens = {t.lower() for t in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", sql)}
    quoted = {q.lower() for q in re.findall(r"`([^`]+)`", sql)}
    return [n for n in names if n.lower() in tokens or n.lower() in quoted]


def version_number(uri: str, ref: int | str | None, storage_options: Mapping[str, Any] | None = None) -> int | None:
    """A version of the dataset (or branch) at ``uri`` named by a number or a tag (which must
    point into this branch); None stays None."""
    if ref is None or (isinstance(ref, int) and not isinstance(ref, bool)):
        return ref
    if isinstance(ref, str) and ref.isdigit():
        return int(ref)
    location, version = resolve_version(uri, ref, storage_options=storage_options)
    if location.rstrip("/") != uri.rstrip("/"):
        raise InvalidArgumentError(f"{uri}: {ref!r} names version {version} of {location}, not of this dataset; pass that URI")
    return version



_ERROR_LINE = re.compile(r"^(lance_ops(?:\.\w+)+)\.(\w+Error): (.+)$", re.MULTILINE)


def lance_error_in(e: BaseException) -> LanceOpsError | None:
    """The lance_ops error a Spark task or Python data source raised, rebuilt from the text of the
    exception Spark surfaces, or None if there is none: the same class with its fields from the
    note :func:`~lance_ops.jobs._error_transport.carried` functions add, else (an error raised
    outside them) the class named on the traceback's last line, built from its message."""
    carried = carried_error_in(str(e))
    if carried is not None:
        return carried
    m = _ERROR_LINE.search(str(e))
    if m is None:
        return None
    module, name, message = m.groups()
    try:
        cls = getattr(importlib.import_module(module), name)
        if isinstance(cls, type) and issubclass(cls, LanceOpsError):
            return cls(message)
    except Exception:  # unknown module, or an error class with another constructor
        pass
    return LanceOpsError(f"{name}: {message}")


@contextmanager
def lance_errors() -> Iterator[None]:
    """Re-raise a lance_ops error that Spark wrapped (task, data source) as that typed error."""
    try:
        yield
    except LanceOpsError:
        raise
    except Exception as e:
        err = lance_error_in(e)
        if err is None:
            raise
        raise err from e
