"""Object storage for datasets: an fsspec adapter with range reads and atomic create.

Local paths, ``file:`` URIs (``file:/abs``, ``file:///abs``, ``file://localhost/abs``),
``memory://`` and ``gs://`` (gcsfs) are supported (:func:`split_uri`: the one URI rule);
anything else is an :class:`InvalidURIError`.  Commits rely on
:meth:`ObjectStore.put_if_absent`, which is atomic on every backend: local = write a temp file
then ``os.link`` (EEXIST = lost race); GCS = an upload with ``ifGenerationMatch=0`` (HTTP 412 =
lost race, surfaced by gcsfs as ``FileExistsError``); memory = a locked check-and-set.
Never ``exists()`` then write (docs/FORMAT.md §12).  When the create itself fails (timeout,
lost connection, 5xx after gcsfs's retries) the object is read back: the writer token in its
metadata says whether our bytes landed, so the outcome is never left unknown unless the
read-back fails too (:class:`ConditionalPutError`).  Every storage failure is an
:class:`ObjectStoreError` naming the path, whatever the transport raised.
"""

import os
import posixpath
import re
import shutil
import stat
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, BinaryIO
from urllib.parse import unquote

import fsspec
import fsspec.asyn
import fsspec.spec

from lance_ops.format.errors import (
    ArgumentTypeError,
    ConditionalPutError,
    CorruptFileError,
    InvalidURIError,
    LanceOpsError,
    ObjectNotFoundError,
    ObjectStoreError,
)
from lance_ops.format.io.io_stats import record_read

_MEMORY_LOCK = threading.Lock()

if "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT" not in os.environ:
    # Without it gcsfs probes a gRPC endpoint before every bucket call (60 s against emulators).
    os.environ["GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"] = "false"


#: storage option: deadline (seconds) of a conditional create, retries included
COMMIT_TIMEOUT_OPTION = "commit_timeout"
#: metadata key of the token a conditional create tags its object with (GCS)
WRITER_TOKEN_KEY = "lance-ops-writer"
#: read-back attempts after a failed conditional create, and the pause between them
READ_BACK_ATTEMPTS = 3
READ_BACK_PAUSE = 0.2


def _transport_errors() -> tuple[type[BaseException], ...]:
    """What a remote filesystem raises for a failed call besides OSError (gcsfs, aiohttp)."""
    found: list[type[BaseException]] = [OSError]
    retry = sys.modules.get("gcsfs.retry")
    if retry is not None:
        found.append(retry.HttpError)
    aiohttp = sys.modules.get("aiohttp")
    if aiohttp is not None:
        found.append(aiohttp.ClientError)
    return tuple(found)


def _describe(e: BaseException) -> str:
    """``Type: message`` of a transport error (timeouts often carry no message)."""
    text = str(e) or ("no answer in time" if isinstance(e, TimeoutError) else "no details")
    return f"{type(e).__name__}: {text}"


@contextmanager
def _storage_errors(path: str, what: str) -> Iterator[None]:
    """Turn OS and transport errors of a storage call into typed errors naming ``path``."""
    try:
        yield
    except LanceOpsError:
        raise
    except FileNotFoundError as e:
        raise ObjectNotFoundError(f"{path}: {what} failed: no such object") from e
    except _transport_errors() as e:
        raise ObjectStoreError(f"{path}: {what} failed: {_describe(e)}") from e


@contextmanager
def _upload_errors(path: str, what: str) -> Iterator[None]:
    """Every failure of an upload as an :class:`ObjectStoreError` naming ``path``.

    Broader than :func:`_storage_errors`: only the filesystem's code runs inside, and gcsfs
    surfaces a lost resumable session as ``FileNotFoundError`` (a 404 on the session URL, not a
    missing object), a short write as ``AssertionError``/``ValueError``.  Not an
    :class:`ObjectNotFoundError`: callers that treat "not found" as "absent" must not swallow it.
    """
    try:
        yield
    except LanceOpsError:
        raise
    except Exception as e:  # noqa: BLE001 - typed below, the cause chained
        raise ObjectStoreError(f"{path}: {what} failed: {_describe(e)}") from e


def _walk_local(path: str, prefix: str) -> Iterator[tuple[str, int, float]]:
    """``(prefix + relative path, size, mtime)`` of the files below ``path`` (one ``scandir`` and
    one ``stat`` per entry; entries that vanish meanwhile are skipped)."""
    try:
        entries = list(os.scandir(path))
    except (FileNotFoundError, NotADirectoryError):
        return
    for e in entries:
        try:
            if e.is_dir():  # as os.walk: a link to a directory is not followed
                if not e.is_symlink():
                    yield from _walk_local(e.path, prefix + e.name + os.sep)
                continue
            st = e.stat()
        except FileNotFoundError:
            continue
        yield prefix + e.name, st.st_size, st.st_mtime


class UploadStream:
    """The write stream of a new object (:meth:`ObjectStore.open_output`).

    gcsfs uploads while it is written to (a resumable upload, once past its block size) and on
    close (a one-shot upload, or the last chunk): a failure in any of them is an
    :class:`ObjectStoreError` naming the object.  After a failure, or when the ``with`` block
    raises, closing abandons the object instead of committing a partial one: the resumable
    session is cancelled, a local file removed.
    """

    def __init__(self, f: BinaryIO, path: str, *, local: bool) -> None:
        self._f = f
        self.path = path
        self._local = local
        self._failed = False

    def write(self, data: Any) -> int:
        try:
            return self._f.write(data)
        except BaseException:
            self._failed = True
            with _upload_errors(self.path, "upload (write)"):
                raise

    def flush(self) -> None:
        try:
            self._f.flush()
        except BaseException:
            self._failed = True
            with _upload_errors(self.path, "upload (flush)"):
                raise

    def tell(self) -> int:
        return self._f.tell()

    def writable(self) -> bool:
        return True

    @property
    def closed(self) -> bool:
        return bool(self._f.closed)

    def close(self) -> None:
        """Finish the upload (the object exists after it), or abandon it after a failure."""
        if self._failed:
            self.abandon()
            return
        try:
            self._f.close()
        except BaseException:
            self._failed = True
            self.abandon()
            with _upload_errors(self.path, "upload (close)"):
                raise

    def abandon(self) -> None:
        """Drop the object: nothing is committed, a partial local file is removed (best effort)."""
        self._failed = True
        f: Any = self._f
        try:
            if self._local:
                f.close()
                os.unlink(self.path)
            elif not f.closed:
                discard = getattr(f, "discard", None)
                if discard is not None:
                    discard()  # gcsfs: DELETE the resumable session
                if isinstance(f, fsspec.spec.AbstractBufferedFile):
                    f.closed = True  # never flushed: no object (close or __del__ would upload it)
                else:
                    f.close()
        except Exception:  # noqa: BLE001 - the failure that got us here is what the caller sees
            pass

    def __enter__(self) -> "UploadStream":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None:
            self.abandon()
        else:
            self.close()


#: URI schemes a dataset may live under (plus plain local paths)
SUPPORTED_SCHEMES = ("file", "memory", "gs", "gcs")  # gcs: gcsfs's alias of gs
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):(.*)$", re.DOTALL)


def split_uri(uri: str | os.PathLike[str]) -> tuple[str, str]:
    """``(protocol, path)`` of a dataset URI: the one rule for every URI lance_ops accepts.

    - a local path (``/abs``, ``rel/dir``): ``("file", absolute path)``, relative to the current
      directory *of this process* (jobs resolve once on the driver, :func:`resolve_uri`);
    - ``file:/abs`` (Spark's and Hadoop's form), ``file:///abs``, ``file://localhost/abs``, and
      ``file:rel`` (relative): the same, with %-escapes decoded as in any URI;
    - ``memory://name``: ``("memory", "/name")``;
    - ``gs://bucket/path``: ``("gs", "bucket/path")``.

    Raises:
        InvalidURIError: any other scheme (``s3://``, ``hdfs://``, ``foo:bar``), a ``file:`` URI
            naming a host other than ``localhost``, an empty URI, or a ``gs://`` URI without bucket.
    """
    raw = os.fspath(uri) if isinstance(uri, os.PathLike) else uri
    if not isinstance(raw, str):
        raise ArgumentTypeError(f"uri must be a string path or URI (or os.PathLike), got {type(uri).__name__} {uri!r}")
    if not raw.strip():
        raise InvalidURIError(f"dataset URI {raw!r} is empty")
    m = _SCHEME.match(raw)
    if m is None:  # ``~`` / ``~user`` expanded as pylance does (not a literal ``./~`` directory)
        return "file", os.path.abspath(os.path.expanduser(raw))
    scheme, rest = m.group(1).lower(), m.group(2)
    if scheme == "file":
        path = rest
        if rest.startswith("//"):
            host, slash, tail = rest[2:].partition("/")
            if host.lower() not in ("", "localhost"):
                raise InvalidURIError(
                    f"dataset URI {raw!r} names host {host!r}: file: URIs must be local "
                    "(file:/path, file:///path or file://localhost/path)"
                )
            path = slash + tail
        path = unquote(path)
        if not path:
            raise InvalidURIError(f"dataset URI {raw!r} has no path")
        return "file", os.path.abspath(path)
    if scheme in ("memory", "gs", "gcs"):
        if not rest.startswith("//"):
            raise InvalidURIError(f"dataset URI {raw!r}: expected {scheme}://...")
        if scheme == "memory":
            return "memory", "/" + rest[2:].strip("/")
        path = rest[2:].rstrip("/")
        if not path or path.startswith("/"):
            raise InvalidURIError(f"dataset URI {raw!r} has no bucket (expected gs://bucket/path)")
        return scheme, path
    raise InvalidURIError(
        f"dataset URI {raw!r}: unsupported scheme {scheme!r}; lance_ops reads local paths and "
        "file:, memory:// and gs:// URIs"
    )


def resolve_uri(uri: str | os.PathLike[str]) -> str:
    """The canonical, absolute form of a dataset URI (see :func:`split_uri`), to hand to other
    processes: local datasets become an absolute path, so a relative path is resolved once, here,
    and not again in each executor's working directory.  Idempotent.

    Raises:
        InvalidURIError: as :func:`split_uri`.
    """
    protocol, path = split_uri(uri)
    if protocol == "file":
        return path
    if protocol == "memory":
        return "memory://" + path.lstrip("/")
    return f"{protocol}://{path}"


#: write buffer of local outputs: a file writer emits many small pieces (chunk headers, parts,
#: padding); with Python's 8 KiB default a 9,000-row 2.2 data file took ~22 write calls, with
#: this one (larger writes go straight through) one or two
_LOCAL_WRITE_BUFFER = 1 << 20


def _open_new_local(path: str) -> BinaryIO:
    """``open(path, "wb")``, creating its directory when missing (one syscall when it exists)."""
    try:
        return open(path, "wb", buffering=_LOCAL_WRITE_BUFFER)
    except FileNotFoundError:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return open(path, "wb", buffering=_LOCAL_WRITE_BUFFER)


_FILE_KINDS = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
               (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a directory"))


def open_regular(path: str) -> int:
    """A read-only descriptor of the local regular file ``path`` (close it with ``os.close``).

    A FIFO, socket, device or directory where a dataset file is expected is refused at once:
    ``O_NONBLOCK`` keeps ``open(2)`` of a FIFO from waiting for a writer (forever), and ``fstat``
    checks what was opened, so nothing can be swapped in between a check and the open.

    Raises:
        FileNotFoundError: no such file.
        CorruptFileError: ``path`` is not a regular file (names it and what it is).
    """
    _check_regular(path, os.stat(path).st_mode)  # a socket cannot be opened at all (ENXIO)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    try:
        _check_regular(path, os.fstat(fd).st_mode)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _check_regular(path: str, mode: int) -> None:
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _FILE_KINDS if test(mode)), f"file type {stat.S_IFMT(mode):o}")
        raise CorruptFileError(path, f"is {kind}, not a regular file; refusing to read it")


def _pread_all(fd: int, start: int, length: int) -> bytes:
    """``length`` bytes from ``start`` (fewer at the end of the file)."""
    if length <= 0:
        return b""
    out = os.pread(fd, length, start)
    while out and len(out) < length:
        more = os.pread(fd, length - len(out), start + len(out))
        if not more:
            break
        out += more
    return out


def _read_local(path: str, start: int = 0, length: int | None = None) -> bytes:
    """``length`` bytes (all when None) from ``start`` of a local regular file."""
    fd = open_regular(path)
    try:
        return _pread_all(fd, start, os.fstat(fd).st_size - start if length is None else length)
    finally:
        os.close(fd)


class ObjectStore:
    """Storage rooted at a dataset URI; every method takes paths relative to the root.

    Args:
        uri: dataset root (local path, ``file:`` URI, ``memory://`` or ``gs://``; :func:`split_uri`).
        storage_options: passed to the fsspec filesystem (e.g. gcsfs ``token``, ``endpoint_url``),
            except ``commit_timeout``: seconds a conditional create (a commit) may take, retries
            included, before its outcome is settled by reading the object back (default: the
            filesystem's own retry budget, about 30 s for gcsfs).
    """

    def __init__(self, uri: str, storage_options: Mapping[str, Any] | None = None) -> None:
        if storage_options is not None and not isinstance(storage_options, Mapping):
            raise ArgumentTypeError(
                f"storage_options must be a mapping, got {type(storage_options).__name__} {storage_options!r}"
            )
        self.protocol, self.root = split_uri(uri)
        self.uri = os.fspath(uri)
        self.storage_options = dict(storage_options or {})
        self.is_local = self.protocol == "file"
        opts = dict(self.storage_options)
        timeout = opts.pop(COMMIT_TIMEOUT_OPTION, None)
        self.commit_timeout = float(timeout) if timeout is not None else None
        if self.protocol not in ("file", "memory"):
            # Another process may commit at any time: never answer exists()/size() from a stale listing.
            opts.setdefault("use_listings_cache", False)
        self.fs = fsspec.filesystem(self.protocol, **opts)

    # ------------------------------------------------------------------ paths
    def full_path(self, rel: str) -> str:
        """Absolute backend path of ``rel``; refuses paths that would leave the dataset root."""
        if rel.startswith("/") or "\\" in rel:
            raise ObjectStoreError(f"{self.uri}: path {rel!r} is absolute; dataset paths must be relative")
        norm = posixpath.normpath(rel)
        if norm == ".." or norm.startswith("../"):
            raise ObjectStoreError(f"{self.uri}: path {rel!r} points outside the dataset root")
        return posixpath.join(self.root, norm) if norm != "." else self.root

    # ------------------------------------------------------------------ reads
    def read(self, rel: str) -> bytes:
        """Whole object.

        Raises:
            ObjectNotFoundError: no such object (also a FileNotFoundError).
            ObjectStoreError: any other storage failure.
        """
        path = self.full_path(rel)
        with _storage_errors(path, "read"):
            data = _read_local(path) if self.is_local else self.fs.cat_file(path)  # local: a FIFO is refused
        record_read(len(data))
        return data

    def read_range(self, rel: str, start: int, length: int) -> bytes:
        """``length`` bytes from ``start`` (fewer at the end of the object)."""
        if length <= 0:
            return b""
        path = self.full_path(rel)
        with _storage_errors(path, f"read of {length} bytes at {start}"):
            if self.is_local:
                data = _read_local(path, start, length)
            else:
                data = self.fs.cat_file(path, start=start, end=start + length)
        record_read(len(data))
        return data

    def read_ranges(self, rel: str, ranges: list[tuple[int, int]]) -> list[bytes]:
        """Several ``(start, length)`` ranges of one object (one open for local files)."""
        path = self.full_path(rel)
        record_read(sum(n for _, n in ranges), len(ranges))
        with _storage_errors(path, f"read of {len(ranges)} ranges"):
            if self.is_local:
                fd = open_regular(path)
                try:
                    return [_pread_all(fd, start, length) for start, length in ranges]
                finally:
                    os.close(fd)
            if not ranges:
                return []
            return list(
                self.fs.cat_ranges(
                    [path] * len(ranges), [s for s, _ in ranges], [s + n for s, n in ranges], on_error="raise"
                )
            )

    def size(self, rel: str) -> int:
        path = self.full_path(rel)
        with _storage_errors(path, "size"):
            if self.is_local:
                return os.stat(path).st_size
            return int(self.fs.size(path))

    def exists(self, rel: str) -> bool:
        path = self.full_path(rel)
        with _storage_errors(path, "existence check"):
            return bool(self.fs.exists(path))

    def list_dir(self, rel: str) -> list[str]:
        """File names (not paths) directly under ``rel``; empty if the directory is absent."""
        path = self.full_path(rel)
        if self.is_local:
            try:
                return [e.name for e in os.scandir(path) if e.is_file()]
            except FileNotFoundError:
                return []
        try:
            with _storage_errors(path, "listing"):
                if self.protocol not in ("memory",):
                    self.fs.invalidate_cache(path)
                entries = self.fs.ls(path, detail=True)
        except FileNotFoundError:
            return []
        return [posixpath.basename(e["name"].rstrip("/")) for e in entries if e.get("type") == "file"]

    def list_files(self, rel: str) -> Iterator[tuple[str, int, float | None]]:
        """``(relative path, size, mtime or None)`` of every file below ``rel``, recursively.

        Files that vanish while the listing runs (another cleanup, a committer's temp file) are
        skipped: the listing describes a moment, and callers must tolerate a listed file being
        gone by the time they use it.
        """
        base = self.full_path(rel)
        if self.is_local:
            prefix = os.path.relpath(base, self.root)
            yield from _walk_local(base, "" if prefix == "." else prefix + os.sep)
            return
        try:
            with _storage_errors(base, "listing"):
                if self.protocol != "memory":
                    self.fs.invalidate_cache(base)
                found = self.fs.find(base, detail=True)
        except FileNotFoundError:
            return
        for full, info in found.items():
            mtime = info.get("mtime") or info.get("updated") or info.get("created")
            if hasattr(mtime, "timestamp"):
                mtime = mtime.timestamp()
            elif isinstance(mtime, str):
                from datetime import datetime

                mtime = datetime.fromisoformat(mtime.replace("Z", "+00:00")).timestamp()
            yield posixpath.relpath(full, self.root), int(info.get("size") or 0), mtime

    # ----------------------------------------------------------------- writes
    def open_output(self, rel: str) -> BinaryIO:
        """A writable binary stream for a new object (data files: unique names, no race).

        An :class:`UploadStream`: every upload failure (simple or resumable) is an
        :class:`ObjectStoreError` naming the object, and a failed upload leaves no object.
        """
        path = self.full_path(rel)
        with _upload_errors(path, "open for writing"):
            f = _open_new_local(path) if self.is_local else self.fs.open(path, "wb")
        return UploadStream(f, path, local=self.is_local)  # type: ignore[return-value]

    def put(self, rel: str, data: bytes, *, atomic: bool = True) -> None:
        """Write a whole object (overwrites).

        Local writes go through a temp file + rename unless ``atomic=False``, which is for new,
        uniquely named files nothing references until a later commit (deletion, .txn files).
        """
        path = self.full_path(rel)
        with _upload_errors(path, "write"):
            if self.is_local:
                target = path if not atomic else f"{path}.tmp-{uuid.uuid4().hex}"
                with _open_new_local(target) as f:
                    f.write(data)
                if atomic:
                    os.replace(target, path)
                return
            self.fs.pipe_file(path, data)

    def put_if_absent(self, rel: str, data: bytes) -> bool:
        """Atomically create ``rel`` with ``data``; return False if it already existed.

        Readers never see a partial object: local writes a whole temp file and links it into
        place (``link(2)`` fails with EEXIST if the name is taken); GCS relies on the
        ``ifGenerationMatch=0`` precondition.  When the create fails in transport (timeout,
        lost connection, 5xx after retries) the object is read back: ours (our writer token)
        -> True, another writer's -> False.

        Durability (local): as pylance 14 (``strace`` of its commits: a temp file, ``linkat``,
        no ``fsync`` of manifests, ``.txn``, data or deletion files), nothing is fsynced: the
        create is atomic for every reader and survives a crash of the process; after a crash
        of the machine the OS may lose the latest commits, as it may lose pylance's.

        Raises:
            ConditionalPutError: the read-back found no object (``applied=False``: nothing was
                created, a retry is safe) or failed itself (``applied=None``: unknown).
        """
        path = self.full_path(rel)
        if self.is_local:
            return self._put_if_absent_local(path, data)
        if self.protocol == "memory":
            with _MEMORY_LOCK:
                if self.fs.exists(path):
                    return False
                self.fs.pipe_file(path, data)
                return True
        # A retried create whose first answer was lost gets 412 although our bytes landed: tag the
        # object with a token and, on a 412 or any failure, check whose object is there.
        token = uuid.uuid4().hex
        try:
            if self.commit_timeout is not None and hasattr(self.fs, "_pipe_file"):
                # one deadline for the create and every retry of it (gcsfs alone retries ~30 s)
                fsspec.asyn.sync(self.fs.loop, self.fs._pipe_file, path, data, mode="create",
                                 metadata={WRITER_TOKEN_KEY: token}, timeout=self.commit_timeout)
            else:
                self.fs.pipe_file(path, data, mode="create", metadata={WRITER_TOKEN_KEY: token})
        except FileExistsError:
            return self._read_back(path, token, None) is True
        except Exception as e:  # noqa: BLE001 - timeout, disconnect, 5xx: settle it by reading back
            if isinstance(e, LanceOpsError) or not isinstance(e, (*_transport_errors(), TimeoutError)):
                raise
            owner = self._read_back(path, token, e)
            if owner is None:
                raise ConditionalPutError(
                    f"{path}: create failed ({_describe(e)}) and the object is absent: not created",
                    path=path, applied=False,
                ) from e
            return owner
        finally:
            try:
                self.fs.invalidate_cache(posixpath.dirname(path))
            except Exception:  # pragma: no cover - cache invalidation is best effort
                pass
        return True

    def _read_back(self, path: str, token: str, cause: BaseException | None) -> bool | None:
        """Whose object is at ``path``: True ours, False another writer's, None absent.

        Raises:
            ConditionalPutError: ``applied=None`` when every read-back attempt failed.
        """
        last: BaseException | None = None
        for attempt in range(READ_BACK_ATTEMPTS):
            if attempt:
                time.sleep(READ_BACK_PAUSE * attempt)
            try:
                self.fs.invalidate_cache(path)
                info = self.fs.info(path)
            except FileNotFoundError:
                return None
            except Exception as e:  # noqa: BLE001 - any failure: try again, then give up typed
                if not isinstance(e, (*_transport_errors(), TimeoutError)):
                    raise
                last = e
                continue
            return (info.get("metadata") or {}).get(WRITER_TOKEN_KEY) == token
        what = f"create failed ({_describe(cause)})" if cause is not None else "create lost a race"
        assert last is not None
        raise ConditionalPutError(
            f"{path}: {what} and reading the object back failed too ({_describe(last)}): "
            "it may or may not exist", path=path, applied=None,
        ) from (cause or last)

    def _put_if_absent_local(self, path: str, data: bytes) -> bool:
        with _storage_errors(path, "create"):
            # the temp name must not end in "manifest": listings ignore it
            tmp = f"{path}#{uuid.uuid4().hex}.tmp"
            with _open_new_local(tmp) as f:  # no fsync, as pylance (see the docstring)
                f.write(data)
            try:
                os.link(tmp, path)
                return True
            except FileExistsError:
                return False
            except OSError as e:
                # link(2) may report an error after the entry was made (NFS, EIO): read back
                try:
                    landed = os.path.samefile(tmp, path)
                except FileNotFoundError:
                    landed = False
                except OSError:
                    raise ConditionalPutError(
                        f"{path}: create failed ({e}) and checking it failed too", path=path, applied=None
                    ) from e
                if landed:
                    return True
                raise ConditionalPutError(f"{path}: create failed ({e}): not created", path=path, applied=False) from e
            finally:
                try:
                    os.unlink(tmp)
                except FileNotFoundError:
                    pass

    def clear_memory(self) -> None:
        """``memory://`` only: remove every object under the root, so a dataset created there
        starts from an empty store as pylance's does (each of its in-memory datasets has its own)."""
        if self.protocol != "memory":
            raise ObjectStoreError(f"{self.uri}: clear_memory is for memory:// stores only")
        with _MEMORY_LOCK:
            if self.fs.exists(self.root):
                self.fs.rm(self.root, recursive=True)

    def remove_root(self) -> None:
        """Remove everything under the store's root, the root included (``LanceDataset.drop``)."""
        with _storage_errors(self.root, "remove"):
            if self.is_local:
                shutil.rmtree(self.root)
            else:
                self.fs.rm(self.root, recursive=True)

    def delete(self, rel: str) -> None:
        """Remove an object; a missing one is not an error."""
        path = self.full_path(rel)
        try:
            with _storage_errors(path, "delete"):
                if self.is_local:
                    os.unlink(path)
                else:
                    self.fs.rm_file(path)
        except FileNotFoundError:
            pass

    def copy(self, src_rel: str, dst_rel: str) -> None:
        src = self.full_path(src_rel)
        with _storage_errors(src, f"copy to {dst_rel}"):
            self.fs.copy(src, self.full_path(dst_rel))
