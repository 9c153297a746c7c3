"""``lance_ops.format.io.object_store.ObjectStore`` on ``gs://`` URIs, against the patched GCS emulator."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from lance_ops.format.errors import ObjectStoreError
from lance_ops.format.io.object_store import ObjectStore


def _put_after_barrier(store: ObjectStore, barrier: threading.Barrier, rel: str, data: bytes) -> bool:
    barrier.wait(timeout=10)
    return store.put_if_absent(rel, data)


@pytest.fixture
def store(gcs_emulator, gcs_bucket) -> ObjectStore:
    return ObjectStore(f"{gcs_bucket}/root", storage_options=gcs_emulator.storage_options)


@pytest.fixture
def other_process_store(gcs_emulator, gcs_bucket) -> ObjectStore:
    """The same dataset seen through a separate gcsfs instance (own listing cache), as another
    process (a Spark worker, a second committer) would see it."""
    return ObjectStore(
        f"{gcs_bucket}/root", storage_options={**gcs_emulator.storage_options, "skip_instance_cache": True}
    )


def test_uri_and_backend(store, gcs_bucket):
    assert store.protocol == "gs"
    assert store.root == f"{gcs_bucket[len('gs://') :]}/root"
    assert not store.is_local
    assert store.full_path("_versions/1.manifest") == f"{store.root}/_versions/1.manifest"
    assert store.full_path(".") == store.root
    with pytest.raises(ObjectStoreError):
        store.full_path("../escape")
    with pytest.raises(ObjectStoreError):
        store.full_path("/abs")


def test_put_read_size_exists(store):
    assert not store.exists("data/a.bin")
    store.put("data/a.bin", b"hello world")
    assert store.exists("data/a.bin")
    assert store.read("data/a.bin") == b"hello world"
    assert store.size("data/a.bin") == 11
    store.put("data/a.bin", b"overwritten!")
    assert store.read("data/a.bin") == b"overwritten!"
    assert store.size("data/a.bin") == 12
    store.put("data/empty", b"")
    assert store.read("data/empty") == b"" and store.size("data/empty") == 0


def test_read_missing_raises_file_not_found(store):
    with pytest.raises(FileNotFoundError):
        store.read("nope.bin")
    with pytest.raises(FileNotFoundError):
        store.size("nope.bin")


def test_read_range_and_ranges(store):
    payload = bytes(range(256)) * 40  # 10 KiB
    store.put("data/r.bin", payload)
    assert store.read_range("data/r.bin", 0, 4) == payload[:4]
    assert store.read_range("data/r.bin", 1000, 300) == payload[1000:1300]
    assert store.read_range("data/r.bin", len(payload) - 3, 3) == payload[-3:]
    assert store.read_range("data/r.bin", 5, 0) == b""
    ranges = [(0, 10), (4096, 100), (10230, 10), (7, 0), (100, 1)]
    assert store.read_ranges("data/r.bin", ranges) == [payload[s : s + n] for s, n in ranges]
    assert store.read_ranges("data/r.bin", []) == []


def test_read_ranges_of_missing_object_raises(store):
    with pytest.raises(FileNotFoundError):
        store.read_ranges("nope.bin", [(0, 4), (4, 4)])


def test_list_dir_lists_files_directly_under(store):
    store.put("_versions/1.manifest", b"m1")
    store.put("_versions/2.manifest", b"m2")
    store.put("_versions/sub/deeper.bin", b"x")
    assert sorted(store.list_dir("_versions")) == ["1.manifest", "2.manifest"]
    assert store.list_dir("missing") == []
    assert store.list_dir("_versions/sub") == ["deeper.bin"]


def test_list_files_is_recursive_with_sizes_and_mtimes(store):
    t0 = time.time()
    store.put("a.txt", b"a")
    store.put("data/b.bin", b"bb")
    store.put("data/deep/c.bin", b"ccc")
    found = sorted(store.list_files(""))
    assert [(p, n) for p, n, _ in found] == [("a.txt", 1), ("data/b.bin", 2), ("data/deep/c.bin", 3)]
    for _, _, mtime in found:
        assert isinstance(mtime, float) and t0 - 60 < mtime < time.time() + 60
    assert sorted(p for p, _, _ in store.list_files("data")) == ["data/b.bin", "data/deep/c.bin"]
    assert list(store.list_files("missing")) == []


def test_delete(store):
    store.put("d/x", b"x")
    store.put("d/y", b"y")
    store.delete("d/x")
    assert not store.exists("d/x")
    assert store.list_dir("d") == ["y"]
    store.delete("d/x")  # already gone: not an error
    store.delete("never/existed")
    assert store.read("d/y") == b"y"


def test_open_output_and_copy(store):
    with store.open_output("data/streamed.bin") as f:
        f.write(b"part1-")
        f.write(b"part2")
    assert store.read("data/streamed.bin") == b"part1-part2"
    store.copy("data/streamed.bin", "data/copy.bin")
    assert store.read("data/copy.bin") == b"part1-part2"
    assert sorted(store.list_dir("data")) == ["copy.bin", "streamed.bin"]


def test_put_if_absent_first_writer_wins(store):
    assert store.put_if_absent("_versions/1.manifest", b"first") is True
    assert store.put_if_absent("_versions/1.manifest", b"second") is False
    assert store.put_if_absent("_versions/1.manifest", b"third") is False
    assert store.read("_versions/1.manifest") == b"first"
    assert store.list_dir("_versions") == ["1.manifest"]  # visible at once (cache invalidated)
    assert store.exists("_versions/1.manifest")
    assert store.put_if_absent("_versions/2.manifest", b"next") is True
    assert sorted(store.list_dir("_versions")) == ["1.manifest", "2.manifest"]


def test_put_if_absent_across_instances(store, other_process_store):
    assert store.put_if_absent("_versions/1.manifest", b"A") is True
    assert other_process_store.put_if_absent("_versions/1.manifest", b"B") is False
    assert other_process_store.read("_versions/1.manifest") == b"A"
    assert other_process_store.list_dir("_versions") == ["1.manifest"]


def test_put_if_absent_threads_racing_have_exactly_one_winner(store):
    n = 8
    for round_ in range(3):
        rel = f"_versions/{round_ + 1}.manifest"
        barrier = threading.Barrier(n)
        with ThreadPoolExecutor(n) as pool:
            futures = [
                pool.submit(_put_after_barrier, store, barrier, rel, f"writer-{i}".encode()) for i in range(n)
            ]
            results = [f.result(timeout=30) for f in futures]
        winners = [i for i, won in enumerate(results) if won is True]
        assert len(winners) == 1 and results.count(False) == n - 1, results
        assert store.read(rel) == f"writer-{winners[0]}".encode()


def test_list_dir_sees_writes_from_another_instance(store, other_process_store):
    store.put("_versions/1.manifest", b"1")
    assert store.list_dir("_versions") == ["1.manifest"]  # caches the listing
    other_process_store.put("_versions/2.manifest", b"2")
    assert sorted(store.list_dir("_versions")) == ["1.manifest", "2.manifest"]



def test_exists_sees_an_object_created_by_another_instance(store, other_process_store):
    store.put("_versions/1.manifest", b"1")
    assert store.list_dir("_versions") == ["1.manifest"]
    other_process_store.put_if_absent("_versions/2.manifest", b"2")
    assert store.exists("_versions/2.manifest")


def test_exists_and_size_see_changes_by_another_instance(store, other_process_store):
    store.put("hint.txt", b"short")
    store.put("gone.txt", b"x")
    assert sorted(store.list_dir("")) == ["gone.txt", "hint.txt"]
    other_process_store.put("hint.txt", b"much longer content")
    other_process_store.delete("gone.txt")
    assert store.size("hint.txt") == len(b"much longer content")
    assert not store.exists("gone.txt")


def test_put_if_absent_survives_a_lost_response(store, gcs_emulator):
    gcs_emulator.drop_responses("POST", r"/upload/storage/v1/b/[^/]+/o", count=1)
    won = store.put_if_absent("_versions/1.manifest", b"mine")
    assert store.read("_versions/1.manifest") == b"mine"  # the write did land
    assert won is True
