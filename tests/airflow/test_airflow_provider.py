"""The provider as Airflow discovers it: ``get_provider_info`` without importing airflow, the
entry point declared in pyproject, the hook reading a ``lance`` connection."""

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from conftest import ROOT

pytestmark = pytest.mark.airflow


def test_provider_info_names_the_distribution_and_the_connection_type():
    from lance_ops.airflow.provider_info import get_provider_info

    info = get_provider_info()
    assert info["package-name"] == "lance-ops"
    (conn,) = info["connection-types"]
    assert conn == {"connection-type": "lance", "hook-class-name": "lance_ops.airflow.hooks.lance.LanceHook",
                    "hook-name": "Lance"}
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["entry-points"]["apache_airflow_provider"] == {
        "provider_info": "lance_ops.airflow.provider_info:get_provider_info"}
    assert "airflow" in pyproject["project"]["optional-dependencies"]["all"][0]
    import importlib

    for section in ("hooks", "operators", "sensors", "triggers"):
        for module in info[section][0]["python-modules"]:
            importlib.import_module(module)


def test_importing_the_entry_point_first_leaves_airflow_importable():
    """``import airflow`` loads the entry point while importing itself: the module must not import airflow."""
    code = ("import sys; import lance_ops.airflow, lance_ops.airflow.provider_info; "
            "assert 'airflow' not in sys.modules, 'provider_info imported airflow'; "
            "import airflow.sdk; from lance_ops.airflow import LanceHook; print(LanceHook.conn_type)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False)
    assert out.returncode == 0 and out.stdout.strip() == "lance", out.stderr[-2000:]


def test_hook_reads_storage_options_manifest_store_and_spark_from_the_connection(monkeypatch, tmp_path: Path):
    from lance_ops.airflow import LanceHook
    from lance_ops.settings import SparkSettings

    key = json.dumps({"type": "service_account", "client_email": "x@y"})
    monkeypatch.setenv("AIRFLOW_CONN_LANCE_GCS", json.dumps({
        "conn_type": "lance", "host": "http://127.0.0.1:4443", "password": key,
        "extra": {"storage_options": {"project": "p"}, "manifest_store": f"sqlite:///{tmp_path}/m.db",
                  "spark": {"master": "spark://h:7077", "conf": {"spark.executor.memory": "2g"},
                            "spark_submit": "/opt/spark/bin/spark-submit"}}}))
    hook = LanceHook("lance_gcs")
    assert hook.storage_options == {"project": "p", "endpoint": "http://127.0.0.1:4443", "token": json.loads(key)}
    assert hook.manifest_store == f"sqlite:///{tmp_path}/m.db"
    spark = hook.spark_settings(SparkSettings(master="local[1]", conf={"spark.driver.memory": "1g"}))
    assert spark["master"] == "spark://h:7077" and spark["spark_submit"] == "/opt/spark/bin/spark-submit"
    assert spark["conf"]["spark.executor.memory"] == "2g" and spark["conf"]["spark.driver.memory"] == "1g"
    assert LanceHook(None).storage_options == {} and LanceHook(None).spark_settings()["spark_submit"] is None


def test_version_trigger_watches_new_versions_with_backoff(tmp_path: Path):
    """The AssetWatcher mode: one event per new version, a serialised trigger rebuilt as the triggerer does."""
    import asyncio

    import pyarrow as pa

    import lance_ops.format as lf
    from lance_ops.airflow import LanceVersionTrigger

    uri = str(tmp_path / "ds")
    table = pa.table({"id": pa.array([1, 2], pa.int64())})
    lf.write_dataset(table, uri)
    path, kwargs = LanceVersionTrigger(uri, 1, lance_conn_id=None, poll_interval=0.05, max_poll_interval=0.2,
                                       watch=True).serialize()
    assert path == "lance_ops.airflow.triggers.lance.LanceVersionTrigger"
    trigger = LanceVersionTrigger(**kwargs)

    async def collect() -> list[dict]:
        events, gen = [], trigger.run()
        for _ in range(2):
            writer = asyncio.get_running_loop().run_in_executor(
                None, lambda: (__import__("time").sleep(0.3), lf.write_dataset(table, uri, mode="append")))
            event = await asyncio.wait_for(gen.__anext__(), 30)
            await writer
            events.append(event.payload)
        await gen.aclose()
        return events

    assert asyncio.run(collect()) == [
        {"status": "success", "uri": uri, "version": 2, "after_version": 1},
        {"status": "success", "uri": uri, "version": 3, "after_version": 2},
    ]
    from airflow.sdk import Asset, AssetWatcher

    watched = Asset(f"file://{uri}", watchers=[AssetWatcher(name="lance_versions", trigger=trigger)])
    assert watched.watchers[0].trigger is trigger


def test_versions_committed_in_a_window_by_commit_time(monkeypatch, tmp_path: Path):
    """What a backfill run of the change feed covers: the versions of ``(start, end]``; an
    interval that covers an instant is refused by the sensor."""
    from datetime import UTC, datetime, timedelta
    from types import SimpleNamespace

    import pyarrow as pa

    import lance_ops.format as lf
    import lance_ops.format.txn.apply as build
    from lance_ops.airflow import LanceConfigError, LanceHook, LanceVersionSensor

    uri, t = str(tmp_path / "ds"), datetime(2026, 3, 1, 10, tzinfo=UTC)
    table = pa.table({"id": pa.array([1, 2], pa.int64())})
    for minutes in (5, 30, 60, 61):  # v1..v4
        monkeypatch.setattr(build, "time", SimpleNamespace(time_ns=lambda m=minutes: int(
            (t + timedelta(minutes=m)).timestamp() * 1e9)))
        lf.write_dataset(table, uri, mode="append", enable_stable_row_ids=True)
    hook, hour = LanceHook(None), timedelta(hours=1)
    assert hook.versions_committed(uri, t, t + hour) == (0, [1, 2, 3])  # the end is inclusive
    assert hook.versions_committed(uri, t + hour, t + 2 * hour) == (3, [4])
    assert hook.versions_committed(uri, t + 2 * hour, t + 3 * hour) == (4, [])
    assert hook.versions_committed(uri, (t + hour).replace(tzinfo=None), t + 2 * hour) == (3, [4])  # naive = UTC
    sensor = LanceVersionSensor(task_id="s", uri=uri, lance_conn_id=None, data_interval=True)
    context = {"dag_run": SimpleNamespace(run_type="backfill"), "data_interval_start": t, "data_interval_end": t}
    with pytest.raises(LanceConfigError, match="data_interval.*is empty"):
        sensor.execute(context)
    context["data_interval_end"] = t + hour
    assert sensor.execute(context)["new_versions"] == [1, 2, 3]
