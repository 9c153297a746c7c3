"""The maintenance autopilot on Airflow: one task plans the fleet of ``lance_ops.yaml`` (named
datasets and ``roots:``) within the tick's budget, and dynamic task mapping runs one task per
chosen action, as the Dagster sensor runs one run per action.

The budget is the planner's ``FleetBudget``: bytes to rewrite per tick and runs per tick
(``LANCE_OPS_AUTOPILOT_MAX_BYTES`` / ``LANCE_OPS_AUTOPILOT_MAX_RUNS``); ``max_active_tis_per_dag``
bounds how many actions run at once.  What the budget left out is logged by ``plan``, kept in
each table's ledger (``lance-ops history URI`` lists it as skipped, with the reason) and planned
again on the next run.  Each action's commits carry the run's stamps
(``lance-ops history URI``).  ``LANCE_OPS_AUTOPILOT_CONFIG`` names another lance_ops.yaml than
``LANCE_OPS_CONFIG``."""

import logging
import os

from _common import DEFAULT_ARGS, START
from airflow.sdk import dag, get_current_context, task

log = logging.getLogger(__name__)


def _settings():
    from lance_ops.orchestration.settings import load_settings

    return load_settings(os.environ.get("LANCE_OPS_AUTOPILOT_CONFIG") or None)


@dag(dag_id="lance_autopilot", schedule="@hourly", start_date=START, catchup=False, default_args=DEFAULT_ARGS,
     tags=["lance_ops"], doc_md=__doc__)
def lance_autopilot():
    @task
    def plan() -> list[dict]:
        from lance_ops.orchestration.planner import FleetBudget, plan_fleet, record_fleet_skipped

        budget = FleetBudget(max_bytes=int(os.environ.get("LANCE_OPS_AUTOPILOT_MAX_BYTES", 0)) or None,
                             max_runs=int(os.environ.get("LANCE_OPS_AUTOPILOT_MAX_RUNS", 0)) or None)
        fleet = plan_fleet(_settings(), budget)
        for table, err in fleet.errors:
            log.warning("%s: not planned: %s", table, err)
        for s in fleet.skipped:
            log.info("skipped %s (priority %s): %s", s.action.run_key, s.action.priority, s.why)
        for table, err in record_fleet_skipped(fleet, run_id=get_current_context()["run_id"], orchestrator="airflow"):
            log.warning("%s: skipped actions not recorded: %s", table, err)
        return [a.to_dict() for a in fleet.selected]

    @task(max_active_tis_per_dag=4, retries=0)
    def run(action: dict) -> dict:
        from lance_ops.orchestration.planner import run_planned

        result = run_planned(_settings(), action, run_id=get_current_context()["run_id"], orchestrator="airflow")
        if result.status == "failed":
            raise RuntimeError(f"{action['table']}: {action['operation']} failed: {result.error}")
        return {"table": action["table"], "operation": action["operation"], "status": result.status,
                "version": result.version, "seconds": round(result.seconds, 3)}

    run.expand(action=plan())


lance_autopilot()
