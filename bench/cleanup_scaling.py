"""Cleanup cost against the table's file count (issue 33), CPU seconds (``time.process_time``).

Each table has ``PER`` fragments per version (every version an overwrite) and a growing number
of versions; routine cleanup removes the oldest 100 versions (the same 100 x PER files) in
each, the sweep and pylance's cleanup list every file.  ``python -m bench.cleanup_scaling
[versions ...]`` prints one row per table.
"""

import os
import sys
import tempfile
import time
from datetime import timedelta

import lance_ops.format as lf

from . import cases  # noqa: F401  (registers the case modules; cases_cleanup imports from it)
from .cases_cleanup import _link_copy, build_many_files
from .data import remove

PER = 20
REMOVED = 100


def _cpu(fn) -> float:
    t = time.process_time()
    fn()
    return time.process_time() - t


def measure(workdir: str, versions: int) -> dict[str, float]:
    import lance

    tpl = build_many_files(os.path.join(workdir, f"tpl_{versions}"), versions * PER, versions)
    keep, zero = versions - REMOVED, timedelta(0)
    out: dict[str, float] = {"files": versions * PER, "versions": versions}
    runs = {
        "lite": lambda d: lf.dataset(d).cleanup_old_versions(zero, keep, retention_duration_check=False, mode="lite"),
        "full": lambda d: lf.dataset(d).cleanup_old_versions(zero, keep, retention_duration_check=False),
        "pylance": lambda d: lance.dataset(d).cleanup_old_versions(older_than=zero, retain_versions=keep),
        "sweep": lambda d: lf.dataset(d).remove_orphan_files(),
    }
    for name, run in runs.items():
        d = os.path.join(workdir, f"run_{name}")
        _link_copy(tpl, d)
        out[name] = _cpu(lambda: run(d))  # noqa: B023
        remove(d)
    remove(tpl)
    return out


def main(argv: list[str]) -> None:
    sizes = [int(a) for a in argv] or [250, 1000, 5000]
    print(f"load average {os.getloadavg()[0]:.2f}; CPU seconds; {PER} files per version, {REMOVED} versions removed")
    print("| files | versions | lite | full | pylance (wall-free CPU of this process) | sweep |")
    with tempfile.TemporaryDirectory() as wd:
        for v in sizes:
            r = measure(wd, v)
            print(f"| {r['files']:,} | {r['versions']:,} | {r['lite']:.3f} | {r['full']:.3f} | {r['pylance']:.3f} | "
                  f"{r['sweep']:.3f} |", flush=True)
    print(f"load average {os.getloadavg()[0]:.2f} at end")


if __name__ == "__main__":
    main(sys.argv[1:])
