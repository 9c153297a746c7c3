"""pylance's ``batch_udf(checkpoint_file=...)``: the results of a UDF's batches kept in a SQLite
file while ``add_columns`` runs, so that a run that failed part-way and is started again skips the
batches it already computed; the file is removed once ``add_columns`` succeeds.

A batch's result is keyed by a digest of the input batch (its Arrow IPC bytes): the same rows of
the same read columns find their result whatever order the fragments are read in.
"""

import hashlib
import os
import sqlite3
import threading
from collections.abc import Callable
from typing import Any

import pyarrow as pa


def _digest(t: pa.Table) -> str:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, t.schema) as w:
        w.write_table(t)
    return hashlib.sha256(sink.getvalue()).hexdigest()


def _ipc(t: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, t.schema) as w:
        w.write_table(t)
    return sink.getvalue().to_pybytes()


class UdfCheckpoint:
    """The SQLite file at ``path`` of one UDF's computed batches."""

    def __init__(self, path: Any) -> None:
        self.path = os.fspath(path)
        # add_columns computes fragments on worker threads: one connection, used under a lock
        self._db = sqlite3.connect(self.path, check_same_thread=False)
        self._lock = threading.Lock()
        self._db.execute("CREATE TABLE IF NOT EXISTS batches (key TEXT PRIMARY KEY, data BLOB NOT NULL)")
        self._db.commit()

    def cached(self, compute: Callable[[pa.Table], pa.Table]) -> Callable[[pa.Table], pa.Table]:
        """``compute`` that reads a batch's result from the file when it is there, else computes
        and stores it (committed at once, so a later failure keeps it)."""

        def run(t: pa.Table) -> pa.Table:
            key = _digest(t)
            with self._lock:
                row = self._db.execute("SELECT data FROM batches WHERE key = ?", (key,)).fetchone()
            if row is not None:
                return pa.ipc.open_stream(row[0]).read_all()
            out = compute(t)
            data = _ipc(out)
            with self._lock:
                self._db.execute("INSERT OR REPLACE INTO batches VALUES (?, ?)", (key, data))
                self._db.commit()
            return out

        return run

    def close(self, *, remove: bool) -> None:
        """Close the file; ``remove`` it (the run succeeded)."""
        self._db.close()
        if remove:
            os.remove(self.path)
