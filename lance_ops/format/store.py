"""Object storage for datasets: an fsspec adapter with range reads and atomic create.

Local paths, ``file:`` URIs (``file:/abs``, ``file:///abs``, ``file://localhost/abs``),
``memory://`` and ``gs://`` (gcsfs) are supported (:func:`split_uri`: the one URI rule);
anything else is an :class:`InvalidURIError`.  Commits rely on
:meth:`ObjectStore.put_if_absent`, which is atomic on every backend: local = write a temp file
then ``os.link`` (EEXIST = lost race); GCS = an upload with ``ifGenerationMatch=0`` (HTTP 412 =
lost race, surfaced by gcsfs as ``FileExistsError``); memory = a locked check-and-set.
Never ``exists()`` then write (FORMAT_NOTES.md §12).
"""

import os
import posixpath
import re
import threading
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, BinaryIO
from urllib.parse import unquote

import fsspec

from .errors import InvalidURIError, LanceOpsError

_MEMORY_LOCK = threading.Lock()

if "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT" not in os.environ:
    # Without it gcsfs probes a gRPC endpoint before every bucket call (60 s against emulators).
    os.environ["GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"] = "false"


class ObjectStoreError(LanceOpsError):
    """A storage call failed (names the path and the operation)."""


class ObjectNotFoundError(ObjectStoreError, FileNotFoundError):
    """The object does not exist.  Also a ``FileNotFoundError``, so callers may catch either."""


@contextmanager
def _storage_errors(path: str, what: str) -> Iterator[None]:
    """Turn OS errors of a storage call into typed errors naming ``path``."""
    try:
        yield
    except ObjectStoreError:
        raise
    except FileNotFoundError as e:
        raise ObjectNotFoundError(f"{path}: {what} failed: no such object") from e
    except OSError as e:
        raise ObjectStoreError(f"{path}: {what} failed: {e}") from e


#: URI schemes a dataset may live under (plus plain local paths)
SUPPORTED_SCHEMES = ("file", "memory", "gs")
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
        raise TypeError(f"a dataset URI must be a str or os.PathLike, got {type(uri).__name__}")
    if not raw.strip():
        raise InvalidURIError(f"dataset URI {raw!r} is empty")
    m = _SCHEME.match(raw)
    if m is None:
        return "file", os.path.abspath(raw)
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
    if scheme in ("memory", "gs"):
        if not rest.startswith("//"):
            raise InvalidURIError(f"dataset URI {raw!r}: expected {scheme}://...")
        if scheme == "memory":
            return "memory", "/" + rest[2:].strip("/")
        path = rest[2:].rstrip("/")
        if not path or path.startswith("/"):
            raise InvalidURIError(f"dataset URI {raw!r} has no bucket (expected gs://bucket/path)")
        return "gs", path
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


class ObjectStore:
    """Storage rooted at a dataset URI; every method takes paths relative to the root.

    Args:
        uri: dataset root (local path, ``file:`` URI, ``memory://`` or ``gs://``; :func:`split_uri`).
        storage_options: passed to the fsspec filesystem (e.g. gcsfs ``token``, ``endpoint_url``).
    """

    def __init__(self, uri: str, storage_options: Mapping[str, Any] | None = None) -> None:
        self.protocol, self.root = split_uri(uri)
        self.uri = uri if isinstance(uri, str) else os.fspath(uri)
        self.storage_options = dict(storage_options or {})
        self.is_local = self.protocol == "file"
        opts = dict(self.storage_options)
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
            return self.fs.cat_file(path)

    def read_range(self, rel: str, start: int, length: int) -> bytes:
        """``length`` bytes from ``start`` (fewer at the end of the object)."""
        if length <= 0:
            return b""
        path = self.full_path(rel)
        with _storage_errors(path, f"read of {length} bytes at {start}"):
            if self.is_local:
                with open(path, "rb") as f:
                    f.seek(start)
                    return f.read(length)
            return self.fs.cat_file(path, start=start, end=start + length)

    def read_ranges(self, rel: str, ranges: list[tuple[int, int]]) -> list[bytes]:
        """Several ``(start, length)`` ranges of one object (one open for local files)."""
        path = self.full_path(rel)
        with _storage_errors(path, f"read of {len(ranges)} ranges"):
            if self.is_local:
                out = []
                with open(path, "rb") as f:
                    for start, length in ranges:
                        f.seek(start)
                        out.append(f.read(length) if length > 0 else b"")
                return out
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
        return bool(self.fs.exists(self.full_path(rel)))

    def list_dir(self, rel: str) -> list[str]:
        """File names (not paths) directly under ``rel``; empty if the directory is absent."""
        path = self.full_path(rel)
        if self.is_local:
            try:
                return [e.name for e in os.scandir(path) if e.is_file()]
            except FileNotFoundError:
                return []
        try:
            if self.protocol not in ("memory",):
                self.fs.invalidate_cache(path)
            entries = self.fs.ls(path, detail=True)
        except FileNotFoundError:
            return []
        return [posixpath.basename(e["name"].rstrip("/")) for e in entries if e.get("type") == "file"]

    def list_files(self, rel: str) -> Iterator[tuple[str, int, float | None]]:
        """``(relative path, size, mtime or None)`` of every file below ``rel``, recursively."""
        base = self.full_path(rel)
        if self.is_local:
            for dirpath, _dirs, files in os.walk(base):
                for name in files:
                    full = os.path.join(dirpath, name)
                    st = os.stat(full)
                    yield os.path.relpath(full, self.root), st.st_size, st.st_mtime
            return
        if self.protocol != "memory":
            self.fs.invalidate_cache(base)
        try:
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
        """A writable binary stream for a new object (data files: unique names, no race)."""
        path = self.full_path(rel)
        if self.is_local:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            return open(path, "wb")
        return self.fs.open(path, "wb")

    def put(self, rel: str, data: bytes, *, atomic: bool = True) -> None:
        """Write a whole object (overwrites).

        Local writes go through a temp file + rename unless ``atomic=False``, which is for new,
        uniquely named files nothing references until a later commit (deletion, .txn files).
        """
        path = self.full_path(rel)
        if self.is_local and not atomic:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(data)
            return
        if self.is_local:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = f"{path}.tmp-{uuid.uuid4().hex}"
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
            return
        self.fs.pipe_file(path, data)

    def put_if_absent(self, rel: str, data: bytes) -> bool:
        """Atomically create ``rel`` with ``data``; return False if it already existed.

        Readers never see a partial object: local writes a temp file, fsyncs it and links it
        into place; GCS relies on the ``ifGenerationMatch=0`` precondition.
        """
        path = self.full_path(rel)
        if self.is_local:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            # the temp name must not end in "manifest": listings ignore it
            tmp = f"{path}#{uuid.uuid4().hex}.tmp"
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            try:
                os.link(tmp, path)
                return True
            except FileExistsError:
                return False
            finally:
                os.unlink(tmp)
        if self.protocol == "memory":
            with _MEMORY_LOCK:
                if self.fs.exists(path):
                    return False
                self.fs.pipe_file(path, data)
                return True
        # A retried create whose first answer was lost gets 412 although our bytes landed: tag the
        # object with a token and, on a 412, check whose object is there.
        token = uuid.uuid4().hex
        try:
            self.fs.pipe_file(path, data, mode="create", metadata={"lance-ops-writer": token})
        except FileExistsError:
            try:
                self.fs.invalidate_cache(path)
                info = self.fs.info(path)
            except FileNotFoundError:
                return False
            return (info.get("metadata") or {}).get("lance-ops-writer") == token
        finally:
            try:
                self.fs.invalidate_cache(posixpath.dirname(path))
            except Exception:  # pragma: no cover - cache invalidation is best effort
                pass
        return True

    def delete(self, rel: str) -> None:
        """Remove an object; a missing one is not an error."""
        path = self.full_path(rel)
        try:
            if self.is_local:
                os.unlink(path)
            else:
                self.fs.rm_file(path)
        except FileNotFoundError:
            pass

    def copy(self, src_rel: str, dst_rel: str) -> None:
        self.fs.copy(self.full_path(src_rel), self.full_path(dst_rel))
