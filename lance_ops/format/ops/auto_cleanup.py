"""pylance's automatic cleanup: a dataset whose table config holds ``lance.auto_cleanup.interval``
(and ``lance.auto_cleanup.older_than``, ``lance.auto_cleanup.retain_versions``) has its old
versions cleaned up after every commit whose version number is a multiple of the interval.

The config keys, their duration syntax (Rust's ``humantime``: ``"1m 40s"``, ``"1ms"``,
``"2days"``) and the hook's policy are pylance 14's (``auto_cleanup_hook``): the cleanup is based
on the version the commit was read from, which it never removes, so the newest versions from
the read version on stay whatever their age; a failure is logged, never raised to the committer.
"""

import logging
import re
from datetime import timedelta
from typing import TypedDict

from lance_ops.format.errors import InvalidArgumentError
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.ops.cleanup import cleanup_old_versions
from lance_ops.format.table.manifest import Manifest
from lance_ops.format.txn.commit_loop import register_post_commit_hook
from lance_ops.format.txn.transaction import Transaction

log = logging.getLogger(__name__)

INTERVAL_KEY = "lance.auto_cleanup.interval"
OLDER_THAN_KEY = "lance.auto_cleanup.older_than"
RETAIN_KEY = "lance.auto_cleanup.retain_versions"
#: pylance's cleanup policy default when ``older_than`` is not configured
DEFAULT_OLDER_THAN = timedelta(days=14)


class AutoCleanupConfig(TypedDict):
    """pylance's ``AutoCleanupConfig`` (a TypedDict): clean up every ``interval`` versions the
    versions older than ``older_than_seconds``."""

    interval: int
    older_than_seconds: int


# humantime's units, in nanoseconds, by every spelling it parses
_NS = {"ns": 1, "nsec": 1, "nanos": 1, "us": 10**3, "usec": 10**3, "micros": 10**3,
       "ms": 10**6, "msec": 10**6, "millis": 10**6}
_S = {"s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1, "m": 60, "min": 60, "mins": 60,
      "minute": 60, "minutes": 60, "h": 3600, "hr": 3600, "hrs": 3600, "hour": 3600, "hours": 3600,
      "d": 86400, "day": 86400, "days": 86400, "w": 604800, "week": 604800, "weeks": 604800,
      "M": 2_630_016, "month": 2_630_016, "months": 2_630_016,
      "y": 31_557_600, "year": 31_557_600, "years": 31_557_600}
_ITEM = re.compile(r"\s*(\d+)\s*([A-Za-z]+)")


def parse_duration(text: str) -> timedelta:
    """A ``humantime`` duration (``"1h 30m"``, ``"1ms"``, ``"2days"``) as a timedelta.

    Raises:
        InvalidArgumentError: not a sequence of ``<number><unit>`` items of known units.
    """
    pos, total_ns = 0, 0
    text = text.strip()
    while pos < len(text):
        m = _ITEM.match(text, pos)
        unit = m.group(2) if m else ""
        if m is None or (unit not in _S and unit not in _NS):
            raise InvalidArgumentError(f"{text!r} is not a duration (e.g. '1h 30m', '500ms', '2days')")
        n = int(m.group(1))
        total_ns += n * _NS[unit] if unit in _NS else n * _S[unit] * 10**9
        pos = m.end()
    if not text:
        raise InvalidArgumentError("an empty string is not a duration")
    return timedelta(microseconds=total_ns / 1000)


def format_duration(seconds: int) -> str:
    """Whole seconds as ``humantime`` writes them (``"1m 40s"``, ``"1day 1h"``, ``"0s"``), as
    pylance stores ``older_than_seconds`` in the table config."""
    if seconds <= 0:
        return "0s"
    parts = []
    years, rest = divmod(seconds, 31_557_600)
    months, rest = divmod(rest, 2_630_016)
    days, rest = divmod(rest, 86400)
    for n, word in ((years, "year"), (months, "month"), (days, "day")):
        if n:
            parts.append(f"{n}{word}{'s' if n > 1 else ''}")
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts += [f"{n}{u}" for n, u in ((hours, "h"), (minutes, "m"), (secs, "s")) if n]
    return " ".join(parts)


def config_values(options: AutoCleanupConfig) -> dict[str, str]:
    """The table config keys of ``options`` (what ``write_dataset(auto_cleanup_options=...)``
    sets on a new dataset)."""
    try:
        interval, seconds = int(options["interval"]), int(options["older_than_seconds"])
    except (KeyError, TypeError, ValueError) as e:
        raise InvalidArgumentError(f"auto_cleanup_options needs integer 'interval' and 'older_than_seconds', "
                                   f"got {options!r}") from e
    return {INTERVAL_KEY: str(interval), OLDER_THAN_KEY: format_duration(seconds)}


def auto_cleanup_hook(store: ObjectStore, txn: Transaction, new: Manifest) -> None:
    """After ``new`` committed: clean up as its config asks (pylance's ``auto_cleanup_hook``)."""
    config = new.config
    if INTERVAL_KEY not in config:
        return
    try:
        interval = int(config[INTERVAL_KEY])
        if interval <= 0 or new.version % interval:
            return
        older_than = parse_duration(config[OLDER_THAN_KEY]) if OLDER_THAN_KEY in config else DEFAULT_OLDER_THAN
        retain = int(config.get(RETAIN_KEY, "1"))
        # the read version is pylance's "current" version: it and every newer one stay
        keep = max(retain, new.version - max(txn.read_version, 1) + 1)
        stats = cleanup_old_versions(store, older_than=older_than, retain_versions=keep,
                                     retention_duration_check=False)
        log.info("%s: auto cleanup after version %d: %s", store.uri, new.version, stats)
    except Exception as e:  # noqa: BLE001 -- the commit has landed: a failed cleanup must not look like a failed commit
        log.error("%s: auto cleanup after version %d failed: %s", store.uri, new.version, e)


register_post_commit_hook(auto_cleanup_hook)
