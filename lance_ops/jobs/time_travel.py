"""Time travel, once for every layer above ``format``: a version by number, tag or commit time.

:func:`version_at` (the latest version committed at or before a time, a binary search over the
commit handler's versions) is what the data source's ``timestampAsOf`` and
``lance_ops.orchestration.TableRef.version_at`` use.

Time travel options: ``versionAsOf``/``version`` (a number or a tag) and ``timestampAsOf``/``timestamp``.

Semantics as Delta Lake's: a timestamp selects the latest version committed at or before it; a
timestamp before the first commit or after the latest one is an error (so a read never changes
when someone commits later); giving both a version and a timestamp is an error.  Timestamps are
ISO 8601 (``2026-11-24``, ``2026-11-24 05:00:00``, ``2026-11-24T05:00:00.123+01:00``); without an
offset they are UTC.  Commit times are compared at microseconds, as ``_commit_timestamp`` shows them.
"""

import datetime as dt
from collections.abc import Mapping
from typing import Any

from lance_ops.format import TagError, Tags
from lance_ops.format.distributed import (
    CommitHandler,
    ObjectStore,
    commit_handler_for,
    commit_timestamp_micros,
)
from lance_ops.format.errors import DatasetNotFoundError
from lance_ops.jobs._options import first
from lance_ops.jobs.errors import InvalidOptionError

VERSION_KEYS = ("versionAsOf", "version")
TIMESTAMP_KEYS = ("timestampAsOf", "timestamp")
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def parse_timestamp(name: str, raw: str) -> dt.datetime:
    """An aware datetime from an ISO 8601 option value (UTC when it has no offset)."""
    try:
        value = dt.datetime.fromisoformat(raw.strip())
    except ValueError:
        raise InvalidOptionError(
            f"option {name}: cannot read {raw!r} as a timestamp (ISO 8601, e.g. 2026-11-24 or "
            "2026-11-24T05:00:00Z; without an offset it is UTC)"
        ) from None
    return value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)


def _micros(t: dt.datetime) -> int:
    """Microseconds since the epoch, exactly (also for pendulum's DateTime, whose difference is a
    timedelta subclass that does not divide by a timedelta: Airflow hands out pendulum times)."""
    d = t - _EPOCH
    return (d.days * 86_400 + d.seconds) * 1_000_000 + d.microseconds


def _show(micros: int) -> str:
    return (_EPOCH + dt.timedelta(microseconds=micros)).isoformat().replace("+00:00", "Z")


def requested_version(store: ObjectStore, options: Mapping[str, Any], handler: CommitHandler | None = None) -> int | None:
    """The version the time travel options ask for (None: the latest), checked to exist; versions
    are listed through ``handler`` (the dataset's external manifest store, if any).

    Raises:
        InvalidOptionError: both a version and a timestamp, a bad value, a timestamp outside the
            dataset's history, or an unknown tag; each names the option.
        DatasetNotFoundError: no dataset, or the version asked for does not exist.
    """
    v = first(options, *VERSION_KEYS)
    t = first(options, *TIMESTAMP_KEYS)
    if v is not None and t is not None:
        raise InvalidOptionError(
            f"{store.uri}: options {v[0]} and {t[0]} cannot be given together (time travel to a version "
            "or to a timestamp, not both)"
        )
    if v is None and t is None:
        return None
    handler = handler or commit_handler_for(store)
    scheme, versions = handler.list_versions()
    if scheme is None or not versions:
        raise DatasetNotFoundError(f"{store.uri}: no Lance dataset here (no manifests in _versions/)")
    if v is not None:
        name, raw = v
        text = raw.strip()
        if text.lstrip("+").isdigit():
            version = int(text)
        else:
            try:
                version = Tags(store).get_version(text)
            except (TagError, ValueError) as e:
                raise InvalidOptionError(f"{store.uri}: option {name}={raw!r} is neither a version number nor a tag ({e})") from None
        if version not in versions:
            raise DatasetNotFoundError(
                f"{store.uri}: option {name}={raw!r}: version {version} does not exist "
                f"(versions {versions[0]}..{versions[-1]})"
            )
        return version
    assert t is not None
    name, raw = t
    return version_at(handler, store.uri, parse_timestamp(name, raw), option=f"option {name}={raw!r}")


def version_at(handler: CommitHandler, uri: str, when: dt.datetime, *, option: str = "") -> int:
    """The latest version committed at or before ``when`` (naive: UTC), by the commit timestamps
    of the manifests ``handler`` lists (binary search: O(log n) manifests read).

    Raises:
        DatasetNotFoundError: no dataset.
        InvalidOptionError: ``when`` is before the first version or after the latest one (Delta's
            rule: a read never changes when someone commits later).
    """
    what = option or f"timestamp {when.isoformat()}"
    scheme, versions = handler.list_versions()
    if scheme is None or not versions:
        raise DatasetNotFoundError(f"{uri}: no Lance dataset here (no manifests in _versions/)")
    want = _micros(when if when.tzinfo is not None else when.replace(tzinfo=dt.UTC))

    def at(i: int) -> int:
        return commit_timestamp_micros(handler.read_manifest(versions[i]).manifest)

    first_t, last_t = at(0), at(len(versions) - 1)
    if want < first_t:
        raise InvalidOptionError(
            f"{uri}: {what} is before the first version ({versions[0]}, committed {_show(first_t)})"
        )
    if want > last_t:
        raise InvalidOptionError(
            f"{uri}: {what} is after the latest version ({versions[-1]}, committed "
            f"{_show(last_t)}); use a timestamp at or before it, or no timestamp for the latest version"
        )
    return _search(versions, at, want)


def _search(versions: list[int], at: Any, want: int) -> int:
    """The last of ``versions`` whose commit time ``at(i)`` is <= ``want`` (``at(0) <= want``)."""
    lo, hi = 0, len(versions) - 1  # invariant: at(lo) <= want; answer in [lo, hi]
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if at(mid) <= want:
            lo = mid
        else:
            hi = mid - 1
    return versions[lo]


def latest_at_or_before(handler: CommitHandler, when: dt.datetime) -> int:
    """The newest version committed at or before ``when`` (naive: UTC); 0 when none was (or there
    is no dataset).  Unlike :func:`version_at`, a time after the latest commit is its version."""
    _scheme, versions = handler.list_versions()
    if not versions:
        return 0
    want = _micros(when if when.tzinfo is not None else when.replace(tzinfo=dt.UTC))

    def at(i: int) -> int:
        return commit_timestamp_micros(handler.read_manifest(versions[i]).manifest)

    return 0 if at(0) > want else _search(versions, at, want)
