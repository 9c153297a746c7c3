"""``python -m bench.run``: lance_ops against pylance, same data, same process, alternating.

Prints a Markdown table and, for a run of every case (or with ``--save``), writes
``bench/results.json`` and ``bench/RESULTS.md``; ``--merge`` folds a subset run into them instead.  See ``bench/README.md``.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from typing import Any

from .cases import TIME_RATIO_TARGET, Case, Skip, SparkEnv
from .data import Fixtures
from .measure import Sample, library_versions, machine, measure
from .registry import CASES, SPARK_CASES

HERE = os.path.dirname(os.path.abspath(__file__))


@dataclass
class Params:
    rows: int = 10_000_000
    batch_size: int = 65536
    appends: int = 500
    append_rows: int = 100
    versions: int = 501  # create + 500 appends: the append_commit dataset is reused when it ran
    opens: int = 20
    delete_rows: int = 2_000_000
    fragments: int = 200
    compact_tasks: int = 2  # one task per local[2] slot: Spark pays per task (~60 ms here)
    feed_rows: int = 1_000_000
    merge_rows: int = 1_000_000  # merge_insert: target rows (source: 10% matched + 10% new)
    small_fragments: int = 10_000  # compact_small_fragments / open_many_fragments
    small_fragment_rows: int = 100
    indexed_rows: int = 1_000_000  # compact_indexed (BTREE + IVF_PQ)
    scaling_rows: int = 10_000_000  # compact_scaling: local[1] vs local[2] at this many rows
    memory_rows: int = 20_000_000  # compact_memory: targets of memory_rows / 20, / 4 and / 1 rows
    cleanup_files: int = 100_000  # cleanup_routine_1m_files / orphan_sweep_1m_files (issue: 1M)
    cleanup_versions: int = 1_000  # (issue: 10,000)


    layout_rows: int = 1_000_000  # upgrade_20_to_22 / compact_zorder_2cols
    layout_fragments: int = 100
    reps: int = 7
    small_reps: int = 3
    spark_reps: int = 5
    fleet_tables: int = 1000  # plan_fleet_1000: tables under the root (and a tenth as many)
    fleet_fragments: int = 100


QUICK = {
    "rows": 2_000_000,
    "appends": 100,
    "versions": 101,
    "opens": 10,
    "delete_rows": 400_000,
    "feed_rows": 200_000,
    "merge_rows": 200_000,
    "small_fragments": 2_000,
    "indexed_rows": 200_000,
    "scaling_rows": 2_000_000,
    "memory_rows": 4_000_000,
    "cleanup_files": 20_000,
    "cleanup_versions": 200,


    "layout_rows": 200_000,
    "layout_fragments": 50,
    "reps": 3,
    "small_reps": 2,
    "spark_reps": 3,
}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller data and fewer repetitions (~1 minute)")
    ap.add_argument("--cases", help=f"comma-separated subset of: {', '.join(CASES)}")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    for name, default in vars(Params()).items():
        ap.add_argument(f"--{name.replace('_', '-')}", type=int, default=None, help=f"default {default}")
    ap.add_argument("--no-spark", action="store_true", help="skip the Spark cases")
    ap.add_argument("--workdir", help="where datasets are written (default: a temp dir, removed after)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--save", action="store_true", help="write results.json/RESULTS.md even for a subset")
    ap.add_argument("--no-save", action="store_true", help="never write results.json/RESULTS.md")
    ap.add_argument(
        "--merge",
        action="store_true",
        help="merge this (subset) run into the existing results.json/RESULTS.md: its cases replace "
        "or join the saved ones, which are kept",
    )
    ap.add_argument("--scale", action="store_true",
                    help="instead of the cases: write, scan, change feed and compaction at 10M and 100M rows "
                    "(time per row and peak memory; see bench/scale.py)")
    ap.add_argument("--scale-rows", default="10000000,100000000", help="comma-separated dataset sizes for --scale")
    ap.add_argument("--scale-reps", type=int, default=1, help="runs per step and library for --scale")
    ap.add_argument("--out", default=os.path.join(HERE, "results.json"))
    ap.add_argument("--markdown", default=os.path.join(HERE, "RESULTS.md"))
    return ap.parse_args(argv)


def make_params(args: argparse.Namespace) -> Params:
    p = Params()
    if args.quick:
        for k, v in QUICK.items():
            setattr(p, k, v)
    for k in vars(p):
        v = getattr(args, k)
        if v is not None:
            setattr(p, k, v)
    if args.appends is not None and args.versions is None:
        p.versions = p.appends + 1
    for name in ("delete_rows", "scaling_rows", "memory_rows"):
        if getattr(p, name) % (p.fragments * 1000):
            raise SystemExit(
                f"--{name.replace('_', '-')} ({getattr(p, name)}) must be a multiple of 1000 x --fragments "
                f"({p.fragments}) so that x < 0.1 deletes exactly 10% of every fragment"
            )
    return p


# ------------------------------------------------------------------------------ running
def run_case(case: Case) -> dict[str, list[Sample]]:
    """Every repetition runs every variant once; the order rotates so no variant always goes first.

    Cases that set ``alternate=False`` run all repetitions of one variant, then the next.
    """
    labels = list(case.variants)
    samples: dict[str, list[Sample]] = {v: [] for v in labels}
    # one untimed run per variant first: warms caches and sessions, and measures peak memory
    # (Arrow's free memory released first, so reused memory counts)
    for v in labels:
        if case.prepare is not None:
            case.prepare(v)
        _settle()
        warm = measure(case.variants[v], watch_children=v in case.spark_variants, release=True)
        warm.result = None
        peaks[case.name, v] = warm
    if case.alternate:
        runs = [v for rep in range(case.reps) for v in labels[rep % len(labels) :] + labels[: rep % len(labels)]]
    else:
        runs = [v for v in labels for _ in range(case.reps)]
    for v in runs:
        if case.prepare is not None:
            case.prepare(v)
        _settle()
        s = measure(case.variants[v], watch_children=v in case.spark_variants)
        s.seconds /= case.per_op
        s.result = None
        samples[v].append(s)
    return samples


def _settle() -> None:
    """Flush dirty pages before a timed run: writeback of earlier runs' output (GBs for the
    write cases) otherwise competes with the run for memory bandwidth and CPU."""
    if hasattr(os, "sync"):
        os.sync()


def _median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


#: the untimed first run of each (case, variant): its peak memory is the one reported
peaks: dict[tuple[str, str], Sample] = {}


def _peak(case: Case, variant: str) -> float | None:
    s = peaks.get((case.name, variant))
    return None if s is None or s.peak_mb is None else round(s.peak_mb, 1)


def _executor_peak(case: Case, variants: list[str], samples: dict[str, list[Sample]]) -> float | None:
    runs = [peaks[(case.name, v)] for v in variants if (case.name, v) in peaks]
    runs += [s for v in variants for s in samples.get(v, [])]
    vals = [s.executor_peak_mb for s in runs if s.executor_peak_mb is not None]
    return round(max(vals), 1) if vals else None


def summarise(case: Case, samples: dict[str, list[Sample]]) -> dict[str, Any]:
    med = {v: _median([s.seconds for s in ss]) for v, ss in samples.items()}
    work = case.work / case.per_op
    entry: dict[str, Any] = {"name": case.name}
    if case.kind == "compare":
        lo, py = med["lance_ops"], med["pylance"]
        entry.update(
            lance_ops_s=_round(lo),
            pylance_s=_round(py),
            ratio=round(lo / py, 3) if py > 0 else None,
            lance_ops_peak_mb=_peak(case, "lance_ops"),
            pylance_peak_mb=_peak(case, "pylance"),
            unit=case.unit,
            lance_ops_throughput=_round(work / lo) if lo > 0 else None,
            pylance_throughput=_round(work / py) if py > 0 else None,
        )
        ex = _executor_peak(case, ["lance_ops"], samples)
        if ex is not None:
            entry["executor_peak_mb"] = ex
    elif case.kind == "scaling":
        l1, l2 = med["local1"], med["local2"]
        entry.update(
            lance_ops_s=_round(l2),
            local1_s=_round(l1),
            local2_s=_round(l2),
            speedup=round(l1 / l2, 3) if l2 > 0 else None,
            lance_ops_peak_mb=_peak(case, "local2"),
            unit=case.unit,
            lance_ops_throughput=_round(work / l2) if l2 > 0 else None,
        )
        ex = _executor_peak(case, ["local1", "local2"], samples)
        if ex is not None:
            entry["executor_peak_mb"] = ex
    elif case.kind == "solo":  # lance_ops alone (no pylance counterpart); other variants reported beside
        entry.update(lance_ops_s=_round(med["lance_ops"]), lance_ops_peak_mb=_peak(case, "lance_ops"), unit=case.unit,
                     lance_ops_throughput=_round(work / med["lance_ops"]) if med["lance_ops"] > 0 else None,
                     **{f"{v}_s": _round(t) for v, t in med.items() if v != "lance_ops"})
    elif case.kind == "memory":
        # one run per variant (the untimed first one: Arrow's cache released, fresh Spark workers);
        # its peak memory is the result, its time is reported alongside
        for v in samples:
            first = peaks.get((case.name, v))
            if first is None:
                continue
            entry[f"{v}_s"] = _round(first.seconds)
            if first.executor_peak_mb is not None:
                entry[f"{v}_executor_peak_mb"] = round(first.executor_peak_mb, 1)
            elif first.peak_mb is not None:
                entry[f"{v}_peak_mb"] = round(first.peak_mb, 1)
        for kind in ("executor_peak_mb", "peak_mb"):
            vals = [entry[f"{v}_{kind}"] for v in samples if entry.get(f"{v}_{kind}") is not None]
            if vals:
                entry[f"{kind}_spread"] = round(max(vals) - min(vals), 1)
        entry["unit"] = case.unit
    else:  # limit
        t = med["ipc"]
        entry.update(ipc_s=_round(t), unit=case.unit, ipc_throughput=_round(work / t) if t > 0 else None)
        entry["limit_of"] = case.limit_of
    if any(s.approx_peak for (name, _), s in peaks.items() if name == case.name):
        entry["peak_is_upper_bound"] = True
    entry["reps"] = case.reps
    entry["min_s"] = {v: _round(min(s.seconds for s in ss)) for v, ss in samples.items() if ss}
    entry["all_s"] = {v: [_round(s.seconds) for s in ss] for v, ss in samples.items()}
    entry.update(case.extra)
    target = case.target
    if target is None and case.kind == "compare" and case.name not in UNTIMED_TARGETS and "pylance" in samples:
        target = DEFAULT_TARGET  # issue 35: every case at or below pylance's time
    if target is not None:
        entry["target"] = target.full_text
        entry["target_met"] = target.met(entry)
    lo_peak, py_peak = entry.get("lance_ops_peak_mb"), entry.get("pylance_peak_mb")
    if lo_peak is not None and py_peak is not None:
        # issue 35: no case of ours may need more than pylance's peak plus 32 MB
        entry["memory_target"] = f"peak <= pylance's + {MEMORY_SLACK_MB} MB"
        entry["memory_ok"] = bool(lo_peak <= py_peak + MEMORY_SLACK_MB)
    return entry


#: the memory bound of every compare case: lance_ops peak <= 2 x pylance peak + this
MEMORY_SLACK_MB = 32
#: the time target of a compare case that names none
DEFAULT_TARGET = TIME_RATIO_TARGET
#: compare cases held to no time target: a Spark job against an in-process call (issue 35)
UNTIMED_TARGETS = frozenset({"change_feed_22_local2"})


def _round(x: float) -> float:
    if x != x:  # nan
        return x
    return float(f"{x:.4g}")


def link_limits(entries: list[dict[str, Any]]) -> None:
    """Put each limit next to the case it bounds: lance_ops and pylance time / IPC time."""
    by_name = {e["name"]: e for e in entries}
    for e in entries:
        ref = by_name.get(e.get("limit_of") or "")
        if ref and e.get("ipc_s"):
            e["lance_ops_vs_limit"] = round(ref["lance_ops_s"] / e["ipc_s"], 2)
            e["pylance_vs_limit"] = round(ref["pylance_s"] / e["ipc_s"], 2)


# ------------------------------------------------------------------------------ report
def _fmt_s(x: Any) -> str:
    if x is None or x != x:
        return "—"
    if x >= 1:
        return f"{x:.2f} s"
    if x >= 1e-3:
        return f"{x * 1e3:.1f} ms"
    return f"{x * 1e6:.0f} µs"


def _fmt_rate(x: Any, unit: str) -> str:
    if x is None:
        return "—"
    if x >= 1e6 and unit == "rows/s":
        return f"{x / 1e6:.2f} M rows/s"
    return f"{x:,.0f} {unit}"


def _fmt_bytes(n: int) -> str:
    return f"{n / 1e6:,.1f} MB"


def markdown(entries: list[dict[str, Any]], skipped: dict[str, str], header: str) -> str:
    lines = [
        header,
        "",
        "| case | lance_ops | pylance | ratio | lance_ops rate | pylance rate | lance_ops peak | pylance peak "
        "| target | notes |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for e in entries:
        unit = e.get("unit", "")
        met = e.get("target_met")
        target = "" if "target" not in e else f"{'✅' if met else '❌'} {e['target']}"
        notes = []
        if e["name"].startswith("ipc_limit"):
            lo, py = e.get("lance_ops_vs_limit"), e.get("pylance_vs_limit")
            rate = _fmt_rate(e.get("ipc_throughput"), unit)
            if lo is not None:
                notes.append(f"{e['limit_of']}: lance_ops {lo}× / pylance {py}× the IPC time")
            lines.append(f"| {e['name']} | {_fmt_s(e['ipc_s'])} (IPC) | | | {rate} | | | | | {'; '.join(notes)} |")
            continue
        if "speedup" in e:
            notes.append(f"local[1] {_fmt_s(e['local1_s'])}, local[2] {_fmt_s(e['local2_s'])}, speedup {e['speedup']}×")
        if "executor_peak_mb_spread" in e:
            notes.append(_memory_notes(e))
        if e.get("executor_peak_mb") is not None:
            notes.append(f"executor peak {e['executor_peak_mb']:.0f} MB")
        if e.get("memory_ok") is False:
            notes.append(f"❌ peak above pylance's + {MEMORY_SLACK_MB} MB")
        if e.get("lance_ops_bytes") is not None and e.get("pylance_bytes") is not None:
            notes.append(
                f"on disk: lance_ops {_fmt_bytes(e['lance_ops_bytes'])}, pylance {_fmt_bytes(e['pylance_bytes'])}"
                + (f" ({e['size_ratio']:.2f}x)" if e.get("size_ratio") else "")
            )
        if e.get("dataset_bytes") is not None:
            notes.append(f"reads {_fmt_bytes(e['dataset_bytes'])} written by {e.get('written_by', '?')}")
        elif e.get("written_by"):
            notes.append(f"dataset written by {e['written_by']}" + (", stable row ids" if e.get("stable_row_ids") else ""))
        if e.get("data_storage_version"):
            notes.append(f"file format {e['data_storage_version']}")
        if e.get("per_table_ms"):
            notes.append(f"CPU {e['cpu_s']} s; per table {e['per_table_ms']} ms, growth {e['per_table_growth']}x")
        if e.get("measured"):
            notes.append(f"measured {e['measured']}")
        if e["name"] in ("append_commit", "open_latest", "open_many_fragments"):
            notes.append("per operation")
        ratio = e.get("ratio")
        peak = e.get("lance_ops_peak_mb")
        py_peak = e.get("pylance_peak_mb")
        lines.append(
            "| {name} | {lo} | {py} | {ratio} | {lr} | {pr} | {peak} | {py_peak} | {target} | {notes} |".format(
                name=e["name"],
                lo=_fmt_s(e.get("lance_ops_s")),
                py=_fmt_s(e.get("pylance_s")),
                ratio="—" if ratio is None else f"{ratio:.2f}",
                lr=_fmt_rate(e.get("lance_ops_throughput"), unit),
                pr=_fmt_rate(e.get("pylance_throughput"), unit),
                peak="—" if peak is None else f"{peak:.0f} MB",
                py_peak="—" if py_peak is None else f"{py_peak:.0f} MB",
                target=target,
                notes="; ".join(notes),
            )
        )
    for name, why in skipped.items():
        lines.append(f"| {name} | skipped | | | | | | | | {why} |")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------ main
def _load_compiled_kernels(workdir: str) -> None:
    """Load lance_ops' compiled 2.2 kernels (numba: ~120 MB of LLVM and machine code, once per
    process) before the cases, as ``import lance`` loads pylance's native library: the first 2.2
    case's peak is then its own working set, not the loading (a 4,096-row round trip through both
    writers and lance_ops' reader; untimed)."""
    import shutil

    import lance

    import lance_ops.format as lf

    from .data import make_table

    table = make_table(4096)
    for name, write in (("lo", lf.write_dataset), ("pl", lance.write_dataset)):
        path = os.path.join(workdir, f"_kernels_{name}")
        write(table, path, data_storage_version="2.2")
        for _ in lf.dataset(path).to_batches():
            pass
        shutil.rmtree(path, ignore_errors=True)


def _run_scale(args: argparse.Namespace) -> int:
    """``--scale``: time per row and peak memory at growing sizes (:mod:`.scale`)."""
    from . import scale

    workdir = args.workdir or tempfile.mkdtemp(prefix="lance_ops_scale_")
    try:
        sizes = [int(x) for x in args.scale_rows.split(",") if x.strip()]
        out = None if args.no_save else os.path.join(HERE, "scale_results.json")
        return scale.main(sizes, workdir, args.scale_reps, out)
    finally:
        if not args.keep and not args.workdir:
            import shutil

            shutil.rmtree(workdir, ignore_errors=True)


def _run_one(name: str, fx: Fixtures, p: Any, spark: SparkEnv) -> dict[str, Any] | str:
    """One case: its summary entry, or why it was skipped or failed."""
    t0 = time.perf_counter()
    try:
        factory = CASES[name]
        case = factory(fx, p, spark) if name in SPARK_CASES else factory(fx, p)
    except Skip as e:
        print(f"- {name}: SKIPPED: {e}", flush=True)
        return str(e)
    setup_s = time.perf_counter() - t0
    try:
        samples = run_case(case)
    except Skip as e:
        print(f"- {name}: SKIPPED: {e}", flush=True)
        return str(e)
    except Exception as e:
        print(f"- {name}: FAILED", flush=True)
        traceback.print_exc()
        return f"failed: {type(e).__name__}: {e}"
    finally:
        if case.after is not None:
            case.after(case)
        if case.cleanup is not None:
            case.cleanup()
    entry = summarise(case, samples)
    print(f"- {name}: {_progress(entry)} (setup {setup_s:.1f} s, case {time.perf_counter() - t0:.1f} s)", flush=True)
    return entry


def _save(args: argparse.Namespace, entries: list[dict[str, Any]], skipped: dict[str, str], mode: str, p: Any,
          load_start: Any, table: str) -> None:
    """Write ``results.json`` and the Markdown table of a full (or ``--save``) run."""
    doc = {
        "machine": machine(),
        "load_average": {"start": load_start, "end": _loadavg()},
        "versions": library_versions(),
        "mode": mode,
        "params": vars(p),
        "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "cases": entries,
        "skipped": skipped,
    }
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    with open(args.markdown, "w") as f:
        f.write(table)
    print(f"wrote {args.out} and {args.markdown}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.list:
        for name in CASES:
            print(name)
        return 0
    if args.scale:
        return _run_scale(args)
    p = make_params(args)
    selected = list(CASES) if not args.cases else [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = [c for c in selected if c not in CASES]
    if unknown:
        print(f"unknown case(s) {unknown}; choose from {list(CASES)}", file=sys.stderr)
        return 2
    selected = [c for c in CASES if c in selected]  # run order is fixed
    full_run = set(selected) == set(CASES)
    workdir = args.workdir or tempfile.mkdtemp(prefix="lance_ops_bench_")
    os.makedirs(workdir, exist_ok=True)
    fx = Fixtures(workdir, p)
    _load_compiled_kernels(workdir)
    spark = SparkEnv(enabled=not args.no_spark)
    entries: list[dict[str, Any]] = []
    skipped: dict[str, str] = {}
    started = time.time()
    load_start = _loadavg()
    print(f"# bench: {', '.join(selected)}\n# params: {vars(p)}\n# workdir: {workdir}", flush=True)
    try:
        for name in selected:
            outcome = _run_one(name, fx, p, spark)
            if isinstance(outcome, str):
                skipped[name] = outcome
            else:
                entries.append(outcome)
    finally:
        spark.stop()
        if not args.keep and not args.workdir:
            import shutil

            shutil.rmtree(workdir, ignore_errors=True)
    link_limits(entries)
    mode = "quick" if args.quick else "default"
    header = (
        f"lance_ops vs pylance, `make bench{' QUICK=1' if args.quick else ''}` ({mode} sizes), "
        f"{time.strftime('%Y-%m-%d')}, {machine()}; "
        + ", ".join(f"{k} {v}" for k, v in library_versions().items())
        + f"; load average {load_start} at start, {_loadavg()} at end"
        + ". Times are medians; ratio = lance_ops / pylance (lower is better)."
    )
    table = markdown(entries, skipped, header)
    print()
    print(table)
    print(f"total {time.time() - started:.0f} s")
    if args.merge and not args.no_save and not full_run:
        merge_results(args, entries, skipped, mode, p, load_start)
    elif (full_run or args.save) and not args.no_save:
        _save(args, entries, skipped, mode, p, load_start, table)
    return 0


def merge_results(
    args: argparse.Namespace,
    entries: list[dict[str, Any]],
    skipped: dict[str, str],
    mode: str,
    p: Params,
    load_start: float | None,
) -> None:
    """Fold a subset run into the saved results: its entries replace (or are inserted among) the
    saved ones in run order, each marked (``measured``, shown in the notes) with when and how it
    was measured; the saved header (the full run's) stays, and ``merged`` in results.json lists
    every merged run with its parameters."""
    try:
        with open(args.out) as f:
            doc = json.load(f)
    except (OSError, ValueError):
        doc = {}
    when = time.strftime("%Y-%m-%dT%H:%M:%S")
    stamp = f"{time.strftime('%Y-%m-%d')} (separate run"
    if mode != doc.get("mode", mode):
        stamp += f", {mode} sizes"
    if p.rows != doc.get("params", {}).get("rows", p.rows):
        stamp += f", {p.rows:,} rows"
    stamp += f", load average {load_start}–{_loadavg()})"
    for e in entries:
        e["measured"] = stamp
    by_name = {e["name"]: e for e in doc.get("cases", [])}
    by_name.update({e["name"]: e for e in entries})
    old_skipped = {k: v for k, v in doc.get("skipped", {}).items() if k not in by_name and k not in skipped}
    new_skipped = {**old_skipped, **skipped}
    for k in skipped:
        by_name.pop(k, None)
    order = list(CASES)
    cases = sorted(by_name.values(), key=lambda e: order.index(e["name"]) if e["name"] in order else len(order))
    link_limits(cases)
    doc["cases"] = cases
    doc["skipped"] = new_skipped
    # earlier merged runs whose every case this run re-measured no longer describe any row
    remeasured = {e["name"] for e in entries}
    doc["merged"] = [m for m in doc.get("merged", []) if set(m.get("cases", [])) - remeasured]
    doc["merged"].append(
        {
            "date": when,
            "cases": [e["name"] for e in entries],
            "mode": mode,
            "params": vars(p),
            "load_average": {"start": load_start, "end": _loadavg()},
            "versions": library_versions(),
        }
    )
    header = None
    try:
        with open(args.markdown) as f:
            header = f.readline().rstrip("\n")
    except OSError:
        pass
    if not header or header.startswith("|"):
        header = "lance_ops vs pylance (merged runs). Times are medians; ratio = lance_ops / pylance (lower is better)."
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    with open(args.markdown, "w") as f:
        f.write(markdown(cases, new_skipped, header))
    print(f"merged {', '.join(e['name'] for e in entries)} into {args.out} and {args.markdown}")


def _loadavg() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def _memory_notes(e: dict[str, Any]) -> str:
    """compact_memory: each target's executor peak (and in-process peak rise) and the spreads."""
    parts = []
    for t in e.get("targets", []):
        ex, own = e.get(f"spark_{t}_executor_peak_mb"), e.get(f"inprocess_{t}_peak_mb")
        parts.append(f"{t}: executor {ex:.0f} MB, in-process +{own:.0f} MB" if ex is not None and own is not None
                     else f"{t}: executor {ex} MB, in-process {own} MB")
    return "; ".join(parts) + (f"; spread executor {e['executor_peak_mb_spread']:.0f} MB, "
                               f"in-process {e.get('peak_mb_spread', float('nan')):.0f} MB")


def _progress(e: dict[str, Any]) -> str:
    if "executor_peak_mb_spread" in e:
        return _memory_notes(e)
    if "ipc_s" in e:
        return f"ipc {_fmt_s(e['ipc_s'])}"
    if "speedup" in e:
        return f"local[1] {_fmt_s(e['local1_s'])}, local[2] {_fmt_s(e['local2_s'])}, speedup {e['speedup']}"
    if "pylance_s" not in e:  # a solo case
        return f"lance_ops {_fmt_s(e['lance_ops_s'])}, cpu {e.get('cpu_s')} s, target met: {e.get('target_met')}"
    return (
        f"lance_ops {_fmt_s(e['lance_ops_s'])}, pylance {_fmt_s(e['pylance_s'])}, ratio {e['ratio']}, "
        f"lance_ops peak {e['lance_ops_peak_mb']} MB, pylance peak {e.get('pylance_peak_mb')} MB"
    )


if __name__ == "__main__":
    sys.exit(main())
