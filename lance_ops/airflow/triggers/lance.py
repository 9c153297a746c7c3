"""Triggers that poll a Lance dataset from the triggerer (no worker slot), with back-off.

``LanceVersionTrigger`` fires when the dataset has a version beyond ``after_version``; with
``watch=True`` it fires once per new version and never ends (an ``AssetWatcher`` for event-driven
scheduling).  ``LanceMaintenanceTrigger`` fires when the maintenance planner finds the dataset needs something
under its policy in ``lance_ops.yaml`` (the decision Dagster's compaction sensor reads,
:mod:`lance_ops.orchestration.maintain`).  Blocking reads (manifests, the connection) run in a thread.
"""

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseEventTrigger, TriggerEvent

from lance_ops.format.errors import LanceOpsError

PACKAGE = "lance_ops.airflow.triggers.lance"


def _backoff(delay: float, factor: float, cap: float) -> float:
    return min(cap, delay * factor)


class LanceVersionTrigger(BaseEventTrigger):
    """Fire ``{"status": "success", "version": v, "after_version": a}`` once the dataset at ``uri``
    has a version ``v > after_version`` (``None``: any version).

    Args:
        uri: the dataset.
        after_version: the version to get beyond.
        lance_conn_id: connection giving storage options (None: none).
        storage_options: non-secret options (from lance_ops.yaml); the connection's win.
        poll_interval: first wait between polls (seconds), multiplied by ``backoff`` up to
            ``max_poll_interval`` while nothing changes.
        watch: keep running, one event per new version (AssetWatcher).
        manifest_store: the dataset's external manifest store (lance_ops.yaml's; the connection's wins).
    """

    def __init__(self, uri: str, after_version: int | None = None, *, lance_conn_id: str | None = None,
                 storage_options: dict[str, Any] | None = None, poll_interval: float = 5.0,
                 max_poll_interval: float = 60.0, backoff: float = 2.0, watch: bool = False,
                 manifest_store: str | None = None) -> None:
        super().__init__()
        self.uri, self.after_version, self.lance_conn_id = uri, after_version, lance_conn_id
        self.manifest_store = manifest_store
        self.storage_options = dict(storage_options or {})
        self.poll_interval, self.max_poll_interval, self.backoff = poll_interval, max_poll_interval, backoff
        self.watch = watch

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return f"{PACKAGE}.LanceVersionTrigger", {
            "uri": self.uri, "after_version": self.after_version, "lance_conn_id": self.lance_conn_id,
            "storage_options": self.storage_options, "poll_interval": self.poll_interval,
            "max_poll_interval": self.max_poll_interval, "backoff": self.backoff, "watch": self.watch,
            "manifest_store": self.manifest_store,
        }

    def _latest(self) -> int | None:
        from lance_ops.airflow.hooks.lance import LanceHook

        return LanceHook(self.lance_conn_id).latest_version(self.uri, self.storage_options, self.manifest_store)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        after, delay = self.after_version, self.poll_interval
        while True:
            try:
                latest = await asyncio.to_thread(self._latest)
            except (LanceOpsError, OSError) as e:
                yield TriggerEvent({"status": "error", "uri": self.uri,
                                    "message": f"{type(e).__name__}: {e}"})
                return
            if latest is not None and (after is None or latest > after):
                yield TriggerEvent({"status": "success", "uri": self.uri, "version": latest, "after_version": after})
                if not self.watch:
                    return
                after, delay = latest, self.poll_interval
                continue
            self.log.info("%s: latest version %s, waiting for one beyond %s (next poll in %.1f s)",
                          self.uri, latest, after, delay)
            await asyncio.sleep(delay)
            delay = _backoff(delay, self.backoff, self.max_poll_interval)


class LanceMaintenanceTrigger(BaseEventTrigger):
    """Fire ``{"status": "success", "operation", "reasons", "version"}`` once the policy of
    ``dataset`` (in the ``lance_ops.yaml`` at ``config_path``) asks for maintenance."""

    def __init__(self, dataset: str | None, config_path: str | None = None, *, lance_conn_id: str | None = None,
                 poll_interval: float = 5.0, max_poll_interval: float = 300.0, backoff: float = 2.0,
                 uri: str | None = None) -> None:
        super().__init__()
        self.dataset, self.config_path, self.lance_conn_id, self.uri = dataset, config_path, lance_conn_id, uri
        self.poll_interval, self.max_poll_interval, self.backoff = poll_interval, max_poll_interval, backoff

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return f"{PACKAGE}.LanceMaintenanceTrigger", {
            "dataset": self.dataset, "config_path": self.config_path, "lance_conn_id": self.lance_conn_id,
            "poll_interval": self.poll_interval, "max_poll_interval": self.max_poll_interval, "backoff": self.backoff,
            "uri": self.uri,
        }

    def _due(self) -> dict[str, Any] | None:
        from lance_ops.airflow.sensors.lance import due_now

        return due_now(self.dataset, self.uri, self.config_path, self.lance_conn_id)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        delay = self.poll_interval
        while True:
            try:
                due = await asyncio.to_thread(self._due)
            except (LanceOpsError, OSError) as e:
                yield TriggerEvent({"status": "error", "dataset": self.dataset or self.uri,
                                    "message": f"{type(e).__name__}: {e}"})
                return
            if due is not None:
                yield TriggerEvent({"status": "success", "dataset": self.dataset or self.uri, **due})
                return
            self.log.info("%s: within the policy (next poll in %.1f s)", self.dataset or self.uri, delay)
            await asyncio.sleep(delay)
            delay = _backoff(delay, self.backoff, self.max_poll_interval)
