"""``plan(table, policy)``: what one table needs, from its metadata.

Each proposer reads the :class:`~.context.TableContext` and returns its actions and notes; the
plan is their concatenation in :data:`PROPOSERS` order (the order ``maintain`` runs them:
rewrites first, so indices and cleanup see their result).
"""

from collections.abc import Callable

from lance_ops.orchestration.planner.compaction import compaction_actions
from lance_ops.orchestration.planner.context import Policy, TableContext
from lance_ops.orchestration.planner.indices import index_actions
from lance_ops.orchestration.planner.model import Action, MaintenancePlan, TableRef
from lance_ops.orchestration.planner.retention import cleanup_actions, orphan_actions
from lance_ops.settings import PolicySettings

Proposer = Callable[[TableContext], tuple[tuple[Action, ...], tuple[str, ...]]]

#: the proposers, in the order their actions run
PROPOSERS: tuple[Proposer, ...] = (compaction_actions, index_actions, cleanup_actions, orphan_actions)

DEFAULT_POLICY = PolicySettings()


def as_ref(table: TableRef | str) -> TableRef:
    return table if isinstance(table, TableRef) else TableRef(uri=str(table))


def plan(table: TableRef | str, policy: Policy | None = None, *, max_bytes: int | None = None) -> MaintenancePlan:
    """The maintenance ``table`` needs at its latest version under ``policy`` (default: the
    defaults of ``PolicySettings``); ``max_bytes`` bounds the bytes its compaction reads.

    Raises:
        DatasetNotFoundError: no table at the URI.
    """
    ref = as_ref(table)
    ctx = TableContext.open(ref, policy or DEFAULT_POLICY, max_bytes)
    actions: list[Action] = []
    notes: list[str] = []
    for propose in PROPOSERS:
        got, said = propose(ctx)
        actions.extend(got)
        notes.extend(said)
    return MaintenancePlan(table=ref, version=ctx.version, actions=tuple(actions),
                           stats=dict(ctx.fragment_stats), notes=tuple(notes))
