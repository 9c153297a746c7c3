"""Layout maintenance cases (issue 36): an upgrade of a 2.0 table through compaction and a
Z-order clustered compaction, each against pylance's plain ``compact_files`` of the same table
(pylance has neither).  Registered into ``cases.CASES``."""

from typing import Any

import numpy as np
import pyarrow as pa

import lance_ops.format as lf

from .cases import Case, Target, _fresh_dirs, _pylance
from .data import Fixtures, make_table, remove


def _template(fx: Fixtures, name: str, table: pa.Table, **kw: Any) -> str:
    if name not in fx._paths:
        path = fx.path(f"{name}_ds")
        remove(path)
        _pylance().write_dataset(table, path, max_rows_per_file=fx.p.layout_rows // fx.p.layout_fragments, **kw)
        fx._paths[name] = path
    return fx._paths[name]


def _keyed_table(rows: int) -> pa.Table:
    """``make_table`` plus two independent random keys ``k`` and ``g`` (every fragment spans
    their whole range before clustering)."""
    rng = np.random.default_rng(36)
    t = make_table(rows)
    return t.append_column("k", pa.array(rng.permutation(rows))).append_column("g", pa.array(rng.permutation(rows)))


def _case(fx: Fixtures, p: Any, name: str, template: str, ours: dict[str, Any], target: Target,
          extra: dict[str, Any]) -> Case:
    lance = _pylance()
    rows = p.layout_rows
    per_task = rows // 10  # pylance rewrites every fragment (10x smaller than the target)
    out = _fresh_dirs(fx, name, ["lance_ops", "pylance"])

    return Case(
        name,
        {
            "lance_ops": lambda: lf.dataset(out["lance_ops"]).compact_files(target_rows_per_fragment=per_task, **ours),
            "pylance": lambda: lance.dataset(out["pylance"]).optimize.compact_files(target_rows_per_fragment=per_task),
        },
        work=rows,
        unit="rows/s",
        reps=p.small_reps,
        prepare=out.copier(template),
        target=target,
        extra={"rows": rows, "fragments": p.layout_fragments, "target_rows_per_fragment": per_task, **extra},
        cleanup=out.cleanup,
    )


def case_upgrade_20_to_22(fx: Fixtures, p: Any) -> Case:
    """A 2.0 table (pylance, row addresses) rewritten to 2.2 files by ``compact_files(
    data_storage_version="2.2")``; reference: pylance's plain ``compact_files`` of it."""
    template = _template(fx, "layout20", make_table(p.layout_rows), data_storage_version="2.0")
    return _case(fx, p, "upgrade_20_to_22", template, {"data_storage_version": "2.2"},
                 Target("ratio", 2.0, "time <= 2x pylance's plain compact_files"),
                 {"data_storage_version": "2.0 -> 2.2", "written_by": "pylance"})


def case_compact_zorder_2cols(fx: Fixtures, p: Any) -> Case:
    """A 2.2 table (pylance, stable row ids) whose two keys span every fragment, Z-order
    clustered by both; reference: pylance's plain ``compact_files`` of it."""
    template = _template(fx, "layoutz", _keyed_table(p.layout_rows), data_storage_version="2.2",
                         enable_stable_row_ids=True)
    return _case(fx, p, "compact_zorder_2cols", template, {"cluster_by": ["k", "g"], "strategy": "zorder"},
                 Target("ratio", 3.0, "time <= 3x pylance's plain compact_files"),
                 {"data_storage_version": "2.2", "written_by": "pylance", "stable_row_ids": True})


CASES_LAYOUT = {
    "upgrade_20_to_22": case_upgrade_20_to_22,
    "compact_zorder_2cols": case_compact_zorder_2cols,
}
