"""Deferrable sensors on a Lance dataset: a new version, or maintenance due by the policy.

Both check once in the worker and, when not yet satisfied, defer to their trigger
(:mod:`lance_ops.airflow.triggers.lance`), which polls with back-off in the triggerer and holds
no worker slot.  ``deferrable=False`` pokes in the worker instead (``mode="reschedule"`` works).
"""

import os
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from airflow.sdk import BaseSensorOperator, Context
from airflow.sdk.exceptions import AirflowException

from lance_ops.airflow.errors import LanceConfigError
from lance_ops.airflow.hooks.lance import LanceHook
from lance_ops.airflow.operators.lance import maintenance_due
from lance_ops.airflow.triggers.lance import LanceMaintenanceTrigger, LanceVersionTrigger
from lance_ops.orchestration import TableRef
from lance_ops.orchestration.errors import DatasetConfigError
from lance_ops.orchestration.settings import CONFIG_ENV, DatasetSettings, PolicySettings, load_settings


def _config_path(config_path: str | None) -> str | None:
    """The lance_ops.yaml the trigger will read (absolute: the triggerer has another cwd)."""
    chosen = config_path or os.environ.get(CONFIG_ENV)
    return os.path.abspath(chosen) if chosen else None


def _dataset(name: str, config_path: str | None) -> DatasetSettings:
    try:
        return load_settings(config_path).dataset(name)
    except DatasetConfigError as e:
        raise LanceConfigError(e.dataset, e.field, e.problem, e.fix) from e


#: run types whose data interval is a window of the past (a manual run's is inferred, not chosen)
INTERVAL_RUN_TYPES = ("scheduled", "backfill")


class LanceVersionSensor(BaseSensorOperator):
    """Wait until the dataset has a version beyond ``after_version``; without one, beyond the
    version this task saw in its previous run (its XCom), or any version on the first run.

    Returns (XCom) ``{"version": latest, "after_version": a, "new_versions": [a+1, ..., latest]}``.

    ``data_interval=True``: a scheduled or backfill run does not wait; it returns the versions
    committed in its data interval ``(data_interval_start, data_interval_end]`` by their commit
    timestamps (``after_version``: the newest committed at or before the start, 0 if none;
    ``new_versions`` may be empty), plus ``"data_interval": [start, end]`` (ISO 8601).  So each
    run of a backfill covers its own hour (or day) of versions and consecutive runs never share
    one.  Manual and asset-triggered runs wait as above.
    """

    template_fields: Sequence[str] = ("dataset", "uri", "after_version")

    def __init__(self, *, dataset: str | None = None, uri: str | None = None, after_version: int | str | None = None,
                 lance_conn_id: str | None = LanceHook.default_conn_name, config_path: str | None = None,
                 deferrable: bool = True, poll_interval: float = 5.0, max_poll_interval: float = 60.0,
                 data_interval: bool = False, **kwargs: Any) -> None:
        kwargs.setdefault("poke_interval", poll_interval)
        super().__init__(**kwargs)
        if dataset is None and uri is None:
            raise ValueError("LanceVersionSensor: give dataset (a name in lance_ops.yaml) or uri")
        self.dataset, self.uri, self.after_version, self.data_interval = dataset, uri, after_version, data_interval
        self.lance_conn_id, self.config_path, self.deferrable = lance_conn_id, config_path, deferrable
        self.poll_interval, self.max_poll_interval = poll_interval, max_poll_interval

    def _target(self) -> tuple[str, dict[str, Any], str | None]:
        """(uri, storage options, manifest store) from lance_ops.yaml; the connection's win."""
        if self.uri:
            return str(self.uri), {}, None
        d = _dataset(str(self.dataset), self.config_path)
        return d.uri, dict(d.storage_options), d.manifest_store

    def _after(self, context: Context) -> int | None:
        if self.after_version not in (None, "", "None"):
            try:
                return int(self.after_version)  # type: ignore[arg-type]
            except (TypeError, ValueError):
                raise LanceConfigError(str(self.dataset or self.uri), "after_version",
                                       f"{self.after_version!r} is not a version number", "pass an integer") from None
        prior = context["ti"].xcom_pull(task_ids=self.task_id, include_prior_dates=True)
        return int(prior["version"]) if isinstance(prior, dict) and prior.get("version") is not None else None

    def _result(self, latest: int, after: int | None) -> dict[str, Any]:
        return {"version": latest, "after_version": after,
                "new_versions": list(range((after or 0) + 1, latest + 1))}

    def _window(self, context: Context) -> tuple[datetime, datetime] | None:
        """The run's data interval when this run covers it (``data_interval=True``, scheduled or backfill)."""
        if not self.data_interval:
            return None
        run_type = getattr(context["dag_run"], "run_type", None)
        start, end = context.get("data_interval_start"), context.get("data_interval_end")
        if str(getattr(run_type, "value", run_type)) not in INTERVAL_RUN_TYPES or start is None or end is None:
            return None
        if not start < end:  # a cron trigger timetable without ``interval=``: its runs cover an instant
            raise LanceConfigError(str(self.dataset or self.uri), "data_interval",
                                   f"the run's data interval [{start}, {end}] is empty, so it covers no versions",
                                   "schedule the DAG with data intervals, e.g. CronTriggerTimetable('@hourly', "
                                   "timezone='UTC', interval=timedelta(hours=1)), or pass data_interval=False")
        return start, end

    def _interval_result(self, uri: str, so: dict[str, Any], ms: str | None,
                         window: tuple[datetime, datetime]) -> dict[str, Any]:
        after, versions = LanceHook(self.lance_conn_id).versions_committed(uri, *window, so, ms)
        self.log.info("%s: versions %s committed in (%s, %s]", uri, versions, window[0], window[1])
        return {"version": versions[-1] if versions else after, "after_version": after, "new_versions": versions,
                "data_interval": [window[0].isoformat(), window[1].isoformat()]}

    def poke(self, context: Context) -> bool:
        if self._window(context) is not None:
            return True
        uri, so, ms = self._target()
        latest = LanceHook(self.lance_conn_id).latest_version(uri, so, ms)
        after = self._after(context)
        return latest is not None and (after is None or latest > after)

    def execute(self, context: Context) -> dict[str, Any]:
        uri, so, ms = self._target()
        window = self._window(context)
        if window is not None:
            return self._interval_result(uri, so, ms, window)
        after = self._after(context)
        latest = LanceHook(self.lance_conn_id).latest_version(uri, so, ms)
        if latest is not None and (after is None or latest > after):
            return self._result(latest, after)
        if not self.deferrable:
            super().execute(context)
            latest = LanceHook(self.lance_conn_id).latest_version(uri, so, ms)
            assert latest is not None
            return self._result(latest, after)
        self.defer(
            trigger=LanceVersionTrigger(uri, after, lance_conn_id=self.lance_conn_id, storage_options=so,
                                        manifest_store=ms,
                                        poll_interval=self.poll_interval, max_poll_interval=self.max_poll_interval),
            method_name="execute_complete", timeout=timedelta(seconds=self.timeout),
        )
        raise AssertionError("defer() raises")  # pragma: no cover

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        if event.get("status") != "success":
            raise AirflowException(f"LanceVersionSensor on {event.get('uri')}: {event.get('message')}")
        return self._result(int(event["version"]), event.get("after_version"))


class LanceMaintenanceSensor(BaseSensorOperator):
    """Wait until the maintenance planner finds the dataset needs something under its policy
    (:func:`lance_ops.orchestration.maintain.decide_maintenance`: compaction or deletion
    materialisation, optimize_indices, cleanup, the orphan sweep); returns the first action's
    ``{"operation", "reasons", "version"}``.

    The dataset is ``dataset`` (a name in ``lance_ops.yaml``: its policy) or ``uri`` (lance_ops'
    default policy), as for the operators.
    """

    template_fields: Sequence[str] = ("dataset", "uri")

    def __init__(self, *, dataset: str | None = None, uri: str | None = None,
                 lance_conn_id: str | None = LanceHook.default_conn_name,
                 config_path: str | None = None, deferrable: bool = True, poll_interval: float = 5.0,
                 max_poll_interval: float = 300.0, **kwargs: Any) -> None:
        kwargs.setdefault("poke_interval", poll_interval)
        super().__init__(**kwargs)
        if dataset is None and uri is None:
            raise ValueError("LanceMaintenanceSensor: give dataset (a name in lance_ops.yaml) or uri")
        self.dataset, self.uri, self.lance_conn_id, self.config_path = dataset, uri, lance_conn_id, config_path
        self.deferrable, self.poll_interval, self.max_poll_interval = deferrable, poll_interval, max_poll_interval

    def _due(self) -> dict[str, Any] | None:
        return due_now(self.dataset, self.uri, self.config_path, self.lance_conn_id)

    def poke(self, context: Context) -> bool:
        return self._due() is not None

    def execute(self, context: Context) -> dict[str, Any]:
        due = self._due()
        if due is not None:
            return due
        if not self.deferrable:
            super().execute(context)
            due = self._due()
            assert due is not None
            return due
        self.defer(
            trigger=LanceMaintenanceTrigger(self.dataset, _config_path(self.config_path), lance_conn_id=self.lance_conn_id,
                                            poll_interval=self.poll_interval, max_poll_interval=self.max_poll_interval,
                                            uri=self.uri),
            method_name="execute_complete", timeout=timedelta(seconds=self.timeout),
        )
        raise AssertionError("defer() raises")  # pragma: no cover

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        if event.get("status") != "success":
            raise AirflowException(f"LanceMaintenanceSensor on {self.dataset or self.uri}: {event.get('message')}")
        return {k: event[k] for k in ("operation", "reasons", "version")}


def due_now(dataset: str | None, uri: str | None, config_path: str | None,
            lance_conn_id: str | None) -> dict[str, Any] | None:
    """What the policy asks for now at the dataset (``dataset`` in lance_ops.yaml, or ``uri``
    under the default policy), through the connection; None when nothing (or no dataset yet)."""
    hook = LanceHook(lance_conn_id)
    if dataset is not None:
        d = _dataset(dataset, config_path)
        table = TableRef.from_settings(d, storage_options=hook.storage_options, manifest_store=hook.manifest_store)
        if uri:
            table = table.with_uri(uri)
        policy = d.policy
    else:
        table, policy = hook.table(str(uri)), PolicySettings()
    if not table.exists():
        return None
    return maintenance_due(table, policy)
