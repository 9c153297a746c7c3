"""``python -m bench.cpu WORKDIR``: CPU time (``time.process_time``: every thread of the process)
and wall time of lance_ops against pylance on the datasets a kept bench run left in ``WORKDIR``
(``python -m bench.run --cases ... --workdir WORKDIR --keep``), alternating, medians.

CPU time is what a loaded machine does not distort much: wall times there measure the other
processes.  Cases: the scans of the pylance-written 2.2 dataset (projection, the SQL filter, a
selective filter with and without late materialisation), the deletes and the change feeds.
"""

import argparse
import gc
import inspect
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import lance

import lance_ops.format as lf

from .cases import SCAN_SQL_FILTER
from .cases_22 import _feed_until_preimages, _pylance_delta
from .data import DELETE_PREDICATE_SQL, delete_predicate

SELECTIVE = "x < 0.001"


def _delta_rows(path: str) -> Callable[[], int]:
    return lambda: _pylance_delta(path, 1, 3)


def cases(work: str) -> dict[str, tuple[Callable[[], Any], Callable[[], Any], Callable[[str], None] | None]]:
    scan = os.path.join(work, "scan22_pylance_ds")
    out: dict[str, Any] = {}
    if os.path.isdir(scan):
        out["scan_projection_22_pylance_written"] = (
            lambda: sum(b.num_rows for b in lf.dataset(scan).to_batches(columns=["id", "x"])),
            lambda: sum(b.num_rows for b in lance.dataset(scan).to_batches(columns=["id", "x"])), None)
        out["scan_sql_filter"] = (
            lambda: sum(b.num_rows for b in lf.dataset(scan).to_batches(filter=SCAN_SQL_FILTER)),
            lambda: sum(b.num_rows for b in lance.dataset(scan).to_batches(filter=SCAN_SQL_FILTER)), None)
        # (a lance_ops without the option decodes every column of every row: "late_False")
        has_late = "late_materialization" in inspect.signature(lf.LanceDataset.to_table).parameters
        for late in (None, False) if has_late else (False,):
            kw = {"late_materialization": late} if has_late else {}
            out[f"scan_selective_late_{late}"] = (
                lambda kw=kw: lf.dataset(scan).to_table(filter=SELECTIVE, **kw).num_rows,
                lambda late=late: lance.dataset(scan).to_table(filter=SELECTIVE, late_materialization=late).num_rows,
                None)
    for name, src in (("delete_10pct", "frags_ds"), ("delete_22", "py_frags22_ds")):
        template = os.path.join(work, src)
        if not os.path.isdir(template):
            continue
        copies = {v: os.path.join(work, f"cpu_{name}_{v}") for v in ("lance_ops", "pylance")}

        def prepare(v: str, template: str = template, copies: dict[str, str] = copies) -> None:
            shutil.rmtree(copies[v], ignore_errors=True)
            shutil.copytree(template, copies[v])

        out[name] = (lambda c=copies: lf.dataset(c["lance_ops"]).delete(delete_predicate()),
                     lambda c=copies: lance.dataset(c["pylance"]).delete(DELETE_PREDICATE_SQL), prepare)
    feed = os.path.join(work, "feed_ds")
    if os.path.isdir(feed):
        out["change_feed"] = (lambda: lf.dataset(feed).change_feed(1, 3).num_rows, _delta_rows(feed), None)
    feed22 = os.path.join(work, "py_feed22_ds")
    if os.path.isdir(feed22):
        out["change_feed_22"] = (lambda: _feed_until_preimages(feed22, 1, 3).num_rows, _delta_rows(feed22), None)
        out["change_feed_22_full"] = (lambda: lf.dataset(feed22).change_feed(1, 3).num_rows, _delta_rows(feed22),
                                      None)
    return out


def _run(fn: Callable[[], Any]) -> tuple[float, float]:
    gc.collect()
    c0, t0 = time.process_time(), time.perf_counter()
    fn()
    return time.process_time() - c0, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.cpu", description=__doc__.splitlines()[0])
    ap.add_argument("workdir")
    ap.add_argument("--cases", help="comma-separated subset")
    ap.add_argument("--reps", type=int, default=7)
    args = ap.parse_args(argv)
    todo = cases(args.workdir)
    if args.cases:
        todo = {k: v for k, v in todo.items() if k in args.cases.split(",")}
    print(f"# load average at start {os.getloadavg()[0]:.2f}", flush=True)
    print("| case | lance_ops CPU | pylance CPU | CPU ratio | lance_ops wall | pylance wall | wall ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, (ours, theirs, prepare) in todo.items():
        got: dict[str, list[tuple[float, float]]] = {"lance_ops": [], "pylance": []}
        for v, fn in (("lance_ops", ours), ("pylance", theirs)):  # warm-up (kernels, caches)
            if prepare:
                prepare(v)
            fn()
        for r in range(args.reps):
            order = [("lance_ops", ours), ("pylance", theirs)][:: 1 if r % 2 == 0 else -1]
            for v, fn in order:
                if prepare:
                    prepare(v)
                got[v].append(_run(fn))
        med = {v: (statistics.median(c for c, _ in s), statistics.median(w for _, w in s)) for v, s in got.items()}
        (oc, ow), (pc_, pw) = med["lance_ops"], med["pylance"]
        print(f"| {name} | {oc * 1e3:.1f} ms | {pc_ * 1e3:.1f} ms | {oc / pc_:.2f} | {ow * 1e3:.1f} ms | "
              f"{pw * 1e3:.1f} ms | {ow / pw:.2f} |", flush=True)
    print(f"# load average at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    sys.exit(main())

