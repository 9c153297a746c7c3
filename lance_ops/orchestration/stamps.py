"""Run stamps: the transaction properties an orchestrator's run puts on every commit it makes.

Built once here for every orchestrator: the run's id and job (``dagster/run_id`` and
``dagster/job``, or ``airflow/run_id`` and ``airflow/dag_id``), the operation
(``lance_ops/operation``) and, for an operation whose single commit is idempotent, Delta's
``txnAppId`` / ``txnVersion`` (``lance_ops.format.distributed.with_idempotency``), so a retried
task or a re-executed run commits at most once.  The CLI runs through Dagster and stamps as it.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from lance_ops.format.distributed import TXN_APP_ID, TXN_VERSION, with_idempotency

# Transaction property names (jobs that accept ``transaction_properties`` store them on the commit).
RUN_ID_PROPERTY = "dagster/run_id"
JOB_PROPERTY = "dagster/job"
AIRFLOW_RUN_PROPERTY = "airflow/run_id"
AIRFLOW_DAG_PROPERTY = "airflow/dag_id"
OPERATION_PROPERTY = "lance_ops/operation"
#: why the commit was made, when the planner asked for it (maintain, the autopilot): ``lance-ops history`` shows it
REASONS_PROPERTY = "lance_ops/reasons"
#: the write's version within its ``txnAppId`` (one idempotent commit per operation and run)
WRITE_VERSION = 0

__all__ = ["AIRFLOW_DAG_PROPERTY", "AIRFLOW_RUN_PROPERTY", "JOB_PROPERTY", "OPERATION_PROPERTY",
           "REASONS_PROPERTY", "RUN_ID_PROPERTY", "TXN_APP_ID", "TXN_VERSION", "RunStamp", "airflow_stamp", "dagster_stamp"]


@dataclass(frozen=True)
class RunStamp:
    """Who commits: the orchestrator's run, and the identity of its writes (``app_id``)."""

    orchestrator: str
    properties: Mapping[str, str] = field(default_factory=dict)  # run id, job
    app_id: str = ""  # txnAppId prefix: one write of one run (the operation is appended)

    def commit_properties(self, operation: str, *, idempotent: bool, reasons: Sequence[str] = ()) -> dict[str, str]:
        """The properties of ``operation``'s commits (with the planner's ``reasons`` when it asked for
        it); with ``idempotent`` also ``txnAppId`` (``<app_id>/<operation>``) and ``txnVersion``."""
        props = {**self.properties, OPERATION_PROPERTY: operation}
        if reasons:
            props[REASONS_PROPERTY] = "; ".join(reasons)[:1000]
        if not idempotent or not self.app_id:
            return props
        return with_idempotency(props, f"{self.app_id}/{operation}", WRITE_VERSION)

    def to_json(self) -> dict[str, object]:
        return {"orchestrator": self.orchestrator, "properties": dict(self.properties), "app_id": self.app_id}


def dagster_stamp(run_id: str, job: str, dataset: str, root_run_id: str | None = None) -> RunStamp:
    """A Dagster run's stamp; the write identity is ``dagster/<root run id>/<dataset>`` (a
    re-execution of the run after an ambiguous failure is the same write)."""
    return RunStamp("dagster", {RUN_ID_PROPERTY: run_id, JOB_PROPERTY: job},
                    f"dagster/{root_run_id or run_id}/{dataset}")


def airflow_stamp(dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> RunStamp:
    """An Airflow task instance's stamp; the write identity is
    ``airflow/<dag_id>/<run_id>/<task_id>/<map_index>`` (a retried or cleared task is the same write)."""
    return RunStamp("airflow", {AIRFLOW_RUN_PROPERTY: str(run_id), AIRFLOW_DAG_PROPERTY: str(dag_id)},
                    f"airflow/{dag_id}/{run_id}/{task_id}/{map_index}")
