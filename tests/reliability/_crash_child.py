"""The body of a writer process that kills itself (SIGKILL) at a chosen point of a commit.

The child installs its hooks in its own process only: a wrapper around ObjectStore's write
methods and around ``os.link`` (the atomic step of a local manifest create).  The parent never
patches anything.  Events: ``put:<top dir>`` (whole-object writes: .txn, deletion files, the
hint), ``data_write`` (after a write into a data file: a torn file), ``data_close`` (a data
file finished), ``link:manifest`` (temp manifest -> final
name); each ``before`` or ``after``, on its ``nth`` occurrence.
"""

import os
import signal

import pyarrow.compute as pc

import lance_ops.format as lf
from lance_ops.format.io import object_store as store_mod


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def install_kill_hook(event: str, when: str, nth: int = 1) -> None:
    seen = {"n": 0}

    def hit(ev: str, phase: str) -> None:
        if ev == event and phase == when:
            seen["n"] += 1
            if seen["n"] == nth:
                _die()

    cls = store_mod.ObjectStore
    orig_put, orig_open = cls.put, cls.open_output

    def put(self, rel, data, **kwargs):  # type: ignore[no-untyped-def]
        ev = "put:" + rel.split("/", 1)[0]
        hit(ev, "before")
        orig_put(self, rel, data, **kwargs)
        hit(ev, "after")

    class _DyingSink:
        """A data file sink that dies half-way through writing (a torn file)."""

        def __init__(self, inner):  # type: ignore[no-untyped-def]
            self._inner = inner

        def write(self, b):  # type: ignore[no-untyped-def]
            n = self._inner.write(b)
            if event == "data_write":
                self._inner.flush()
                hit("data_write", "after")
            return n

        def close(self):  # type: ignore[no-untyped-def]
            self._inner.close()
            hit("data_close", "after")

        def __getattr__(self, name):  # type: ignore[no-untyped-def]
            return getattr(self._inner, name)

    def open_output(self, rel):  # type: ignore[no-untyped-def]
        return _DyingSink(orig_open(self, rel))

    orig_link = os.link

    def link(src, dst, *args, **kwargs):  # type: ignore[no-untyped-def]
        ev = "link:manifest" if str(dst).endswith(".manifest") else "link:other"
        hit(ev, "before")
        orig_link(src, dst, *args, **kwargs)
        hit(ev, "after")

    cls.put, cls.open_output = put, open_output
    os.link = link


def run(uri: str, op: str, event: str, when: str, nth: int = 1) -> None:
    """Perform ``op`` on ``uri`` with the kill hook armed (normally never returns)."""
    from datagen import simple_table

    install_kill_hook(event, when, nth)
    if op == "append":
        lf.write_dataset(simple_table(1000, 50), uri, mode="append", max_rows_per_file=20)
    elif op == "delete":
        lf.dataset(uri).delete(pc.field("id") < 5)
    elif op == "update":
        lf.dataset(uri).update({"val": "'crash'"}, where=pc.field("id").isin([12, 25]))
    elif op == "compact":
        lf.dataset(uri).compact_files(target_rows_per_fragment=1000)
    else:
        raise ValueError(op)
