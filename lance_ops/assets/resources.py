"""Dagster resources: a Lance dataset, and Spark in the run worker or through Pipes.

All thin: ``LanceDatasetResource`` opens ``lance_ops.format`` datasets; ``SparkResource``
builds the session through ``lance_ops.jobs.spark_session`` (``getOrCreate``, so an active
session, e.g. a test fixture's, is reused) and never stops it; ``PipesSparkSubmitResource``
runs the same operations as spark-submit applications.  Both Spark resources offer
``run_task(context, task)``, so the assets do not care where Spark runs.
"""

import os
from typing import Any

from dagster import ConfigurableResource
from pydantic import PrivateAttr

import lance_ops.format as lf
from lance_ops.format import COMMIT_DEFAULTS
from lance_ops.format.distributed import ObjectStore
from lance_ops.orchestration import OperationResult, TableRef, Task, error_from_json
from lance_ops.orchestration.settings import OpenLineageSettings


class LanceDatasetResource(ConfigurableResource):  # type: ignore[misc]
    """One Lance dataset: the Dagster face of a :class:`~lance_ops.orchestration.TableRef`.

    Attributes:
        uri: dataset root (local path, ``file://``, ``memory://``, ``gs://bucket/path``).
        storage_options: literal fsspec options (no secrets).
        storage_options_env: option name -> environment variable holding its value (GCS
            credentials); read when the dataset is opened, never logged.
        manifest_store: the external manifest store the dataset commits through.
        openlineage: lance_ops.yaml's ``openlineage`` section as JSON when enabled, else empty.
    """

    uri: str
    storage_options: dict[str, str] = {}
    storage_options_env: dict[str, str] = {}
    manifest_store: str | None = COMMIT_DEFAULTS.manifest_store
    openlineage: str = ""

    def lineage(self) -> OpenLineageSettings | None:
        """The OpenLineage settings the dataset's runs emit with (None: off)."""
        return OpenLineageSettings.model_validate_json(self.openlineage) if self.openlineage else None

    def table(self) -> TableRef:
        return TableRef(self.uri, dict(self.storage_options), dict(self.storage_options_env), self.manifest_store)

    def resolved_storage_options(self) -> dict[str, str]:
        return self.table().resolved_storage_options()

    def open(self, version: int | None = None) -> lf.LanceDataset:
        """The dataset at ``version`` (default: latest); raises DatasetNotFoundError if absent."""
        return self.table().open(version)

    def store(self) -> ObjectStore:
        return self.table().store()

    def versions(self) -> list[int]:
        """Every version present, through the commit handler (no manifest is read)."""
        return self.table().list_versions()

    def latest_version(self) -> int | None:
        return self.table().latest_version()

    def exists(self) -> bool:
        return self.table().exists()


class SparkResource(ConfigurableResource):  # type: ignore[misc]
    """Spark in the run worker (the embedded default): local (``local[*]``) or a cluster driver.

    The session is built once per run (on first use) through ``lance_ops.jobs.spark_session``,
    which registers the Lance data source.  It is not stopped at the end of the run: the JVM
    outlives the run in one process (tests, ``make demo``), and the run worker's exit ends it
    under ``dagster dev``.
    """

    master: str = "local[*]"
    conf: dict[str, str] = {}

    _session: Any = PrivateAttr(default=None)

    def get_session(self) -> Any:
        if self._session is None:
            from lance_ops import jobs

            os.environ.setdefault("PYSPARK_PYTHON", _python())
            self._session = jobs.spark_session(master=self.master, conf=dict(self.conf))
        return self._session

    def run_task(self, context: Any, task: Task) -> OperationResult:
        """Run a dataset operation on this process's session."""
        return task.run(self.get_session())

    def describe(self) -> str:
        return f"in the run worker, master {self.master}"


class PipesSparkSubmitResource(ConfigurableResource):  # type: ignore[misc]
    """Spark as ``spark-submit`` applications launched through Dagster Pipes (no JVM in the run worker).

    ``run_task`` starts ``spark_submit --master <master> [--conf k=v ...] spark_pipes_main.py``
    with a ``PipesSubprocessClient``; the driver (client deploy mode) opens dagster-pipes, runs
    the task through ``lance_ops.jobs`` and reports its log lines, the job's result (a custom
    message) and the version it committed (a materialization with that data version) back to
    this run.  A typed lance_ops error on the driver comes back as the same error type.
    """

    spark_submit: str = "spark-submit"
    master: str = "local[*]"
    conf: dict[str, str] = {}
    env: dict[str, str] = {}
    python: str | None = None

    def command(self) -> list[str]:
        from lance_ops.assets import spark_pipes_main

        python = self.python or _python()
        cmd = [self.spark_submit, "--master", self.master, "--deploy-mode", "client", "--name", "lance_ops",
               "--conf", f"spark.pyspark.python={python}", "--conf", f"spark.pyspark.driver.python={python}"]
        for k, v in sorted(self.conf.items()):
            cmd += ["--conf", f"{k}={v}"]
        return [*cmd, os.path.abspath(spark_pipes_main.__file__)]

    def run_task(self, context: Any, task: Task) -> OperationResult:
        from dagster import PipesSubprocessClient

        python = self.python or _python()
        env = {"PYSPARK_PYTHON": python, "PYSPARK_DRIVER_PYTHON": python, **self.env}
        invocation = PipesSubprocessClient(env=env).run(context=context, command=self.command(),
                                                         extras={"lance_ops_task": task.to_json()})
        messages = invocation.get_custom_messages()
        results = [m["result"] for m in messages if isinstance(m, dict) and "result" in m]
        errors = [m["error"] for m in messages if isinstance(m, dict) and "error" in m]
        if errors:
            raise error_from_json(errors[-1])  # the driver's error, same class and fields
        if not results:
            raise RuntimeError(f"spark-submit of {task.operation} on {task.table.uri} reported no result")
        out = dict(results[-1])
        reported = [r for r in invocation.get_results() if getattr(r, "data_version", None) is not None]
        if reported:
            out["pipes_data_version"] = reported[-1].data_version.value  # type: ignore[union-attr]
        return OperationResult.from_dict(out)

    def describe(self) -> str:
        return f"spark-submit through Dagster Pipes, master {self.master}"


def _python() -> str:
    import sys

    return sys.executable
