"""Maintain: what the maintenance planner finds a dataset needs, run by every orchestrator.

The decision is the planner's alone (:func:`lance_ops.orchestration.planner.plan`: compaction or
deletion materialisation, ``optimize_indices`` per index, cleanup, the orphan sweep, from metadata,
within the policy's budgets).  :func:`planned_steps` turns the plan into registry operations
(:mod:`.operations`) with their parameter objects -- the dataset's settings first, then exactly the
parameters the plan chose -- and asks the planner again after each step, so every step runs with
parameters exact for the version it meets; each operation (per index for ``optimize_indices``) is
tried at most once per maintain.  Dagster's ``lance_maintain``, Airflow's ``LanceMaintainOperator``
and ``lance-ops run maintain`` iterate it with their own runner, so the same ``lance_ops.yaml``
and the same table state give the same actions everywhere.  :func:`decide_maintenance` is the
plan's view for sensors and triggers (what is due now, and why).
"""

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from lance_ops.orchestration.operations import operation, resolve_params
from lance_ops.orchestration.planner.model import Action
from lance_ops.orchestration.planner.table_plan import plan
from lance_ops.orchestration.results import OperationResult
from lance_ops.orchestration.table import TableRef

#: a maintain asks the planner at most this many times (every operation is tried once anyway)
MAX_STEPS = 16


@dataclass(frozen=True)
class MaintenanceAction:
    """One action the planner finds due: the operation, why (the reasons' texts), the version it
    judged, and the parameters it chose (the registry's names)."""

    operation: str
    reasons: tuple[str, ...]
    version: int
    parameters: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, a: Action) -> "MaintenanceAction":
        return cls(a.operation, tuple(r.text for r in a.reasons), a.version, dict(a.parameters))


@dataclass(frozen=True)
class PlannedStep:
    """A planned action as a registry operation: ``params`` is its parameter object."""

    action: Action
    operation: str
    params: Any

    @property
    def reasons(self) -> tuple[str, ...]:
        return tuple(r.text for r in self.action.reasons)


def registry_params(action: Action, d: Any | None) -> Any:
    """The registry's parameter object for ``action``: the dataset's settings ``d`` (a
    ``DatasetSettings``, or None), then every parameter the plan chose."""
    fields = {f.name for f in dataclasses.fields(operation(action.operation).params)}
    unknown = sorted(set(action.parameters) - fields)
    if unknown:  # a planner parameter the registry cannot carry would silently change the action
        raise KeyError(f"{action.operation}: the registry has no parameter {unknown}")
    return resolve_params(action.operation, d, dict(action.parameters))


def _plan(table: TableRef, policy: Any) -> tuple[Action, ...]:
    if table.latest_version() is None:
        return ()
    return plan(table, policy).actions


def decide_maintenance(table: TableRef, policy: Any) -> list[MaintenanceAction]:
    """The actions the planner finds due at ``table``'s latest version under ``policy`` (a
    ``PolicySettings``), in the order they run; [] when the table is healthy or does not exist."""
    return [MaintenanceAction.of(a) for a in _plan(table, policy)]


def _key(a: Action) -> tuple[str, tuple[str, ...]]:
    return a.operation, tuple(a.parameters.get("index_names") or ())


def planned_steps(table: TableRef, d: Any) -> Iterator[PlannedStep]:
    """The steps of one maintain of ``table`` (settings ``d``: policy and parameter defaults):
    the next one is planned when the caller asks for it, after running the previous one."""
    tried: set[tuple[str, tuple[str, ...]]] = set()
    for _ in range(MAX_STEPS):
        todo = [a for a in _plan(table, d.policy) if _key(a) not in tried]
        if not todo:
            return
        action = todo[0]
        tried.add(_key(action))
        yield PlannedStep(action, action.operation, registry_params(action, d))


#: ``runner(operation, params, reasons) -> OperationResult``: how an orchestrator runs one action
Runner = Callable[[str, Any, tuple[str, ...]], OperationResult]


def maintain(table: TableRef, d: Any, runner: Runner) -> list[OperationResult]:
    """Run what the planner finds ``table`` needs through ``runner``; [] when nothing is due."""
    return [runner(s.operation, s.params, s.reasons) for s in planned_steps(table, d)]


def nothing_to_do(version: int | None) -> OperationResult:
    """The result of a maintain that found the dataset needing nothing."""
    return OperationResult("maintain", None, {"latest_version": version})

