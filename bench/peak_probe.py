"""Peak memory of one lance_ops operation in a fresh process, and where it is reached.

``python -m bench.peak_probe OP --workdir DIR [--runs 2] [--stacks]``: DIR is a ``--keep`` work
directory of ``python -m bench.run`` that ran the case (its template datasets).  Loads the
compiled kernels as ``bench.run`` does, then runs OP ``--runs`` times on fresh copies and
prints each run's peak (``bench.measure``: the resident set's rise, first run = what the bench
reports).  ``--stacks`` also samples every thread's stack whenever the resident set reaches a
new high during the last run and prints the last four (lance_ops frames only).

OP: ``add_columns`` (``x * 2`` on ``scan22_pylance_ds``), ``create_btree`` (``btree_False``),
``merge_insert`` (``merge_ds``, the bench's source rebuilt), ``change_feed`` (``feed_ds``),
``change_feed_22_full`` (``py_feed22_ds``), ``compact_22`` (``py_deleted22_ds``).
"""

import argparse
import os
import shutil
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

import lance_ops.format as lf

from .data import make_table
from .measure import measure
from .run import _load_compiled_kernels


def _merge_source(n: int = 1_000_000) -> pa.Table:
    matched = make_table(n // 10).set_column(0, "id", pa.array(np.arange(0, n, 10, dtype=np.int64)))
    src = pa.concat_tables([matched, make_table(n // 10, start=n)])
    order = np.random.default_rng(7).permutation(src.num_rows)
    return src.take(pa.array(order)).combine_chunks()


def _op(name: str, wd: str, scratch: str) -> Callable[[], Any]:
    def fresh(src: str) -> str:
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.copytree(os.path.join(wd, src), scratch)
        return scratch

    if name == "add_columns":
        d = fresh("scan22_pylance_ds")
        return lambda: lf.dataset(d).add_columns({"y": "x * 2"})
    if name == "create_btree":
        d = fresh("btree_False")
        return lambda: lf.dataset(d).create_scalar_index("x", "BTREE")
    if name == "merge_insert":
        src, d = _merge_source(), fresh("merge_ds")
        return lambda: lf.dataset(d).merge_insert("id").when_matched_update_all() \
            .when_not_matched_insert_all().execute(src)
    if name == "compact_22":
        d = fresh("py_deleted22_ds")
        return lambda: lf.dataset(d).compact_files(target_rows_per_fragment=1_000_000)
    feeds = {"change_feed": "feed_ds", "change_feed_22_full": "py_feed22_ds"}
    if name in feeds:
        return lambda: lf.dataset(os.path.join(wd, feeds[name])).change_feed(1, 3)
    raise SystemExit(f"unknown operation {name!r}")


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _sample(stop: threading.Event, base: int, out: list[tuple[int, list[Any]]]) -> None:
    best, me = 0, threading.get_ident()
    while not stop.is_set():
        r = _rss() - base
        if r > best + (4 << 20):
            best = r
            frames = [traceback.extract_stack(f)[-8:] for t, f in sys._current_frames().items() if t != me]
            out.append((r, frames))
        time.sleep(0.0005)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("op")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--stacks", action="store_true")
    a = ap.parse_args()
    scratch = os.path.join(a.workdir, "_probe")
    _load_compiled_kernels(a.workdir)
    for i in range(a.runs):
        fn = _op(a.op, a.workdir, scratch)
        seen: list[tuple[int, list[Any]]] = []
        stop = threading.Event()
        sampler = threading.Thread(target=_sample, args=(stop, _rss(), seen), daemon=True)
        if a.stacks and i == a.runs - 1:
            sampler.start()
        s = measure(fn, release=True)
        stop.set()
        print(f"run {i}: peak {s.peak_mb:.1f} MB, {s.seconds * 1000:.0f} ms")
        for rise, frames in seen[-4:]:
            print(f"--- resident set +{rise / 2**20:.0f} MB")
            for stack in frames:
                for fs in stack:
                    if "lance_ops" in fs.filename:
                        print(f"   {fs.filename.rsplit('lance_ops/', 1)[-1]}:{fs.lineno} {fs.name}")
                print("   ...")
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
