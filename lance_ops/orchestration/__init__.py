"""lance_ops.orchestration: one operation model under Dagster, Airflow and the CLI.

Between ``lance_ops.jobs`` (Spark) and the orchestrators (``assets``, ``airflow``, ``cli``), which
are adapters over it:

- :mod:`.settings` (``lance_ops.yaml``, validated strictly) and :mod:`.policy` (manifest statistics);
- :class:`~.table.TableRef` (how to reach a dataset: opened, listed and searched by time through
  its commit handler);
- :mod:`.operations` (the registry: name -> typed parameters with format's defaults, idempotency,
  validation, runner);
- :class:`~.tasks.Task` (an operation on a table, JSON round-trip for spark-submit and Pipes);
- :class:`~.results.OperationResult` (one shape for Dagster metadata, Airflow XCom, CLI output);
- :mod:`.stamps` (run stamps and idempotency keys per orchestrator);
- :mod:`.errors` (config errors, and errors across processes as type + fields);
- :mod:`.maintain` (the planner's plan as registry tasks: the one maintain of every orchestrator).

This ``__init__`` imports only what needs ``lance_ops.format`` alone; :mod:`.settings` needs the
``orchestration`` extra (pydantic, PyYAML).
"""

from lance_ops.orchestration.errors import (
    DatasetConfigError,
    SettingsError,
    error_from_json,
    error_to_json,
    is_retryable,
)
from lance_ops.orchestration.operations import OPERATIONS, OperationSpec, operation, resolve_params
from lance_ops.orchestration.results import OperationResult
from lance_ops.orchestration.stamps import RunStamp, airflow_stamp, dagster_stamp
from lance_ops.orchestration.table import TableRef
from lance_ops.orchestration.tasks import Task

__all__ = [
    "OPERATIONS",
    "DatasetConfigError",
    "OperationResult",
    "OperationSpec",
    "RunStamp",
    "SettingsError",
    "TableRef",
    "Task",
    "airflow_stamp",
    "dagster_stamp",
    "error_from_json",
    "error_to_json",
    "is_retryable",
    "operation",
    "resolve_params",
]
