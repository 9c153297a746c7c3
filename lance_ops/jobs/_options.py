"""Data source options: the known names, parsing (keys arrive lower-cased, values as strings), building.

Read and write options are named as Delta Lake and lance-spark name them.  Anything else is an
:class:`InvalidOptionError` raised on the driver, listing the known options, before a task runs.
"""

import json
import os
from collections.abc import Mapping
from typing import Any

from lance_ops.format import SQLiteManifestStore
from lance_ops.jobs.errors import InvalidOptionError

STORAGE_PREFIX = "storage."

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


#: ``format("lance")`` read options (canonical spelling -> what it does).  Spark lower-cases keys.
READ_OPTIONS: dict[str, str] = {
    "path": "dataset URI (.load(uri))",
    "versionAsOf": "read this version: a number or a tag name (Delta); alias version (lance-spark)",
    "version": "alias of versionAsOf",
    "timestampAsOf": "read the latest version committed at or before this time (Delta); alias timestamp",
    "timestamp": "alias of timestampAsOf",
    "columns": "comma-separated columns to read (user and metadata columns); only these are decoded",
    "with_metadata": "add _rowid, _rowaddr, _row_created_at_version, _row_last_updated_at_version",
    "batch_size": "rows per Arrow batch a task yields",
    "rows_per_partition": "split fragments larger than this into several input partitions",
    "pushDownFilters": "push filters into the scan (default true; lance-spark name); alias pushdown",
    "pushdown": "alias of pushDownFilters",
    "storage_options": "JSON object for the storage (gcsfs token, endpoint_url, ...)",
    "storage.<key>": "one storage option",
    "manifest_store": "external manifest store the dataset commits through (SQLite path or sqlite:/// URL): "
    "the latest version is the store's",
    "changed_between": "internal (change feed): rows inserted or updated in versions (b, e]",
    "lease": "take a reader lease on the version read, so cleanup keeps it while the query reads (default true)",
    "lease_ttl": "seconds the reader lease lives after the last task renewed it (default 300)",
}

#: ``format("lance")`` write options.
WRITE_OPTIONS: dict[str, str] = {
    "path": "dataset URI (.save(uri))",
    "max_rows_per_file": "rows per fragment file (alias max_row_per_file, lance-spark)",
    "max_row_per_file": "alias of max_rows_per_file",
    "enable_stable_row_ids": "stable row ids for a dataset this write creates",
    "data_storage_version": "file format of a dataset this write creates (2.0, 2.1, 2.2, stable); "
    "alias file_format_version",
    "file_format_version": "alias of data_storage_version",
    "storage_options": "JSON object for the storage",
    "storage.<key>": "one storage option",
    "write_id": "id stored in the transaction properties as lance_ops.write_id",
    "transaction_properties": "JSON object stored in the transaction properties",
    "max_retries": "lost commit races retried before a CommitConflictError (CommitOptions.max_retries)",
    "mergeSchema": "Delta's schema evolution on append: columns of the data the dataset lacks are added "
    "(nullable) in the same commit as the rows; without it an append must have the dataset's columns",
    "txnAppId": "Delta's idempotent writes: application id; with txnVersion, a write commits at most once",
    "txnVersion": "Delta's idempotent writes: version of the write within txnAppId",
    "manifest_store": "external manifest store the dataset commits through (SQLite path or sqlite:/// URL); "
    "the driver commits through it. A dataset that has one refuses writes without it",
}


def manifest_store_option(manifest_store: Any) -> str | None:
    """The ``manifest_store`` option value for a job's ``manifest_store=`` (a path, a ``sqlite:///``
    URL or a SQLiteManifestStore); None stays None.

    Raises:
        InvalidOptionError: another ManifestStore implementation (a data source option is a string;
            use the ``lance_ops.format`` API for those).
    """
    if manifest_store is None or isinstance(manifest_store, str):
        return manifest_store or None
    if isinstance(manifest_store, os.PathLike):
        return os.fspath(manifest_store)
    if isinstance(manifest_store, SQLiteManifestStore):
        return manifest_store.path
    raise InvalidOptionError(
        f"manifest_store {type(manifest_store).__name__} cannot be passed to Spark as an option; "
        "pass a SQLite path or sqlite:/// URL (other stores: use lance_ops.format's API)"
    )


def check_options(options: Mapping[str, Any], known: Mapping[str, str], what: str, uri: str = "") -> None:
    """Raise :class:`InvalidOptionError` naming the first option of ``options`` not in ``known``."""
    names = {k.lower() for k in known if not k.endswith(".<key>")}
    for key in options:
        k = str(key).lower()
        if k in names or (k.startswith(STORAGE_PREFIX) and len(k) > len(STORAGE_PREFIX)):
            continue
        listed = ", ".join(n for n in known if n != "changed_between")
        where = f"{uri}: " if uri else ""
        raise InvalidOptionError(f"{where}unknown {what} option {key!r}; the known options are: {listed}")


def first(options: Mapping[str, Any], *keys: str) -> tuple[str, str] | None:
    """``(name, value)`` of the first of ``keys`` set in ``options`` (case-insensitively; ``name``
    spelled as in ``keys``), or None; two of them set to different values is an error."""
    lowered = {str(k).lower(): v for k, v in options.items()}
    found = [(k, str(lowered[k.lower()])) for k in keys if k.lower() in lowered and str(lowered[k.lower()]) != ""]
    if len({v for _, v in found}) > 1:
        raise InvalidOptionError(f"options {' and '.join(k for k, _ in found)} are aliases but disagree")
    return found[0] if found else None


def storage_options(options: Mapping[str, str]) -> dict[str, Any]:
    """``storage_options`` (a JSON object) merged with ``storage.<key>`` options (prefix stripped)."""
    out: dict[str, Any] = {}
    raw = options.get("storage_options")
    if raw:
        try:
            parsed = json.loads(raw)
        except json.JSONDecodeError as e:
            raise InvalidOptionError(f"option storage_options must be a JSON object, got {raw!r}: {e}") from None
        if not isinstance(parsed, dict):
            raise InvalidOptionError(f"option storage_options must be a JSON object, got {raw!r}")
        out.update(parsed)
    for k, v in options.items():
        if k.lower().startswith(STORAGE_PREFIX):
            out[k[len(STORAGE_PREFIX):]] = v
    return out


def get_bool(options: Mapping[str, str], key: str, default: bool, *aliases: str) -> bool:
    hit = first(options, key, *aliases)
    if hit is None:
        return default
    name, raw = hit
    v = raw.strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise InvalidOptionError(f"option {name} must be true or false, got {raw!r}")


def get_int(options: Mapping[str, str], key: str, default: int | None, *aliases: str, minimum: int | None = None) -> int | None:
    hit = first(options, key, *aliases)
    if hit is None:
        return default
    name, raw = hit
    try:
        value = int(raw.strip())
    except ValueError:
        raise InvalidOptionError(f"option {name} must be an integer, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise InvalidOptionError(f"option {name} must be at least {minimum}, got {value}")
    return value


def source_options(
    *,
    storage_options: Mapping[str, Any] | None = None,
    version: int | None = None,
    **extra: Any,
) -> dict[str, str]:
    """Options for ``spark.read/write.format("lance")`` (None values are left out)."""
    out: dict[str, str] = {}
    if storage_options:
        out["storage_options"] = json.dumps(dict(storage_options), sort_keys=True)
    if version is not None:
        out["version"] = str(int(version))
    for k, v in extra.items():
        if v is None:
            continue
        out[k] = str(v).lower() if isinstance(v, bool) else str(v)
    return out
