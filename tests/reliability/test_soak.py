"""Soak: lance_ops and pylance writers, readers holding leases, maintenance on a short retention
and killed writers, all at once, for ``LANCE_OPS_SOAK_SECONDS`` (default 90).

At the end: every committed write is present (lost = 0), every read matched the model and none
failed with a missing file (failed reads = 0), the orphan sweep leaves nothing that nothing
references (orphans = 0), and pylance and lance_ops open every surviving version alike.
"""

import json
import multiprocessing as mp
import os
import random
import time
from datetime import timedelta

import _soak_workers as w
import lance
import pytest

import lance_ops.format as lf

pytestmark = [pytest.mark.slow, pytest.mark.soak]
SECONDS = float(os.environ.get("LANCE_OPS_SOAK_SECONDS", "90"))


def _model(journals: list[str]) -> tuple[set[int], set[int], int]:
    """(ids that must be present, ids whose commit outcome is unknown, commits)."""
    present: set[int] = set()
    unknown: set[int] = set()
    commits = 0
    for path in journals:
        if not os.path.exists(path):  # a writer killed (or stopped) before its first intent wrote nothing
            continue
        pending: dict[tuple, list[int]] = {}
        for line in open(path):
            e = json.loads(line)
            key = (e["kind"], tuple(e["ids"]))
            if e["phase"] == "intent":
                pending[key] = e["ids"]
            elif e["phase"] in ("done", "gave_up"):
                pending.pop(key, None)
                if e["phase"] == "done":
                    commits += 1
                    (present.update if e["kind"] == "append" else present.difference_update)(e["ids"])
        for (kind, _ids), ids in pending.items():  # killed between intent and done
            unknown.update(ids)
            if kind == "delete":
                present.difference_update(ids)
    return present, unknown, commits


def test_soak(tmp_path):
    uri = str(tmp_path / "ds")
    lf.write_dataset(w.table(list(range(100))), uri, enable_stable_row_ids=True)
    lf.dataset(uri).create_scalar_index("id", "BTREE")
    ctx = mp.get_context("spawn")
    stop = str(tmp_path / "stop")
    journals = {lib: str(tmp_path / f"{lib}.jsonl") for lib in ("lance_ops", "pylance")}
    bases = {"lance_ops": 1_000_000, "pylance": 2_000_000}

    def start_writer(lib: str, seed: int) -> mp.Process:
        p = ctx.Process(target=w.writer, args=(uri, lib, bases[lib], journals[lib], stop, seed))
        p.start()
        return p

    writers = {lib: start_writer(lib, i) for i, lib in enumerate(journals)}
    readers = [ctx.Process(target=w.reader, args=(uri, str(tmp_path / f"reader{i}.json"), stop)) for i in range(2)]
    maint = ctx.Process(target=w.maintainer, args=(uri, str(tmp_path / "maint.json"), stop))
    for p in [*readers, maint]:
        p.start()
    faults, rng, deadline = 0, random.Random(7), time.monotonic() + SECONDS
    while time.monotonic() < deadline:
        time.sleep(rng.uniform(5, 15))
        victim = rng.choice(list(writers))  # a killed writer process, restarted
        writers[victim].kill()
        writers[victim].join()
        faults += 1
        writers[victim] = start_writer(victim, 100 + faults)
    open(stop, "w").close()
    for p in [*writers.values(), *readers, maint]:
        p.join(300)
        assert p.exitcode in (0, -9), p.exitcode

    present, unknown, commits = _model(list(journals.values()))
    present |= set(range(100))
    got = set(lf.dataset(uri).to_table(columns=["id"]).column("id").to_pylist())
    lost = present - got
    extra = got - present - unknown
    rd = [json.load(open(tmp_path / f"reader{i}.json")) for i in range(2)]
    mt = json.load(open(tmp_path / "maint.json"))
    # after everyone stopped: routine cleanup, then the sweep with no grace; nothing unreferenced is left
    lf.dataset(uri).cleanup_old_versions(timedelta(0), retention_duration_check=False, mode="lite")
    swept = lf.dataset(uri).remove_orphan_files(timedelta(0), retention_duration_check=False)
    orphans = lf.dataset(uri).remove_orphan_files(timedelta(0), retention_duration_check=False, dry_run=True)
    versions = [v["version"] for v in lance.dataset(uri).versions()]
    for v in versions:
        assert lance.dataset(uri, version=v).count_rows() == lf.dataset(uri, version=v).count_rows()
    counts = {"seconds": SECONDS, "writes": commits, "reads": sum(r["reads"] for r in rd),
              "maintenance_runs": mt["runs"], "faults": faults, "lost": len(lost), "unexpected": len(extra),
              "failed_reads": sum(r["failed"] for r in rd),
              "leases_refused": sum(r["lease_refused"] for r in rd), "orphans_swept": len(swept.removed_paths),
              "orphans": len(orphans.removed_paths), "versions_left": len(versions)}
    print("SOAK", json.dumps(counts))
    assert not lost and not extra, (sorted(lost)[:10], sorted(extra)[:10])
    assert counts["failed_reads"] == 0, [p for r in rd for p in r["problems"]][:3]
    assert not [p for r in rd for p in r["problems"]]
    assert mt["runs"]["errors"] == 0, mt["problems"][:3]
    assert counts["orphans"] == 0 and counts["writes"] > 0 and counts["reads"] > 0 and faults > 0
