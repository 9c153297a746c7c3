"""Spark session set-up for lance_ops: the worker environment, then the data sources."""

import os
import sys
from collections.abc import Mapping
from typing import Any

from pyspark.sql import SparkSession

PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"

#: Environment the Python workers need.  Spark freezes the environment when the JVM starts, so
#: these must be set before the first session of the process (RECIPES.md §1 (d), (e)).
WORKER_ENV_DEFAULTS = {
    # gcsfs otherwise probes a gRPC endpoint before every bucket call (60 s against emulators)
    "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false",
}


def register(spark: SparkSession) -> None:
    """Register ``format("lance")`` and ``format("lance_changes")`` on ``spark``.

    Also enables Python data source filter pushdown (``spark.sql.python.filterPushdown.enabled``),
    which the lance reader implements; to read with pushdown disabled, pass
    ``option("pushdown", False)``.
    """
    from .source import LanceDataSource
    from .streaming import LanceChangesDataSource

    spark.dataSource.register(LanceDataSource)
    spark.dataSource.register(LanceChangesDataSource)
    spark.conf.set(PUSHDOWN_CONF, "true")


def prepare_environment(*, local: bool = True, extra: Mapping[str, str] | None = None) -> None:
    """Set what Python workers need before a JVM starts (existing values win)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    for k, v in {**WORKER_ENV_DEFAULTS, **dict(extra or {})}.items():
        os.environ.setdefault(k, v)
    if local:
        # no "hostname resolves to a loopback address" probing; all traffic stays on this machine
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Workers import lance_ops: make sure they find this copy even when it is not installed.
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if root not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([root, *paths])


def spark_session(
    master: str = "local[*]",
    conf: Mapping[str, Any] | None = None,
    app_name: str = "lance_ops",
    *,
    env: Mapping[str, str] | None = None,
) -> SparkSession:
    """A SparkSession ready for lance_ops: worker env set first, UI and progress bar off, sources registered.

    Args:
        master: Spark master URL (``local[2]``, ``spark://host:7077``, ...).
        conf: extra Spark configuration (wins over the defaults here).
        app_name: the application name.
        env: extra environment for the workers (e.g. ``STORAGE_EMULATOR_HOST``); it only takes
            effect if no JVM has been started in this process yet.
    """
    prepare_environment(local=master.startswith("local"), extra=env)
    builder = SparkSession.builder.master(master).appName(app_name)
    defaults: dict[str, Any] = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        PUSHDOWN_CONF: "true",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
    }
    for k, v in {**defaults, **dict(conf or {})}.items():
        builder = builder.config(k, str(v).lower() if isinstance(v, bool) else str(v))
    spark = builder.getOrCreate()
    register(spark)
    return spark
