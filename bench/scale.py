"""``python -m bench.run --scale``: does lance_ops' cost grow linearly with the dataset?

At each size (default 10M and 100M rows, ``--scale-rows``) at file format 2.2, stable row ids:

- ``write``: ``write_dataset`` of a stream of 1M-row batches (generated on the fly, never the
  whole table in memory) by each library into its own dataset;
- ``scan``: every batch of the dataset pylance wrote, by both libraries;
- ``change_feed``: pylance appends 10% and updates 10% of the rows (untimed); lance_ops streams
  its whole change feed over those two versions, pylance reads ``delta()`` inserted + updated;
- ``compact``: pylance deletes 10% of every fragment (untimed); each library compacts its own
  copy (deletions materialised, fragments merged to 1M rows).

Each step runs once per library (``--scale-reps`` for more; the median is reported), with its
peak memory measured as in the other cases.  The table gives time per row and peak memory for
each size and, per step, how much lance_ops' time per row and peak grew from the smallest to the
largest size (the goal: time per row within 20%, peak independent of the size).
"""

import json
import os
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa

import lance_ops.format as lf

from .data import DELETE_PREDICATE_SQL, copy_dataset, dir_bytes, make_table, remove
from .measure import library_versions, machine, measure

BATCH_ROWS = 1_000_000
STEPS = ("write", "scan", "change_feed", "compact")


def batches(rows: int, start: int = 0) -> pa.RecordBatchReader:
    """``rows`` bench rows as a stream of 1M-row batches, generated as they are read."""
    schema = make_table(1).schema

    def gen() -> Iterator[pa.RecordBatch]:
        for lo in range(start, start + rows, BATCH_ROWS):
            yield from make_table(min(BATCH_ROWS, start + rows - lo), start=lo).to_batches()

    return pa.RecordBatchReader.from_batches(schema, gen())


def _run(fn: Callable[[], Any], reps: int, prepare: Callable[[], None] | None = None) -> dict[str, Any]:
    times, peaks = [], []
    for _ in range(reps):
        if prepare is not None:
            prepare()
        if hasattr(os, "sync"):
            os.sync()
        s = measure(fn, release=True)
        times.append(s.seconds)
        peaks.append(s.peak_mb)
    return {"s": statistics.median(times), "all_s": times, "peak_mb": max(p or 0 for p in peaks)}


def run_size(workdir: str, rows: int, reps: int, log: Callable[[str], None]) -> dict[str, dict[str, Any]]:
    import lance

    from lance_ops.format.ops.change_feed.batches import change_feed_batches

    out: dict[str, dict[str, Any]] = {}
    ours, theirs = os.path.join(workdir, f"scale{rows}_lance_ops"), os.path.join(workdir, f"scale{rows}_pylance")

    def step(name: str, lo: Callable[[], Any], py: Callable[[], Any],
             prep_lo: Callable[[], None] | None = None, prep_py: Callable[[], None] | None = None) -> None:
        out[name] = {"lance_ops": _run(lo, reps, prep_lo), "pylance": _run(py, reps, prep_py)}
        r = out[name]
        log(f"  {name}: lance_ops {r['lance_ops']['s']:.2f} s (peak {r['lance_ops']['peak_mb']:.0f} MB), "
            f"pylance {r['pylance']['s']:.2f} s (peak {r['pylance']['peak_mb']:.0f} MB)")

    step(
        "write",
        lambda: lf.write_dataset(batches(rows), ours, data_storage_version="2.2", enable_stable_row_ids=True),
        lambda: lance.write_dataset(batches(rows), theirs, data_storage_version="2.2", enable_stable_row_ids=True),
        prep_lo=lambda: remove(ours),
        prep_py=lambda: remove(theirs),
    )
    out["write"]["bytes"] = {"lance_ops": dir_bytes(ours), "pylance": dir_bytes(theirs)}
    remove(ours)

    def scan_ours() -> int:
        return sum(b.num_rows for b in lf.dataset(theirs).to_batches())

    def scan_theirs() -> int:
        return sum(b.num_rows for b in lance.dataset(theirs).to_batches())

    step("scan", scan_ours, scan_theirs)

    # history made by pylance: +10% appended (v2), 10% of the original rows updated (v3)
    t0 = time.perf_counter()
    lance.write_dataset(batches(rows // 10, start=rows), theirs, mode="append")
    lance.dataset(theirs).update({"s": "'updated'"}, where=f"x < 0.1 and id < {rows}")
    log(f"  (feed history by pylance: {time.perf_counter() - t0:.1f} s)")

    def feed_ours() -> int:
        ds = lf.dataset(theirs)
        return sum(b.num_rows for b in change_feed_batches(ds._store, ds._handler, 1, 3))

    def feed_theirs() -> int:
        d = lance.dataset(theirs).delta(begin_version=1, end_version=3)
        return sum(b.num_rows for r in (d.get_inserted_rows(), d.get_updated_rows()) for b in r)

    step("change_feed", feed_ours, feed_theirs)

    t0 = time.perf_counter()
    lance.dataset(theirs).delete(DELETE_PREDICATE_SQL)
    template = theirs + "_deleted"
    os.replace(theirs, template)
    log(f"  (10% deleted by pylance: {time.perf_counter() - t0:.1f} s)")
    # threshold below the 10% deleted: pylance materialises above it, lance_ops from it on
    opts = {"target_rows_per_fragment": BATCH_ROWS, "materialize_deletions_threshold": 0.05}
    step(
        "compact",
        lambda: lf.dataset(ours).compact_files(**opts),
        lambda: lance.dataset(theirs).optimize.compact_files(**opts),
        prep_lo=lambda: copy_dataset(template, ours),
        prep_py=lambda: copy_dataset(template, theirs),
    )
    out["compact"]["live_rows"] = lance.dataset(template).count_rows()
    for d in (ours, theirs, template):
        remove(d)
    return out


def _rows_of(step: str, rows: int) -> int:
    """The rows a step processes at a dataset size (the change feed: its 10% + 10%)."""
    if step == "change_feed":
        return rows // 10 * 2
    if step == "compact":
        return int(rows * 1.1 * 0.9)
    return rows


def markdown(results: dict[int, dict[str, dict[str, Any]]], header: str) -> str:
    sizes = sorted(results)
    lines = [header, "", "| step | rows | lance_ops | ns/row | peak | pylance | ns/row | peak | ratio |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for st in STEPS:
        for n in sizes:
            r = results[n].get(st)
            if r is None:
                continue
            k = r.get("live_rows") or _rows_of(st, n)
            lo, py = r["lance_ops"], r["pylance"]
            lines.append(
                f"| {st} | {n:,} | {lo['s']:.2f} s | {lo['s'] / k * 1e9:.0f} | {lo['peak_mb']:.0f} MB | "
                f"{py['s']:.2f} s | {py['s'] / k * 1e9:.0f} | {py['peak_mb']:.0f} MB | {lo['s'] / py['s']:.2f} |"
            )
    if len(sizes) > 1:
        a, b = sizes[0], sizes[-1]
        lines += ["", f"lance_ops from {a:,} to {b:,} rows (goal: time per row within 20%, peak independent of size):",
                  "", "| step | time per row | peak |", "|---|---:|---:|"]
        for st in STEPS:
            ra, rb = results[a].get(st), results[b].get(st)
            if ra is None or rb is None:
                continue
            ka, kb = ra.get("live_rows") or _rows_of(st, a), rb.get("live_rows") or _rows_of(st, b)
            pa_, pb_ = ra["lance_ops"]["s"] / ka, rb["lance_ops"]["s"] / kb
            grow = pb_ / pa_
            ok = "✅" if abs(grow - 1) <= 0.2 else "❌"
            lines.append(
                f"| {st} | {ok} {grow:.2f}x | {ra['lance_ops']['peak_mb']:.0f} MB -> {rb['lance_ops']['peak_mb']:.0f} MB |"
            )
    return "\n".join(lines) + "\n"


def main(sizes: list[int], workdir: str, reps: int, out_path: str | None) -> int:
    os.makedirs(workdir, exist_ok=True)
    load0 = _load()
    results: dict[int, dict[str, dict[str, Any]]] = {}
    print("# warm-up (200,000 rows, not reported)", flush=True)
    run_size(workdir, 200_000, 1, lambda s: None)
    for n in sizes:
        print(f"# scale: {n:,} rows (workdir {workdir})", flush=True)
        results[n] = run_size(workdir, n, reps, lambda s: print(s, flush=True))
    header = (
        f"`python -m bench.run --scale`, {time.strftime('%Y-%m-%d')}, {machine()}; "
        + ", ".join(f"{k} {v}" for k, v in library_versions().items())
        + f"; load average {load0} at start, {_load()} at end; file format 2.2, stable row ids, "
        f"{reps} run(s) per step."
    )
    table = markdown(results, header)
    print()
    print(table)
    if out_path:
        with open(out_path, "w") as f:
            json.dump({"date": time.strftime("%Y-%m-%dT%H:%M:%S"), "machine": machine(), "reps": reps,
                       "load_average": {"start": load0, "end": _load()},
                       "results": {str(k): v for k, v in results.items()}}, f, indent=2)
            f.write("\n")
        print(f"wrote {out_path}")
    return 0


def _load() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None
