"""Cleanup at scale (issue 33): a table with many data files and versions on the local store,
built cheaply (one real data file hard-linked under every name; cleanup never reads data), each
version an overwrite of ``files / versions`` fragments, so every version's files are its own.

- ``cleanup_routine_1m_files``: remove the oldest 100 versions (``retain_versions`` = the rest):
  lance_ops ``mode="lite"`` (derived from those versions' metadata) against pylance's
  ``cleanup_old_versions`` (which lists every file); ``lance_ops_full`` is lance_ops' full mode.
- ``orphan_sweep_1m_files``: lance_ops ``remove_orphan_files`` (lists every file, reads every
  manifest) against pylance's cleanup with nothing to remove (which does the same listing).

The issue asks for 1,000,000 files and 10,000 versions; the sizes come from ``--cleanup-files``
/ ``--cleanup-versions`` (default 100,000 and 1,000 here: the shared 2-core machine cannot
build the full table in the time a run has).  Registered into ``cases.CASES``.
"""

import dataclasses
import os
import shutil
import time
from datetime import timedelta
from typing import Any

import lance_ops.format as lf

from .cases import Case, _fresh_dirs, _pylance, copied_case
from .data import Fixtures, make_table, remove

ROUTINE_VERSIONS = 100


def build_many_files(path: str, files: int, versions: int) -> str:
    """``versions`` overwrites of ``files // versions`` hard-linked fragments each."""
    if os.path.exists(os.path.join(path, "_versions")) and len(os.listdir(os.path.join(path, "_versions"))) >= versions:
        return path
    remove(path)
    per = max(1, files // versions)
    lf.write_dataset(make_table(1_000), path, max_rows_per_file=1_000)
    base = lf.dataset(path)
    frag = base.manifest.fragments[0]
    first = os.path.join(path, "data", frag.files[0].path)
    schema = base.lance_schema
    made = 0
    for v in range(1, versions):
        frags = []
        for j in range(per):
            name = f"v{v}-{j}.lance"
            if made % 10_000 == 0:  # a fresh inode every 10,000 names (ext4 allows 65,000 links)
                src = os.path.join(path, "data", f"source-{made}.bin")
                shutil.copyfile(first, src)
            made += 1
            os.link(src, os.path.join(path, "data", name))
            df = dataclasses.replace(frag.files[0], path=name)
            frags.append(dataclasses.replace(frag, id=j, files=(df,)))
        lf.commit(path, lf.Overwrite(frags, schema), read_version=v)
    return path


def _link_copy(src: str, dst: str) -> None:
    """A copy sharing the data files' inodes (cleanup only unlinks names): seconds, not minutes."""
    remove(dst)
    shutil.copytree(src, dst, copy_function=os.link)


def _fixture(fx: Fixtures, p: Any) -> tuple[str, int, int]:
    files, versions = getattr(p, "cleanup_files", 100_000), getattr(p, "cleanup_versions", 1_000)
    return build_many_files(fx.path(f"many_files_{files}_{versions}"), files, versions), files, versions


def case_cleanup_routine(fx: Fixtures, p: Any) -> Case:
    lance = _pylance()
    template, files, versions = _fixture(fx, p)
    out = _fresh_dirs(fx, "cleanup_routine", ["lance_ops", "lance_ops_full", "pylance"])
    keep = versions - ROUTINE_VERSIONS
    zero = timedelta(0)

    def lite(d: str) -> Any:
        s = lf.dataset(d).cleanup_old_versions(zero, keep, retention_duration_check=False, mode="lite")
        assert s.old_versions == ROUTINE_VERSIONS, s.old_versions

    def full(d: str) -> Any:
        s = lf.dataset(d).cleanup_old_versions(zero, keep, retention_duration_check=False)
        assert s.old_versions == ROUTINE_VERSIONS, s.old_versions

    def pylance(d: str) -> Any:
        s = lance.dataset(d).cleanup_old_versions(older_than=zero, retain_versions=keep)
        assert s.old_versions == ROUTINE_VERSIONS, s.old_versions

    return copied_case(
        "cleanup_routine_1m_files", {"lance_ops": lite, "lance_ops_full": full, "pylance": pylance}, template, out,
        work=ROUTINE_VERSIONS * (files // versions), unit="files/s", reps=p.small_reps, goal=None, copy=_link_copy,
        extra={"files": files, "versions": versions, "versions_removed": ROUTINE_VERSIONS,
               "files_removed": ROUTINE_VERSIONS * (files // versions), "scaled_down_from": "1,000,000 files, 10,000 versions"},
    )


def case_orphan_sweep(fx: Fixtures, p: Any) -> Case:
    lance = _pylance()
    template, files, versions = _fixture(fx, p)
    out = _fresh_dirs(fx, "orphan_sweep", ["lance_ops", "pylance"])

    def prepare(v: str) -> None:
        _link_copy(template, out[v])
        for i in range(100):  # orphans of killed writers, older than the grace period
            name = os.path.join(out[v], "data", f"orphan-{i}.lance")
            with open(name, "wb") as f:
                f.write(b"x")
            old = time.time() - 8 * 86400
            os.utime(name, (old, old))

    def sweep() -> Any:
        s = lf.dataset(out["lance_ops"]).remove_orphan_files()
        assert s.data_files_removed == 100, s.data_files_removed

    def pylance() -> Any:  # the same listing: every version is kept, the orphans go
        lance.dataset(out["pylance"]).cleanup_old_versions(older_than=timedelta(days=3650))

    return Case(
        "orphan_sweep_1m_files",
        {"lance_ops": sweep, "pylance": pylance},
        work=files,
        unit="files/s",
        reps=p.small_reps,
        prepare=prepare,
        extra={"files": files, "versions": versions, "orphans": 100,
               "scaled_down_from": "1,000,000 files, 10,000 versions"},
        cleanup=out.cleanup,
    )


CASES_CLEANUP = {
    "cleanup_routine_1m_files": case_cleanup_routine,
    "orphan_sweep_1m_files": case_orphan_sweep,
}
