"""What the planner hands out: typed, frozen and JSON-able (``to_dict`` / ``to_json``).

A :class:`MaintenancePlan` is one table's list of :class:`Action` s; each action names the
operation and the exact parameters it is called with, the :class:`Reason` s (numbers against
thresholds), an :class:`Estimate` of the work and a priority score.  A :class:`FleetPlan` ranks
many tables' actions within a :class:`FleetBudget`.
"""

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lance_ops.orchestration.table import TableRef

#: the operations the planner proposes, in the order a table's actions run
OPERATIONS = ("compact", "materialize_deletions", "optimize_indices", "cleanup_old_versions", "remove_orphan_files")


def _plain(value: Any) -> Any:
    """Dataclasses, mappings and tuples as JSON-able dicts and lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | frozenset | set):
        return [_plain(v) for v in value]
    return value


class _Json:
    def to_dict(self) -> dict[str, Any]:
        """Plain dicts and lists (``json.dumps`` takes it as it is)."""
        return _plain(self)

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(), **kwargs)


@dataclass(frozen=True)
class Reason(_Json):
    """One measured fact against its threshold: ``metric`` = ``value`` (``threshold``)."""

    metric: str
    value: float
    threshold: float | None
    text: str


@dataclass(frozen=True)
class Estimate(_Json):
    """The work of an action, from metadata: rows and bytes read and written, files removed
    and added, versions removed."""

    rows_read: int = 0
    bytes_read: int = 0
    rows_written: int = 0
    bytes_written: int = 0
    files_removed: int = 0
    files_added: int = 0
    bytes_removed: int = 0
    versions_removed: int = 0


@dataclass(frozen=True)
class Action(_Json):
    """One operation on one table at ``version``: ``parameters`` are exactly the keyword
    arguments it runs with; ``details`` what it touches (compaction bins, segments, paths)."""

    table: str
    operation: str
    version: int
    parameters: Mapping[str, Any]
    reasons: tuple[Reason, ...]
    estimate: Estimate
    priority: float
    details: Mapping[str, Any] = field(default_factory=dict)

    @property
    def run_key(self) -> str:
        """One key per (table, operation[, index], version): a scheduler launches it once."""
        names = self.parameters.get("index_names") or ()
        suffix = f":{','.join(names)}" if names else ""
        return f"{self.table}:{self.operation}{suffix}:{self.version}"

    @property
    def budget_bytes(self) -> int:
        """What the action counts against a byte budget: the bytes it reads to rewrite."""
        return self.estimate.bytes_read

    def explain(self) -> str:
        return "; ".join(r.text for r in self.reasons)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Action":
        """The action ``to_dict`` gave (as run config, an XCom or a run tag carry it)."""
        return cls(table=d["table"], operation=d["operation"], version=int(d["version"]),
                   parameters=dict(d["parameters"]), reasons=tuple(Reason(**r) for r in d["reasons"]),
                   estimate=Estimate(**d["estimate"]), priority=float(d["priority"]),
                   details=dict(d.get("details") or {}))


@dataclass(frozen=True)
class MaintenancePlan(_Json):
    """What one table needs at ``version``: nothing (``actions == ()``) when it is healthy."""

    table: TableRef
    version: int
    actions: tuple[Action, ...]
    stats: Mapping[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()  # what the planner saw but does not act on, and why

    @property
    def healthy(self) -> bool:
        return not self.actions


@dataclass(frozen=True)
class FleetBudget(_Json):
    """One tick's budget: bytes to rewrite (summed over the chosen actions' ``bytes_read``)
    and runs (actions) launched; None = unlimited."""

    max_bytes: int | None = None
    max_runs: int | None = None


@dataclass(frozen=True)
class Skipped(_Json):
    """An action left out of a tick, and why."""

    action: Action
    why: str


@dataclass(frozen=True)
class FleetPlan(_Json):
    """Every table's plan, the actions chosen for this tick (highest priority first) and the
    ones skipped for the budget; ``errors``: tables that could not be planned (uri, message)."""

    plans: tuple[MaintenancePlan, ...]
    selected: tuple[Action, ...]
    skipped: tuple[Skipped, ...]
    budget: FleetBudget
    errors: tuple[tuple[str, str], ...] = ()

    @property
    def bytes_selected(self) -> int:
        return sum(a.budget_bytes for a in self.selected)
