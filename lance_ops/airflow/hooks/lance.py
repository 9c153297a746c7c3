"""``LanceHook``: a ``lance`` connection's storage options, manifest store and Spark settings.

Connection extras (all optional)::

    {"storage_options": {"token": "/secrets/sa.json", "endpoint": "http://127.0.0.1:4443"},
     "manifest_store": "sqlite:////var/lance/manifests.db",
     "spark": {"master": "spark://host:7077", "conf": {"spark.executor.memory": "2g"},
               "spark_submit": "/opt/spark/bin/spark-submit"}}

With ``spark.spark_submit`` set, operators run their job as a spark-submit application
(``python -m lance_ops.jobs task``); otherwise Spark runs in the worker (``master`` from the
connection, else ``lance_ops.yaml``'s ``spark:``).  The connection's password, when set, is the
GCS service-account key JSON (``storage_options.token``), so it never sits in plain extras.
"""

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from airflow.sdk import BaseHook

import lance_ops.format as lf
from lance_ops.airflow.errors import LanceConfigError
from lance_ops.format.errors import DatasetNotFoundError
from lance_ops.settings import DEFAULT_SPARK_CONF, SparkSettings


class LanceHook(BaseHook):
    """Storage options, the manifest store and Spark settings of a ``lance`` connection.

    Args:
        lance_conn_id: the connection; None runs without one (local datasets, in-worker Spark
            from ``lance_ops.yaml``).
    """

    conn_name_attr = "lance_conn_id"
    default_conn_name = "lance_default"
    conn_type = "lance"
    hook_name = "Lance"

    def __init__(self, lance_conn_id: str | None = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.lance_conn_id = lance_conn_id
        self._extras: dict[str, Any] | None = None

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        return {
            "hidden_fields": ["schema", "port", "login"],
            "relabeling": {"host": "Storage endpoint (optional)", "password": "GCS service-account key JSON"},
            "placeholders": {"extra": json.dumps({"storage_options": {}, "manifest_store": None,
                                                  "spark": {"master": "local[*]", "conf": {}}})},
        }

    def extras(self) -> dict[str, Any]:
        """The connection's extras with host/password folded into ``storage_options`` ({} without a connection)."""
        if self._extras is not None:
            return self._extras
        if self.lance_conn_id is None:
            self._extras = {}
            return self._extras
        try:
            conn = self.get_connection(self.lance_conn_id)
        except Exception as e:  # the SDK raises AirflowNotFoundException (or a comms error) by id
            raise LanceConfigError(
                "-", "lance_conn_id", f"connection {self.lance_conn_id!r} does not exist ({type(e).__name__})",
                f"create it (conn_type lance, e.g. AIRFLOW_CONN_{self.lance_conn_id.upper()}='{{\"conn_type\": "
                "\"lance\"}'), or pass lance_conn_id=None for local datasets",
            ) from e
        extras = dict(conn.extra_dejson or {})
        so = dict(extras.get("storage_options") or {})
        if conn.host:
            so.setdefault("endpoint", conn.host)
        if conn.password:
            so.setdefault("token", json.loads(conn.password) if conn.password.lstrip().startswith("{")
                          else conn.password)
        extras["storage_options"] = so
        self._extras = extras
        return extras

    def get_conn(self) -> dict[str, Any]:
        """The connection's settings (``storage_options``, ``manifest_store``, ``spark``)."""
        return self.extras()

    @property
    def storage_options(self) -> dict[str, Any]:
        return dict(self.extras().get("storage_options") or {})

    @property
    def manifest_store(self) -> str | None:
        return self.extras().get("manifest_store")

    def spark_settings(self, default: SparkSettings | None = None) -> dict[str, Any]:
        """``master``, ``conf`` (lance_ops defaults, then ``lance_ops.yaml``, then the connection)
        and ``spark_submit`` (None: Spark in the worker)."""
        base = default or SparkSettings()
        mine = dict(self.extras().get("spark") or {})
        return {
            "master": mine.get("master") or base.master,
            "conf": {**DEFAULT_SPARK_CONF, **base.conf, **dict(mine.get("conf") or {})},
            "spark_submit": mine.get("spark_submit") or (base.submit.spark_submit if base.submit else None),
        }

    def open_dataset(self, uri: str, *, version: int | str | None = None,
                     storage_options: Mapping[str, Any] | None = None) -> lf.LanceDataset:
        """The dataset at ``uri`` through this connection's storage options and manifest store."""
        so = {**self.storage_options, **dict(storage_options or {})}
        return lf.dataset(uri, version=version, storage_options=so, manifest_store=self.manifest_store)

    def latest_version(self, uri: str, storage_options: Mapping[str, Any] | None = None) -> int | None:
        """The dataset's latest version, or None when there is no dataset at ``uri``."""
        try:
            return self.open_dataset(uri, storage_options=storage_options).version
        except (DatasetNotFoundError, FileNotFoundError):
            return None

    def versions_committed(self, uri: str, start: datetime, end: datetime,
                           storage_options: Mapping[str, Any] | None = None) -> tuple[int, list[int]]:
        """``(after, versions)``: the versions committed in ``(start, end]`` by their manifests'
        commit timestamps, and the newest one committed at or before ``start`` (0: none).

        Naive datetimes are UTC.  A time window of a data interval (a backfill run's) maps to
        the versions of that window; consecutive windows never share a version.  Reads every
        version's manifest (``LanceDataset.versions()``).
        """
        lo, hi = _utc_naive(start), _utc_naive(end)
        if hi < lo:
            raise LanceConfigError(uri, "data_interval", f"the window ({start}, {end}] ends before it starts",
                                   "pass a window whose end is not before its start")
        history = [(int(v["version"]), v["timestamp"]) for v in self.open_dataset(
            uri, storage_options=storage_options).versions()]
        before = [v for v, ts in history if ts <= lo]
        return max(before, default=0), sorted(v for v, ts in history if lo < ts <= hi)

    def run_task(self, task: Mapping[str, Any], spark: Mapping[str, Any]) -> dict[str, Any]:
        """Run a :mod:`lance_ops.jobs.tasks` task: in this worker, or through spark-submit."""
        if spark.get("spark_submit"):
            return self._submit(task, spark)
        from lance_ops import jobs
        from lance_ops.jobs.tasks import run_task

        session = jobs.spark_session(spark["master"], spark["conf"], app_name=f"lance_ops airflow {task['operation']}")
        return run_task(session, task)

    def _submit(self, task: Mapping[str, Any], spark: Mapping[str, Any]) -> dict[str, Any]:
        from lance_ops.jobs import __main__ as entry

        with tempfile.TemporaryDirectory(prefix="lance_ops_airflow_") as tmp:
            task_path, result_path = os.path.join(tmp, "task.json"), os.path.join(tmp, "result.json")
            with open(task_path, "w") as fh:
                json.dump(task, fh)
            cmd = [spark["spark_submit"], "--master", spark["master"]]
            for k, v in spark["conf"].items():
                cmd += ["--conf", f"{k}={v}"]
            cmd += [entry.__file__, "task", task_path, "--result-json", result_path]
            env = {**os.environ, "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable)}
            self.log.info("spark-submit: %s", " ".join(cmd))
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
            self.log.info("spark-submit output:\n%s", proc.stdout[-20000:] + proc.stderr[-20000:])
            if proc.returncode != 0 or not os.path.exists(result_path):
                raise RuntimeError(f"spark-submit of {task['operation']} on {task['uri']} exited {proc.returncode}: "
                                   f"{proc.stderr.strip().splitlines()[-1:]}")
            with open(result_path) as fh:
                return dict(json.load(fh))


def _utc_naive(when: datetime) -> datetime:
    """``when`` as a naive UTC datetime (how ``LanceDataset.versions()`` reports commit times)."""
    return when.astimezone(UTC).replace(tzinfo=None) if when.tzinfo is not None else when
