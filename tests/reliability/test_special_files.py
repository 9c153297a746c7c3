"""Special files where dataset files belong: refused at once, never waited on.

A named pipe (FIFO) where the next manifest, a data file or a deletion file would be makes
``open(2)`` wait for a writer forever; a socket cannot be opened at all; a directory reads as
nothing.  Each is a CorruptFileError naming the path, raised within a few seconds: every test
runs under a SIGALRM deadline, so a regression fails instead of hanging the suite.
"""

import glob
import os
import signal
import socket
import time
from contextlib import contextmanager

import pyarrow.compute as pc
import pytest
from datagen import simple_table
from templates import template_copy

import lance_ops.format as lf
from lance_ops.format.errors import CorruptFileError
from lance_ops.format.io.object_store import ObjectStore, open_regular

V2 = "{:020d}.manifest"
LIMIT = 10.0  # seconds; refusing takes milliseconds


def manifest_file(uri: str, version: int) -> str:
    return os.path.join(uri, "_versions", V2.format(2**64 - 1 - version))


@contextmanager
def bounded(limit: float = LIMIT):
    """Fail (not hang) when the block takes longer than ``limit``: SIGALRM interrupts a blocked
    ``open(2)`` and its handler raises, so the open is not retried."""

    def expire(signum, frame):
        raise TimeoutError(f"blocked for more than {limit} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, limit)
    t0 = time.monotonic()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert time.monotonic() - t0 < limit


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """v1: 1010 rows in fragments of 1000 and 10; v2: 10 rows of fragment 0 deleted (.arrow)."""
    path = str(tmp_path_factory.mktemp("special") / "ds")
    lf.write_dataset(simple_table(0, 1010), path, max_rows_per_file=1000)
    lf.dataset(path).delete(pc.field("id") < 10)
    return path


uri = template_copy("uri")


def _fifo(path: str) -> None:
    if os.path.exists(path):
        os.unlink(path)
    os.mkfifo(path)


def _socket(path: str) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    return s


def _refused(path: str, call) -> CorruptFileError:
    with bounded(), pytest.raises(CorruptFileError) as err:
        call()
    assert err.value.path == path and "not a regular file" in str(err.value)
    return err.value


def test_fifo_as_the_next_manifest(uri):
    path = manifest_file(uri, 3)
    _fifo(path)
    e = _refused(path, lambda: lf.dataset(uri))
    assert "named pipe" in str(e)
    with bounded():  # an older version does not read the pipe
        assert lf.dataset(uri, version=2).count_rows() == 1000


def test_fifo_as_the_latest_manifest(uri):
    path = manifest_file(uri, 2)
    _fifo(path)
    _refused(path, lambda: lf.dataset(uri))


def test_directory_and_socket_as_manifests(uri, tmp_path):
    path = manifest_file(uri, 3)
    os.mkdir(path)
    assert "a directory" in str(_refused(path, lambda: lf.dataset(uri)))
    os.rmdir(path)
    short = str(tmp_path / "s")  # AF_UNIX paths are limited to ~108 bytes: bind short, link long
    sock = _socket(short)
    try:
        os.link(short, path)
        assert "a socket" in str(_refused(path, lambda: lf.dataset(uri)))
    finally:
        sock.close()


@pytest.mark.parametrize("which", ["first", "second"])
def test_fifo_as_a_data_file(uri, which):
    files = sorted(glob.glob(os.path.join(uri, "data", "*.lance")), key=os.path.getsize)
    path = files[-1] if which == "first" else files[0]  # fragment 0 is the big one
    with bounded():
        ds = lf.dataset(uri)
    _fifo(path)
    _refused(path, lambda: ds.to_table())
    _refused(path, lambda: lf.dataset(uri).to_table())


def test_fifo_as_a_deletion_file(uri):
    (path,) = glob.glob(os.path.join(uri, "_deletions", "*"))
    _fifo(path)
    _refused(path, lambda: lf.dataset(uri).to_table())
    with bounded():  # counting needs only the manifest (the deleted-row count is there)
        assert lf.dataset(uri).count_rows() == 1000


def test_store_reads_refuse_special_files(tmp_path):
    store = ObjectStore(str(tmp_path))
    _fifo(str(tmp_path / "p"))
    os.mkdir(tmp_path / "d")
    for rel in ("p", "d"):
        path = str(tmp_path / rel)
        _refused(path, lambda rel=rel: store.read(rel))
        _refused(path, lambda rel=rel: store.read_range(rel, 0, 10))
        _refused(path, lambda rel=rel: store.read_ranges(rel, [(0, 1)]))
        _refused(path, lambda path=path: open_regular(path))
    store.put("f", b"abc")
    with bounded():
        assert store.read("f") == b"abc" and store.read_range("f", 1, 5) == b"bc"
        assert store.read_ranges("f", [(0, 1), (2, 1), (3, 4)]) == [b"a", b"c", b""]
