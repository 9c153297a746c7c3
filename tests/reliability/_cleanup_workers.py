"""Process bodies for test_cleanup_concurrency.py (module-level so ``spawn`` children import them).

Writers (lance_ops or pylance) append rows with ids they own and delete some of their own live
rows; every acknowledged commit is reported with the version it became.  Cleaners (lance_ops or
pylance) run ``cleanup_old_versions`` in a loop with a short retention until told to stop and
report every failure.
"""

import random
import time
import traceback
from dataclasses import dataclass, field
from datetime import timedelta

import numpy as np
import pyarrow as pa

RETENTION = timedelta(seconds=0.5)
MIN_RUNS = 3  # each cleaner runs at least this often, even if the writers finish first


@dataclass
class WriterReport:
    name: str
    appended: dict[int, list[int]] = field(default_factory=dict)
    deleted: dict[int, list[int]] = field(default_factory=dict)
    retries: int = 0
    typed_failures: list[str] = field(default_factory=list)  # lance_ops: typed errors, retried
    untyped: list[str] = field(default_factory=list)  # lance_ops: anything else (a defect)
    gave_up: list[str] = field(default_factory=list)


@dataclass
class CleanerReport:
    name: str
    runs: int = 0
    runs_during_writes: int = 0  # runs started while the writers were still committing
    removed_versions: int = 0
    failures: list[str] = field(default_factory=list)


def table(ids: list[int]) -> pa.Table:
    a = np.asarray(ids, dtype=np.int64)
    return pa.table({"id": a, "val": pa.array([f"v{i}" for i in ids]), "score": (a * 0.5).astype(np.float64)})


def lance_ops_writer(uri: str, name: str, base: int, commits: int, seed: int) -> WriterReport:
    import pyarrow.compute as pc

    import lance_ops.format as lf

    rng = random.Random(seed)
    rep = WriterReport(name)
    live: list[int] = []
    next_id = base
    for _ in range(commits):
        delete = len(live) > 5 and rng.random() < 0.3
        if delete:
            ids = sorted(rng.sample(live, rng.randint(1, 3)))
        else:
            n = rng.randint(1, 10)
            ids, next_id = list(range(next_id, next_id + n)), next_id + n
        for _attempt in range(40):
            try:
                if delete:
                    ds = lf.dataset(uri)
                    deleted = ds.delete(pc.field("id").isin(ids))["num_deleted_rows"]
                    assert deleted == len(ids), f"{name}: delete of live {ids} deleted {deleted}"
                    rep.deleted[ds.version] = ids
                    live = [i for i in live if i not in set(ids)]
                else:
                    rep.appended[lf.write_dataset(table(ids), uri, mode="append").version] = ids
                    live.extend(ids)
                break
            except lf.LanceOpsError as e:  # a lost race, or a file a cleanup removed under us
                rep.retries += 1
                rep.typed_failures.append(f"{type(e).__name__}: {str(e)[:160]}")
                time.sleep(rng.uniform(0, 0.02))
            except Exception:  # noqa: BLE001 - reported to the parent, which fails the test
                rep.untyped.append(traceback.format_exc())
                break
        else:
            rep.gave_up.append(f"{'delete' if delete else 'append'} {ids}")
    return rep


def pylance_writer(uri: str, name: str, base: int, commits: int, seed: int) -> WriterReport:
    import lance

    rng = random.Random(seed)
    rep = WriterReport(name)
    live: list[int] = []
    next_id = base
    for _ in range(commits):
        delete = len(live) > 5 and rng.random() < 0.3
        if delete:
            ids = sorted(rng.sample(live, rng.randint(1, 3)))
        else:
            n = rng.randint(1, 10)
            ids, next_id = list(range(next_id, next_id + n)), next_id + n
        for _attempt in range(40):
            try:
                if delete:
                    ds = lance.dataset(uri)
                    before = ds.version
                    ds.delete(f"id IN ({', '.join(map(str, ids))})")
                    assert ds.version > before, f"{name}: delete of live {ids} matched nothing"
                    rep.deleted[ds.version] = ids
                    live = [i for i in live if i not in set(ids)]
                else:
                    rep.appended[lance.write_dataset(table(ids), uri, mode="append").version] = ids
                    live.extend(ids)
                break
            except AssertionError:
                raise
            except Exception as e:  # noqa: BLE001 - pylance's errors are untyped; retried
                rep.retries += 1
                rep.typed_failures.append(f"{type(e).__name__}: {str(e)[:160]}")
                time.sleep(rng.uniform(0, 0.02))
        else:
            rep.gave_up.append(f"{'delete' if delete else 'append'} {ids}")
    return rep


def lance_ops_cleaner(uri: str, name: str, stop) -> CleanerReport:
    import lance_ops.format as lf

    rep = CleanerReport(name)
    while not stop.is_set() or rep.runs + len(rep.failures) < MIN_RUNS:
        rep.runs_during_writes += not stop.is_set()
        try:
            stats = lf.dataset(uri).cleanup_old_versions(
                older_than=RETENTION, retain_versions=2, retention_duration_check=False
            )
            rep.runs += 1
            rep.removed_versions += stats.old_versions
            if stats.failed_deletes:
                rep.failures.append(f"{stats.failed_deletes} failed deletes")
        except Exception:  # noqa: BLE001 - every failure is a defect here
            rep.failures.append(traceback.format_exc())
        time.sleep(0.05)
    return rep


def pylance_cleaner(uri: str, name: str, stop) -> CleanerReport:
    import lance

    rep = CleanerReport(name)
    while not stop.is_set() or rep.runs + len(rep.failures) < MIN_RUNS:
        rep.runs_during_writes += not stop.is_set()
        try:
            stats = lance.dataset(uri).cleanup_old_versions(
                older_than=RETENTION, retain_versions=2, error_if_tagged_old_versions=False
            )
            rep.runs += 1
            rep.removed_versions += stats.old_versions
        except Exception:  # noqa: BLE001 - counted
            rep.failures.append(traceback.format_exc())
        time.sleep(0.05)
    return rep


def child(kind: str, args: tuple, barrier, stop, queue) -> None:
    import lance  # noqa: F401 - imports before the start line, so everyone starts together

    import lance_ops.format  # noqa: F401

    body = {"lance_ops_writer": lance_ops_writer, "pylance_writer": pylance_writer,
            "lance_ops_cleaner": lance_ops_cleaner, "pylance_cleaner": pylance_cleaner}[kind]
    barrier.wait(timeout=60)
    try:
        if kind.endswith("cleaner"):
            queue.put(body(*args, stop))
        else:
            queue.put(body(*args))
    except BaseException:  # noqa: BLE001 - the parent fails the test with this
        queue.put(f"{kind} {args[1]} crashed:\n{traceback.format_exc()}")
