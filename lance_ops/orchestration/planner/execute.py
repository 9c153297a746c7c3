"""``maintain``: run the plan, each action as the registry's operation (:mod:`..operations`):
in this process through ``lance_ops.format``, or on Spark when given a session.

Tables go highest priority first.  Per table the planner is asked again after every action (so
each action runs with parameters exact for the version it meets) and the first action not yet
tried this run is run: rewrites, then indices, then cleanup.  Each operation (per index for
``optimize_indices``) is tried at most once per run, so a run ends; what a byte budget leaves
out (``max_bytes``: summed over the actions' bytes read; a compaction is re-planned within what
is left, most valuable bins first) is reported as skipped, kept beside the table in the ledger
(:func:`.ledger.record_skipped`, not with ``dry_run``), and the next run continues.  Every commit
carries the ledger's stamps (:mod:`.ledger`); the orphan sweep (``remove_orphan_files``) runs last.
"""

import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import lance_ops.format as lf
from lance_ops.orchestration.operations import resolve_params
from lance_ops.orchestration.planner.fleet import Member, fleet_members, within_budget
from lance_ops.orchestration.planner.ledger import record_skipped, stamps
from lance_ops.orchestration.planner.model import Action, Skipped, TableRef, _Json
from lance_ops.orchestration.planner.table_plan import plan
from lance_ops.orchestration.tasks import Task

MAX_ROUNDS = 16


@dataclass(frozen=True)
class ActionResult(_Json):
    """One action of a ``maintain`` run: ``status`` is ran, planned (dry run), skipped or failed."""

    action: Action
    status: str
    version: int | None = None
    metrics: Mapping[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    error: str = ""


@dataclass(frozen=True)
class MaintainReport(_Json):
    run_id: str
    results: tuple[ActionResult, ...]
    skipped: tuple[Skipped, ...]
    bytes_used: int
    errors: tuple[tuple[str, str], ...] = ()


def run_action(ref: TableRef, action: Action, *, run_id: str, orchestrator: str = "cli",
               spark: Any = None) -> ActionResult:
    """Run one planned action on ``ref`` now, as the registry's operation (its commits stamped):
    on ``spark`` when given, else in this process; failures are returned, not raised."""
    start = time.perf_counter()
    try:
        task = Task(action.operation, ref, resolve_params(action.operation, None, dict(action.parameters)),
                    stamps(action, run_id=run_id, orchestrator=orchestrator), ref.label)
        result = task.run(spark)
    except (lf.LanceOpsError, OSError, KeyError, ValueError) as e:
        return ActionResult(action, "failed", seconds=time.perf_counter() - start, error=f"{type(e).__name__}: {e}")
    metrics = {k: v for k, v in result.metrics.items() if k != "seconds"}
    return ActionResult(action, "ran", result.version, metrics, time.perf_counter() - start)


def run_planned(source: Any, action: Action | Mapping[str, Any], *, run_id: str, orchestrator: str) -> ActionResult:
    """Run an action a scheduler carried (its dict, or the Action) on its table, found in
    ``source`` by its label (so storage options and secrets are resolved here, in the worker,
    never carried in run config).  A table whose version moved on since planning is re-planned:
    the action of the same operation (and index) on the current version runs, or nothing.

    Raises:
        KeyError: no table of that name in ``source``.
    """
    a = action if isinstance(action, Action) else Action.from_dict(action)
    members = {m[0].label: m for m in fleet_members(source)}
    if a.table not in members:
        raise KeyError(f"no table {a.table!r} in the fleet (known: {sorted(members)[:5]}...)")
    ref, policy = members[a.table]
    bound = a.budget_bytes if a.operation in ("compact", "materialize_deletions") else None
    current = {_key(x): x for x in plan(ref, policy, max_bytes=bound).actions}
    if _key(a) not in current:
        return ActionResult(a, "skipped", error="nothing to do any more: the table's plan no longer has it")
    return run_action(ref, current[_key(a)], run_id=run_id, orchestrator=orchestrator)


def _key(a: Action) -> tuple[str, tuple[str, ...]]:
    return a.operation, tuple(a.parameters.get("index_names") or ())


def maintain(source: Any, *, max_bytes: int | None = None, dry_run: bool = False, run_id: str | None = None,
             orchestrator: str = "cli", on_action: Callable[[ActionResult], None] | None = None,
             spark: Any = None) -> MaintainReport:
    """Run what the planner asks for on every table of ``source`` (as :func:`.fleet.fleet_members`
    takes it) within ``max_bytes`` (module docstring); ``dry_run``: report, change nothing;
    ``spark``: a SparkSession the rewrites and index builds run on (default: this process)."""
    run_id = run_id or f"lance-ops-{uuid.uuid4().hex[:12]}"
    results: list[ActionResult] = []
    skipped: list[Skipped] = []
    errors: list[tuple[str, str]] = []
    left = [max_bytes]
    for ref, policy in _by_priority(fleet_members(source), errors):
        mark = len(skipped)
        try:
            _maintain_table(ref, policy, left, dry_run, (run_id, orchestrator, spark), results, skipped, on_action)
            if not dry_run:
                record_skipped(ref, skipped[mark:], run_id=run_id, orchestrator=orchestrator)
        except (lf.LanceOpsError, OSError) as e:
            errors.append((ref.label, f"{type(e).__name__}: {e}"))
    used = sum(r.action.budget_bytes for r in results if r.status in ("ran", "planned"))
    return MaintainReport(run_id, tuple(results), tuple(skipped), used, tuple(errors))


def _by_priority(members: list[Member], errors: list[tuple[str, str]]) -> list[Member]:
    ranked = []
    for m in members:
        try:
            p = plan(m[0], m[1])
        except (lf.LanceOpsError, OSError) as e:
            errors.append((m[0].label, f"{type(e).__name__}: {e}"))
            continue
        ranked.append((-max((a.priority for a in p.actions), default=0.0), m[0].label, m))
    return [m for *_, m in sorted(ranked, key=lambda t: (t[0], t[1]))]


def _maintain_table(ref: TableRef, policy: Any, left: list[int | None], dry_run: bool, how: tuple[str, str, Any],
                    results: list[ActionResult], skipped: list[Skipped],
                    on_action: Callable[[ActionResult], None] | None) -> None:
    run_id, orchestrator, spark = how
    tried: set[tuple[str, tuple[str, ...]]] = set()
    for _ in range(MAX_ROUNDS):
        todo = [a for a in plan(ref, policy).actions if _key(a) not in tried]
        if not todo:
            return
        action = todo[0]
        tried.add(_key(action))
        if left[0] is not None and action.budget_bytes > left[0]:
            smaller = within_budget((ref, policy), action, left[0])
            if smaller is None:
                skipped.append(Skipped(action, f"byte budget: needs {action.budget_bytes} bytes, {left[0]} left"))
                continue
            skipped.append(Skipped(action, f"byte budget: {action.budget_bytes - smaller.budget_bytes} of its "
                                           f"{action.budget_bytes} bytes left for the next run"))
            action = smaller
        result = ActionResult(action, "planned") if dry_run else run_action(ref, action, run_id=run_id,
                                                                             orchestrator=orchestrator, spark=spark)
        if left[0] is not None and result.status != "failed":
            left[0] -= action.budget_bytes
        results.append(result)
        if on_action is not None:
            on_action(result)
