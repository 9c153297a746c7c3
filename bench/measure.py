"""Timing and peak-memory measurement for one benchmark run.

Peak memory is the rise of the process's resident set during an untimed first run of each
variant (which also warms caches): before it the kernel's high-water mark is reset (``echo 5 > /proc/self/clear_refs``, Linux >= 4.0), after it
``VmHWM - VmRSS(before)`` is the peak.  That costs nothing while the run executes (tracemalloc
slows big scans by 10x and misses Arrow's allocations), and it counts Arrow, NumPy and pylance's
Rust allocations alike.  Where the kernel does not allow the reset the peak falls back to
``ru_maxrss``, which is then only an upper bound over the whole process (flagged ``approx``).

Spark executors are Python worker processes under the JVM; their peak is read the same way from
every descendant process (``executor_peak_mb`` = the largest worker high-water mark, absolute).
"""

import gc
import os
import platform
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

MB = 1024 * 1024


def _status_kb(pid: int | str, key: str) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _reset_hwm(pid: int | str = "self") -> bool:
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def descendants(root: int | None = None) -> list[int]:
    """Pids of every live descendant process of ``root`` (default: this process)."""
    root = os.getpid() if root is None else root
    parent: dict[int, int] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # the command name may contain spaces and parentheses: ppid follows the last ')'
        fields = stat[stat.rfind(")") + 2 :].split()
        parent[int(name)] = int(fields[1])
    out, frontier = [], {root}
    while frontier:
        kids = {p for p, pp in parent.items() if pp in frontier}
        out.extend(kids)
        frontier = kids
    return out


def _python_workers() -> list[int]:
    pids = []
    for pid in descendants():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if b"python" in cmd:
            pids.append(pid)
    return pids


@dataclass
class Sample:
    """One timed run."""

    seconds: float
    peak_mb: float | None
    approx_peak: bool = False
    executor_peak_mb: float | None = None
    result: Any = None


def measure(fn: Callable[[], Any], *, watch_children: bool = False, release: bool = False) -> Sample:
    """Run ``fn`` once; its wall time and the peak rise in resident memory while it ran.

    ``release`` first returns Arrow's cached free memory to the OS, so that memory the run
    reuses shows up in its peak.  Timed runs do not: it would make lance_ops fault in fresh
    pages that pylance's allocator (not Arrow's pool) keeps cached.
    """
    gc.collect()
    if release:
        pa.default_memory_pool().release_unused()
    workers = _python_workers() if watch_children else []
    for pid in workers:
        _reset_hwm(pid)
    exact = _reset_hwm()
    before_kb = _status_kb("self", "VmRSS") or 0
    maxrss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - t0
    if exact:
        hwm = _status_kb("self", "VmHWM")
        peak = None if hwm is None else max(0, hwm - before_kb) / 1024
    else:
        maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        peak = max(0, maxrss - min(maxrss_before, before_kb)) / 1024
    executor_peak = None
    if watch_children:
        seen = [_status_kb(pid, "VmHWM") for pid in _python_workers()]
        seen_kb = [kb for kb in seen if kb]
        executor_peak = max(seen_kb) / 1024 if seen_kb else None
    return Sample(seconds, peak, not exact, executor_peak, result)


def machine() -> str:
    """One line naming the CPU, cores, memory, OS and library versions."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem_kb = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    mem_kb = int(line.split()[1])
    except OSError:
        pass
    mem = f"{mem_kb / MB:.0f} GB RAM" if mem_kb else "? GB RAM"
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (
        f"{cpu}, {cores} cores, {mem}, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}"
    )


def library_versions() -> dict[str, str]:
    import numpy

    import lance_ops

    out = {"pyarrow": pa.__version__, "numpy": numpy.__version__, "lance_ops": getattr(lance_ops, "__version__", "?")}
    try:
        import lance

        out["pylance"] = lance.__version__
    except Exception:  # pragma: no cover - reported, not fatal
        out["pylance"] = "not installed"
    try:
        import pyspark

        out["pyspark"] = pyspark.__version__
    except Exception:
        out["pyspark"] = "not installed"
    return out
