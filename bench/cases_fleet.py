"""``plan_fleet_1000`` (issue 32): the maintenance planner over a local root of
``fleet_tables`` tables of ``fleet_fragments`` small fragments each (every table needs a
compaction, the planner's longest path), and over a tenth as many, so the per-table cost can be
compared (it should be flat).  Registered into ``cases.CASES``.

The tables are hard-linked copies of one template (building 1,000 tables would dominate the
run); the planner reads each table's own manifests and listings.
"""

import os
import shutil
import time
from typing import Any

import numpy as np
import pyarrow as pa

import lance_ops.format as lf

from .cases import Case, Target
from .data import Fixtures, remove


def _template(fx: Fixtures, fragments: int) -> str:
    path = fx.path("fleet_template")
    remove(path)
    rows = 100
    ids = np.arange(fragments * rows, dtype=np.int64)
    lf.write_dataset(pa.table({"id": ids, "val": ids * 0.5}), path, max_rows_per_file=rows)
    return path


def _root(fx: Fixtures, template: str, name: str, tables: int) -> str:
    root = fx.path(name)
    remove(root)
    os.makedirs(root)
    for i in range(tables):
        shutil.copytree(template, os.path.join(root, f"t{i:05d}"), copy_function=os.link)
    return root


def case_plan_fleet(fx: Fixtures, p: Any) -> Case:
    from lance_ops.orchestration.planner import plan_fleet
    from lance_ops.settings import PolicySettings, RootSettings

    n, frags = p.fleet_tables, p.fleet_fragments
    template = _template(fx, frags)
    small, full = max(1, n // 10), n
    roots = {"tables_small": _root(fx, template, "fleet_small", small), "lance_ops": _root(fx, template, "fleet", full)}
    policy = PolicySettings()  # the defaults: every table has 100 small fragments and needs a compaction
    cpu: dict[str, list[float]] = {k: [] for k in roots}

    def run(label: str) -> Any:
        def go() -> int:
            t0 = time.process_time()
            fleet = plan_fleet(RootSettings(uri=roots[label], policy=policy))
            cpu[label].append(time.process_time() - t0)
            assert not fleet.errors and len(fleet.selected) == (full if label == "lance_ops" else small)
            return len(fleet.plans)
        return go

    def after(case: Case) -> None:
        med = {k: float(np.median(v)) for k, v in cpu.items() if v}
        if len(med) == 2:
            case.extra["cpu_s"] = round(med["lance_ops"], 3)
            case.extra[f"cpu_s_{small}_tables"] = round(med["tables_small"], 3)
            per_small, per_full = med["tables_small"] / small, med["lance_ops"] / full
            case.extra["per_table_ms"] = {small: round(per_small * 1e3, 3), full: round(per_full * 1e3, 3)}
            case.extra["per_table_growth"] = round(per_full / per_small, 3)

    return Case(
        "plan_fleet_1000",
        {"lance_ops": run("lance_ops"), "tables_small": run("tables_small")},
        work=full,
        unit="tables/s",
        reps=p.small_reps,
        kind="solo",
        target=Target("cpu_s", 10.0, f"plan_fleet over {full} tables <= 10 s of CPU",
                      also=Target("per_table_growth", 1.25, f"per-table cost from {small} to {full} tables <= 1.25x")),
        extra={"tables": full, "fragments_per_table": frags},
        after=after,
        cleanup=lambda: [remove(d) for d in [*roots.values(), template]],
    )


CASES_FLEET = {"plan_fleet_1000": case_plan_fleet}
