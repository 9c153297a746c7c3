"""Soak on the GCS emulator: lance_ops writers, readers holding leases and maintenance on a short
retention, all at once, while the bucket misbehaves, for ``LANCE_OPS_SOAK_GCS_SECONDS`` (default 45).

The faults, injected in turn: a writer process killed (and restarted), uploads answered 503 without
being applied, uploads applied whose answer is lost (the commit's outcome is then ambiguous until
read back), and reads answered 503.  At the end, as in tests/reliability/test_soak.py: nothing
committed is lost, nothing unknown appeared, no read failed or saw a row the model does not have,
maintenance raised nothing but lost races, and the sweep leaves no unreferenced file.  pylance is
not a writer here (its object store does not take the emulator's endpoint); the local soak has it.
"""

import json
import multiprocessing as mp
import os
import random
import sys
import time
from datetime import timedelta

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "reliability"))

import _soak_workers as w  # noqa: E402
from test_soak import _model  # noqa: E402

import lance_ops.format as lf  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.soak]
SECONDS = float(os.environ.get("LANCE_OPS_SOAK_GCS_SECONDS", "45"))
WRITERS = {"a": 1_000_000, "b": 2_000_000}


def test_soak_on_gcs(gcs_emulator, gcs_bucket, tmp_path):
    uri = f"{gcs_bucket}/soak"
    bucket = gcs_bucket.removeprefix("gs://")
    so = dict(gcs_emulator.storage_options)
    lf.write_dataset(w.table(list(range(100))), uri, enable_stable_row_ids=True, storage_options=so)
    lf.dataset(uri, storage_options=so).create_scalar_index("id", "BTREE")
    ctx = mp.get_context("spawn")
    stop = str(tmp_path / "stop")
    journals = {name: str(tmp_path / f"{name}.jsonl") for name in WRITERS}

    def start_writer(name: str, seed: int) -> mp.Process:
        p = ctx.Process(target=w.writer, args=(uri, "lance_ops", WRITERS[name], journals[name], stop, seed, so))
        p.start()
        return p

    writers = {name: start_writer(name, i) for i, name in enumerate(WRITERS)}
    readers = [ctx.Process(target=w.reader, args=(uri, str(tmp_path / f"reader{i}.json"), stop, so)) for i in range(2)]
    maint = ctx.Process(target=w.maintainer, args=(uri, str(tmp_path / "maint.json"), stop, so))
    for p in [*readers, maint]:
        p.start()
    uploads, objects = f"/upload/storage/v1/b/{bucket}/o", f"/storage/v1/b/{bucket}/o/"
    faults = {"killed": 0, "upload_503": 0, "upload_answer_lost": 0, "read_503": 0}
    rng, deadline = random.Random(11), time.monotonic() + SECONDS
    while time.monotonic() < deadline:
        time.sleep(rng.uniform(2, 5))
        kind = list(faults)[sum(faults.values()) % len(faults)]  # each kind in turn
        if kind == "killed":
            victim = rng.choice(list(writers))
            writers[victim].kill()
            writers[victim].join()
            writers[victim] = start_writer(victim, 100 + sum(faults.values()))
        elif kind == "upload_503":
            gcs_emulator.fail_requests("POST", uploads, status=503, count=3)
        elif kind == "upload_answer_lost":
            gcs_emulator.drop_responses("POST", uploads, count=1)
        else:
            gcs_emulator.fail_requests("GET", objects, status=503, count=3)
        faults[kind] += 1
    open(stop, "w").close()
    for p in [*writers.values(), *readers, maint]:
        p.join(300)
        assert p.exitcode in (0, -9), p.exitcode
    gcs_emulator.clear_faults()

    present, unknown, commits = _model(list(journals.values()))
    present |= set(range(100))
    ds = lf.dataset(uri, storage_options=so)
    got = ds.to_table(columns=["id"]).column("id").to_pylist()
    lost, extra = present - set(got), set(got) - present - unknown
    rd = [json.load(open(tmp_path / f"reader{i}.json")) for i in range(2)]
    mt = json.load(open(tmp_path / "maint.json"))
    ds.cleanup_old_versions(timedelta(0), retention_duration_check=False, mode="lite")
    swept = lf.dataset(uri, storage_options=so).remove_orphan_files(timedelta(0), retention_duration_check=False)
    orphans = lf.dataset(uri, storage_options=so).remove_orphan_files(timedelta(0), retention_duration_check=False,
                                                                      dry_run=True)
    latest = lf.dataset(uri, storage_options=so)
    counts = {"seconds": SECONDS, "writes": commits, "reads": sum(r["reads"] for r in rd),
              "maintenance_runs": mt["runs"], "faults": faults, "lost": len(lost), "unexpected": len(extra),
              "duplicates": len(got) - len(set(got)), "failed_reads": sum(r["failed"] for r in rd),
              "leases_refused": sum(r["lease_refused"] for r in rd),
              "orphans_swept": len(swept.removed_paths), "orphans": len(orphans.removed_paths),
              "versions_left": len(latest.versions())}
    print("SOAK_GCS", json.dumps(counts))
    assert not lost and not extra and counts["duplicates"] == 0, (sorted(lost)[:10], sorted(extra)[:10])
    assert counts["failed_reads"] == 0, [p for r in rd for p in r["problems"]][:3]
    assert not [p for r in rd for p in r["problems"]]
    assert mt["runs"]["errors"] == 0, mt["problems"][:3]
    assert latest.count_rows() == len(got) and latest.validate() is None
    assert counts["orphans"] == 0 and counts["writes"] > 0 and counts["reads"] > 0 and all(faults.values())
