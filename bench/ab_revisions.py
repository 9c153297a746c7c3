"""Before/after CPU ratios of two source trees on the same data, in one run.

``python -m bench.ab_revisions --before /work/main --after . --workdir DIR`` (DIR: a ``--keep``
work directory of ``python -m bench.run --cases delete_10pct,change_feed_22``, holding
``frags_ds`` and ``py_feed22_ds``).  Child processes alternate between the trees (each imports
lance_ops and ``bench`` from its tree); inside each, lance_ops and pylance alternate on the same
data and CPU time (``time.process_time``) is taken per call.  Prints the median ratio
(lance_ops / pylance) of every case for both trees, and the load average at start and end.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

CASES = ("delete_10pct", "change_feed_22", "change_feed_22_full")


def _child(workdir: str, reps: int) -> dict[str, float]:
    import lance

    import lance_ops.format as lf
    from bench.cases_22 import _feed_until_preimages, _pylance_delta
    from bench.data import DELETE_PREDICATE_SQL, delete_predicate

    feed = os.path.join(workdir, "py_feed22_ds")
    frags = os.path.join(workdir, "frags_ds")
    scratch = os.path.join(workdir, f"ab_{os.getpid()}")
    out: dict[str, float] = {}

    def fresh(name: str) -> str:
        d = os.path.join(scratch, name)
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(frags, d)
        return d

    def cpu(fn, arg) -> float:
        t = time.process_time()
        fn(arg)
        return time.process_time() - t

    runs = {
        "delete_10pct": (lambda d: lf.dataset(d).delete(delete_predicate()),
                         lambda d: lance.dataset(d).delete(DELETE_PREDICATE_SQL)),
        "change_feed_22": (lambda _: _feed_until_preimages(feed, 1, 3), lambda _: _pylance_delta(feed, 1, 3)),
        "change_feed_22_full": (lambda _: lf.dataset(feed).change_feed(1, 3), lambda _: _pylance_delta(feed, 1, 3)),
    }
    try:
        for case, (ours, theirs) in runs.items():
            a, b = [], []
            for _ in range(reps):
                d = fresh("o") if case.startswith("delete") else None
                a.append(cpu(ours, d))
                d = fresh("p") if case.startswith("delete") else None
                b.append(cpu(theirs, d))
            out[case] = statistics.median(a) / statistics.median(b)
            out[case + "_ms"] = statistics.median(a) * 1000
            out[case + "_pylance_ms"] = statistics.median(b) * 1000
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(_child(args.workdir, args.reps)))
        return
    load0 = os.getloadavg()
    res: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
    for _ in range(args.rounds):
        for label in ("before", "after"):
            tree = os.path.abspath(getattr(args, label))
            env = dict(os.environ, PYTHONPATH=tree)
            cmd = [sys.executable, os.path.abspath(__file__), "--before", ".", "--after", ".", "--child",
                   "--workdir", os.path.abspath(args.workdir), "--reps", str(args.reps)]
            got = subprocess.run(cmd, cwd=tree, env=env, check=True, capture_output=True, text=True)
            res[label].append(json.loads(got.stdout.strip().splitlines()[-1]))
    print(f"load average {load0[0]:.2f} at start, {os.getloadavg()[0]:.2f} at end; "
          f"{args.rounds} rounds x {args.reps} reps, CPU time medians")
    print("| case | before: lance_ops / pylance | after: lance_ops / pylance |")
    print("|---|---:|---:|")
    for case in CASES:
        cells = []
        for label in ("before", "after"):
            rs = res[label]
            ratio = statistics.median(r[case] for r in rs)
            ms = statistics.median(r[case + "_ms"] for r in rs)
            py = statistics.median(r[case + "_pylance_ms"] for r in rs)
            cells.append(f"{ratio:.2f} ({ms:.1f} / {py:.1f} ms)")
        print(f"| {case} | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
    main()
