"""Reader leases taken by the Spark readers (data source, ``lance_changes``, change-feed jobs).

The driver acquires a lease on the versions a query reads when Spark plans it; the lease
travels to the tasks in the reader (a small picklable :class:`ReadLease`), and every task renews
it when it starts and every third of the ttl while it reads, so the lease lives as long as the
query reads and expires ``lease_ttl`` after its last task (a Python data source gets no call
when a batch query ends).  A lease that lapsed anyway (a stage that waited longer than the
ttl) is acquired again, which fails with ``VersionRemovedError`` if cleanup removed the version
meanwhile: a clear error instead of a missing file.
"""

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import lance_ops.format as lf
from lance_ops.format.errors import LeaseExpiredError, LeaseNotFoundError
from lance_ops.jobs._options import InvalidOptionError, first, get_bool

#: seconds a reader lease lives after its last renewal (option ``lease_ttl``)
DEFAULT_READ_LEASE_TTL = 300.0

LEASE_OPTIONS = {
    "lease": "take a reader lease on the versions read, so cleanup keeps them (default true)",
    "lease_ttl": f"seconds the reader lease lives after the last task renewed it (default {DEFAULT_READ_LEASE_TTL:g})",
}


@dataclass
class ReadLease:
    """A lease held for a query; renewed from any process that has a copy."""

    uri: str
    storage_options: dict[str, Any]
    lease_id: str
    version: int
    first_version: int
    ttl: float
    holder: str = "spark"
    _renewed: float = field(default=0.0, compare=False)

    @classmethod
    def acquire(cls, uri: str, storage_options: dict[str, Any], version: int, *, first_version: int | None = None,
                ttl: float = DEFAULT_READ_LEASE_TTL, holder: str = "spark") -> "ReadLease":
        got = lf.acquire_lease(uri, version, first_version=first_version, ttl=ttl, holder=holder,
                               storage_options=storage_options)
        return cls(uri, dict(storage_options), got.id, version, got.first_version, ttl, holder, time.monotonic())

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_renewed": 0.0}  # another process renews at its first call

    def keep_alive(self) -> None:
        """Renew when a third of the ttl passed since this copy last did (or never did)."""
        now = time.monotonic()
        if self._renewed and now - self._renewed < self.ttl / 3:
            return
        try:
            lf.renew_lease(self.uri, self.lease_id, ttl=self.ttl, storage_options=self.storage_options)
        except (LeaseExpiredError, LeaseNotFoundError):
            again = lf.acquire_lease(self.uri, self.version, first_version=self.first_version, ttl=self.ttl,
                                     holder=self.holder, storage_options=self.storage_options)
            self.lease_id = again.id
        self._renewed = now

    def release(self) -> None:
        lf.release_lease(self.uri, self.lease_id, storage_options=self.storage_options)

    @contextlib.contextmanager
    def holding(self) -> Iterator[None]:
        """Renew now and every third of the ttl from a background thread while the block runs
        (a task whose consumer is slow, or blocked, still holds the lease)."""
        self.keep_alive()
        stop = threading.Event()

        def renew() -> None:
            while not stop.wait(self.ttl / 3):
                try:
                    self._renewed = 0.0
                    self.keep_alive()
                except Exception:  # noqa: BLE001 - the task's own reads report a real failure
                    return

        thread = threading.Thread(target=renew, name="lance-read-lease", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()


def lease_settings(options: Any) -> float | None:
    """The lease ttl the options ask for (seconds), or None with ``lease=false``."""
    if not get_bool(options, "lease", True):
        return None
    hit = first(options, "lease_ttl")
    if hit is None:
        return DEFAULT_READ_LEASE_TTL
    raw = hit[1]
    try:
        ttl = float(raw)
    except ValueError:
        raise InvalidOptionError(f"option lease_ttl must be a number of seconds, got {raw!r}") from None
    if not ttl > 0:
        raise InvalidOptionError(f"option lease_ttl must be positive, got {raw!r}")
    return ttl
