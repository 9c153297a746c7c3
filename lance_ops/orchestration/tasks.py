"""A ``Task``: one operation on one dataset as data, what an orchestrator hands to Spark.

Typed and frozen: the operation's spec (:mod:`.operations`), the :class:`~.table.TableRef`, the
operation's parameter object, and the transaction properties that stamp its commits
(:mod:`.stamps`).  ``to_json`` / ``from_json`` round-trip it through a spark-submit task file and
Dagster Pipes extras; :meth:`Task.run` runs it (on Spark when the operation needs it) through the
registry, returning a typed :class:`~.results.OperationResult`.
"""

import dataclasses
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lance_ops.format import CommitOptions
from lance_ops.orchestration.operations import OperationSpec, operation, params_from_json, params_to_json
from lance_ops.orchestration.results import OperationResult
from lance_ops.orchestration.table import TableRef

FORMAT = 1


@dataclass(frozen=True)
class Task:
    """One operation on one dataset.

    Attributes:
        operation: the operation's name (a key of ``OPERATIONS``).
        table: the dataset.
        params: the operation's parameter object (``OPERATIONS[operation].params``).
        transaction_properties: what its commits carry (run stamp, idempotency key).
        dataset: the dataset's name in lance_ops.yaml (or its URI), for error messages.
        max_retries: lost commit races retried (``CommitOptions.max_retries``); None: the default.
    """

    operation: str
    table: TableRef
    params: Any
    transaction_properties: Mapping[str, str] = field(default_factory=dict)
    dataset: str = ""
    max_retries: int | None = None

    def __post_init__(self) -> None:
        spec = operation(self.operation)
        if not isinstance(self.params, spec.params):
            raise TypeError(f"task {self.operation}: params must be {spec.params.__name__}, "
                            f"got {type(self.params).__name__}")
        if not self.dataset:
            object.__setattr__(self, "dataset", self.table.uri)

    @property
    def spec(self) -> OperationSpec:
        return operation(self.operation)

    def commit_options(self) -> CommitOptions:
        """The commit options of every commit the task's job makes (manifest store, stamp, retries)."""
        extra = {} if self.max_retries is None else {"max_retries": self.max_retries}
        return CommitOptions(transaction_properties=dict(self.transaction_properties) or None,
                             manifest_store=self.table.manifest_store, **extra)

    def job_kwargs(self) -> dict[str, Any]:
        """The keyword arguments every ``lance_ops.jobs`` write job takes from the task."""
        return {"storage_options": self.table.resolved_storage_options(), "commit": self.commit_options()}

    def validate(self) -> None:
        """Refuse what can be seen from the parameters and the manifest, before Spark starts
        (DatasetConfigError naming the dataset, the field and the fix)."""
        from lance_ops.orchestration.errors import DatasetConfigError

        spec = self.spec
        if spec.needs_dataset and not self.table.exists():
            raise DatasetConfigError(self.dataset, "uri", f"no Lance dataset at {self.table.uri} to {self.operation}",
                                     "run append first (it creates the dataset), or fix the uri")
        spec.validate(self.table, self.params, self.dataset)

    def run(self, spark: Any = None) -> OperationResult:
        """Run the operation and return its result: on ``spark`` (a SparkSession) for the Spark
        operations, in this process through ``lance_ops.format`` without one (where the
        operation can run there: ``OperationSpec.local``)."""
        t0 = time.perf_counter()
        spec = self.spec
        raw = spec.local(self) if spark is None and spec.spark and spec.local is not None else spec.run(spark, self)
        metrics = {k: (list(v) if isinstance(v, tuple) else v) for k, v in raw.items()}
        metrics.setdefault("seconds", round(time.perf_counter() - t0, 3))
        return OperationResult.from_job(self.operation, metrics)

    def with_(self, **changes: Any) -> "Task":
        return dataclasses.replace(self, **changes)

    # ------------------------------------------------------------------ JSON
    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "operation": self.operation, "dataset": self.dataset, "table": self.table.to_json(),
                "params": params_to_json(self.params), "transaction_properties": dict(self.transaction_properties),
                "max_retries": self.max_retries}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Task":
        if int(data.get("format", FORMAT)) != FORMAT:
            raise ValueError(f"task format {data.get('format')} is not {FORMAT} (another lance_ops version?)")
        op = str(data["operation"])
        return cls(op, TableRef.from_json(data["table"]), params_from_json(op, data.get("params") or {}),
                   dict(data.get("transaction_properties") or {}), str(data.get("dataset") or ""),
                   data.get("max_retries"))
