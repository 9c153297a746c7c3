"""Worker bodies for the stress tests (module-level so ``spawn`` children can import them).

Each worker owns the ids ``id % WORKERS == worker`` and makes ``commits`` mixed commits on one
dataset: appends of new own rows, deletes and updates of own live rows, config changes.  A
RetryableCommitConflictError makes the worker redo the operation on the latest version; every
committed operation is reported with the version it became, every failure with its type.
"""

import random
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import lance_ops.format as lf

WORKERS = 4


@dataclass
class Report:
    worker: int
    appended: dict[int, list[int]] = field(default_factory=dict)  # version -> ids
    deleted: dict[int, list[int]] = field(default_factory=dict)  # version -> ids
    updated: dict[int, tuple[list[int], str]] = field(default_factory=dict)  # version -> (ids, value)
    configs: dict[int, dict[str, str]] = field(default_factory=dict)  # version -> upserts
    retries: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)  # (exception type, message)
    untyped: list[str] = field(default_factory=list)  # tracebacks of non-LanceOpsError failures

    @property
    def versions(self) -> list[int]:
        return [*self.appended, *self.deleted, *self.updated, *self.configs]


def table(ids: list[int], tag: str) -> pa.Table:
    a = np.asarray(ids, dtype=np.int64)
    return pa.table({"id": a, "val": pa.array([f"{tag}{i}" for i in ids]), "score": (a * 0.5).astype(np.float64)})


def run_worker(
    uri: str,
    worker: int,
    commits: int,
    seed: int,
    storage_options: dict[str, Any] | None = None,
    max_attempts: int = 50,
) -> Report:
    rng = random.Random(seed * 1000 + worker)
    rep = Report(worker)
    so = storage_options
    # own live ids: the shared initial rows plus what this worker appends
    live = [i for i in range(400) if i % WORKERS == worker]
    next_id = 1000 + worker
    for k in range(commits):
        kind = rng.choices(["append", "delete", "update", "config"], weights=[4, 2, 3, 1])[0]
        if kind in ("delete", "update") and len(live) < 3:
            kind = "append"
        if kind == "append":
            n = rng.randint(1, 20)
            ids = list(range(next_id, next_id + WORKERS * n, WORKERS))
            next_id += WORKERS * n
        elif kind == "delete":
            ids = sorted(rng.sample(live, rng.randint(1, min(5, len(live)))))
        elif kind == "update":
            ids = sorted(rng.sample(live, rng.randint(1, min(5, len(live)))))
            value = f"w{worker}c{k}"
        else:
            # a private key always, the shared key sometimes: same-key races are incompatible
            upserts = {f"worker.{worker}": str(k)}
            if rng.random() < 0.3:
                upserts["shared"] = f"{worker}:{k}"
        for _attempt in range(max_attempts):
            try:
                if kind == "append":
                    ds = lf.write_dataset(table(ids, "a"), uri, mode="append", storage_options=so)
                    rep.appended[ds.version] = ids
                    live.extend(ids)
                else:
                    ds = lf.dataset(uri, storage_options=so)
                    if kind == "delete":
                        deleted = ds.delete(pc.field("id").isin(ids), conflict_retries=0)["num_deleted_rows"]
                        assert deleted == len(ids), f"delete of live rows {ids} deleted {deleted}"
                        rep.deleted[ds.version] = ids
                        live = [i for i in live if i not in set(ids)]
                    elif kind == "update":
                        n = ds.update({"val": pa.scalar(value)}, where=pc.field("id").isin(ids), conflict_retries=0)["num_rows_updated"]
                        assert n == len(ids), f"update of live rows {ids} updated {n}"
                        rep.updated[ds.version] = (ids, value)
                    else:
                        ds.update_config(upserts)
                        rep.configs[ds.version] = upserts
                break
            except lf.RetryableCommitConflictError:
                rep.retries += 1
                time.sleep(rng.uniform(0, 0.02))
            except lf.LanceOpsError as e:
                rep.failures.append((type(e).__name__, str(e)))
                break
            except Exception:  # noqa: BLE001 - reported to the parent, which fails the test
                rep.untyped.append(traceback.format_exc())
                break
        else:
            rep.failures.append(("gave up", f"{kind} after {max_attempts} retryable conflicts"))
    return rep


def run_compactor(uri: str, rounds: int, seed: int, max_attempts: int = 50) -> Report:
    """Compact (and materialise deletions) ``rounds`` times while the others commit.

    Reported as ``worker = -1``; a compaction's versions (ReserveFragments + Rewrite) are found
    from the transactions afterwards.  A retryable conflict (e.g. a compaction racing another
    compaction, or deletes without stable row ids) is redone on the latest version.
    """
    rng = random.Random(seed)
    rep = Report(-1)
    for _ in range(rounds):
        for _attempt in range(max_attempts):
            try:
                lf.dataset(uri).compact_files(target_rows_per_fragment=rng.choice([150, 400, 1000]),
                                              materialize_deletions_threshold=0.05)
                break
            except lf.RetryableCommitConflictError:
                rep.retries += 1
            except lf.LanceOpsError as e:
                rep.failures.append((type(e).__name__, str(e)))
                break
            except Exception:  # noqa: BLE001 - reported to the parent, which fails the test
                rep.untyped.append(traceback.format_exc())
                break
        time.sleep(rng.uniform(0, 0.05))
    return rep
