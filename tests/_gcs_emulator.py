"""A gcp-storage-emulator patched to behave like GCS where ``lance_ops`` relies on it.

The stock emulator (gcp-storage-emulator 2026.7) ignores write preconditions, so a second
"create only" upload silently overwrites the first (docs/RECIPES.md §5).  Importing this module
patches the emulator's route table in memory (site-packages is never edited):

* ``ifGenerationMatch`` / ``ifGenerationNotMatch`` / ``ifMetagenerationMatch`` /
  ``ifMetagenerationNotMatch`` are enforced with **HTTP 412 conditionNotMet** on
  ``objects.insert`` (media, multipart and resumable initiation), on every resumable chunk
  (``upload_partial``, so the finalising chunk re-checks), on ``objects.delete`` and on the
  destination of ``copyTo`` / ``rewriteTo`` / ``compose`` / ``moveTo``;
  ``ifSourceGeneration[Not]Match`` is enforced on the source of ``copyTo`` / ``rewriteTo`` /
  ``moveTo``.  The emulator's HTTP server handles one request at a time, so check + write is
  atomic.
* ``POST .../o/SRC/moveTo/o/DST`` is implemented (the stock emulator answers 501, and gcsfs
  retries 501 for about 35 s before falling back to copy + delete).
* ``DELETE`` on a resumable-upload session URL cancels the session (answers 499 like GCS);
  gcsfs sends it after a failed chunk, and a 501 there would again cost 35 s of retries.
* The listen backlog is raised from 5 to 128 (racing clients otherwise wait 1 s for SYN
  retransmits) and shutdown polls every 50 ms.
* Fault injection for tests: :meth:`EmulatorHandle.drop_responses` lets a request be processed
  (the write lands) and then closes the connection without an answer, like a lost response;
  :meth:`EmulatorHandle.delay_responses` processes it and answers only after a delay (an answer
  that arrives after the client's timeout); :meth:`EmulatorHandle.fail_requests` answers with
  an HTTP error (503, ...) or hangs up *without* processing (the request never applied).

Set ``GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT=false`` before gcsfs is imported (done below): without it
gcsfs probes a gRPC endpoint before every bucket call, which costs ~60 s against the emulator.

Usage in-process::

    from _gcs_emulator import start_emulator
    emu = start_emulator()            # 127.0.0.1, free port, in memory
    emu.make_bucket("b")              # -> "gs://b"
    fs = gcsfs.GCSFileSystem(**emu.storage_options)
    emu.stop()

Standalone (for Spark workers or manual use)::

    python tests/_gcs_emulator.py --port 9023 [--bucket NAME ...]
"""

from __future__ import annotations

import os

os.environ["GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"] = "false"  # before any `import gcsfs`

import contextlib  # noqa: E402
import http.client  # noqa: E402
import http.server  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import re  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from collections import deque  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from functools import partial  # noqa: E402
from http import HTTPStatus  # noqa: E402
from typing import Any  # noqa: E402
from urllib.parse import parse_qs, quote, urlparse  # noqa: E402

from gcp_storage_emulator import server as _server  # noqa: E402
from gcp_storage_emulator import settings as _settings  # noqa: E402
from gcp_storage_emulator.exceptions import NotFound  # noqa: E402
from gcp_storage_emulator.handlers import objects as _objects  # noqa: E402
from gcp_storage_emulator.storage import RESUMABLE_DIR  # noqa: E402

__all__ = ["EmulatorHandle", "apply_patch", "race_create_worker", "remove_patch", "start_emulator"]

logger = logging.getLogger("lance_ops.tests.gcs_emulator")

DEFAULT_HOST = "127.0.0.1"

_TARGET_CONDITIONS = (
    "ifGenerationMatch",
    "ifGenerationNotMatch",
    "ifMetagenerationMatch",
    "ifMetagenerationNotMatch",
)
_SOURCE_CONDITIONS = {
    "ifSourceGenerationMatch": "ifGenerationMatch",
    "ifSourceGenerationNotMatch": "ifGenerationNotMatch",
    "ifSourceMetagenerationMatch": "ifMetagenerationMatch",
    "ifSourceMetagenerationNotMatch": "ifMetagenerationNotMatch",
}


class _Status:
    """A status for ``Response.close`` that ``http.HTTPStatus`` lacks (499)."""

    def __init__(self, value: int, phrase: str) -> None:
        self.value = value
        self.phrase = phrase


_CLIENT_CLOSED_REQUEST = _Status(499, "Client Closed Request")


# --------------------------------------------------------------------------- shared state
@dataclass
class _Fault:
    method: str
    path_regex: re.Pattern[str]
    remaining: int
    kind: str = "drop"  # drop (apply, no answer) | delay (apply, answer late) | fail (no apply)
    status: int = 0  # fail: the HTTP status answered; 0 = hang up without an answer
    seconds: float = 0.0  # delay


@dataclass
class _PatchState:
    """Lives on the emulator's server module so a second import never patches twice."""

    originals: dict[str, Any] = field(default_factory=dict)
    # upload_id -> preconditions given when the resumable session was opened
    resumable_conditions: dict[str, dict[str, int]] = field(default_factory=dict)
    faults: list[_Fault] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    requests: deque = field(default_factory=lambda: deque(maxlen=20000))
    not_implemented: list[str] = field(default_factory=list)
    precondition_failures: int = 0


def _state() -> _PatchState:
    st = getattr(_server, "_lance_ops_patch_state", None)
    if st is None:
        st = _PatchState()
        _server._lance_ops_patch_state = st
    return st


# --------------------------------------------------------------------------- preconditions
class _BadPrecondition(ValueError):
    pass


def _parse_conditions(query: dict[str, list[str]], names=_TARGET_CONDITIONS) -> dict[str, int]:
    out: dict[str, int] = {}
    for name in names:
        values = query.get(name)
        if not values:
            continue
        try:
            out[name] = int(values[0])
        except ValueError as e:
            raise _BadPrecondition(f"invalid value for {name}: {values[0]!r}") from e
    return out


def _parse_source_conditions(query: dict[str, list[str]]) -> dict[str, int]:
    raw = _parse_conditions(query, tuple(_SOURCE_CONDITIONS))
    return {_SOURCE_CONDITIONS[k]: v for k, v in raw.items()}


def _live_object(storage, bucket: str, name: str) -> dict | None:
    try:
        return storage.get_file_obj(bucket, name)
    except NotFound:
        return None


def _failed_condition(storage, bucket: str, name: str, conds: dict[str, int]) -> str | None:
    """The first precondition that does not hold on ``bucket/name``, or None.

    GCS semantics: ``ifGenerationMatch=0`` means "no live object"; any other value must equal the
    live generation.  ``ifGenerationNotMatch`` (and the metageneration forms) fail when no live
    object exists; ``ifGenerationNotMatch=0`` therefore means "a live object must exist".
    """
    if not conds:
        return None
    obj = _live_object(storage, bucket, name)
    generation = int(obj["generation"]) if obj else None
    metageneration = int(obj["metageneration"]) if obj else None
    for cond, want in conds.items():
        if cond == "ifGenerationMatch":
            ok = (obj is None) if want == 0 else (generation == want)
        elif cond == "ifGenerationNotMatch":
            ok = obj is not None and generation != want
        elif cond == "ifMetagenerationMatch":
            ok = obj is not None and metageneration == want
        elif cond == "ifMetagenerationNotMatch":
            ok = obj is not None and metageneration != want
        else:  # pragma: no cover - only known names are parsed
            continue
        if not ok:
            return f"{cond}={want} (current generation {generation}) on {bucket}/{name}"
    return None


def _drain(request) -> None:
    """Read the request body before answering without the wrapped handler.

    The server closes the connection after each answer; closing it with unread input makes the
    client see a connection reset instead of the answer.
    """
    try:
        _ = request.data  # Request.data reads and caches the body
    except Exception:  # pragma: no cover - a malformed body must not hide the answer
        pass


def _reply_412(request, response, detail: str) -> None:
    _drain(request)
    with _state().lock:
        _state().precondition_failures += 1
    message = "At least one of the pre-conditions you specified did not hold."
    response.status = HTTPStatus.PRECONDITION_FAILED
    response.json(
        {
            "error": {
                "code": 412,
                "message": message,
                "errors": [
                    {
                        "message": f"{message} ({detail})",
                        "domain": "global",
                        "reason": "conditionNotMet",
                        "locationType": "header",
                        "location": "If-Match",
                    }
                ],
            }
        }
    )


def _reply_400(response, message: str) -> None:
    response.status = HTTPStatus.BAD_REQUEST
    response.json({"error": {"code": 400, "message": message, "errors": [{"reason": "invalid"}]}})


def _check(request, response, storage, targets) -> bool:
    """Evaluate ``[(bucket, name, conditions), ...]``; answer 412/400 and return False on failure."""
    for bucket, name, conds in targets:
        if not conds or name is None or storage.get_bucket(bucket) is None:
            continue  # a missing bucket is reported by the wrapped handler (404)
        failed = _failed_condition(storage, bucket, name, conds)
        if failed:
            _reply_412(request, response, failed)
            return False
    return True


# --------------------------------------------------------------------------- handler wrappers
def _insert_target_name(request) -> str | None:
    if "name" in request.query:
        return request.query["name"][0]
    upload_type = (request.query.get("uploadType") or [""])[0]
    data = request.data
    if upload_type == "multipart" and isinstance(data, dict):
        return (data.get("meta") or {}).get("name")
    if upload_type == "resumable" and isinstance(data, dict):
        return data.get("name")
    return None


def _insert(request, response, storage, *args, **kwargs):
    if "upload_id" in request.query:  # gcsfs POSTs resumable chunks to the session URL
        return _upload_partial(request, response, storage, *args, **kwargs)
    try:
        conds = _parse_conditions(request.query)
    except _BadPrecondition as e:
        _drain(request)
        return _reply_400(response, str(e))
    bucket = request.params["bucket_name"]
    if conds and not _check(request, response, storage, [(bucket, _insert_target_name(request), conds)]):
        return None
    result = _state().originals["insert"](request, response, storage, *args, **kwargs)
    upload_type = (request.query.get("uploadType") or [""])[0]
    if conds and upload_type == "resumable" and response.status == HTTPStatus.OK:
        try:
            location = response["Location"]
        except KeyError:
            location = None
        if location:
            upload_id = parse_qs(urlparse(location).query).get("upload_id", [None])[0]
            if upload_id:
                with _state().lock:
                    _state().resumable_conditions[upload_id] = conds
    return result


def _upload_partial(request, response, storage, *args, **kwargs):
    upload_id = (request.query.get("upload_id") or [None])[0]
    original = _state().originals["upload_partial"]
    try:
        session = storage.get_resumable_file_obj(upload_id)
    except NotFound:
        return original(request, response, storage, *args, **kwargs)
    try:
        conds = {**_state().resumable_conditions.get(upload_id, {}), **_parse_conditions(request.query)}
    except _BadPrecondition as e:
        _drain(request)
        return _reply_400(response, str(e))
    # Checked on every chunk; the finalising chunk's check and write run in one request.
    if not _check(request, response, storage, [(session["bucket"], session["name"], conds)]):
        return None
    result = original(request, response, storage, *args, **kwargs)
    if upload_id not in storage.resumable:  # finalised
        with _state().lock:
            _state().resumable_conditions.pop(upload_id, None)
    return result


def _cancel_upload(request, response, storage, *args, **kwargs):
    """DELETE on a resumable session URL: drop the session and its bytes (GCS answers 499)."""
    _drain(request)
    upload_id = (request.query.get("upload_id") or [None])[0]
    try:
        storage.delete_resumable_file_obj(upload_id)
    except NotFound:
        response.status = HTTPStatus.NOT_FOUND
        return
    storage._delete_file(RESUMABLE_DIR, storage.safe_id(upload_id))
    with _state().lock:
        _state().resumable_conditions.pop(upload_id, None)
    response.status = _CLIENT_CLOSED_REQUEST


def _guarded(name: str, target, source=None):
    """Wrap handler ``name`` with target (and optionally source) precondition checks."""

    def handler(request, response, storage, *args, **kwargs):
        try:
            targets = [(*target(request.params), _parse_conditions(request.query))]
            if source is not None:
                targets.append((*source(request.params), _parse_source_conditions(request.query)))
        except _BadPrecondition as e:
            _drain(request)
            return _reply_400(response, str(e))
        if not _check(request, response, storage, targets):
            return None
        return _state().originals[name](request, response, storage, *args, **kwargs)

    handler.__name__ = f"guarded_{name}"
    return handler


def _same_object(params):
    return params["bucket_name"], params["object_id"]


def _dest_object(params):
    return params["dest_bucket_name"], params["dest_object_id"]


def _move(request, response, storage, *args, **kwargs):
    """``POST /b/B/o/SRC/moveTo/o/DST``: atomic rename inside one bucket."""
    _drain(request)
    bucket = request.params["bucket_name"]
    src, dst = request.params["object_id"], request.params["dest_object_id"]
    try:
        dest_conds = _parse_conditions(request.query)
        src_conds = _parse_source_conditions(request.query)
    except _BadPrecondition as e:
        return _reply_400(response, str(e))
    obj = _live_object(storage, bucket, src)
    wanted_gen = (request.query.get("sourceGeneration") or [None])[0]
    if obj is None or (wanted_gen and str(obj["generation"]) != str(wanted_gen)):
        response.status = HTTPStatus.NOT_FOUND
        response.json({"error": {"code": 404, "message": f"No such object: {bucket}/{src}"}})
        return
    if not _check(request, response, storage, [(bucket, dst, dest_conds), (bucket, src, src_conds)]):
        return
    dest_obj = _objects._copy(request.base_url, storage, bucket, src, bucket, dst)
    if src != dst:
        storage._hard_delete_file(bucket, src)  # a move leaves no soft-deleted source behind
    response.json(dest_obj)


# --------------------------------------------------------------------------- server plumbing
class _HTTPServer(http.server.HTTPServer):
    request_queue_size = 128

    def handle_error(self, request, client_address):
        import sys

        exc = sys.exc_info()[1]
        if isinstance(exc, (BrokenPipeError, ConnectionResetError)):
            # gcsfs sends some lookups in parallel and hangs up on the loser: not an error.
            logger.debug("client %s hung up: %s", client_address, exc)
            return
        super().handle_error(request, client_address)


def _api_thread_run(self):
    try:
        self._httpd = _HTTPServer((self._host, self._port), partial(_server.RequestHandler, self._storage))
    except BaseException as e:
        self._startup_error = e
        self.is_running.set()
        raise
    self.is_running.set()
    self._httpd.serve_forever(poll_interval=0.05)


class _Sink(io.BytesIO):
    def close(self) -> None:  # the request handler flushes/closes wfile in finish()
        pass


def _router_handle(self, method):
    handler = self._request_handler
    method = handler.headers.get("x-http-method-override") or method
    st = _state()
    fault = None
    with st.lock:
        st.requests.append((method, handler.path))
        for f in st.faults:
            if f.remaining > 0 and f.method == method and f.path_regex.search(handler.path):
                f.remaining -= 1
                fault = f
                break
    if fault is None:
        return st.originals["Router.handle"](self, method)
    if fault.kind == "delay":
        # Process the request (the write lands) and hold the answer back; the server handles
        # one request at a time, so everything else waits too (as a stalled frontend would).
        real_wfile = handler.wfile
        sink = handler.wfile = _Sink()
        try:
            st.originals["Router.handle"](self, method)
        finally:
            handler.wfile = real_wfile
        time.sleep(fault.seconds)
        try:
            real_wfile.write(sink.getvalue())
        except OSError:
            pass  # the client gave up long ago
        handler.close_connection = True
        logger.info("fault injected: answered %s %s after %.1f s", method, handler.path, fault.seconds)
        return
    if fault.kind == "fail":
        try:  # read the body first: closing with unread input would reset the connection
            handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
        except (OSError, ValueError):
            pass
        if fault.status:
            body = json.dumps({"error": {"code": fault.status, "message": "injected fault"}}).encode()
            handler.send_response(fault.status)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(body)))
            handler.end_headers()
            handler.wfile.write(body)
        handler.close_connection = True
        logger.info("fault injected: %s %s answered %s without processing", method, handler.path,
                    fault.status or "nothing")
        return
    # Process the request (the write lands), then hang up without answering: a lost response.
    real_wfile = handler.wfile
    handler.wfile = _Sink()
    try:
        st.originals["Router.handle"](self, method)
    finally:
        handler.wfile = real_wfile
    handler.close_connection = True
    logger.info("fault injected: dropped the response to %s %s", method, handler.path)


class _NotImplementedRecorder(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage()
        if msg.startswith("Method not implemented"):
            with _state().lock:
                _state().not_implemented.append(msg)


def apply_patch() -> None:
    """Patch the emulator's route table and server in memory (idempotent)."""
    st = _state()
    if st.originals:
        return
    st.originals.update(
        {
            "insert": _objects.insert,
            "upload_partial": _objects.upload_partial,
            "delete": _objects.delete,
            "copy": _objects.copy,
            "rewrite": _objects.rewrite,
            "compose": _objects.compose,
            "Router.handle": _server.Router.handle,
            "APIThread.run": _server.APIThread.run,
            "HANDLERS": _server.HANDLERS,
        }
    )
    replacements = {
        _objects.insert: _insert,
        _objects.upload_partial: _upload_partial,
        _objects.delete: _guarded("delete", _same_object),
        _objects.copy: _guarded("copy", _dest_object, _same_object),
        _objects.rewrite: _guarded("rewrite", _dest_object, _same_object),
        _objects.compose: _guarded("compose", _same_object),
    }
    upload_route = rf"^{_settings.UPLOAD_API_ENDPOINT}/b/(?P<bucket_name>[-.\w]+)/o$"
    object_route_tail = "(?P<object_id>.*[^/]+)$"
    routes = []
    for regex, handlers in _server.HANDLERS:
        handlers = {m: replacements.get(h, h) for m, h in handlers.items()}
        if regex == upload_route:
            handlers[_server.DELETE] = _cancel_upload
        if handlers.get(_server.GET) is _objects.get and regex.endswith(object_route_tail):
            move_regex = regex[:-1] + r"/moveTo/o/(?P<dest_object_id>.*[^/]+)$"
            routes.append((move_regex, {_server.POST: _move}))
        routes.append((regex, handlers))
    _server.HANDLERS = tuple(routes)
    # Router.handle's fallback for uploads without the /upload prefix reads objects.insert, and
    # _create_resumable_upload calls the module-level upload_partial.
    _objects.insert = _insert
    _objects.upload_partial = _upload_partial
    _server.Router.handle = _router_handle
    _server.APIThread.run = _api_thread_run
    server_logger = logging.getLogger(_server.__name__)
    if not any(isinstance(h, _NotImplementedRecorder) for h in server_logger.handlers):
        server_logger.addHandler(_NotImplementedRecorder())


def remove_patch() -> None:
    """Restore the stock emulator (for checking that the tests catch its behaviour)."""
    st = _state()
    if not st.originals:
        return
    _server.HANDLERS = st.originals["HANDLERS"]
    _objects.insert = st.originals["insert"]
    _objects.upload_partial = st.originals["upload_partial"]
    _server.Router.handle = st.originals["Router.handle"]
    _server.APIThread.run = st.originals["APIThread.run"]
    st.originals.clear()


apply_patch()


# --------------------------------------------------------------------------- public handle
def _http(
    host: str, port: int, method: str, path: str, body: bytes | None = None, headers=None, timeout=10.0
) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, {k: v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


@dataclass
class EmulatorHandle:
    """A running patched emulator (in-process)."""

    host: str
    port: int
    server: Any

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def storage_options(self) -> dict[str, str]:
        """Options for ``gcsfs.GCSFileSystem`` / ``ObjectStore`` (never real credentials)."""
        return {"endpoint_url": self.endpoint, "token": "anon"}

    def request(self, method: str, path: str, body: bytes | None = None, headers=None):
        """A raw HTTP call to the emulator: ``(status, headers, body)``."""
        return _http(self.host, self.port, method, path, body, headers)

    def make_bucket(self, name: str) -> str:
        """Create ``name`` (idempotent) and return ``"gs://name"``."""
        status, _, body = self.request(
            "POST",
            f"{_settings.API_ENDPOINT}/b?project=test",
            json.dumps({"name": name}).encode(),
            {"Content-Type": "application/json"},
        )
        if status not in (200, 409):
            raise RuntimeError(f"creating bucket {name!r} failed: {status} {body[:200]!r}")
        return f"gs://{name}"

    def object_generation(self, bucket: str, name: str) -> int | None:
        status, _, body = self.request("GET", f"{_settings.API_ENDPOINT}/b/{bucket}/o/{quote(name, safe='')}")
        if status == 404:
            return None
        if status != 200:
            raise RuntimeError(f"metadata of {bucket}/{name}: {status} {body[:200]!r}")
        return int(json.loads(body)["generation"])

    def drop_responses(self, method: str, path_regex: str, count: int = 1) -> None:
        """Process the next ``count`` matching requests but hang up without answering them."""
        with _state().lock:
            _state().faults.append(_Fault(method.upper(), re.compile(path_regex), count))

    def delay_responses(self, method: str, path_regex: str, seconds: float, count: int = 1) -> None:
        """Process the next ``count`` matching requests, answering each after ``seconds``."""
        with _state().lock:
            _state().faults.append(_Fault(method.upper(), re.compile(path_regex), count, "delay", seconds=seconds))

    def fail_requests(self, method: str, path_regex: str, status: int = 503, count: int = 1) -> None:
        """Answer the next ``count`` matching requests with ``status`` without processing them
        (``status=0``: hang up without an answer); the request never applies."""
        with _state().lock:
            _state().faults.append(_Fault(method.upper(), re.compile(path_regex), count, "fail", status=status))

    def clear_faults(self) -> None:
        with _state().lock:
            _state().faults.clear()

    @property
    def requests(self) -> list[tuple[str, str]]:
        """``(method, path?query)`` of every request received so far (last 20000)."""
        with _state().lock:
            return list(_state().requests)

    @property
    def not_implemented(self) -> list[str]:
        """Requests the emulator answered with 501 (each costs a gcsfs client ~35 s of retries)."""
        with _state().lock:
            return list(_state().not_implemented)

    @property
    def precondition_failures(self) -> int:
        with _state().lock:
            return _state().precondition_failures

    def stop(self) -> None:
        self.server.stop()  # shuts the HTTP server down and closes the socket
        threading.Thread.join(self.server._api, timeout=5)


def start_emulator(host: str = DEFAULT_HOST, port: int = 0) -> EmulatorHandle:
    """Start a patched in-memory emulator on ``host:port`` (0 = a free port) in a daemon thread."""
    apply_patch()
    srv = _server.create_server(host, port, in_memory=True)
    srv._api.daemon = True
    srv.start()
    err = getattr(srv._api, "_startup_error", None)
    if err is not None:
        raise RuntimeError(f"gcs emulator could not listen on {host}:{port}: {err}") from err
    bound_port = srv._api._httpd.server_address[1]
    return EmulatorHandle(host, bound_port, srv)


# --------------------------------------------------------------------------- multiprocess helper
def race_create_worker(endpoint: str, path: str, payload: bytes, barrier, results) -> None:
    """Child-process body for race tests: wait at ``barrier``, then create ``path`` once.

    Puts ``(payload, True)`` on ``results`` if this process created the object, ``(payload,
    False)`` if it lost (FileExistsError), ``(payload, "error: ...")`` otherwise.
    """
    os.environ["GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"] = "false"
    try:
        import gcsfs

        fs = gcsfs.GCSFileSystem(endpoint_url=endpoint, token="anon", skip_instance_cache=True)
        fs.info(path.split("/", 1)[0])  # warm the session before the race starts
        barrier.wait(timeout=30)
        try:
            fs.pipe_file(path, payload, mode="create")
            results.put((payload, True))
        except FileExistsError:
            results.put((payload, False))
    except BaseException as e:  # report instead of dying silently
        results.put((payload, f"error: {type(e).__name__}: {e}"))


# --------------------------------------------------------------------------- standalone
def main(argv: list[str] | None = None) -> int:
    import argparse
    import signal
    import time

    parser = argparse.ArgumentParser(description="gcp-storage-emulator with GCS preconditions and moveTo")
    parser.add_argument("--host", default=DEFAULT_HOST)
    parser.add_argument("--port", type=int, default=9023, help="0 picks a free port")
    parser.add_argument("--bucket", action="append", default=[], help="create this bucket (repeatable)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log every request")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING)
    emu = start_emulator(args.host, args.port)
    for name in args.bucket:
        emu.make_bucket(name)
    print(f"gcs emulator listening on {emu.endpoint}", flush=True)
    print(f"export STORAGE_EMULATOR_HOST={emu.endpoint} GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT=false", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        while not stop.is_set():
            time.sleep(0.1)
    finally:
        emu.stop()
    return 0


@contextlib.contextmanager
def running_emulator(host: str = "127.0.0.1", port: int = 0) -> Iterator[EmulatorHandle]:
    """An emulator started for the ``with`` block, with ``STORAGE_EMULATOR_HOST`` pointing at it
    meanwhile (restored afterwards)."""
    emu = start_emulator(host, port)
    previous = os.environ.get("STORAGE_EMULATOR_HOST")
    os.environ["STORAGE_EMULATOR_HOST"] = emu.endpoint
    try:
        yield emu
    finally:
        emu.stop()
        if previous is None:
            os.environ.pop("STORAGE_EMULATOR_HOST", None)
        else:
            os.environ["STORAGE_EMULATOR_HOST"] = previous


if __name__ == "__main__":
    raise SystemExit(main())
