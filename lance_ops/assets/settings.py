"""The dataset settings (``lance_ops.yaml``), moved to :mod:`lance_ops.settings` so the Airflow
provider reads them with the same loader; re-exported here for the Dagster layer."""

from lance_ops.settings import (
    CONFIG_ENV,
    DEFAULT_CONFIG_YAML,
    DEFAULT_SPARK_CONF,
    ChangeFeedSettings,
    DatasetSettings,
    PolicySettings,
    Settings,
    SourceSettings,
    SparkSettings,
    SparkSubmitSettings,
    load_settings,
    parse_settings,
)

__all__ = [
    "CONFIG_ENV",
    "DEFAULT_CONFIG_YAML",
    "DEFAULT_SPARK_CONF",
    "ChangeFeedSettings",
    "DatasetSettings",
    "PolicySettings",
    "Settings",
    "SourceSettings",
    "SparkSettings",
    "SparkSubmitSettings",
    "load_settings",
    "parse_settings",
]
