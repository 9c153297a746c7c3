"""Dagster resources: a Lance dataset and a Spark session.

Both are thin: ``LanceDatasetResource`` opens ``lance_ops.format`` datasets, ``SparkResource``
builds the session through ``lance_ops.jobs.spark_session`` (``getOrCreate``, so an active
session, e.g. a test fixture's, is reused) and never stops it.
"""

import os
from typing import Any

from dagster import ConfigurableResource
from pydantic import PrivateAttr

import lance_ops.format as lf
from lance_ops.format.errors import DatasetNotFoundError
from lance_ops.format.manifest import list_versions
from lance_ops.format.store import ObjectStore


class LanceDatasetResource(ConfigurableResource):  # type: ignore[misc]
    """One Lance dataset.

    Attributes:
        uri: dataset root (local path, ``file://``, ``memory://``, ``gs://bucket/path``).
        storage_options: literal fsspec options (no secrets).
        storage_options_env: option name -> environment variable holding its value (GCS
            credentials); read when the dataset is opened, never logged.
    """

    uri: str
    storage_options: dict[str, str] = {}
    storage_options_env: dict[str, str] = {}

    def resolved_storage_options(self) -> dict[str, str]:
        opts = dict(self.storage_options)
        for key, var in self.storage_options_env.items():
            value = os.environ.get(var)
            if value is None:
                raise RuntimeError(f"{self.uri}: storage option {key!r} comes from ${var}, which is not set")
            opts[key] = value
        return opts

    def open(self, version: int | None = None) -> lf.LanceDataset:
        """The dataset at ``version`` (default: latest); raises DatasetNotFoundError if absent."""
        return lf.dataset(self.uri, version=version, storage_options=self.resolved_storage_options())

    def store(self) -> ObjectStore:
        return ObjectStore(self.uri, self.resolved_storage_options())

    def versions(self) -> list[int]:
        """Every version present (one listing of ``_versions/``; no manifest is read)."""
        return list_versions(self.store())[1]

    def latest_version(self) -> int | None:
        versions = self.versions()
        return versions[-1] if versions else None

    def exists(self) -> bool:
        try:
            return self.latest_version() is not None
        except (FileNotFoundError, DatasetNotFoundError):
            return False


class SparkResource(ConfigurableResource):  # type: ignore[misc]
    """A SparkSession, local (``local[*]``) or on a cluster (``spark://host:7077``).

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


def _python() -> str:
    import sys

    return sys.executable
