"""The operators are adapters over ``lance_ops.orchestration``: their defaults are the registry's
(and the dataset's policy), every operator and sensor takes ``dataset=`` or ``uri=``, the change
feed declares its sink as an outlet, and the connection's manifest store reaches the task."""

import json
from pathlib import Path

import pyarrow as pa
import pytest
from conftest import CONFIG  # tests/airflow/conftest.py (at import: later, "conftest" is another folder's)

import lance_ops.format as lf
from lance_ops.orchestration import TableRef, resolve_params

pytestmark = [pytest.mark.airflow]


def test_defaults_are_the_registrys_and_the_policys(tmp_path: Path):
    from lance_ops.airflow import LanceCompactOperator, LanceMaterializeDeletionsOperator, LanceUpsertOperator
    from lance_ops.orchestration.settings import load_settings

    table = TableRef(str(tmp_path / "ds"))
    bare = LanceCompactOperator(task_id="c", uri=table.uri, lance_conn_id=None)
    assert bare.job_params(None, table) == resolve_params("compact")
    assert bare.job_params(None, table).target_rows_per_fragment == lf.COMPACTION_DEFAULTS.target_rows_per_fragment
    d = load_settings(str(CONFIG)).dataset("events")
    named = LanceCompactOperator(task_id="c2", dataset="events", max_source_fragments=3, lance_conn_id=None)
    params = named.job_params(d, table)
    assert (params.target_rows_per_fragment, params.materialize_deletions_threshold, params.max_source_fragments) \
        == (d.policy.target_rows_per_fragment, d.policy.deleted_ratio_threshold, 3)
    assert LanceMaterializeDeletionsOperator(task_id="m", uri=table.uri).job_params(None, table).threshold \
        == lf.COMPACTION_DEFAULTS.materialize_deletions_threshold
    upsert = LanceUpsertOperator(task_id="u", dataset="events", lance_conn_id=None).job_params(d, table)
    assert (upsert.on, upsert.rows, upsert.format) == (tuple(d.policy.upsert_on), d.source.rows, "generate")


def test_change_feed_declares_its_sink_and_sensors_take_a_uri(tmp_path: Path):
    from airflow.sdk import Asset

    from lance_ops.airflow import LanceChangeFeedOperator, LanceMaintenanceSensor

    op = LanceChangeFeedOperator(task_id="cf", uri=str(tmp_path / "ds"), sink_uri=str(tmp_path / "sink"))
    assert op.outlets == [Asset(f"file://{tmp_path / 'sink'}")]
    named = LanceChangeFeedOperator(task_id="cf2", dataset="events")
    assert [a.uri for a in named.outlets] == [f"file://{Path(named.settings().dataset('events').change_feed.sink_uri)}"]
    sensor = LanceMaintenanceSensor(task_id="due", uri=str(tmp_path / "ds"), lance_conn_id=None)
    assert sensor._due() is None  # no dataset yet
    uri = str(tmp_path / "ds")
    for i in range(8):  # the default policy: 8 small fragments
        lf.write_dataset(pa.table({"id": pa.array([i], pa.int64())}), uri, mode="append" if i else "create")
    due = sensor._due()
    assert due["operation"] == "compact" and due["version"] == 8


def test_the_connections_manifest_store_reaches_the_task(tmp_path: Path, monkeypatch):
    from lance_ops.airflow import LanceDeleteOperator, LanceHook

    store, uri = str(tmp_path / "m.db"), str(tmp_path / "ds")
    lf.write_dataset(pa.table({"id": pa.array(range(5), pa.int64())}), uri, manifest_store=store)
    monkeypatch.setenv("AIRFLOW_CONN_LANCE_M", json.dumps({"conn_type": "lance", "extra": {"manifest_store": store}}))
    op = LanceDeleteOperator(task_id="d", uri=uri, where="id < 2", lance_conn_id="lance_m")
    hook = LanceHook("lance_m")
    table = op.table(None, hook, uri)
    task = op.task({"ti": type("TI", (), {"dag_id": "g", "run_id": "r", "task_id": "d", "map_index": -1})()},
                   table, op.job_params(None, table))
    task.validate()  # reads the dataset through the store: no ManifestStoreRequiredError
    assert task.table.manifest_store == store and task.commit_options().manifest_store == store
    assert task.transaction_properties["txnAppId"] == "airflow/g/r/d/-1/delete"
    assert hook.latest_version(uri) == 1
