"""``maintain``: run the plan in this process through ``lance_ops.format``.

Tables go highest priority first.  Per table the planner is asked again after every action (so
each action runs with parameters exact for the version it meets) and the first action not yet
tried this run is run: rewrites, then indices, then cleanup.  Each operation (per index for
``optimize_indices``) is tried at most once per run, so a run ends; what a byte budget leaves
out (``max_bytes``: summed over the actions' bytes read; a compaction is re-planned within what
is left, most valuable bins first) is reported as skipped, kept beside the table in the ledger
(:func:`.ledger.record_skipped`, not with ``dry_run``), and the next run continues.  Every commit
carries the ledger's stamps (:mod:`.ledger`); the orphan sweep (``remove_orphan_files``) runs last.
"""

import dataclasses
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import lance_ops.format as lf
from lance_ops.format.distributed import ObjectStore, commit_handler_for, discard_index_segments
from lance_ops.orchestration.planner.fleet import Member, fleet_members, within_budget
from lance_ops.orchestration.planner.ledger import record_skipped, stamps
from lance_ops.orchestration.planner.model import Action, Skipped, TableRef, _Json
from lance_ops.orchestration.planner.table_plan import plan

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


Runner = Callable[[lf.LanceDataset, TableRef, Action, dict[str, str]], tuple[int | None, dict[str, Any]]]
RUNNERS: dict[str, Runner] = {}


def runner(operation: str) -> Callable[[Runner], Runner]:
    def register(fn: Runner) -> Runner:
        RUNNERS[operation] = fn
        return fn
    return register


def _metrics(obj: Any) -> dict[str, Any]:
    d = dataclasses.asdict(obj)
    d.pop("removed_paths", None)
    return d


@runner("compact")
def _compact(ds: lf.LanceDataset, ref: TableRef, a: Action, props: dict[str, str]) -> tuple[int | None, dict[str, Any]]:
    m = ds.compact_files(**a.parameters, transaction_properties=props)
    return m.version, _metrics(m)


@runner("materialize_deletions")
def _materialize(ds: lf.LanceDataset, ref: TableRef, a: Action, props: dict[str, str]) -> tuple[int | None, dict[str, Any]]:
    m = ds.materialize_deletions(**a.parameters, transaction_properties=props)
    return m.version, _metrics(m)


@runner("optimize_indices")
def _optimize(ds: lf.LanceDataset, ref: TableRef, a: Action, props: dict[str, str]) -> tuple[int | None, dict[str, Any]]:
    store = ObjectStore(ds.uri, dict(ref.storage_options))
    handler = commit_handler_for(store, ref.manifest_store)
    plan_ = lf.plan_optimize_indices(ds.manifest, **a.parameters)
    if not plan_.tasks:
        return None, {"segments_added": 0}
    built: list[Any] = []
    try:
        for task in plan_.tasks:
            built.append(lf.execute_index_task(store, ds.manifest, task))
    except BaseException:
        discard_index_segments(store, built)
        raise
    m = lf.commit_index_build(store, plan_, built, handler=handler, known=ds.manifest, properties=props)
    return m.version, {"segments_added": len(built), "segments_removed": len(plan_.removed),
                       "rows_indexed": sum(len(t.fragment_ids) for t in plan_.tasks)}


@runner("cleanup_old_versions")
def _cleanup(ds: lf.LanceDataset, ref: TableRef, a: Action, props: dict[str, str]) -> tuple[int | None, dict[str, Any]]:
    p = a.parameters
    s = ds.cleanup_old_versions(timedelta(days=p["older_than_days"]), p["retain_versions"],
                                retention_duration_check=p["retention_duration_check"])
    return None, _metrics(s)


@runner("remove_orphan_files")
def _orphans(ds: lf.LanceDataset, ref: TableRef, a: Action, props: dict[str, str]) -> tuple[int | None, dict[str, Any]]:
    p = a.parameters
    s = ds.remove_orphan_files(timedelta(hours=p["older_than_hours"]),
                               retention_duration_check=p["retention_duration_check"])
    return None, _metrics(s)


def run_action(ref: TableRef, action: Action, *, run_id: str, orchestrator: str = "cli") -> ActionResult:
    """Run one planned action on ``ref`` now (its commits stamped); failures are returned, not raised."""
    start = time.perf_counter()
    try:
        ds = lf.dataset(ref.uri, storage_options=dict(ref.storage_options), manifest_store=ref.manifest_store)
        version, metrics = RUNNERS[action.operation](ds, ref, action, stamps(action, run_id=run_id,
                                                                            orchestrator=orchestrator))
    except (lf.LanceOpsError, OSError, KeyError, ValueError) as e:
        return ActionResult(action, "failed", seconds=time.perf_counter() - start, error=f"{type(e).__name__}: {e}")
    return ActionResult(action, "ran", version, metrics, time.perf_counter() - start)


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
             orchestrator: str = "cli", on_action: Callable[[ActionResult], None] | None = None) -> MaintainReport:
    """Run what the planner asks for on every table of ``source`` (as :func:`.fleet.fleet_members`
    takes it) within ``max_bytes`` (module docstring); ``dry_run``: report, change nothing."""
    run_id = run_id or f"lance-ops-{uuid.uuid4().hex[:12]}"
    results: list[ActionResult] = []
    skipped: list[Skipped] = []
    errors: list[tuple[str, str]] = []
    left = [max_bytes]
    for ref, policy in _by_priority(fleet_members(source), errors):
        mark = len(skipped)
        try:
            _maintain_table(ref, policy, left, dry_run, run_id, orchestrator, results, skipped, on_action)
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


def _maintain_table(ref: TableRef, policy: Any, left: list[int | None], dry_run: bool, run_id: str,
                    orchestrator: str, results: list[ActionResult], skipped: list[Skipped],
                    on_action: Callable[[ActionResult], None] | None) -> None:
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
                                                                             orchestrator=orchestrator)
        if left[0] is not None and result.status != "failed":
            left[0] -= action.budget_bytes
        results.append(result)
        if on_action is not None:
            on_action(result)
