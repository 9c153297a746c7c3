"""The maintenance planner: what every table needs, from its metadata, within a budget.

    from lance_ops.orchestration.planner import plan, plan_fleet, maintain, history
    p = plan("/data/events")                 # MaintenancePlan: actions with reasons and estimates
    fleet = plan_fleet(settings, FleetBudget(max_bytes=10 << 30, max_runs=8))

See docs/ARCHITECTURE.md, "The maintenance planner", for the thresholds, scores and budget rules.
"""

from lance_ops.orchestration.planner.execute import (
    ActionResult,
    MaintainReport,
    maintain,
    run_action,
    run_planned,
)
from lance_ops.orchestration.planner.fleet import discover_tables, fleet_members, plan_fleet
from lance_ops.orchestration.planner.ledger import (
    history,
    record_fleet_skipped,
    record_skipped,
    skipped_decisions,
    stamps,
)
from lance_ops.orchestration.planner.model import (
    OPERATIONS,
    Action,
    Estimate,
    FleetBudget,
    FleetPlan,
    MaintenancePlan,
    Reason,
    Skipped,
    TableRef,
)
from lance_ops.orchestration.planner.table_plan import plan

__all__ = [
    "OPERATIONS",
    "Action",
    "ActionResult",
    "Estimate",
    "FleetBudget",
    "FleetPlan",
    "MaintainReport",
    "MaintenancePlan",
    "Reason",
    "Skipped",
    "TableRef",
    "discover_tables",
    "fleet_members",
    "history",
    "maintain",
    "plan",
    "plan_fleet",
    "record_fleet_skipped",
    "record_skipped",
    "run_action",
    "run_planned",
    "skipped_decisions",
    "stamps",
]
