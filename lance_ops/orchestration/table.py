"""``TableRef``: how to reach one Lance dataset, passed everywhere above ``jobs`` (as
dagster-deltalake's ``TableConnection``).

It holds the URI, literal storage options, the storage options read from environment variables
when the dataset is opened (secrets never travel in a task or in logs), and the external manifest
store every commit of the dataset goes through.  Everything it reads goes through the dataset's
commit handler: opening, listing versions, reading a version's transaction, finding the version
committed at a time.  Dagster's resource, Airflow's hook, the CLI and the policy all use it, so a
store-backed dataset is read the same way everywhere.

Imports only ``lance_ops.format`` at module level (``lance-ops inspect`` runs on the base install).
"""

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import cached_property
from typing import Any

import lance_ops.format as lf
from lance_ops.format import Transaction
from lance_ops.format.distributed import CommitHandler, ObjectStore, commit_handler_for, load_transaction
from lance_ops.format.errors import DatasetNotFoundError, LanceOpsError


@dataclass(frozen=True)
class TableRef:
    """One Lance dataset and how to reach it.

    Attributes:
        uri: dataset root (local path, ``file://``, ``memory://``, ``gs://bucket/path``).
        storage_options: literal fsspec options (no secrets).
        storage_options_env: option name -> environment variable holding its value.
        manifest_store: the external manifest store the dataset commits through (SQLite path or
            ``sqlite:///`` URL), or None (conditional put).
        name: how reports name it (a dataset's name in lance_ops.yaml); ``label`` falls back to the uri.
    """

    uri: str
    storage_options: Mapping[str, str] = field(default_factory=dict)
    storage_options_env: Mapping[str, str] = field(default_factory=dict)
    manifest_store: str | None = None
    name: str = ""

    @property
    def label(self) -> str:
        """The name reports show: ``name``, else the uri."""
        return self.name or self.uri

    @classmethod
    def from_settings(cls, d: Any, *, storage_options: Mapping[str, Any] | None = None,
                      manifest_store: str | None = None) -> "TableRef":
        """The dataset of a ``DatasetSettings`` (``lance_ops.yaml``); ``storage_options`` (a
        connection's) win over the file's, ``manifest_store`` overrides the file's."""
        return cls(uri=d.uri, storage_options={**d.storage_options, **{k: v for k, v in (storage_options or {}).items()}},
                   storage_options_env=dict(d.storage_options_env),
                   manifest_store=manifest_store or d.manifest_store, name=getattr(d, "name", ""))

    def with_uri(self, uri: str) -> "TableRef":
        """The same connection to another location (a branch ``<uri>/tree/<name>``, a sink)."""
        return replace(self, uri=uri)

    # ------------------------------------------------------------------ JSON
    def to_json(self) -> dict[str, Any]:
        return {"uri": self.uri, "storage_options": dict(self.storage_options),
                "storage_options_env": dict(self.storage_options_env), "manifest_store": self.manifest_store,
                "name": self.name}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "TableRef":
        return cls(uri=str(data["uri"]), storage_options=dict(data.get("storage_options") or {}),
                   storage_options_env=dict(data.get("storage_options_env") or {}),
                   manifest_store=data.get("manifest_store"), name=str(data.get("name") or ""))

    # ------------------------------------------------------------------ access
    def resolved_storage_options(self) -> dict[str, Any]:
        """Literal options plus the ones read from environment variables.

        Raises:
            DatasetNotFoundError: never; RuntimeError when a named variable is not set.
        """
        opts: dict[str, Any] = dict(self.storage_options)
        for key, var in self.storage_options_env.items():
            value = os.environ.get(var)
            if value is None:
                raise RuntimeError(f"{self.uri}: storage option {key!r} comes from ${var}, which is not set")
            opts[key] = value
        return opts

    def store(self) -> ObjectStore:
        return self._store

    def handler(self) -> CommitHandler:
        """The dataset's commit handler (its external manifest store, or conditional put)."""
        return self._handler

    @cached_property
    def _store(self) -> ObjectStore:
        return ObjectStore(self.uri, self.resolved_storage_options())

    @cached_property
    def _handler(self) -> CommitHandler:
        return commit_handler_for(self._store, self.manifest_store)

    def open(self, version: int | str | None = None) -> lf.LanceDataset:
        """The dataset at ``version`` (a number or a tag; default: the latest).

        Raises:
            DatasetNotFoundError: no dataset (or no such version).
        """
        return lf.dataset(self.uri, version=version, storage_options=self.resolved_storage_options(),
                          manifest_store=self.manifest_store)

    def list_versions(self) -> list[int]:
        """Every version, through the commit handler (one listing; no manifest is read)."""
        try:
            return self.handler().list_versions()[1]
        except (FileNotFoundError, DatasetNotFoundError):
            return []

    def latest_version(self) -> int | None:
        """The latest version, or None when there is no dataset."""
        versions = self.list_versions()
        return versions[-1] if versions else None

    def exists(self) -> bool:
        return self.latest_version() is not None

    def transaction(self, version: int) -> Transaction | None:
        """The transaction that made ``version``, or None when it has none (or it cannot be read)."""
        handler = self.handler()
        try:
            scheme = handler.cached_scheme() or handler.list_versions()[0]
            if scheme is None:
                return None
            return load_transaction(self.store(), version, scheme, handler=handler)
        except (LanceOpsError, FileNotFoundError):
            return None

    def version_at(self, when: datetime) -> int:
        """The latest version committed at or before ``when`` (naive: UTC), as Delta's
        ``timestampAsOf`` (an error before the first or after the latest commit)."""
        from lance_ops.jobs import version_at

        return version_at(self.handler(), self.uri, when)

    def versions_between(self, start: datetime, end: datetime) -> tuple[int, list[int]]:
        """``(after, versions)``: the versions committed in ``(start, end]`` and the newest one
        committed at or before ``start`` (0: none).  Consecutive windows never share a version;
        two binary searches over commit times."""
        from lance_ops.jobs import latest_at_or_before

        handler = self.handler()
        after = latest_at_or_before(handler, start)
        last = latest_at_or_before(handler, end)
        return after, [v for v in handler.list_versions()[1] if after < v <= last]
