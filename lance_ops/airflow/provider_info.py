"""``get_provider_info`` for Airflow's provider discovery (the ``apache_airflow_provider`` entry point).

Imports nothing: ``import airflow`` loads every provider entry point, so a module here that
imported airflow would make every airflow command fail with a circular import.
"""

from typing import Any

PACKAGE = "lance_ops.airflow"


def get_provider_info() -> dict[str, Any]:
    """The provider's description: the ``lance`` connection type, hook, operators, sensors, triggers."""
    return {
        "package-name": "lance-ops",  # the distribution's canonical name, or discovery raises
        "name": "Lance (lance_ops)",
        "description": "Maintenance of Lance datasets (append, delete, upsert, compaction, deletion "
                       "materialisation, cleanup, orphan sweep, restore, change feed) through lance_ops' Spark jobs.",
        "integrations": [{"integration-name": "Lance", "external-doc-url": "https://lance.org",
                          "tags": ["software"]}],
        "connection-types": [{"connection-type": "lance", "hook-class-name": f"{PACKAGE}.hooks.lance.LanceHook",
                              "hook-name": "Lance"}],
        "hooks": [{"integration-name": "Lance", "python-modules": [f"{PACKAGE}.hooks.lance"]}],
        "operators": [{"integration-name": "Lance", "python-modules": [f"{PACKAGE}.operators.lance",
                                                                          f"{PACKAGE}.operators.maintenance"]}],
        "sensors": [{"integration-name": "Lance", "python-modules": [f"{PACKAGE}.sensors.lance"]}],
        "triggers": [{"integration-name": "Lance", "python-modules": [f"{PACKAGE}.triggers.lance"]}],
    }
