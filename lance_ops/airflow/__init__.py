"""lance_ops.airflow: an Airflow 3 provider for Lance dataset maintenance.

``LanceHook`` (connection type ``lance``), one operator per ``lance_ops.jobs`` job
(``LanceAppendOperator`` ... ``LanceMaintainOperator``), the deferrable ``LanceVersionSensor`` and
``LanceMaintenanceSensor`` with their triggers, and ``get_provider_info``.  Example DAGs are in
``examples/airflow/``.

Names are imported lazily: Airflow imports this package (through the provider entry point) while
``airflow`` itself is still importing, so nothing here may import airflow at import time.
"""

from importlib import import_module
from importlib.util import find_spec
from typing import Any

if find_spec("airflow") is None:  # no import of airflow: this runs while airflow imports itself
    from lance_ops.format.errors import MissingDependencyError

    raise MissingDependencyError("lance_ops.airflow (the Airflow provider)", extra="airflow", missing="airflow")

_NAMES = {
    "LanceHook": "hooks.lance",
    "LanceConfigError": "errors",
    "LanceAppendOperator": "operators.lance",
    "LanceDeleteOperator": "operators.lance",
    "LanceUpsertOperator": "operators.lance",
    "LanceCompactOperator": "operators.lance",
    "LanceMaterializeDeletionsOperator": "operators.lance",
    "LanceCleanupOperator": "operators.lance",
    "LanceChangeFeedOperator": "operators.lance",
    "LanceMaintainOperator": "operators.lance",
    "LanceOptimizeIndicesOperator": "operators.lance",
    "LanceRestoreOperator": "operators.maintenance",
    "LanceRemoveOrphanFilesOperator": "operators.maintenance",
    "LanceVersionSensor": "sensors.lance",
    "LanceMaintenanceSensor": "sensors.lance",
    "LanceVersionTrigger": "triggers.lance",
    "LanceMaintenanceTrigger": "triggers.lance",
    "get_provider_info": "provider_info",
    "lance_asset": "operators.lance",
}

__all__ = sorted(_NAMES)


def __getattr__(name: str) -> Any:
    if name not in _NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{_NAMES[name]}"), name)
