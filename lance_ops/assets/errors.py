"""Typed errors of the Dagster layer: a bad run configuration names the dataset, the field and the fix.

``DatasetConfigError`` lives in :mod:`lance_ops.settings` (the Airflow provider raises it too).
"""

from lance_ops.settings import DatasetConfigError

__all__ = ["DatasetConfigError"]
