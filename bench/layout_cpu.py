"""CPU time of the issue-36 layout cases against pylance, in one process.

``python -m bench.layout_cpu --workdir DIR [--rows 1000000] [--reps 7]``: writes the two
templates of ``bench.cases_layout`` once into DIR (pylance, 100 fragments), then alternates
lance_ops and pylance on fresh copies and prints CPU-time (``time.process_time``, every thread)
medians and ratios with the load average: ``compact_zorder_2cols`` (lance_ops clustered by
``k, g`` against pylance's plain compaction), ``upgrade_20_to_22`` (lance_ops to 2.2 against
pylance's plain compaction) and, for reference, pylance's own upgrade of the same table.
"""

import argparse
import os
import shutil
import statistics
import time
from collections.abc import Callable

import lance

import lance_ops.format as lf
from bench.cases_layout import _keyed_table
from bench.data import make_table


def _templates(workdir: str, rows: int) -> tuple[str, str]:
    t20, tz = os.path.join(workdir, "layout20_ds"), os.path.join(workdir, "layoutz_ds")
    per_file = rows // 100
    if not os.path.exists(t20):
        lance.write_dataset(make_table(rows), t20, max_rows_per_file=per_file, data_storage_version="2.0")
    if not os.path.exists(tz):
        lance.write_dataset(_keyed_table(rows), tz, max_rows_per_file=per_file, data_storage_version="2.2",
                            enable_stable_row_ids=True)
    return t20, tz


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--reps", type=int, default=7)
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    t20, tz = _templates(a.workdir, a.rows)
    per = a.rows // 10
    runs: dict[str, tuple[str, Callable[[str], object]]] = {
        "zorder lance_ops": (tz, lambda d: lf.dataset(d).compact_files(
            target_rows_per_fragment=per, cluster_by=["k", "g"], strategy="zorder")),
        "zorder pylance plain": (tz, lambda d: lance.dataset(d).optimize.compact_files(target_rows_per_fragment=per)),
        "upgrade lance_ops": (t20, lambda d: lf.dataset(d).compact_files(
            target_rows_per_fragment=per, data_storage_version="2.2")),
        "upgrade pylance plain": (t20, lambda d: lance.dataset(d).optimize.compact_files(target_rows_per_fragment=per)),
        "upgrade pylance 2.2": (t20, lambda d: lance.dataset(d).optimize.compact_files(
            target_rows_per_fragment=per, data_storage_version="2.2")),
    }
    scratch = os.path.join(a.workdir, "run")

    def cpu(src: str, fn: Callable[[str], object]) -> float:
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.copytree(src, scratch)
        t = time.process_time()
        fn(scratch)
        return time.process_time() - t

    for src, fn in runs.values():  # warm-up (compiled kernels, caches)
        cpu(src, fn)
    got: dict[str, list[float]] = {k: [] for k in runs}
    print("load at start", os.getloadavg())
    names = list(runs)
    for i in range(a.reps):
        for k in names[i % len(names):] + names[: i % len(names)]:
            got[k].append(cpu(*runs[k]))
    print("load at end", os.getloadavg())
    med = {k: statistics.median(v) for k, v in got.items()}
    for k, v in med.items():
        print(f"{k:24s} {v * 1000:7.0f} ms  {[round(x * 1000) for x in got[k]]}")
    print(f"compact_zorder_2cols ratio {med['zorder lance_ops'] / med['zorder pylance plain']:.2f} (target <= 3)")
    print(f"upgrade_20_to_22 ratio {med['upgrade lance_ops'] / med['upgrade pylance plain']:.2f} (target <= 2); "
          f"against pylance's upgrade {med['upgrade lance_ops'] / med['upgrade pylance 2.2']:.2f}")
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
