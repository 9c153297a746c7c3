"""Maintain: what a dataset's policy asks for now, decided once for every orchestrator.

:func:`decide_maintenance` is the whole decision (pure metadata: manifests and transactions):
compaction or deletion materialisation when the policy's thresholds are crossed
(:mod:`.policy`), then ``optimize_indices`` when an index lance_ops extends covers less than
``policy.min_index_coverage`` of the live rows.  :func:`maintain` runs the actions through the
orchestrator's runner with the parameters the policy fills (:func:`.operations.resolve_params`),
so Dagster, Airflow and ``lance-ops run maintain`` do the same for the same ``lance_ops.yaml``.

The decision is kept to one function on purpose: a maintenance planner may replace it.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import lance_ops.format as lf
from lance_ops.orchestration.operations import resolve_params
from lance_ops.orchestration.policy import maintenance_request
from lance_ops.orchestration.results import OperationResult
from lance_ops.orchestration.table import TableRef


@dataclass(frozen=True)
class MaintenanceAction:
    """One operation the policy asks for, why, and the version it judged."""

    operation: str
    reasons: tuple[str, ...]
    version: int


def index_reasons(ds: lf.LanceDataset, threshold: float) -> list[str]:
    """Why ``optimize_indices`` is due at ``ds``'s version: each index lance_ops extends covering
    less than ``threshold`` of the live rows (0 turns it off)."""
    if threshold <= 0:
        return []
    extendable = set(lf.optimizable_index_names(ds.manifest))
    if not extendable:
        return []
    return [f"index {x.name} covers {x.coverage:.1%} < {threshold:.0%} ({x.num_rows_unindexed} rows unindexed)"
            for x in ds.describe_indices() if x.name in extendable and x.coverage < threshold]


def decide_maintenance(table: TableRef, policy: Any) -> list[MaintenanceAction]:
    """The actions ``policy`` (a ``PolicySettings``) asks for at ``table``'s latest version, in order:
    at most one of compact / materialize_deletions, then optimize_indices.  [] when the dataset
    is within the policy or does not exist."""
    latest = table.latest_version()
    if latest is None:
        return []
    ds = table.open(latest)
    actions = []
    wanted = maintenance_request(ds.manifest, table, policy)
    if wanted is not None:
        actions.append(MaintenanceAction(wanted.operation, tuple(wanted.reasons), latest))
    low = index_reasons(ds, float(getattr(policy, "min_index_coverage", 0.0)))
    if low:
        actions.append(MaintenanceAction("optimize_indices", tuple(low), latest))
    return actions


#: ``runner(operation, params, reasons) -> OperationResult``: how an orchestrator runs one action
Runner = Callable[[str, Any, tuple[str, ...]], OperationResult]


def maintain(table: TableRef, d: Any, runner: Runner) -> list[OperationResult]:
    """Run what :func:`decide_maintenance` asks for on ``table`` (settings ``d``: policy and
    parameter defaults) through ``runner``; [] when nothing is due."""
    return [runner(a.operation, resolve_params(a.operation, d), a.reasons)
            for a in decide_maintenance(table, d.policy)]


def nothing_to_do(version: int | None) -> OperationResult:
    """The result of a maintain that found the dataset within its policy."""
    return OperationResult("maintain", None, {"latest_version": version})
