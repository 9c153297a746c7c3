"""Idempotent writes: a writer id and sequence number that commit at most once (Delta's
``txnAppId`` / ``txnVersion``).

A writer that may be retried after an ambiguous failure (a Spark job, a Dagster op) puts
``txnAppId`` (a stable id of the writer, e.g. the Dagster run id) and ``txnVersion`` (a
sequence number it increases for each new write) in the transaction properties.  At commit,
the newest transaction of the same ``txnAppId`` in recent history decides, as Delta's
``SetTransaction`` does: if its ``txnVersion`` is at least ours, this write was already
committed (or superseded) and the commit returns that version instead of committing again.
The check covers the last :data:`DEFAULT_LOOKBACK_VERSIONS` versions when the commit starts and
every version committed while it retries, so two attempts of one write racing each other
commit once.  pylance writers that set the same properties are recognised too.
"""

from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor

from lance_ops.format.errors import DatasetNotFoundError, InvalidArgumentError
from lance_ops.format.table.manifest import Manifest
from lance_ops.format.txn.transaction import Transaction

TXN_APP_ID = "txnAppId"
TXN_VERSION = "txnVersion"
#: versions before the latest searched for an earlier commit of the same write
DEFAULT_LOOKBACK_VERSIONS = 100


def idempotency_key(properties: Mapping[str, str]) -> tuple[str, int] | None:
    """``(txnAppId, txnVersion)`` of a transaction's properties, or None when it has none.

    Raises:
        InvalidArgumentError: only one of the two is given, or ``txnVersion`` is not a
            non-negative integer.
    """
    app = properties.get(TXN_APP_ID)
    version = properties.get(TXN_VERSION)
    if app is None and version is None:
        return None
    if not app or version is None:
        raise InvalidArgumentError(
            f"transaction properties {TXN_APP_ID!r} and {TXN_VERSION!r} must be given together "
            f"(got {TXN_APP_ID}={app!r}, {TXN_VERSION}={version!r})"
        )
    try:
        number = int(str(version))
    except ValueError:
        number = -1
    if number < 0:
        raise InvalidArgumentError(f"transaction property {TXN_VERSION} must be a non-negative integer, got {version!r}")
    return str(app), number


def with_idempotency(
    properties: Mapping[str, str] | None, app_id: str | None, txn_version: int | None
) -> dict[str, str]:
    """``properties`` plus ``txnAppId``/``txnVersion`` (when ``app_id`` is given)."""
    out = dict(properties or {})
    if app_id is not None:
        out[TXN_APP_ID] = str(app_id)
        out[TXN_VERSION] = str(0 if txn_version is None else int(txn_version))
    idempotency_key(out)  # validates
    return out


def find_committed(
    key: tuple[str, int],
    versions: Iterable[int],
    load: Callable[[int], Transaction],
    *,
    parallel: int = 1,
) -> int | None:
    """The version that already committed the write ``key``, or None.

    ``versions`` are searched newest first; the newest transaction carrying the same
    ``txnAppId`` decides (its ``txnVersion`` at least ours: committed).  Versions removed by a
    concurrent cleanup are skipped.  With ``parallel`` > 1 the transactions are loaded that
    many at a time, newest first (object stores: one round trip per batch, not per version).
    """
    order = sorted(versions, reverse=True)
    if parallel > 1 and len(order) > 1:
        for start in range(0, len(order), parallel):
            batch = order[start : start + parallel]
            with ThreadPoolExecutor(min(parallel, len(batch))) as pool:
                loaded = list(pool.map(lambda v: _load_or_none(load, v), batch))
            found = _decide(key, zip(batch, loaded, strict=True))
            if found is not _UNDECIDED:
                return found  # type: ignore[return-value]
        return None
    found = _decide(key, ((v, _load_or_none(load, v)) for v in order))
    return None if found is _UNDECIDED else found  # type: ignore[return-value]


_UNDECIDED = object()


def _load_or_none(load: Callable[[int], Transaction], version: int) -> Transaction | None:
    try:
        return load(version)
    except DatasetNotFoundError:
        return None


def _decide(key: tuple[str, int], loaded: Iterable[tuple[int, Transaction | None]]) -> object:
    """The committed version, None (this writer's newest commit is older), or _UNDECIDED."""
    app, number = key
    for v, txn in loaded:
        if txn is None:
            continue
        if txn.properties.get(TXN_APP_ID) != app:
            continue
        try:
            theirs = int(str(txn.properties.get(TXN_VERSION)))
        except ValueError:
            continue  # a foreign writer's malformed property: not a commit of ours
        return v if theirs >= number else None
    return _UNDECIDED


def committed_by(manifest: Manifest, txn: Transaction) -> bool:
    """Whether ``manifest`` is the version ``txn`` itself created (False for an earlier duplicate)."""
    return manifest.transaction_file == txn.file_name


__all__ = [
    "DEFAULT_LOOKBACK_VERSIONS",
    "TXN_APP_ID",
    "TXN_VERSION",
    "committed_by",
    "find_committed",
    "idempotency_key",
    "with_idempotency",
]
