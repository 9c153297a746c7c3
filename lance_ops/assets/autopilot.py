"""The Dagster autopilot: one sensor over the whole fleet, one run per planned action.

``build_autopilot(settings, budget)`` gives a job (``lance_autopilot``: one op that runs one
planned action through :func:`lance_ops.orchestration.planner.run_planned`) and a sensor
(``lance_autopilot_sensor``) that plans the fleet of ``lance_ops.yaml`` (named datasets and
``roots:``) each tick and requests a run per action chosen within the tick's budget:

- run key ``<table>:<operation>[:<index>]:<version>``: Dagster launches a key once, so repeated
  ticks on an unchanged table launch nothing;
- tags: ``lance_ops/table`` (limit runs per table with the run coordinator's
  ``tag_concurrency_limits``, ``applyLimitPerUniqueValue``), ``lance_ops/operation``,
  ``lance_ops/reasons``, ``lance_ops/priority``, ``lance_ops/estimated_bytes``;
- what the budget left out, and tables that could not be planned, are logged on the tick; a
  tick without requests says why in its skip reason.  A skipped action is kept in the table's
  ledger (``lance-ops history`` lists it) the first tick it is skipped for a reason (the
  sensor's cursor holds the run keys already recorded, so repeated ticks add nothing).

Run config carries the action only (its table by name); the run resolves the table's storage
options from ``lance_ops.yaml`` in the worker, so no secret enters Dagster's database.  The code
location of ``lance_ops.assets`` has both (the sensor STOPPED until turned on); another code
location merges ``autopilot_definitions(settings, budget)``.
"""

import json
import uuid
from typing import Any

from dagster import (
    Config,
    DefaultSensorStatus,
    Definitions,
    Failure,
    JobDefinition,
    OpExecutionContext,
    RunRequest,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    in_process_executor,
    job,
    op,
    sensor,
)

from lance_ops.orchestration.planner import (
    Action,
    FleetBudget,
    FleetPlan,
    plan_fleet,
    record_fleet_skipped,
    run_planned,
)
from lance_ops.orchestration.settings import Settings

JOB_NAME = "lance_autopilot"
SENSOR_NAME = "lance_autopilot_sensor"


class PlannedActionConfig(Config):
    """One planned action, as the planner's ``Action.to_dict()`` JSON."""

    action: str


def action_tags(a: Action) -> dict[str, str]:
    return {"lance_ops/table": a.table, "lance_ops/operation": a.operation, "lance_ops/reasons": a.explain()[:1000],
            "lance_ops/priority": str(a.priority), "lance_ops/estimated_bytes": str(a.budget_bytes),
            "lance_ops/version": str(a.version)}


def build_autopilot(settings: Settings, budget: FleetBudget | None = None, *, minimum_interval_seconds: int = 300,
                    default_status: DefaultSensorStatus = DefaultSensorStatus.STOPPED
                    ) -> tuple[JobDefinition, SensorDefinition]:
    """The autopilot's job and sensor for ``settings``' fleet (module docstring)."""

    @op(name="run_planned_action")
    def run_planned_action(context: OpExecutionContext, config: PlannedActionConfig) -> dict[str, Any]:
        result = run_planned(settings, json.loads(config.action), run_id=context.run_id, orchestrator="dagster")
        out = {"status": result.status, "version": result.version, "seconds": round(result.seconds, 3),
               **{k: v for k, v in result.metrics.items() if isinstance(v, int | float)}}
        if result.status == "failed":
            raise Failure(description=f"{result.action.table}: {result.action.operation} failed: {result.error}",
                          metadata={"error": result.error}, allow_retries=False)
        context.add_output_metadata({k: v for k, v in out.items() if v is not None})
        return out

    @job(name=JOB_NAME, executor_def=in_process_executor,
         description="Runs one action the maintenance planner chose (lance_autopilot_sensor requests it).")
    def autopilot_job() -> None:
        run_planned_action()

    @sensor(name=SENSOR_NAME, job=autopilot_job, minimum_interval_seconds=minimum_interval_seconds,
            default_status=default_status,
            description="Plans every table of lance_ops.yaml (datasets and roots) and runs what they need, "
                        "highest priority first, within the tick's budget.")
    def autopilot_sensor(context: SensorEvaluationContext) -> SensorResult | SkipReason:
        fleet = plan_fleet(settings, budget)
        for table, err in fleet.errors:
            context.log.warning(f"{table}: not planned: {err}")
        for s in fleet.skipped:
            context.log.info(f"skipped {s.action.run_key} (priority {s.action.priority}): {s.why}")
        cursor = record_new_skips(fleet, context.cursor, context.log)
        requests = [RunRequest(run_key=a.run_key, tags=action_tags(a),
                               run_config={"ops": {"run_planned_action": {"config": {"action": a.to_json()}}}})
                    for a in fleet.selected]
        if not requests:
            healthy = sum(1 for p in fleet.plans if p.healthy)
            return SensorResult(skip_reason=SkipReason(
                f"{len(fleet.plans)} tables planned, {healthy} need nothing; {len(fleet.skipped)} actions skipped "
                f"for the budget; {len(fleet.errors)} errors"), cursor=cursor)
        return SensorResult(run_requests=requests, cursor=cursor)

    return autopilot_job, autopilot_sensor


def record_new_skips(fleet: FleetPlan, raw_cursor: str | None, log: Any) -> str:
    """Keep the tick's skipped actions in their tables' ledgers, except those the previous tick
    recorded (``raw_cursor``: their run keys and reasons); the new cursor."""
    try:
        seen = set(json.loads(raw_cursor or "[]"))
    except ValueError:
        seen = set()
    new = [s for s in fleet.skipped if f"{s.action.run_key}|{s.why}" not in seen]
    for table, err in record_fleet_skipped(fleet, new, run_id=f"tick-{uuid.uuid4().hex[:12]}",
                                           orchestrator="dagster"):
        log.warning(f"{table}: skipped actions not recorded ({err})")
    return json.dumps(sorted(f"{s.action.run_key}|{s.why}" for s in fleet.skipped))


def autopilot_definitions(settings: Settings, budget: FleetBudget | None = None, **kwargs: Any) -> Definitions:
    """The autopilot as Definitions, to merge into a code location."""
    job_def, sensor_def = build_autopilot(settings, budget, **kwargs)
    return Definitions(jobs=[job_def], sensors=[sensor_def])
