"""Process bodies of test_soak.py (module level: ``spawn`` children import them).

Every row's content is a function of its id (``val = f"v{id}"``, ``score = id / 2``), so any
row any reader sees is checked against the model.  Writers journal each commit: an ``intent``
line before it, a ``done`` line with the version after it (a writer killed in between leaves an
intent whose ids must then be all present or all absent).
"""

import json
import os
import random
import time
import traceback
from datetime import timedelta

import numpy as np
import pyarrow as pa

RETENTION = timedelta(seconds=0.5)


def table(ids: list[int]) -> pa.Table:
    a = np.asarray(ids, dtype=np.int64)
    return pa.table({"id": a, "val": pa.array([f"v{i}" for i in ids]), "score": (a * 0.5).astype(np.float64)})


def _journal(path: str, **entry: object) -> None:
    with open(path, "a") as f:
        f.write(json.dumps(entry) + "\n")
        f.flush()


def writer(uri: str, lib: str, base: int, journal: str, stop: str, seed: int,
           storage_options: dict | None = None) -> None:
    """Appends (and deletes of its own rows) until ``stop`` exists; ids from ``base`` (a restarted
    writer continues after the ids its journal names).  ``storage_options``: lance_ops writers only."""
    import pyarrow.compute as pc

    import lance_ops.format as lf

    rng = random.Random(seed)
    next_id, live = base, []
    if os.path.exists(journal):
        for line in open(journal):
            e = json.loads(line)
            next_id = max(next_id, max(e["ids"]) + 1)
            if e["kind"] == "append" and e["phase"] == "done":
                live.extend(e["ids"])
            if e["kind"] == "delete" and e["phase"] == "done":
                live = [i for i in live if i not in set(e["ids"])]
    while not os.path.exists(stop):
        delete = len(live) > 20 and rng.random() < 0.25
        ids = sorted(rng.sample(live, 3)) if delete else list(range(next_id, next_id + rng.randint(5, 50)))
        next_id = max(next_id, ids[-1] + 1)
        kind = "delete" if delete else "append"
        _journal(journal, kind=kind, phase="intent", ids=ids)
        for _attempt in range(50):
            try:
                if lib == "pylance":
                    import lance

                    if delete:
                        ds = lance.dataset(uri)
                        ds.delete(f"id IN ({', '.join(map(str, ids))})")
                        version = ds.version
                    else:
                        version = lance.write_dataset(table(ids), uri, mode="append").version
                elif delete:
                    ds = lf.dataset(uri, storage_options=storage_options)
                    ds.delete(pc.field("id").isin(ids))
                    version = ds.version
                else:
                    version = lf.write_dataset(table(ids), uri, mode="append", storage_options=storage_options).version
                break
            except Exception:  # noqa: BLE001 - a lost race: retried
                time.sleep(rng.uniform(0, 0.05))
        else:
            _journal(journal, kind=kind, phase="gave_up", ids=ids)
            continue
        _journal(journal, kind=kind, phase="done", ids=ids, version=version)
        live = [i for i in live if i not in set(ids)] if delete else live + ids


def reader(uri: str, out: str, stop: str, storage_options: dict | None = None) -> None:
    """Leases the latest version, waits (cleanups run), reads it in full and checks every row."""
    import lance_ops.format as lf

    reads = failed = refused = 0
    problems: list[str] = []
    while not os.path.exists(stop):
        try:
            ds = lf.dataset(uri, storage_options=storage_options)
            try:
                lease = ds.lease(ttl=3)
            except lf.VersionRemovedError:
                # cleanup removed the version between the open and the lease: nothing was read yet,
                # the lease is refused (as documented) and the reader opens the latest again
                refused += 1
                continue
            with lease:
                time.sleep(random.uniform(0.2, 1.5))  # a long reader
                t = ds.to_table(columns=["id", "val", "score"])
            ids = t.column("id").to_numpy()
            ok = (len(set(ids.tolist())) == len(ids)
                  and t.column("val").to_pylist() == [f"v{i}" for i in ids]
                  and np.array_equal(t.column("score").to_numpy(), ids * 0.5))
            reads += 1
            if not ok:
                problems.append(f"version {ds.version}: rows do not match the model")
        except Exception:  # noqa: BLE001 - counted: a missing file is a failed read
            failed += 1
            problems.append(traceback.format_exc()[-600:])
    with open(out, "w") as f:
        json.dump({"reads": reads, "failed": failed, "lease_refused": refused, "problems": problems}, f)


def maintainer(uri: str, out: str, stop: str, storage_options: dict | None = None) -> None:
    """Compaction (with deletion materialisation), optimize_indices, cleanup on a short retention
    (routine and full in turn) and the orphan sweep, in a loop."""
    import lance_ops.format as lf

    runs = {"compact": 0, "optimize_indices": 0, "cleanup": 0, "sweep": 0, "errors": 0}
    problems: list[str] = []
    i = 0
    while not os.path.exists(stop):
        i += 1
        try:
            ds = lf.dataset(uri, storage_options=storage_options)
            if i % 3 == 0:
                ds.compact_files(target_rows_per_fragment=2000, materialize_deletions_threshold=0.05)
                runs["compact"] += 1
            if i % 5 == 0 and ds.list_indices():
                lf.dataset(uri, storage_options=storage_options).optimize_indices()
                runs["optimize_indices"] += 1
            lf.dataset(uri, storage_options=storage_options).cleanup_old_versions(RETENTION, retention_duration_check=False,
                                                 mode="lite" if i % 2 else "full")
            runs["cleanup"] += 1
            if i % 7 == 0:
                lf.dataset(uri, storage_options=storage_options).remove_orphan_files(timedelta(seconds=30), retention_duration_check=False)
                runs["sweep"] += 1
        except lf.CommitConflictError:
            pass  # lost a race against a writer: the next round retries
        except Exception:  # noqa: BLE001 - reported
            runs["errors"] += 1
            problems.append(traceback.format_exc()[-600:])
        time.sleep(0.1)
    with open(out, "w") as f:
        json.dump({"runs": runs, "problems": problems}, f)
