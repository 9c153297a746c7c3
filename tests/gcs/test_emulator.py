"""The patched emulator enforces GCS write preconditions, supports moveTo and cancels uploads.

These are the guarantees ``ObjectStore.put_if_absent`` (the commit primitive) relies on on GCS;
the stock emulator ignores ``ifGenerationMatch`` and overwrites (docs/RECIPES.md §5).
"""

import hashlib
import json
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from functools import partial
from urllib.parse import quote, urlparse

import gcsfs
import gcsfs.core
import pytest
from _gcs_emulator import race_create_worker
from fsspec.asyn import sync

MiB = 2**20

# gcsfs hands multi-MiB uploads to aiohttp as bytes, which warns; not something these tests check.
pytestmark = pytest.mark.filterwarnings("ignore:Sending a large body directly:ResourceWarning")


@pytest.fixture
def fs(gcs_emulator):
    return gcsfs.GCSFileSystem(**gcs_emulator.storage_options)


@pytest.fixture
def bucket(gcs_bucket):
    return gcs_bucket[len("gs://") :]


def _media_upload(fs, bucket, key, payload, **conditions):
    """A raw ``uploadType=media`` insert with preconditions (as a compare-and-swap would do)."""
    out = fs.call(
        "POST",
        f"{fs._location}/upload/storage/v1/b/{{}}/o",
        bucket,
        uploadType="media",
        name=key,
        data=payload,
        headers={"Content-Type": "application/octet-stream"},
        json_out=True,
        **{k: str(v) for k, v in conditions.items()},
    )
    fs.invalidate_cache(f"{bucket}/{key}")
    return out


def _object_url(bucket, key, suffix=""):
    return f"/storage/v1/b/{bucket}/o/{quote(key, safe='')}{suffix}"


# ----------------------------------------------------------------------------- set-up sanity
def test_gcsfs_is_the_plain_http_client_and_fast(fs, bucket, gcs_emulator):
    # GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT=false took effect: no gRPC bucket-layout probe (60 s each).
    assert type(fs) is gcsfs.core.GCSFileSystem
    assert fs._location == gcs_emulator.endpoint
    assert urlparse(gcs_emulator.endpoint).hostname == "127.0.0.1"
    t0 = time.perf_counter()
    fs.pipe_file(f"{bucket}/a/x.json", b"{}")
    assert fs.cat_file(f"{bucket}/a/x.json") == b"{}"
    assert fs.ls(f"{bucket}/a", detail=False, refresh=True) == [f"{bucket}/a/x.json"]
    assert fs.info(f"{bucket}/a/x.json")["size"] == 2
    fs.rm_file(f"{bucket}/a/x.json")
    assert not fs.exists(f"{bucket}/a/x.json")
    assert time.perf_counter() - t0 < 10.0  # ~0.1 s here; a gRPC probe per bucket call would take ~60 s


def test_connections_outside_loopback_are_refused():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        with pytest.raises(OSError, match="may only connect to 127.0.0.1"):
            s.connect(("192.0.2.1", 80))  # TEST-NET-1: refused by the guard before any packet
    finally:
        s.close()


def test_bucket_fixture_is_fresh_and_empty(gcs_emulator, gcs_bucket, fs):
    assert gcs_bucket.startswith("gs://bucket-") and len(gcs_bucket) == len("gs://bucket-") + 8
    assert fs.ls(gcs_bucket, refresh=True) == []
    assert gcs_emulator.make_bucket(gcs_bucket[5:]) == gcs_bucket  # idempotent


# ----------------------------------------------------------------------------- create-only uploads
def test_create_when_absent_sends_if_generation_match_0(fs, bucket, gcs_emulator):
    path = f"{bucket}/k/first.bin"
    fs.pipe_file(path, b"first", mode="create")
    assert fs.cat_file(path) == b"first"
    inserts = [
        p
        for m, p in gcs_emulator.requests
        if m == "POST" and p.startswith(f"/upload/storage/v1/b/{bucket}/o")
    ]
    assert inserts and "ifGenerationMatch=0" in inserts[-1]
    assert gcs_emulator.object_generation(bucket, "k/first.bin") > 0


def test_pipe_file_create_on_existing_raises_and_keeps_content(fs, bucket, gcs_emulator):
    path = f"{bucket}/k/obj"
    fs.pipe_file(path, b"first", mode="create")
    gen = gcs_emulator.object_generation(bucket, "k/obj")
    failures = gcs_emulator.precondition_failures
    with pytest.raises(FileExistsError):
        fs.pipe_file(path, b"second", mode="create")
    assert gcs_emulator.precondition_failures == failures + 1
    assert fs.cat_file(path) == b"first"
    assert gcs_emulator.object_generation(bucket, "k/obj") == gen
    fs.pipe_file(path, b"third")  # an overwrite without the precondition still works
    assert fs.cat_file(path) == b"third"
    assert gcs_emulator.object_generation(bucket, "k/obj") > gen


def test_open_xb_small(fs, bucket):
    path = f"{bucket}/k/xb"
    with fs.open(path, "xb") as f:
        f.write(b"one")
    assert fs.cat_file(path) == b"one"
    with pytest.raises(FileExistsError):
        with fs.open(path, "xb") as f:
            f.write(b"two")
    assert fs.cat_file(path) == b"one"


def test_resumable_pipe_file_create(fs, bucket, gcs_emulator):
    path = f"{bucket}/big/obj"
    data = bytes(range(256)) * (9 * MiB // 256 + 17)  # > 8 MiB, not a chunk multiple
    fs.pipe_file(path, data, mode="create", chunksize=2 * MiB)
    got = fs.cat_file(path)
    assert len(got) == len(data) and hashlib.sha256(got).digest() == hashlib.sha256(data).digest()
    chunk_posts = [
        p for m, p in gcs_emulator.requests if m == "POST" and "name=big/obj" in p and "upload_id=" in p
    ]
    assert len(chunk_posts) == 5 and all("ifGenerationMatch=0" in p for p in chunk_posts)

    sessions_before = len(gcs_emulator.server._storage.resumable)
    with pytest.raises(FileExistsError):
        fs.pipe_file(path, b"\xff" * (9 * MiB), mode="create", chunksize=2 * MiB)
    assert hashlib.sha256(fs.cat_file(path)).digest() == hashlib.sha256(data).digest()
    assert len(gcs_emulator.server._storage.resumable) == sessions_before  # refused at initiation


def test_resumable_open_xb_multi_chunk(fs, bucket):
    path = f"{bucket}/big/xb"
    piece = b"0123456789abcdef" * (MiB // 16)
    with fs.open(path, "xb", block_size=2 * MiB) as f:
        for _ in range(9):
            f.write(piece)
        f.write(b"tail")
    assert fs.size(path) == 9 * MiB + 4
    assert fs.cat_file(path, start=9 * MiB - 4) == b"cdeftail"
    with pytest.raises(FileExistsError):
        with fs.open(path, "xb", block_size=2 * MiB) as f:
            for _ in range(9):
                f.write(b"x" * MiB)
    assert fs.size(path) == 9 * MiB + 4
    assert fs.cat_file(path, start=0, end=16) == b"0123456789abcdef"


def test_object_created_during_resumable_upload_fails_the_final_chunk(fs, bucket, gcs_emulator):
    """Preconditions are re-checked when the upload is finalised, and the session can be cancelled."""
    key = "mid/obj"
    path = f"{bucket}/{key}"
    sessions = gcs_emulator.server._storage.resumable
    n_sessions = len(sessions)
    location = sync(fs.loop, gcsfs.core.initiate_upload, fs, bucket, key, mode="create")
    assert "ifGenerationMatch=0" in location and "upload_id=" in location
    assert len(sessions) == n_sessions + 1
    first = b"a" * (256 * 1024)
    out = sync(
        fs.loop, gcsfs.core.upload_chunk, fs, location, first, 0, 2 * len(first), "application/octet-stream"
    )
    assert out is None  # 308: more expected
    fs.pipe_file(path, b"other writer won")  # another writer creates the object meanwhile
    with pytest.raises(FileExistsError):
        sync(
            fs.loop,
            gcsfs.core.upload_chunk,
            fs,
            location,
            first,
            len(first),
            2 * len(first),
            "application/octet-stream",
        )
    assert fs.cat_file(path) == b"other writer won"

    # gcsfs then cancels the session (DELETE on the session URL): answered 499, no 501 retries.
    t0 = time.perf_counter()
    fs.call("DELETE", location.replace("&ifGenerationMatch=0", ""))
    assert time.perf_counter() - t0 < 5.0  # a 501 here would cost ~35 s of retries
    assert len(sessions) == n_sessions
    parts = urlparse(location)
    status, _, _ = gcs_emulator.request("DELETE", f"{parts.path}?{parts.query}")
    assert status == 404  # already cancelled
    assert fs.cat_file(path) == b"other writer won"


def test_pipe_file_cleans_up_its_session_when_a_chunk_fails(fs, bucket, gcs_emulator):
    """gcsfs' own error path: a chunk fails -> DELETE of the session URL must be answered quickly."""
    key = "mid/pipe"
    path = f"{bucket}/{key}"
    # The 1st chunk POST is processed but its answer dropped; gcsfs re-sends it (after 1-2 s), the
    # emulator answers 400 (offset already received), so gcsfs gives up and cancels the session.
    gcs_emulator.drop_responses("POST", r"name=mid/pipe.*upload_id=", count=1)
    sessions_before = len(gcs_emulator.server._storage.resumable)
    t0 = time.perf_counter()
    with pytest.raises(Exception, match="Content-Range"):
        fs.pipe_file(path, b"p" * (4 * MiB + 5), mode="create", chunksize=2 * MiB)
    assert time.perf_counter() - t0 < 15.0  # one 1-2 s retry; a 501 on the DELETE would add ~35 s
    deletes = [p for m, p in gcs_emulator.requests if m == "DELETE" and "name=mid/pipe" in p]
    assert len(deletes) == 1 and "ifGenerationMatch" not in deletes[0]
    assert len(gcs_emulator.server._storage.resumable) == sessions_before
    assert not fs.exists(path)


# ----------------------------------------------------------------------------- raw preconditions
def test_if_generation_match_compare_and_swap(fs, bucket, gcs_emulator):
    key = "cas/pointer"
    path = f"{bucket}/{key}"
    g1 = int(_media_upload(fs, bucket, key, b"v1", ifGenerationMatch=0)["generation"])
    with pytest.raises(FileExistsError):
        _media_upload(fs, bucket, key, b"v1-again", ifGenerationMatch=0)
    g2 = int(_media_upload(fs, bucket, key, b"v2", ifGenerationMatch=g1)["generation"])
    assert g2 != g1
    with pytest.raises(FileExistsError):
        _media_upload(fs, bucket, key, b"stale", ifGenerationMatch=g1)  # stale generation
    assert fs.cat_file(path) == b"v2"
    assert gcs_emulator.object_generation(bucket, key) == g2

    status, _, body = gcs_emulator.request(
        "POST",
        f"/upload/storage/v1/b/{bucket}/o?uploadType=media&name={quote(key, safe='')}&ifGenerationMatch={g1}",
        b"raw-stale",
        {"Content-Type": "application/octet-stream"},
    )
    assert status == 412
    err = json.loads(body)["error"]
    assert err["code"] == 412 and err["errors"][0]["reason"] == "conditionNotMet"
    assert fs.cat_file(path) == b"v2"


def test_if_generation_not_match_and_metageneration(fs, bucket):
    key = "cas/notmatch"
    path = f"{bucket}/{key}"
    with pytest.raises(FileExistsError):  # ifGenerationNotMatch=0: a live object must exist
        _media_upload(fs, bucket, key, b"x", ifGenerationNotMatch=0)
    assert not fs.exists(path)
    g1 = int(_media_upload(fs, bucket, key, b"v1")["generation"])
    with pytest.raises(FileExistsError):
        _media_upload(fs, bucket, key, b"v2", ifGenerationNotMatch=g1)
    assert fs.cat_file(path) == b"v1"
    _media_upload(fs, bucket, key, b"v2", ifGenerationNotMatch=g1 + 1)
    assert fs.cat_file(path) == b"v2"
    with pytest.raises(FileExistsError):
        _media_upload(fs, bucket, key, b"v3", ifMetagenerationMatch=7)
    _media_upload(fs, bucket, key, b"v3", ifMetagenerationMatch=1)
    assert fs.cat_file(path) == b"v3"


def test_bad_precondition_value_is_400(gcs_emulator, bucket):
    status, _, body = gcs_emulator.request(
        "POST",
        f"/upload/storage/v1/b/{bucket}/o?uploadType=media&name=z&ifGenerationMatch=abc",
        b"z",
        {"Content-Type": "application/octet-stream"},
    )
    assert status == 400 and b"ifGenerationMatch" in body


def test_preconditions_on_delete_copy_rewrite_compose(fs, bucket, gcs_emulator):
    for key, payload in (("p/a", b"A"), ("p/b", b"B")):
        fs.pipe_file(f"{bucket}/{key}", payload)
    ga = gcs_emulator.object_generation(bucket, "p/a")
    gb = gcs_emulator.object_generation(bucket, "p/b")

    status, _, _ = gcs_emulator.request("DELETE", _object_url(bucket, "p/a") + f"?ifGenerationMatch={ga + 1}")
    assert status == 412 and gcs_emulator.object_generation(bucket, "p/a") == ga

    for verb in ("copyTo", "rewriteTo"):
        url = _object_url(bucket, "p/a", f"/{verb}/b/{bucket}/o/{quote('p/b', safe='')}")
        status, _, _ = gcs_emulator.request(
            "POST", url + "?ifGenerationMatch=0", b"{}", {"Content-Type": "application/json"}
        )
        assert status == 412, verb
        status, _, _ = gcs_emulator.request(
            "POST", url + f"?ifSourceGenerationMatch={ga + 1}", b"{}", {"Content-Type": "application/json"}
        )
        assert status == 412, verb
    assert fs.cat_file(f"{bucket}/p/b") == b"B" and gcs_emulator.object_generation(bucket, "p/b") == gb

    compose = json.dumps({"sourceObjects": [{"name": "p/a"}, {"name": "p/b"}], "destination": {}}).encode()
    status, _, _ = gcs_emulator.request(
        "POST",
        _object_url(bucket, "p/b", "/compose") + "?ifGenerationMatch=0",
        compose,
        {"Content-Type": "application/json"},
    )
    assert status == 412
    status, _, _ = gcs_emulator.request(
        "POST",
        _object_url(bucket, "p/ab", "/compose") + "?ifGenerationMatch=0",
        compose,
        {"Content-Type": "application/json"},
    )
    assert status == 200 and fs.cat_file(f"{bucket}/p/ab") == b"AB"

    url = _object_url(bucket, "p/a", f"/copyTo/b/{bucket}/o/{quote('p/c', safe='')}")
    status, _, _ = gcs_emulator.request(
        "POST",
        url + f"?ifGenerationMatch=0&ifSourceGenerationMatch={ga}",
        b"{}",
        {"Content-Type": "application/json"},
    )
    assert status == 200 and fs.cat_file(f"{bucket}/p/c") == b"A"

    status, _, _ = gcs_emulator.request("DELETE", _object_url(bucket, "p/a") + f"?ifGenerationMatch={ga}")
    assert status in (200, 204) and gcs_emulator.object_generation(bucket, "p/a") is None


# ----------------------------------------------------------------------------- races
def _race(n: int, attempt) -> dict[int, object]:
    """Run ``attempt(i)`` in ``n`` threads released together; ``{i: result or exception}``."""
    barrier = threading.Barrier(n)
    results: dict[int, object] = {}

    def run(i: int) -> None:
        barrier.wait(timeout=10)
        try:
            results[i] = attempt(i)
        except Exception as e:
            results[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    return results


def _create_or_lose(fs, path: str, i: int) -> bool:
    try:
        fs.pipe_file(path, f"writer-{i}".encode(), mode="create")
        return True
    except FileExistsError:
        return False


def test_threads_racing_to_create_one_key_have_exactly_one_winner(fs, bucket):
    n = 8
    for round_ in range(3):
        path = f"{bucket}/race/threads-{round_}"
        results = _race(n, partial(_create_or_lose, fs, path))
        assert sorted(results) == list(range(n)), results
        winners = [i for i, won in results.items() if won is True]
        losers = [i for i, won in results.items() if won is False]
        assert len(winners) == 1 and len(losers) == n - 1, results
        assert fs.cat_file(path) == f"writer-{winners[0]}".encode()


def test_processes_racing_to_create_one_key_have_exactly_one_winner(gcs_emulator, bucket, fs):
    n = 4
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(n)
    results = ctx.Queue()
    path = f"{bucket}/race/processes"
    payloads = [f"process-{i}".encode() for i in range(n)]
    procs = [
        ctx.Process(target=race_create_worker, args=(gcs_emulator.endpoint, path, p, barrier, results))
        for p in payloads
    ]
    for p in procs:
        p.start()
    try:
        outcome = dict(results.get(timeout=60) for _ in range(n))
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():  # pragma: no cover
                p.kill()
    assert [p.exitcode for p in procs] == [0] * n
    assert sorted(outcome) == sorted(payloads), outcome
    winners = [p for p, won in outcome.items() if won is True]
    assert len(winners) == 1 and all(won is False for p, won in outcome.items() if p not in winners), outcome
    assert fs.cat_file(path) == winners[0]


# ----------------------------------------------------------------------------- moveTo
def test_mv_uses_move_to_and_is_fast(fs, bucket, gcs_emulator):
    src, dst = f"{bucket}/mv/src.json", f"{bucket}/mv/dst.json"
    fs.pipe_file(src, b'{"v": 1}')
    t0 = time.perf_counter()
    fs.mv(src, dst)
    assert (
        time.perf_counter() - t0 < 5.0
    )  # ~10 ms; the stock emulator 501s moveTo, then gcsfs retries for ~35 s
    assert fs.cat_file(dst) == b'{"v": 1}'
    assert not fs.exists(src)
    assert fs.ls(f"{bucket}/mv", detail=False, refresh=True) == [dst]
    assert any(m == "POST" and "/moveTo/o/" in p for m, p in gcs_emulator.requests)
    with pytest.raises(FileNotFoundError):
        fs.mv(src, f"{bucket}/mv/other.json")


def test_move_to_honours_destination_precondition(fs, bucket, gcs_emulator):
    fs.pipe_file(f"{bucket}/mv/a", b"A")
    fs.pipe_file(f"{bucket}/mv/b", b"B")
    url = _object_url(bucket, "mv/a", f"/moveTo/o/{quote('mv/b', safe='')}")
    status, _, body = gcs_emulator.request(
        "POST", url + "?ifGenerationMatch=0", b"", {"Content-Type": "application/json"}
    )
    assert status == 412 and b"conditionNotMet" in body
    assert fs.cat_file(f"{bucket}/mv/a") == b"A" and fs.cat_file(f"{bucket}/mv/b") == b"B"
    url = _object_url(bucket, "mv/a", f"/moveTo/o/{quote('mv/c', safe='')}")
    status, _, body = gcs_emulator.request(
        "POST", url + "?ifGenerationMatch=0", b"", {"Content-Type": "application/json"}
    )
    assert status == 200 and json.loads(body)["name"] == "mv/c"
    fs.invalidate_cache()
    assert fs.cat_file(f"{bucket}/mv/c") == b"A" and not fs.exists(f"{bucket}/mv/a")


# ----------------------------------------------------------------------------- fault injection
def test_dropped_response_makes_a_landed_create_look_lost(fs, bucket, gcs_emulator):
    """A lost answer to a create-only upload: gcsfs retries and the retry gets 412.

    This is the hazard a commit protocol must handle on real GCS: the write landed, but the caller
    sees FileExistsError (see test_store_gcs.py::test_put_if_absent_survives_a_lost_response).
    """
    path = f"{bucket}/fault/obj"
    gcs_emulator.drop_responses("POST", f"/upload/storage/v1/b/{bucket}/o", count=1)
    with pytest.raises(FileExistsError):
        fs.pipe_file(path, b"mine", mode="create")
    assert fs.cat_file(path) == b"mine"
    posts = [
        p
        for m, p in gcs_emulator.requests
        if m == "POST" and p.startswith(f"/upload/storage/v1/b/{bucket}/o")
    ]
    assert len(posts) == 2  # the original and gcsfs' retry


# ----------------------------------------------------------------------------- standalone
def test_standalone_server_is_patched_and_stops_on_sigterm():
    """``python tests/_gcs_emulator.py --port N`` (what Spark workers or a developer would use)."""
    script = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "_gcs_emulator.py")
    proc = subprocess.Popen(
        [sys.executable, script, "--port", "0", "--bucket", "lake"], stdout=subprocess.PIPE, text=True
    )
    try:
        line = proc.stdout.readline()
        assert line.startswith("gcs emulator listening on http://127.0.0.1:"), line
        endpoint = line.split()[-1]
        fs = gcsfs.GCSFileSystem(endpoint_url=endpoint, token="anon", skip_instance_cache=True)
        fs.pipe_file("lake/t/_versions/1.manifest", b"one", mode="create")
        with pytest.raises(FileExistsError):
            fs.pipe_file("lake/t/_versions/1.manifest", b"two", mode="create")
        assert fs.cat_file("lake/t/_versions/1.manifest") == b"one"
        t0 = time.perf_counter()
        fs.pipe_file("lake/t/a", b"a")
        fs.mv("lake/t/a", "lake/t/b")
        assert time.perf_counter() - t0 < 5.0 and fs.cat_file("lake/t/b") == b"a"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=5) == 0
    finally:
        if proc.poll() is None:  # pragma: no cover - only if an assertion failed above
            proc.kill()
            proc.wait(timeout=5)
        proc.stdout.close()
