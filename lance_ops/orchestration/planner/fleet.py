"""Fleets: the tables of ``lance_ops.yaml`` (named datasets and ``roots:``) planned together.

A root is a directory or bucket prefix; every folder below it (up to ``max_depth`` levels)
holding ``_versions/`` is a table, with the root's policy and storage options.

``plan_fleet`` plans every table and chooses the tick's actions: highest priority first (ties:
fewer bytes, then table name), at most one action per table (a table's writes serialise), until
``max_runs`` actions are chosen; an action whose bytes exceed what is left of ``max_bytes`` is
skipped, except a compaction, which is re-planned within what is left (its most valuable bins).
"""

import os
import posixpath
from collections.abc import Iterable, Iterator
from typing import Any

import lance_ops.format as lf
from lance_ops.format.distributed import ObjectStore
from lance_ops.orchestration.planner.context import Policy
from lance_ops.orchestration.planner.model import (
    Action,
    FleetBudget,
    FleetPlan,
    MaintenancePlan,
    Skipped,
    TableRef,
)
from lance_ops.orchestration.planner.table_plan import DEFAULT_POLICY, plan
from lance_ops.settings import DatasetSettings, RootSettings, Settings

Member = tuple[TableRef, Policy]
_REWRITES = frozenset({"compact", "materialize_deletions"})


def _resolved(literal: dict[str, str], from_env: dict[str, str]) -> dict[str, str]:
    return {**literal, **{k: os.environ[v] for k, v in from_env.items() if v in os.environ}}


def discover_tables(uri: str, storage_options: dict[str, str] | None = None, *, max_depth: int = 3) -> list[str]:
    """URIs of the Lance tables at or below ``uri`` (folders holding ``_versions/``), sorted."""
    store = ObjectStore(uri, dict(storage_options or {}))
    found: list[str] = []

    def subdirs(path: str) -> list[str]:
        if store.is_local:
            try:
                return sorted(e.name for e in os.scandir(path) if e.is_dir())
            except (FileNotFoundError, NotADirectoryError):
                return []
        try:
            entries = store.fs.ls(path, detail=True)
        except FileNotFoundError:
            return []
        return sorted(posixpath.basename(e["name"].rstrip("/")) for e in entries if e.get("type") == "directory")

    def walk(path: str, rel: str, depth: int) -> None:
        names = subdirs(path)
        if "_versions" in names:
            found.append(uri.rstrip("/") + (f"/{rel}" if rel else ""))
            return
        if depth >= max_depth:
            return
        for n in names:
            if not n.startswith((".", "_")):
                walk(f"{path.rstrip('/')}/{n}", f"{rel}/{n}" if rel else n, depth + 1)

    walk(store.full_path(""), "", 0)
    return found


def _root_members(root: RootSettings) -> Iterator[Member]:
    so = _resolved(root.storage_options, root.storage_options_env)
    for uri in discover_tables(root.uri, so, max_depth=root.max_depth):
        yield TableRef(uri=uri, storage_options=so, name=uri), root.policy


def _dataset_member(d: DatasetSettings) -> Member:
    so = _resolved(d.storage_options, d.storage_options_env)
    return TableRef(uri=d.uri, storage_options=so, manifest_store=d.manifest_store, name=d.name), d.policy


def fleet_members(source: Any) -> list[Member]:
    """(table, policy) pairs of ``source``: a Settings, a RootSettings / DatasetSettings, a
    TableRef, a (TableRef, policy) pair, a URI (a table, or a root to search), or a list of
    these; a table listed twice is planned once (the first listing wins)."""
    out: dict[str, Member] = {}

    def add(m: Member) -> None:
        out.setdefault(m[0].uri.rstrip("/"), m)

    items = source if isinstance(source, list | tuple) and not _is_pair(source) else [source]
    for item in items:
        for m in _expand(item):
            add(m)
    return list(out.values())


def _is_pair(x: Any) -> bool:
    return isinstance(x, tuple) and len(x) == 2 and isinstance(x[0], TableRef)


def _expand(item: Any) -> Iterable[Member]:
    if isinstance(item, Settings):
        return [*map(_dataset_member, item.datasets), *(m for r in item.roots for m in _root_members(r))]
    if isinstance(item, RootSettings):
        return _root_members(item)
    if isinstance(item, DatasetSettings):
        return [_dataset_member(item)]
    if _is_pair(item):
        return [item]
    if isinstance(item, TableRef):
        return [(item, DEFAULT_POLICY)]
    uri = str(item)
    return [(TableRef(uri=u, name=u), DEFAULT_POLICY) for u in discover_tables(uri)]


def _rank_key(a: Action) -> tuple[float, int, str]:
    return (-a.priority, a.budget_bytes, a.table)


def plan_fleet(tables_or_roots: Any, budget: FleetBudget | None = None) -> FleetPlan:
    """Plan every table of ``tables_or_roots`` (see :func:`fleet_members`) and choose this
    tick's actions within ``budget`` (module docstring)."""
    budget = budget or FleetBudget()
    plans: list[MaintenancePlan] = []
    errors: list[tuple[str, str]] = []
    members = fleet_members(tables_or_roots)
    policies = {m[0].label: m for m in members}
    for ref, policy in members:
        try:
            plans.append(plan(ref, policy))
        except (lf.LanceOpsError, OSError) as e:
            errors.append((ref.label, f"{type(e).__name__}: {e}"))
    selected: list[Action] = []
    skipped: list[Skipped] = []
    busy: set[str] = set()
    left = budget.max_bytes
    for action in sorted((a for p in plans for a in p.actions), key=_rank_key):
        why = None
        if action.table in busy:
            why = "the table already has a run this tick"
        elif budget.max_runs is not None and len(selected) >= budget.max_runs:
            why = f"run budget: {budget.max_runs} runs chosen"
        elif left is not None and action.budget_bytes > left:
            smaller = within_budget(policies[action.table], action, left)
            if smaller is None:
                why = f"byte budget: needs {action.budget_bytes} bytes, {left} left"
            action = smaller or action
        if why is not None:
            skipped.append(Skipped(action, why))
            continue
        selected.append(action)
        busy.add(action.table)
        if left is not None:
            left -= action.budget_bytes
    return FleetPlan(tuple(plans), tuple(selected), tuple(skipped), budget, tuple(errors))


def within_budget(member: Member, action: Action, left: int) -> Action | None:
    """``action`` re-planned to read at most ``left`` bytes (a rewrite's most valuable bins), or None."""
    if action.operation not in _REWRITES or left <= 0:
        return None
    again = plan(member[0], member[1], max_bytes=left)
    for a in again.actions:
        if a.operation == action.operation and 0 < a.budget_bytes <= left:
            return a
    return None
