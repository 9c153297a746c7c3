"""Typed results of an operation, with one way to become Dagster metadata or an Airflow XCom."""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class OperationResult:
    """What one operation did.

    Attributes:
        operation: the operation's name.
        version: the version it committed last (None: it committed nothing).
        metrics: the job's result (``lance_ops.jobs`` results' ``to_dict()``, plus ``seconds``).
        reasons: why it ran (the policy's reasons, for maintain).
    """

    operation: str
    version: int | None
    metrics: Mapping[str, Any] = field(default_factory=dict)
    reasons: tuple[str, ...] = ()

    @classmethod
    def from_job(cls, operation: str, metrics: Mapping[str, Any]) -> "OperationResult":
        version = metrics.get("version")
        return cls(operation, int(version) if version is not None else None, dict(metrics))

    def with_reasons(self, reasons: tuple[str, ...] | list[str]) -> "OperationResult":
        return OperationResult(self.operation, self.version, self.metrics, tuple(reasons))

    def to_dict(self) -> dict[str, Any]:
        """The one flat shape every orchestrator reports: Dagster's ``lance_ops/job`` metadata,
        Airflow's XCom and the CLI's ``metrics:`` line (the job's metrics, ``operation``,
        ``version`` and, when set, ``reasons``)."""
        out: dict[str, Any] = {**self.metrics, "operation": self.operation, "version": self.version}
        if self.reasons:
            out["reasons"] = list(self.reasons)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "OperationResult":
        metrics = {k: v for k, v in data.items() if k not in ("operation", "reasons")}
        version = data.get("version")
        return cls(str(data["operation"]), int(version) if version is not None else None, metrics,
                   tuple(data.get("reasons") or ()))
