"""The benchmark cases: what each variant runs, on which data, and the target it is held to.

A case has timed *variants* (``lance_ops`` and ``pylance``; ``ipc`` for the physical limits;
``local1``/``local2`` for Spark scaling) that the runner alternates within every repetition,
and an untimed ``prepare(variant)`` that resets state (fresh output directory, fresh copy of a
template dataset) before each timed run.
"""

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import lance_ops.format as lf

from .data import (
    DELETE_PREDICATE_SQL,
    Fixtures,
    Workdirs,
    copy_dataset,
    delete_predicate,
    dir_bytes,
    make_table,
    read_ipc,
    remove,
    write_ipc,
)

MB = 1e6  # throughput in decimal MB/s of Arrow in-memory bytes


@dataclass
class Target:
    """``ratio <= value`` (lance_ops time / pylance time), ``speedup >= value``, or any other
    metric of the entry ``<= value`` (e.g. ``executor_peak_mb_spread``)."""

    metric: str  # "ratio", "speedup", "size_ratio" (lance_ops bytes / pylance bytes on disk), or a lower-is-better entry key
    value: float
    text: str
    also: "Target | None" = None  # a second condition that must hold too

    def met(self, entry: dict[str, Any]) -> bool | None:
        got = entry.get(self.metric)
        if got is None:
            return None
        ok = bool(got >= self.value) if self.metric == "speedup" else bool(got <= self.value)
        if self.also is not None:
            other = self.also.met(entry)
            return None if other is None else ok and other

        return ok

    @property
    def full_text(self) -> str:
        return self.text if self.also is None else f"{self.text} and {self.also.full_text}"


@dataclass
class Case:
    name: str
    variants: dict[str, Callable[[], Any]]
    work: float  # units of work per run (MB, rows, commits, opens)
    unit: str  # "MB/s", "rows/s", ...
    reps: int
    kind: str = "compare"  # "compare" | "limit" | "scaling"
    prepare: Callable[[str], None] | None = None
    target: Target | None = None
    spark_variants: frozenset[str] = frozenset()
    per_op: int = 1  # a timed run does this many operations; times are reported per operation
    alternate: bool = True  # False: all repetitions of one variant, then the next (Spark masters)
    limit_of: str | None = None  # limit cases: the case whose times they bound
    extra: dict[str, Any] = field(default_factory=dict)
    cleanup: Callable[[], None] | None = None
    after: Callable[["Case"], None] | None = None


#: the target of most cases: lance_ops' time at most pylance's
TIME_RATIO_TARGET = Target("ratio", 1.0, "time <= 1.0x pylance")


class Skip(Exception):
    """A case that cannot run here (the message says why)."""


# ------------------------------------------------------------------------------- Spark
class SparkEnv:
    """``lance_ops.jobs`` if it is importable and complete, and one SparkSession at a time."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self._jobs: Any = None
        self._problem: str | None = None if enabled else "Spark cases disabled (--no-spark)"
        self._checked = not enabled
        self._spark: Any = None
        self._master: str | None = None

    def jobs(self, *needed: str) -> Any:
        if not self._checked:
            self._checked = True
            try:
                self._jobs = importlib.import_module("lance_ops.jobs")
            except Exception as e:  # any import failure: report and skip, never crash the run
                self._problem = f"lance_ops.jobs does not import ({type(e).__name__}: {e})"
        if self._problem:
            raise Skip(self._problem)
        missing = [n for n in ("spark_session", *needed) if not callable(getattr(self._jobs, n, None))]
        if missing:
            raise Skip(f"lance_ops.jobs has no {', '.join(missing)} yet")
        return self._jobs

    def session(self, master: str, *, fresh: bool = False) -> Any:
        """A session on ``master``, warmed up (Python workers started, lance_ops imported);
        ``fresh``: a new one even if one on ``master`` is running (new Python workers)."""
        if self._spark is not None and self._master == master and not fresh:
            return self._spark
        self.stop()
        spark = self.jobs().spark_session(master=master)
        got = spark.sparkContext.master
        if got != master:
            raise Skip(f"spark_session(master={master!r}) returned a session on {got!r}")
        slots = int(master[len("local[") : -1]) if master.startswith("local[") else 2
        # start every Python worker and import lance_ops in it, outside the timed runs
        spark.sparkContext.parallelize(range(slots * 4), slots * 4).map(_warm).collect()
        self._spark, self._master = spark, master
        return spark

    def stop(self) -> None:
        if self._spark is not None:
            self._spark.stop()
            self._spark = self._master = None


def _warm(i: int) -> int:
    import lance_ops.format  # noqa: F401
    from lance_ops.format.file.v21 import kernels

    # numba's import and the cached kernels' loading: ~0.6 s of CPU per fresh Python worker,
    # which a first job on 2.1/2.2 files otherwise pays inside its tasks
    kernels.get()
    return i


# ------------------------------------------------------------------------------- helpers
def _pylance() -> Any:
    import lance

    return lance


def _fresh_dirs(fx: Fixtures, stem: str, labels: list[str]) -> Workdirs:
    return Workdirs({v: fx.path(f"{stem}_{v}") for v in labels})


# ------------------------------------------------------------------------------- cases
def _write(fx: Fixtures, p: Any, name: str, version: str, target: Target | None, sizes: bool) -> Case:
    lance = _pylance()
    table = fx.table()
    out = _fresh_dirs(fx, f"write{version.replace('.', '')}", ["lance_ops", "pylance"])
    extra: dict[str, Any] = {"rows": table.num_rows, "mb": round(table.nbytes / MB, 1)}
    if sizes:
        extra["data_storage_version"] = version

    def prepare(v: str) -> None:
        remove(out[v])

    def after(case: Case) -> None:
        # on-disk size of what the last timed run of each library wrote (before cleanup)
        if sizes:
            for v, d in out.items():
                if os.path.isdir(d):
                    case.extra[f"{v}_bytes"] = dir_bytes(d)
            if case.extra.get("pylance_bytes"):
                case.extra["size_ratio"] = round(case.extra["lance_ops_bytes"] / case.extra["pylance_bytes"], 3)

    return Case(
        name,
        {
            "lance_ops": lambda: lf.write_dataset(table, out["lance_ops"], data_storage_version=version),
            "pylance": lambda: lance.write_dataset(table, out["pylance"], data_storage_version=version),
        },
        work=table.nbytes / MB,
        unit="MB/s",
        reps=p.reps,
        prepare=prepare,
        target=target,
        extra=extra,
        after=after,
        cleanup=out.cleanup,
    )


def case_write(fx: Fixtures, p: Any) -> Case:
    return _write(fx, p, "write_10m", "2.0", Target("ratio", 1.0, "throughput >= 1.0x pylance"), sizes=False)


def case_write_22(fx: Fixtures, p: Any) -> Case:
    """``write_10m`` at file format 2.2 (pylance's default encodings against lance_ops')."""
    size = Target("size_ratio", 1.05, "on disk <= 1.05x pylance")
    return _write(fx, p, "write_22", "2.2", Target("ratio", 1.0, "time <= 1.0x pylance", also=size), sizes=True)


def _scan(
    fx: Fixtures,
    p: Any,
    name: str,
    columns: list[str] | None,
    target: Target | None,
    path: str | None = None,
    about: dict[str, Any] | None = None,
) -> Case:
    lance = _pylance()
    path = path or fx.scan_dataset()
    table = fx.table()
    nbytes = (table.select(columns) if columns else table).nbytes
    bs = p.batch_size

    def ours() -> int:
        return sum(b.num_rows for b in lf.dataset(path).to_batches(columns=columns, batch_size=bs))

    def theirs() -> int:
        return sum(b.num_rows for b in lance.dataset(path).to_batches(columns=columns, batch_size=bs))

    return Case(
        name,
        {"lance_ops": ours, "pylance": theirs},
        work=nbytes / MB,
        unit="MB/s",
        reps=p.reps,
        target=target,
        extra={
            "rows": table.num_rows,
            "columns": columns or table.column_names,
            "batch_size": bs,
            **(about or {}),
        },
    )


def case_scan(fx: Fixtures, p: Any) -> Case:
    return _scan(fx, p, "scan_10m", None, Target("ratio", 1 / 1.5, "throughput >= 1.5x pylance"))


def case_scan_projection(fx: Fixtures, p: Any) -> Case:
    return _scan(fx, p, "scan_projection", ["id", "x"], Target("ratio", 1 / 1.5, "throughput >= 1.5x pylance"))


def _scan_22(fx: Fixtures, p: Any, name: str, columns: list[str] | None, writer: str) -> Case:
    """A scan of the 2.2 dataset written by ``writer``; records its on-disk size."""
    path = fx.scan_dataset_22(writer)
    about = {"data_storage_version": "2.2", "written_by": writer, "dataset_bytes": dir_bytes(path)}
    return _scan(fx, p, name, columns, None, path=path, about=about)


def case_scan_22(fx: Fixtures, p: Any) -> Case:
    return _scan_22(fx, p, "scan_22", None, "lance_ops")


def case_scan_projection_22(fx: Fixtures, p: Any) -> Case:
    return _scan_22(fx, p, "scan_projection_22", ["id", "x"], "lance_ops")


def case_scan_22_pylance_written(fx: Fixtures, p: Any) -> Case:
    case = _scan_22(fx, p, "scan_22_pylance_written", None, "pylance")
    case.target = TIME_RATIO_TARGET
    return case


def case_scan_projection_22_pylance_written(fx: Fixtures, p: Any) -> Case:
    case = _scan_22(fx, p, "scan_projection_22_pylance_written", ["id", "x"], "pylance")
    case.target = TIME_RATIO_TARGET
    return case



#: one predicate, as SQL, to both libraries: a range, a string LIKE and an IN list
SCAN_SQL_FILTER = "x < 0.25 AND s LIKE 'row-1%' AND id % 7 IN (1, 3, 5)"


def case_scan_sql_filter(fx: Fixtures, p: Any) -> Case:
    """The same SQL filter (parsed by each library) on the pylance-written 2.2 dataset; rows
    out of the filtered scan of every column (lance_ops: sqlglot -> pyarrow.compute)."""
    lance = _pylance()
    path = fx.scan_dataset_22("pylance")
    bs = p.batch_size

    def ours() -> int:
        return sum(b.num_rows for b in lf.dataset(path).to_batches(filter=SCAN_SQL_FILTER, batch_size=bs))

    def theirs() -> int:
        return sum(b.num_rows for b in lance.dataset(path).to_batches(filter=SCAN_SQL_FILTER, batch_size=bs))

    table = fx.table()
    return Case(
        "scan_sql_filter",
        {"lance_ops": ours, "pylance": theirs},
        work=table.nbytes / MB,
        unit="MB/s",
        reps=p.reps,
        target=TIME_RATIO_TARGET,
        extra={"rows": table.num_rows, "filter": SCAN_SQL_FILTER, "batch_size": bs, "data_storage_version": "2.2",
               "written_by": "pylance"},
    )

#: a selective filter (~0.1% of the rows, the selectivity pylance's heuristic assumes) whose
#: projection holds a column the filter does not read (``s``: late in both libraries)
SCAN_SELECTIVE_FILTER = "x < 0.001"


def case_scan_late_materialization(fx: Fixtures, p: Any) -> Case:
    """``to_table(filter=SCAN_SELECTIVE_FILTER)`` of every column on the pylance-written 2.2
    dataset, each library with its default ``late_materialization`` (``s`` is taken after the
    filter, decoding only the chunks holding the passing rows)."""
    lance = _pylance()
    path = fx.scan_dataset_22("pylance")

    def ours() -> int:
        return lf.dataset(path).to_table(filter=SCAN_SELECTIVE_FILTER).num_rows

    def theirs() -> int:
        return lance.dataset(path).to_table(filter=SCAN_SELECTIVE_FILTER).num_rows

    table = fx.table()
    return Case(
        "scan_late_materialization",
        {"lance_ops": ours, "pylance": theirs},
        work=table.nbytes / MB,
        unit="MB/s",
        reps=p.reps,
        target=TIME_RATIO_TARGET,
        extra={"rows": table.num_rows, "filter": SCAN_SELECTIVE_FILTER, "data_storage_version": "2.2",
               "written_by": "pylance"},
    )


def case_append(fx: Fixtures, p: Any) -> Case:
    lance = _pylance()
    out = _fresh_dirs(fx, "append", ["lance_ops", "pylance"])
    n, rows = p.appends, p.append_rows
    batches = [make_table(rows, start=(i + 1) * rows) for i in range(n)]
    first = make_table(rows)

    def prepare(v: str) -> None:
        remove(out[v])
        if v == "lance_ops":
            lf.write_dataset(first, out[v], data_storage_version="2.0")
        else:
            lance.write_dataset(first, out[v], data_storage_version="2.0")

    def ours() -> None:
        for t in batches:
            lf.write_dataset(t, out["lance_ops"], mode="append")

    def theirs() -> None:
        for t in batches:
            lance.write_dataset(t, out["pylance"], mode="append")

    def after(case: Case) -> None:
        # the last lance_ops run left a (1 + appends)-version dataset: open_latest can use it
        fx.adopt_versions_dataset(out["lance_ops"], n + 1)

    return Case(
        "append_commit",
        {"lance_ops": ours, "pylance": theirs},
        work=n,
        unit="commits/s",
        reps=p.small_reps,
        prepare=prepare,
        target=Target("ratio", 1.0, "commit latency <= 1.0x pylance"),
        per_op=n,
        extra={"appends": n, "rows_per_append": rows},
        after=after,
        cleanup=out.cleanup,
    )


def case_open(fx: Fixtures, p: Any) -> Case:
    lance = _pylance()
    path = fx.versions_dataset()
    k = p.opens

    def ours() -> int:
        v = 0
        for _ in range(k):
            v = lf.dataset(path).version
        return v

    def theirs() -> int:
        v = 0
        for _ in range(k):
            v = lance.dataset(path).version
        return v

    return Case(
        "open_latest",
        {"lance_ops": ours, "pylance": theirs},
        work=k,
        unit="opens/s",
        reps=p.small_reps,
        target=Target("ratio", 1.0, "open latency <= 1.0x pylance"),
        per_op=k,
        extra={"versions": lf.dataset(path).version, "opens_per_run": k},
    )


def delete_case(fx: Fixtures, p: Any, name: str, template: str, extra: dict[str, Any] | None = None) -> Case:
    """Both libraries delete ``delete_predicate()`` from private copies of ``template``."""
    lance = _pylance()
    out = _fresh_dirs(fx, name.replace("_", ""), ["lance_ops", "pylance"])

    return Case(
        name,
        {
            "lance_ops": lambda: lf.dataset(out["lance_ops"]).delete(delete_predicate()),
            "pylance": lambda: lance.dataset(out["pylance"]).delete(DELETE_PREDICATE_SQL),
        },
        work=p.delete_rows,
        unit="rows/s",
        reps=p.reps,
        prepare=out.copier(template),
        target=TIME_RATIO_TARGET,
        extra={"rows": p.delete_rows, "fragments": p.fragments, "predicate": DELETE_PREDICATE_SQL, **(extra or {})},
        cleanup=out.cleanup,
    )


def case_delete(fx: Fixtures, p: Any) -> Case:
    return delete_case(fx, p, "delete_10pct", fx.fragments_dataset())


def _compact_common(fx: Fixtures) -> tuple[str, int, int]:
    template = fx.deleted_dataset()
    live = lf.dataset(template).count_rows()
    return template, fx.compaction_target(), live


def copied_case(name: str, run: dict[str, Callable[[str], Any]], template: str, out: Workdirs, *, work: float,
                reps: int, extra: dict[str, Any], goal: Target | None = TIME_RATIO_TARGET,
                after: Callable[[Case], None] | None = None, unit: str = "rows/s",
                copy: Callable[[str, str], object] = copy_dataset) -> Case:
    """Each variant ``run[v](dir)`` on its own fresh copy (``copy``) of ``template`` (``out[v]``)
    per timed run."""
    return Case(
        name,
        {v: (lambda v=v: run[v](out[v])) for v in run},
        work=work,
        unit=unit,
        reps=reps,
        prepare=out.copier(template, copy),
        target=goal,
        extra=extra,
        after=after,
        cleanup=out.cleanup,
    )


def compaction_case(name: str, lance: Any, template: str, out: Workdirs, target: int, *, work: int, reps: int,
                    extra: dict[str, Any], goal: Target | None = TIME_RATIO_TARGET,
                    after: Callable[[Case], None] | None = None) -> Case:
    """``compact_files(target_rows_per_fragment=target)`` by lance_ops and by pylance in process."""
    run = {
        "lance_ops": lambda d: lf.dataset(d).compact_files(target_rows_per_fragment=target),
        "pylance": lambda d: lance.dataset(d).optimize.compact_files(target_rows_per_fragment=target),
    }
    return copied_case(name, run, template, out, work=work, reps=reps, extra=extra, goal=goal, after=after)


def case_compact_inprocess(fx: Fixtures, p: Any) -> Case:
    lance = _pylance()
    template, target, live = _compact_common(fx)
    out = _fresh_dirs(fx, "compact", ["lance_ops", "pylance"])
    return compaction_case("compact_inprocess", lance, template, out, target, work=live, reps=p.reps, goal=None,
                           extra={"fragments": p.fragments, "live_rows": live, "target_rows_per_fragment": target})


def case_compact_indexed(fx: Fixtures, p: Any) -> Case:
    """Compaction of an indexed dataset: lance_ops remaps the BTREE and IVF_PQ index files (no
    stable row ids) as pylance's compact_files does."""
    lance = _pylance()
    template = fx.indexed_dataset()
    live = lf.dataset(template).count_rows()
    frags = fx.indexed_fragments()
    per_frag = (p.indexed_rows // frags) * 9 // 10
    target = per_frag * max(1, frags // p.compact_tasks)
    out = _fresh_dirs(fx, "compact_indexed", ["lance_ops", "pylance"])

    def after(case: Case) -> None:
        for v, path in out.items():
            stats = {d.name: d.num_rows_indexed for d in lf.dataset(path).describe_indices()}
            case.extra[f"indexed_rows_{v}"] = stats

    return compaction_case(
        "compact_indexed", lance, template, out, target, work=live, reps=p.small_reps, after=after,
        extra={"fragments": frags, "live_rows": live, "target_rows_per_fragment": target,
               "indices": "BTREE(id), IVF_PQ(vec, 16 partitions, 4 sub-vectors)"},
    )


def _index_case(fx: Fixtures, p: Any, name: str, template: str, run: dict[str, Callable[[str], Any]],
                work: int, extra: dict[str, Any]) -> Case:
    """Both libraries change private copies of ``template``; the index each wrote is recorded."""
    out = _fresh_dirs(fx, name.replace("_", ""), ["lance_ops", "pylance"])

    def after(case: Case) -> None:
        for v, path in out.items():
            case.extra[f"segments_{v}"] = {d.name: len(d.segments) for d in lf.dataset(path).describe_indices()}
            name = lf.dataset(path).describe_indices()[0].name
            case.extra[f"unindexed_rows_{v}"] = lf.dataset(path).index_statistics(name)["num_unindexed_rows"]

    # tens of milliseconds per run: the full repetitions
    return copied_case(name, run, template, out, work=work, reps=p.reps, extra=extra, after=after)


def case_create_btree(fx: Fixtures, p: Any) -> Case:
    """``create_scalar_index("x", "BTREE")`` on ``indexed_rows`` rows (float64, 1,000 distinct
    values in no order), file format 2.2, both libraries from the same files."""
    lance = _pylance()
    return _index_case(
        fx, p, "create_btree", fx.btree_dataset(indexed=False),
        {"lance_ops": lambda d: lf.dataset(d).create_scalar_index("x", "BTREE"),
         "pylance": lambda d: lance.dataset(d).create_scalar_index("x", "BTREE")},
        p.indexed_rows, {"rows": p.indexed_rows, "fragments": fx.indexed_fragments(), "column": "x float64"},
    )


def case_optimize_indices_btree(fx: Fixtures, p: Any) -> Case:
    """``optimize_indices(num_indices_to_merge=0)`` after 10% new rows were appended to an
    ``indexed_rows``-row dataset with pylance's BTREE on ``x``: one new segment each."""
    lance = _pylance()
    new_rows = p.indexed_rows // 10
    return _index_case(
        fx, p, "optimize_indices_btree", fx.btree_dataset(indexed=True),
        {"lance_ops": lambda d: lf.dataset(d).optimize.optimize_indices(num_indices_to_merge=0),
         "pylance": lambda d: lance.dataset(d).optimize.optimize_indices(num_indices_to_merge=0)},
        new_rows, {"indexed_rows": p.indexed_rows, "new_rows": new_rows, "column": "x float64"},
    )


def case_optimize_indices_ivf_pq(fx: Fixtures, p: Any) -> Case:
    """``optimize_indices(num_indices_to_merge=0)`` after 10% new rows were appended to an
    ``indexed_rows``-row dataset with pylance's IVF_PQ (16-dim, 16 partitions, 4 sub-vectors):
    new vectors assigned to the existing centroids and encoded with the existing codebook."""
    lance = _pylance()
    new_rows = p.indexed_rows // 10
    return _index_case(
        fx, p, "optimize_indices_ivf_pq", fx.ivf_pq_dataset(),
        {"lance_ops": lambda d: lf.dataset(d).optimize.optimize_indices(num_indices_to_merge=0),
         "pylance": lambda d: lance.dataset(d).optimize.optimize_indices(num_indices_to_merge=0)},
        new_rows, {"indexed_rows": p.indexed_rows, "new_rows": new_rows, "index": "IVF_PQ(vec 16-dim, 16 partitions, 4 sub-vectors)"},
    )


def spark_compact_case(name: str, fx: Fixtures, p: Any, spark: SparkEnv, jobs: Any, lance: Any, template: str,
                       stem: str, target: int, live: int, extra: dict[str, Any]) -> Case:
    """The Spark compaction job on ``local[2]`` against pylance's in-process ``compact_files``,
    each on a fresh copy of ``template``."""
    session = spark.session("local[2]")
    out = _fresh_dirs(fx, stem, ["lance_ops", "pylance"])

    def prepare(v: str) -> None:
        copy_dataset(template, out[v])
        if v == "lance_ops":
            spark.session("local[2]")  # still the live session (compact_scaling may follow)

    return Case(
        name,
        {
            "lance_ops": lambda: jobs.compact(session, out["lance_ops"], target_rows_per_fragment=target),
            "pylance": lambda: lance.dataset(out["pylance"]).optimize.compact_files(target_rows_per_fragment=target),
        },
        work=live,
        unit="rows/s",
        reps=p.spark_reps,
        prepare=prepare,
        target=Target("ratio", 1.0, "time on local[2] <= 1.0x pylance"),
        spark_variants=frozenset({"lance_ops"}),
        extra={"fragments": p.fragments, "live_rows": live, "target_rows_per_fragment": target,
               "master": "local[2]", **extra},
        cleanup=out.cleanup,
    )


def case_compact_local2(fx: Fixtures, p: Any, spark: SparkEnv) -> Case:
    lance = _pylance()
    jobs = spark.jobs("compact")
    template, target, live = _compact_common(fx)
    return spark_compact_case("compact_local2", fx, p, spark, jobs, lance, template, "spark_compact", target, live, {})


def case_compact_scaling(fx: Fixtures, p: Any, spark: SparkEnv) -> Case:
    jobs = spark.jobs("compact")
    template, target = fx.scaling_dataset(), fx.scaling_target()
    live = lf.dataset(template).count_rows()
    out = _fresh_dirs(fx, "scaling", ["local1", "local2"])

    masters = {"local1": "local[1]", "local2": "local[2]"}

    def prepare(v: str) -> None:
        copy_dataset(template, out[v])
        spark.session(masters[v])  # (re)start the session outside the timed region

    def run(label: str) -> Callable[[], Any]:
        def go() -> Any:
            return jobs.compact(spark.session(masters[label]), out[label], target_rows_per_fragment=target)

        return go

    return Case(
        "compact_scaling",
        # local[2] first: it is usually the live session after compact_local2
        {"local2": run("local2"), "local1": run("local1")},
        work=live,
        unit="rows/s",
        reps=p.spark_reps,
        kind="scaling",
        alternate=False,  # a session restart per switch would dominate the run time
        prepare=prepare,
        target=Target("speedup", 1.8, "local[2] >= 1.8x faster than local[1]"),
        spark_variants=frozenset({"local1", "local2"}),
        extra={"fragments": p.fragments, "live_rows": live, "target_rows_per_fragment": target},
        cleanup=out.cleanup,
    )


def _rows_label(n: int) -> str:
    return f"{n / 1e6:g}m" if n >= 1_000_000 else f"{n // 1000}k"


def case_compact_memory(fx: Fixtures, p: Any, spark: SparkEnv) -> Case:
    """Peak memory of compaction tasks at three ``target_rows_per_fragment`` (memory_rows / 20,
    / 4, / 1: 1M, 5M and 20M rows by default) on a stable-row-id dataset at file format 2.2.

    ``spark_<t>``: ``jobs.compact`` on ``local[1]`` (one executor Python worker runs every task);
    its peak is the worker's high-water mark in the first run on a fresh session (reused workers
    keep what Arrow's allocator cached, so later runs would mix targets).  ``inprocess_<t>``:
    ``compact_files`` in this process, peak = the rise of its resident set (Arrow's cache released
    first).  One run per variant.  Target: the executor peaks within 64 MB of each other.
    """
    jobs = spark.jobs("compact")
    template = fx.memory_dataset()
    live = lf.dataset(template).count_rows()
    targets = [p.memory_rows // 20, p.memory_rows // 4, p.memory_rows]
    labels = [_rows_label(t) for t in targets]
    variants: dict[str, Callable[[], Any]] = {}
    out = _fresh_dirs(fx, "memory", [f"{kind}_{lb}" for lb in labels for kind in ("inprocess", "spark")])
    started: set[str] = set()

    def prepare(v: str) -> None:
        copy_dataset(template, out[v])
        if v.startswith("spark_"):
            spark.session("local[1]", fresh=v not in started)
            started.add(v)

    for t, lb in zip(targets, labels, strict=True):
        variants[f"inprocess_{lb}"] = lambda t=t, d=out[f"inprocess_{lb}"]: lf.dataset(d).compact_files(
            target_rows_per_fragment=t)
        variants[f"spark_{lb}"] = lambda t=t, d=out[f"spark_{lb}"]: jobs.compact(
            spark.session("local[1]"), d, target_rows_per_fragment=t)

    target = Target("executor_peak_mb_spread", 64, "task peak memory of the three targets within 64 MB")
    return Case(
        "compact_memory",
        variants,
        work=live,
        unit="rows/s",
        reps=0,  # the untimed first run of each variant is the measurement
        kind="memory",
        alternate=False,
        prepare=prepare,
        target=target,
        spark_variants=frozenset(v for v in variants if v.startswith("spark_")),
        extra={"fragments": p.fragments, "live_rows": live, "targets": labels,
               "target_rows_per_fragment": targets, "data_storage_version": "2.2", "stable_row_ids": True},
        cleanup=out.cleanup,
    )


def case_change_feed(fx: Fixtures, p: Any) -> Case:
    lance = _pylance()
    path, begin, end = fx.feed_dataset()
    n_feed = lf.dataset(path).change_feed(begin, end).num_rows

    def ours() -> int:
        return lf.dataset(path).change_feed(begin, end).num_rows

    def theirs() -> int:
        d = lance.dataset(path).delta(begin_version=begin, end_version=end)
        return d.get_inserted_rows().read_all().num_rows + d.get_updated_rows().read_all().num_rows

    return Case(
        "change_feed",
        {"lance_ops": ours, "pylance": theirs},
        work=n_feed,
        unit="rows/s",
        reps=p.reps,
        extra={
            "base_rows": p.feed_rows,
            "versions": f"({begin}, {end}]",
            "feed_rows": n_feed,
            "note": "lance_ops also emits update pre-images and deletes; pylance: inserted + updated",
        },
    )


def case_merge_insert(fx: Fixtures, p: Any) -> Case:
    """Upsert (update matched + insert new) of a source of 10% matched and 10% new rows into
    private copies of a pylance-written dataset with stable row ids."""
    lance = _pylance()
    template, source = fx.merge_dataset()
    out = _fresh_dirs(fx, "merge", ["lance_ops", "pylance"])

    def ours() -> Any:
        return lf.dataset(out["lance_ops"]).merge_insert("id").when_matched_update_all() \
            .when_not_matched_insert_all().execute(source)

    def theirs() -> Any:
        return lance.dataset(out["pylance"]).merge_insert("id").when_matched_update_all() \
            .when_not_matched_insert_all().execute(source)

    return Case(
        "merge_insert",
        {"lance_ops": ours, "pylance": theirs},
        work=source.num_rows,
        unit="rows/s",
        reps=p.reps,
        prepare=out.copier(template),
        target=TIME_RATIO_TARGET,
        extra={"target_rows": p.merge_rows, "source_rows": source.num_rows, "stable_row_ids": True,
               "file_version": "2.2"},
        cleanup=out.cleanup,
    )


def case_ipc_write(fx: Fixtures, p: Any) -> Case:
    table = fx.table()
    path = fx.path("ipc_write.arrow")
    return Case(
        "ipc_limit_write",
        {"ipc": lambda: write_ipc(table, path)},
        work=table.nbytes / MB,
        unit="MB/s",
        reps=p.reps,
        kind="limit",
        prepare=lambda v: os.path.exists(path) and os.remove(path),
        limit_of="write_10m",
        extra={"rows": table.num_rows},
        cleanup=lambda: os.path.exists(path) and os.remove(path),
    )


def case_ipc_read(fx: Fixtures, p: Any) -> Case:
    table = fx.table()
    path = fx.ipc_file()
    return Case(
        "ipc_limit_read",
        {"ipc": lambda: read_ipc(path)},
        work=table.nbytes / MB,
        unit="MB/s",
        reps=p.reps,
        kind="limit",
        limit_of="scan_10m",
        extra={"rows": table.num_rows},
    )


#: every case in run order; Spark cases take the SparkEnv too
CASES: dict[str, Callable[..., Case]] = {
    "write_10m": case_write,
    "ipc_limit_write": case_ipc_write,
    "scan_10m": case_scan,
    "scan_projection": case_scan_projection,
    "ipc_limit_read": case_ipc_read,
    "write_22": case_write_22,
    "scan_22": case_scan_22,
    "scan_projection_22": case_scan_projection_22,
    "scan_22_pylance_written": case_scan_22_pylance_written,
    "scan_projection_22_pylance_written": case_scan_projection_22_pylance_written,
    "scan_sql_filter": case_scan_sql_filter,
    "scan_late_materialization": case_scan_late_materialization,
    "append_commit": case_append,
    "open_latest": case_open,
    "delete_10pct": case_delete,
    "compact_inprocess": case_compact_inprocess,
    "compact_indexed": case_compact_indexed,
    "create_btree": case_create_btree,
    "optimize_indices_btree": case_optimize_indices_btree,
    "optimize_indices_ivf_pq": case_optimize_indices_ivf_pq,
    "compact_local2": case_compact_local2,
    "compact_scaling": case_compact_scaling,
    "compact_memory": case_compact_memory,
    "change_feed": case_change_feed,
    "merge_insert": case_merge_insert,
}
SPARK_CASES = frozenset({"compact_local2", "compact_scaling", "compact_memory"})
