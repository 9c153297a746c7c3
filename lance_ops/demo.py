"""``make demo``: write a local dataset, append, time-travel and print a summary.

Runs on the embedded default (a dataset under ``.lance_ops/demo``).  Exits non-zero if any
check fails.
"""

import shutil
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import lance_ops.format as lf

ROOT = Path(".lance_ops") / "demo" / "events"


def _batch(start: int, n: int) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table(
        {
            "id": ids,
            "kind": pa.array(np.array(["click", "view", "buy"])[ids % 3]),
            "amount": (ids % 97).astype(np.float64) * 1.25,
        }
    )


def main() -> int:
    if ROOT.exists():
        shutil.rmtree(ROOT)
    uri = str(ROOT)
    t0 = time.perf_counter()
    lf.write_dataset(_batch(0, 200_000), uri, enable_stable_row_ids=True, max_rows_per_file=50_000)
    for i in range(1, 4):
        lf.write_dataset(_batch(200_000 * i, 20_000), uri, mode="append")
    ds = lf.dataset(uri)
    elapsed = time.perf_counter() - t0
    checks = {
        "4 versions": [v["version"] for v in ds.versions()] == [1, 2, 3, 4],
        "rows": ds.count_rows() == 260_000,
        "time travel to v1": ds.checkout_version(1).count_rows() == 200_000,
        "stable row ids are dense": ds.to_table(columns=["_rowid"])["_rowid"].to_numpy().tolist()
        == list(range(260_000)),
        "created_at of the last append": set(
            ds.to_table(columns=["_row_created_at_version"], filter=pc.field("id") >= 600_000)[
                "_row_created_at_version"
            ].to_pylist()
        )
        == {4},
    }
    print(f"dataset {uri}: {len(ds.versions())} versions, {len(ds.get_fragments())} fragments, "
          f"{ds.count_rows()} rows, written in {elapsed:.2f}s")
    print(f"{'version':>8} {'rows':>10} {'fragments':>10}")
    for v in ds.versions():
        md = v["metadata"]
        print(f"{v['version']:>8} {md['total_rows']:>10} {md['total_fragments']:>10}")
    for name, ok in checks.items():
        print(f"  [{'ok' if ok else 'FAILED'}] {name}")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
