"""Upload failures on ``gs://`` are typed: simple and resumable uploads, data files and whole writes.

gcsfs uploads a new object in one request when it is small and through a resumable session once
it passes its block size (5 MiB): it surfaces a lost session (HTTP 404 on the session URL) as a
raw ``FileNotFoundError``.  Each must reach the caller as an :class:`ObjectStoreError` naming the
object, and the failed write must leave the dataset at its last good version with no files of its own.
"""

import time

import numpy as np
import pyarrow as pa
import pytest

import lance_ops.format as lf
from lance_ops.format.errors import ObjectNotFoundError, ObjectStoreError
from lance_ops.format.io.object_store import ObjectStore

SESSION = r"upload_id="  # chunks of a resumable session (the session URL)
SIMPLE = r"/upload/storage/v1/b/[^/]+/o\?.*uploadType=multipart"  # pipe_file: one request
START = r"uploadType=resumable$"  # opening a session: open_output's first upload request, even when small


@pytest.fixture
def store(gcs_emulator, gcs_bucket) -> ObjectStore:
    return ObjectStore(f"{gcs_bucket}/root", storage_options=gcs_emulator.storage_options)


def _big_table(rows: int = 1_200_000) -> pa.Table:
    rng = np.random.default_rng(7)  # random: neither bit-packing nor a dictionary shrinks it below 5 MiB
    return pa.table({"id": pa.array(np.arange(rows, dtype=np.int64)),
                     "x": pa.array(rng.integers(0, 2**62, rows, dtype=np.int64))})


def _objects(store: ObjectStore, prefix: str) -> list[str]:
    return sorted(rel for rel, _size, _mtime in store.list_files(prefix))


@pytest.mark.parametrize("status", [404, 410])
def test_resumable_upload_fault_is_typed_and_leaves_no_object(store, gcs_emulator, status):
    gcs_emulator.fail_requests("PUT", SESSION, status=status, count=1)
    gcs_emulator.fail_requests("POST", SESSION, status=status, count=1)
    chunk = np.random.default_rng(1).bytes(1 << 20)
    t0 = time.monotonic()
    with pytest.raises(ObjectStoreError) as err:
        with store.open_output("data/big.lance") as f:
            for _ in range(12):  # 12 MiB: past gcsfs's 5 MiB block size, so a resumable upload
                f.write(chunk)
    assert time.monotonic() - t0 < 30
    assert not isinstance(err.value, FileNotFoundError | ObjectNotFoundError)  # a failed upload, not "absent"
    assert "root/data/big.lance" in str(err.value) and "upload" in str(err.value)
    gcs_emulator.clear_faults()
    assert not store.exists("data/big.lance")


def test_simple_upload_fault_is_typed(store, gcs_emulator):
    gcs_emulator.fail_requests("POST", START, status=404, count=1)
    with pytest.raises(ObjectStoreError, match=r"root/data/small\.lance: upload \(close\) failed"):
        with store.open_output("data/small.lance") as f:
            f.write(b"x" * 1000)
    gcs_emulator.clear_faults()
    assert not store.exists("data/small.lance")
    gcs_emulator.fail_requests("POST", SIMPLE, status=404, count=1)
    with pytest.raises(ObjectStoreError, match=r"root/_transactions/0-x\.txn: write failed"):
        store.put("_transactions/0-x.txn", b"txn")


def test_failed_resumable_append_keeps_the_last_good_version(store, gcs_emulator, gcs_bucket):
    uri = f"{gcs_bucket}/root"
    so = gcs_emulator.storage_options
    lf.write_dataset(pa.table({"id": pa.array([1, 2, 3], pa.int64()), "x": pa.array([4, 5, 6], pa.int64())}),
                     uri, storage_options=so)
    before = _objects(store, "data")
    gcs_emulator.fail_requests("PUT", SESSION, status=404, count=1)
    gcs_emulator.fail_requests("POST", SESSION, status=404, count=1)
    with pytest.raises(ObjectStoreError) as err:
        lf.write_dataset(_big_table(), uri, mode="append", storage_options=so)
    assert not isinstance(err.value, FileNotFoundError)
    assert "root/data/" in str(err.value) and ".lance" in str(err.value)
    gcs_emulator.clear_faults()
    ds = lf.dataset(uri, storage_options=so)
    assert ds.version == 1 and ds.count_rows() == 3
    assert _objects(store, "data") == before  # no file of the failed write is left
    assert len(_objects(store, "_transactions")) == 1  # version 1's: the failed write wrote none
