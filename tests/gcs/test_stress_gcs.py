"""Concurrent mixed commits against the GCS emulator (threads; commits via ifGenerationMatch=0).

A smaller version of tests/reliability/test_stress.py: the same workers and invariants, with
every worker thread reaching the bucket through its own gcsfs instance, as separate processes
would.
"""

import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "reliability"))

from _stress_workers import WORKERS, run_worker, table  # noqa: E402
from test_stress import check_history  # noqa: E402

import lance_ops.format as lf  # noqa: E402
from lance_ops.format.io.object_store import ObjectStore  # noqa: E402
from lance_ops.format.table.manifest import list_versions  # noqa: E402
from lance_ops.format.txn.commit_loop import load_transaction  # noqa: E402

COMMITS = 6


def test_threads_mixed_commits_on_gcs(gcs_emulator, gcs_bucket):
    uri = f"{gcs_bucket}/stress"
    so = dict(gcs_emulator.storage_options)
    lf.write_dataset(table(list(range(400)), "init"), uri, enable_stable_row_ids=True,
                     max_rows_per_file=100, storage_options=so)
    barrier = threading.Barrier(WORKERS)
    lost_before = gcs_emulator.precondition_failures

    def work(w: int):
        barrier.wait(timeout=30)
        return run_worker(uri, w, COMMITS, 11, storage_options={**so, "skip_instance_cache": True})

    with ThreadPoolExecutor(WORKERS) as pool:
        reports = list(pool.map(work, range(WORKERS)))
    check_history(uri, reports, storage_options=so)
    store = ObjectStore(uri, so)
    scheme, versions = list_versions(store)
    assert versions[-1] == 1 + sum(len(r.versions) for r in reports) >= 1 + WORKERS * COMMITS * 0.9
    rebased = sum(load_transaction(store, v, scheme).read_version < v - 1 for v in versions[1:])
    assert rebased >= 3, "the threads did not race"
    # lost races really happened at the storage layer (HTTP 412 on the manifest create)
    assert gcs_emulator.precondition_failures > lost_before
