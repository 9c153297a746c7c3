"""What Dagster, Airflow and the CLI share, run through each of them (real Dagster instance, real
Airflow ``dag.test()``, the ``lance-ops`` CLI in process; one SparkSession).

- A store-backed dataset (SQLite manifest store) driven through the Spark operations: Airflow gets
  the store from its connection only (the bug was that its jobs never saw it); every orchestrator
  must leave the same versions, operations, rows and commit stamps.  Then the policy asks for
  maintenance and each orchestrator's maintain must decide (and do) the same.
- A SchemaError of the job (a source with other columns) arrives as SchemaError in a Dagster run,
  an Airflow task (in the worker and through spark-submit; no retry) and the CLI.
"""

import io
import json
import os
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import load_dag
from dagster import instance_for_test

import lance_ops.format as lf
from lance_ops.orchestration import TableRef
from lance_ops.orchestration.settings import parse_settings

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

NAME = "shared"
YAML = """\
spark:
  master: local[2,2]
datasets:
  shared:
    uri: {root}/shared
    manifest_store: {root}/manifests.db
    source: {{format: generate, rows: 500}}
    change_feed: {{sink_uri: {root}/shared_changes}}
    policy: {{target_rows_per_fragment: 10000, min_small_fragments: 3, deleted_ratio_threshold: 0.2}}
"""
#: (operation, parameters) in every orchestrator's vocabulary: Dagster config, CLI options, operator args
STEPS = [("append", {}), ("append", {}), ("delete", {"where": "id < 100"}),
         ("upsert", {"start_id": 900, "rows": 200}), ("compact", {})]
SPARK_SUBMIT = str(Path(sys.executable).parent / "spark-submit")
RESULTS: dict[str, dict] = {}


def world(tmp_path: Path) -> tuple[str, str, str]:
    """(lance_ops.yaml path, dataset uri, manifest store path) under ``tmp_path``."""
    cfg = tmp_path / "lance_ops.yaml"
    cfg.write_text(YAML.format(root=tmp_path))
    return str(cfg), str(tmp_path / NAME), str(tmp_path / "manifests.db")


def small_appends(uri: str, store: str, n: int = 3) -> None:
    """``n`` small appends in process, through the store (the policy's compaction threshold is 3)."""
    for _ in range(n):
        start = lf.dataset(uri, manifest_store=store).manifest.next_row_id
        lf.write_dataset(pa.table({"id": pa.array(range(start, start + 5), pa.int64()), "kind": ["late"] * 5,
                                   "amount": pa.array([2.0] * 5)}), uri, mode="append", manifest_store=store)


def outcome(uri: str, store: str) -> dict:
    """Versions with their operation and commit stamp (orchestrator-neutral parts), rows by kind."""
    table = TableRef(uri, manifest_store=store)
    history = []
    for v in table.list_versions():
        txn = table.transaction(v)
        p = txn.properties
        history.append((v, txn.operation.name, p.get("lance_ops/operation"), p.get("txnVersion"),
                        (p.get("txnAppId") or "/").rsplit("/", 1)[-1] or None))
    kinds = table.open().to_table(columns=["kind"]).column("kind").value_counts().to_pylist()
    return {"history": history, "rows": table.open().count_rows(),
            "kinds": sorted((k["values"], k["counts"]) for k in kinds)}


# ---------------------------------------------------------------------------- the three drivers
def dagster_configs(op: str, params: dict):
    from lance_ops.assets import configs

    cls = {"append": configs.AppendConfig, "delete": configs._OptionalDelete, "upsert": configs.UpsertConfig,
           "compact": configs.CompactConfig}[op]
    return cls(**params)


def via_dagster(tmp_path: Path, *, maintain: bool) -> None:
    from lance_ops.assets.definitions import build_definitions
    from lance_ops.assets.runs import execute

    cfg, _, _ = world(tmp_path)
    defs = build_definitions(parse_settings(Path(cfg).read_text(), base_dir=tmp_path, source_path=cfg))
    (tmp_path / "dagster_home").mkdir(exist_ok=True)
    with instance_for_test(temp_dir=str(tmp_path / "dagster_home")) as instance:
        runs = [("maintain", None)] if maintain else [(op, dagster_configs(op, p)) for op, p in STEPS]
        for op, config in runs:
            result = execute(defs, NAME, op, config, instance=instance)
            assert result.success, op


def via_cli(tmp_path: Path, *, maintain: bool) -> None:
    from lance_ops.cli import main

    cfg, _, _ = world(tmp_path)
    steps = [("maintain", {})] if maintain else STEPS
    for op, params in steps:
        flags = [x for k, v in params.items() for x in (f"--{k.replace('_', '-')}", str(v))]
        assert main(["run", op, "--config", cfg, "--dataset", NAME, *flags], out=io.StringIO()) == 0, op


AIRFLOW_DAG = """
from datetime import datetime

from airflow.sdk import DAG, chain
from lance_ops.airflow import *  # noqa: F403

CONN = dict(uri={uri!r}, lance_conn_id="lance_store")  # the manifest store comes from the connection only
with DAG({dag_id!r}, schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    chain(
        LanceAppendOperator(task_id="append_1", format="generate", rows=500, **CONN),
        LanceAppendOperator(task_id="append_2", format="generate", rows=500, **CONN),
        LanceDeleteOperator(task_id="delete", where="id < 100", **CONN),
        LanceUpsertOperator(task_id="upsert", format="generate", rows=200, start_id=900, **CONN),
        LanceCompactOperator(task_id="compact", target_rows_per_fragment=10000, materialize_deletions_threshold=0.2,
                             **CONN),
    )
"""
AIRFLOW_MAINTAIN = """
from datetime import datetime

from airflow.sdk import DAG
from lance_ops.airflow import LanceMaintainOperator

with DAG({dag_id!r}, schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    LanceMaintainOperator(task_id="maintain", dataset="shared", config_path={cfg!r}, lance_conn_id="lance_store")
"""


def via_airflow(tmp_path: Path, *, maintain: bool) -> None:
    cfg, uri, store = world(tmp_path)
    os.environ["AIRFLOW_CONN_LANCE_STORE"] = json.dumps({"conn_type": "lance", "extra": {
        "manifest_store": store, "spark": {"master": "local[2,2]"}}})
    dag_id = "lance_shared_maintain" if maintain else "lance_shared_steps"
    text = (AIRFLOW_MAINTAIN if maintain else AIRFLOW_DAG).format(dag_id=dag_id, uri=uri, cfg=cfg)
    run = load_dag(dag_id, text).test()
    assert str(run.state) == "success", [(ti.task_id, str(ti.state)) for ti in run.get_task_instances()]


DRIVERS = {"dagster": via_dagster, "airflow": via_airflow, "cli": via_cli}


@pytest.mark.parametrize("orchestrator", list(DRIVERS))
def test_store_backed_dataset_through_every_operation(orchestrator, tmp_path, airflow_db, spark, monkeypatch):
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    _, uri, store = world(tmp_path)
    DRIVERS[orchestrator](tmp_path, maintain=False)
    steps = outcome(uri, store)
    assert steps["rows"] == 1000 and dict(steps["kinds"])["upserted"] == 200
    assert [h[2] for h in steps["history"]][:4] == ["append", "append", "delete", "upsert"]
    assert all(h[3] == "0" and h[4] == h[2] for h in steps["history"][:4])  # idempotent, keyed by operation
    with pytest.raises(lf.ManifestStoreRequiredError):  # it is store-backed: a writer without it is refused
        lf.write_dataset(pa.table({"id": pa.array([1], pa.int64())}), uri, mode="append")
    small_appends(uri, store)
    DRIVERS[orchestrator](tmp_path, maintain=True)
    maintained = outcome(uri, store)
    assert maintained["history"][-1][1:3] == ("rewrite", "compact") and maintained["rows"] == 1015
    assert len(TableRef(uri, manifest_store=store).open().get_fragments()) == 1
    RESULTS.setdefault("reference", {"steps": steps, "maintained": maintained})
    assert {"steps": steps, "maintained": maintained} == RESULTS["reference"], orchestrator


# ---------------------------------------------------------------------------- a SchemaError, everywhere
def wrong_source(tmp_path: Path) -> str:
    """A parquet file whose columns are not the dataset's."""
    path = tmp_path / "landing.parquet"
    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int64()), "label": ["x", "y"]}), path)
    return str(path)


def seeded(tmp_path: Path) -> tuple[str, str, str]:
    cfg, uri, store = world(tmp_path)
    lf.write_dataset(pa.table({"id": pa.array([0], pa.int64()), "kind": ["a"], "amount": pa.array([1.0])}), uri,
                     enable_stable_row_ids=True, manifest_store=store)
    return cfg, uri, store


def schema_error_dagster(tmp_path: Path) -> str:
    from lance_ops.assets.configs import AppendConfig
    from lance_ops.assets.definitions import build_definitions
    from lance_ops.assets.runs import execute

    cfg, _, _ = seeded(tmp_path)
    defs = build_definitions(parse_settings(Path(cfg).read_text(), base_dir=tmp_path, source_path=cfg))
    (tmp_path / "dagster_home").mkdir(exist_ok=True)
    with instance_for_test(temp_dir=str(tmp_path / "dagster_home")) as instance:
        result = execute(defs, NAME, "append", AppendConfig(path=wrong_source(tmp_path), format="parquet"),
                         instance=instance)
    assert not result.success
    (err,) = [e.event_specific_data.error for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    chain = [err]
    while chain[-1].cause is not None:
        chain.append(chain[-1].cause)
    return " ".join(f"{e.cls_name}: {e.message}" for e in chain)


SCHEMA_DAG = """
from datetime import datetime, timedelta

from airflow.sdk import DAG
from lance_ops.airflow import LanceAppendOperator

with DAG({dag_id!r}, schedule=None, start_date=datetime(2026, 1, 1), catchup=False,
         default_args={{"retries": 3, "retry_delay": timedelta(seconds=0)}}):
    LanceAppendOperator(task_id="append", uri={uri!r}, source={src!r}, format="parquet", lance_conn_id="lance_store")
"""


def schema_error_airflow(tmp_path: Path, capfd, spark_submit: bool) -> str:
    _, uri, store = seeded(tmp_path)
    spark = {"master": "local[1]", "spark_submit": SPARK_SUBMIT} if spark_submit else {"master": "local[2,2]"}
    os.environ["AIRFLOW_CONN_LANCE_STORE"] = json.dumps({"conn_type": "lance", "extra": {
        "manifest_store": store, "spark": spark}})
    dag_id = f"lance_schema_{'submit' if spark_submit else 'worker'}"
    capfd.readouterr()
    run = load_dag(dag_id, SCHEMA_DAG.format(dag_id=dag_id, uri=uri, src=wrong_source(tmp_path))).test()
    (ti,) = run.get_task_instances()
    assert str(ti.state) == "failed" and ti.try_number == 1  # not retried: a retry cannot fix a schema
    return "".join(capfd.readouterr())


def schema_error_cli(tmp_path: Path, capfd) -> str:
    from lance_ops.cli import main

    cfg, _, _ = seeded(tmp_path)
    capfd.readouterr()
    assert main(["run", "append", "--config", cfg, "--path", wrong_source(tmp_path), "--format", "parquet"],
                out=io.StringIO()) == 1
    err = capfd.readouterr().err
    (line,) = [x for x in err.splitlines() if x.startswith("lance-ops: error")]
    assert "Traceback" not in err and "--debug" in line
    return line


@pytest.mark.parametrize("orchestrator", ["dagster", "airflow", "airflow_spark_submit", "cli"])
def test_schema_error_arrives_as_schema_error(orchestrator, tmp_path, airflow_db, spark, capfd, monkeypatch):
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    if orchestrator == "dagster":
        text = schema_error_dagster(tmp_path)
    elif orchestrator == "cli":
        text = schema_error_cli(tmp_path, capfd)
    else:
        text = schema_error_airflow(tmp_path, capfd, spark_submit=orchestrator.endswith("submit"))
    assert "SchemaError" in text and "missing columns ['amount', 'kind']" in text, text[-3000:]
    assert "columns not in the dataset ['label']" in text
    _, uri, store = world(tmp_path)
    assert TableRef(uri, manifest_store=store).list_versions() == [1]  # nothing committed


# ---------------------------------------------------------------------------- one maintain: the planner's
PLANNED_YAML = """\
spark:
  master: local[2,2]
datasets:
  planned:
    uri: {root}/planned
    source: {{format: generate, rows: 100}}
    change_feed: {{sink_uri: {root}/planned_changes}}
    policy: {{target_rows_per_fragment: 10000, min_small_fragments: 3, min_unindexed_rows: 100,
              min_index_coverage: 0.5}}
"""
PLANNED_DAG = """
from datetime import datetime

from airflow.sdk import DAG
from lance_ops.airflow import LanceMaintainOperator

with DAG({dag_id!r}, schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    LanceMaintainOperator(task_id="maintain", dataset="planned", config_path={cfg!r})
"""


def planned_state(tmp_path: Path) -> tuple[str, str]:
    """Five small fragments (three under a BTREE, 300 rows unindexed: 80% coverage, above
    min_index_coverage but over min_unindexed_rows) and a failed writer's file three hours old."""
    import lance

    cfg, uri = tmp_path / "lance_ops.yaml", str(tmp_path / "planned")
    cfg.write_text(PLANNED_YAML.format(root=tmp_path))
    for i, n in enumerate((400, 400, 400, 150, 150)):
        start = 0 if i == 0 else lf.dataset(uri).manifest.next_row_id
        lf.write_dataset(pa.table({"id": pa.array(range(start, start + n), pa.int64()), "kind": ["a"] * n,
                                   "amount": pa.array([1.0] * n)}), uri, mode="append" if i else "create",
                         enable_stable_row_ids=True)
        if i == 2:
            lance.dataset(uri).create_scalar_index("id", "BTREE")
    stray = Path(uri) / "data" / "stray.lance"
    stray.write_bytes(b"x" * 64)
    os.utime(stray, (stray.stat().st_mtime - 3 * 3600,) * 2)
    return str(cfg), uri


def maintain_planned(orchestrator: str, tmp_path: Path, cfg: str) -> None:
    if orchestrator == "dagster":
        from lance_ops.assets.definitions import build_definitions
        from lance_ops.assets.runs import execute

        defs = build_definitions(parse_settings(Path(cfg).read_text(), base_dir=tmp_path, source_path=cfg))
        (tmp_path / "dagster_home").mkdir(exist_ok=True)
        with instance_for_test(temp_dir=str(tmp_path / "dagster_home")) as instance:
            assert execute(defs, "planned", "maintain", None, instance=instance).success
    elif orchestrator == "cli":
        from lance_ops.cli import main

        assert main(["run", "maintain", "--config", cfg, "--dataset", "planned"], out=io.StringIO()) == 0
    else:
        dag_id = "lance_planned_maintain"
        run = load_dag(dag_id, PLANNED_DAG.format(dag_id=dag_id, cfg=cfg)).test()
        assert str(run.state) == "success", [(ti.task_id, str(ti.state)) for ti in run.get_task_instances()]


@pytest.mark.parametrize("orchestrator", list(DRIVERS))
def test_maintain_is_the_planners_plan_everywhere(orchestrator, tmp_path, airflow_db, spark, monkeypatch):
    """The same table state gets the same maintain actions from Dagster, Airflow and the CLI: the
    planner's (compaction, the index catch-up the old coverage threshold would not have asked for,
    and the orphan sweep), each committed and stamped by the orchestrator."""
    from lance_ops.orchestration.maintain import decide_maintenance
    from lance_ops.orchestration.planner import plan

    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    cfg, uri = planned_state(tmp_path)
    d = parse_settings(Path(cfg).read_text(), base_dir=tmp_path).dataset("planned")
    planned = [a.operation for a in decide_maintenance(TableRef(uri), d.policy)]
    assert planned == ["compact", "optimize_indices", "remove_orphan_files"]
    assert planned == [a.operation for a in plan(uri, d.policy).actions]
    maintain_planned(orchestrator, tmp_path, cfg)
    table = TableRef(uri)
    after = [(table.transaction(v).operation.name, table.transaction(v).properties.get("lance_ops/operation"))
             for v in table.list_versions() if v > 6]
    ds = lf.dataset(uri)
    (idx,) = [x for x in ds.describe_indices() if x.name == "id_idx"]
    got = {"commits": after, "fragments": len(ds.get_fragments()), "rows": ds.count_rows(),
           "unindexed": idx.num_rows_unindexed, "stray": (Path(uri) / "data" / "stray.lance").exists(),
           "plan_after": [a.operation for a in decide_maintenance(table, d.policy)]}
    assert got["commits"][-1] == ("create_index", "optimize_indices") and ("rewrite", "compact") in got["commits"]
    assert (got["rows"], got["unindexed"], got["stray"], got["plan_after"]) == (1500, 0, False, [])
    RESULTS.setdefault("planned", got)
    assert got == RESULTS["planned"], orchestrator


# ---------------------------------------------------------------------------- one history, three orchestrators
HISTORY_DAG = """
from datetime import datetime

from airflow.sdk import DAG
from lance_ops.airflow import LanceDeleteOperator

with DAG({dag_id!r}, schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    LanceDeleteOperator(task_id="delete", uri={uri!r}, where="id < 100", lance_conn_id="lance_store")
"""


def test_history_shows_every_orchestrators_commits(tmp_path, airflow_db, spark, monkeypatch):
    """One store-backed table appended by Dagster, deleted from by Airflow, upserted and maintained by
    the CLI: ``lance-ops history --json`` names each commit's orchestrator and run, with its metrics."""
    from lance_ops.assets.configs import AppendConfig
    from lance_ops.assets.definitions import build_definitions
    from lance_ops.assets.runs import execute
    from lance_ops.cli import main

    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    cfg, uri, store = world(tmp_path)
    defs = build_definitions(parse_settings(Path(cfg).read_text(), base_dir=tmp_path, source_path=cfg))
    (tmp_path / "dagster_home").mkdir()
    with instance_for_test(temp_dir=str(tmp_path / "dagster_home")) as instance:
        dagster_run = execute(defs, NAME, "append", AppendConfig(), instance=instance)
        assert dagster_run.success
    os.environ["AIRFLOW_CONN_LANCE_STORE"] = json.dumps({"conn_type": "lance", "extra": {
        "manifest_store": store, "spark": {"master": "local[2,2]"}}})
    run = load_dag("lance_shared_history", HISTORY_DAG.format(dag_id="lance_shared_history", uri=uri)).test()
    assert str(run.state) == "success"
    flags = ["--config", cfg, "--dataset", NAME]
    assert main(["run", "upsert", *flags, "--start-id", "900", "--rows", "200"], out=io.StringIO()) == 0
    small_appends(uri, store)
    assert main(["run", "maintain", *flags], out=io.StringIO()) == 0
    out = io.StringIO()
    assert main(["history", uri, "--manifest-store", store, "--json"], out=out) == 0
    rows = [r for r in json.loads(out.getvalue()) if r["status"] == "committed"]
    assert [r["version"] for r in rows] == sorted((r["version"] for r in rows), reverse=True)
    by_op = {}
    for r in reversed(rows):  # oldest first: the first commit of each operation
        by_op.setdefault(r["operation"], r)
    append, delete, upsert = by_op["append"], by_op["delete"], by_op["upsert"]
    assert append["who"].startswith("dagster") and append["run_id"] == dagster_run.run_id
    assert append["metrics"]["num_added_rows"] == 500
    assert delete["who"] == "airflow:lance_shared_history" and delete["run_id"] == run.run_id
    assert delete["metrics"]["num_updated_fragments"] + delete["metrics"]["num_removed_fragments"] >= 1
    assert upsert["who"].startswith("dagster") and upsert["run_id"]  # the CLI runs its jobs in a Dagster instance
    compact = by_op["compact"]
    assert compact["version"] == rows[0]["version"] and compact["lance_operation"] == "rewrite"
    assert compact["reasons"] and compact["metrics"]["num_removed_fragments"] >= 3
    assert {r["run_id"] for r in (append, delete, upsert)} == {dagster_run.run_id, run.run_id, upsert["run_id"]}
