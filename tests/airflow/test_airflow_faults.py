"""Retries commit once, and bad configuration fails before anything is committed (real Airflow,
``dag.test()``; the task's own log is asserted for the typed error)."""

from pathlib import Path

import pytest
from conftest import DATA, load_dag

import lance_ops.format as lf
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.policy import transaction_of

pytestmark = [pytest.mark.airflow, pytest.mark.slow]


def files(uri: str) -> set[str]:
    root = Path(uri)
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()} if root.exists() else set()


DAG_FILE = """
from datetime import datetime, timedelta

import lance_ops.format as lf
from airflow.sdk import DAG
from lance_ops.airflow import *  # noqa: F403


class DiesAfterCommit(LanceAppendOperator):
    \"\"\"The first try dies after its commit landed, before it reported it (the ambiguous case).\"\"\"

    def record(self, context, hook, uri, d, result):
        if context["ti"].try_number == 1:
            assert lf.dataset(uri).version == result["version"]  # the commit is there
            raise RuntimeError("worker killed after the commit, before the task finished")
        super().record(context, hook, uri, d, result)


with DAG({dag_id!r}, schedule=None, start_date=datetime(2026, 1, 1), catchup=False,
         default_args={{"retries": {retries}, "retry_delay": timedelta(seconds=0)}}):
    {task}
"""


def one_task_dag(dag_id: str, task: str, retries: int = 0):
    """A one-task DAG file in the DAG folder (dag.test() runs DAGs Airflow parsed from its bundle)."""
    return load_dag(dag_id, DAG_FILE.format(dag_id=dag_id, retries=retries, task=task))


def test_task_dying_after_its_commit_is_retried_and_commits_once(airflow_db, fresh_dataset, spark):
    dag = one_task_dag("lance_retry", 'DiesAfterCommit(task_id="append", dataset="events")', retries=2)
    run = dag.test()
    assert str(run.state) == "success"
    (ti,) = run.get_task_instances()
    assert ti.try_number == 2
    ds = lf.dataset(fresh_dataset)
    assert (ds.version, ds.count_rows()) == (1, 500)  # committed once, not twice
    props = transaction_of(ObjectStore(fresh_dataset), 1).properties
    assert props["txnAppId"] == f"airflow/lance_retry/{run.run_id}/append/-1" and props["txnVersion"] == "1"
    assert props["airflow/dag_id"] == "lance_retry" and props["lance_ops/operation"] == "append"


@pytest.fixture(scope="module")
def existing(airflow_db, spark):
    """The yaml's dataset at version 1 (500 rows), made by the append DAG's operator."""
    import shutil

    shutil.rmtree(DATA / "events", ignore_errors=True)
    run = one_task_dag("lance_seed", 'LanceAppendOperator(task_id="append", dataset="events")').test()
    assert str(run.state) == "success"
    return str(DATA / "events")


CASES = {
    "unknown_dataset": ('LanceDeleteOperator(task_id="t", dataset="nope", where="id < 3")',
                        ["dataset 'nope', field `dataset`", "no dataset 'nope'"]),
    "bad_predicate": ('LanceDeleteOperator(task_id="t", dataset="events", where="no_such_column < 3")',
                      ["dataset 'events', field `where`", "no_such_column", "no column named 'no_such_column'"]),
    "bad_range": ('LanceChangeFeedOperator(task_id="t", dataset="events", begin_version="{{ 2 + 3 }}", '
                  'end_version="9")',
                  ["dataset 'events', field `begin_version/end_version`", "(5, 9]", "between 0 and 1"]),
    "missing_connection": ('LanceAppendOperator(task_id="t", dataset="events", lance_conn_id="no_such_conn")',
                           ["field `lance_conn_id`", "connection 'no_such_conn' does not exist"]),
}


@pytest.mark.parametrize("case", ["unknown_dataset", "bad_predicate", "bad_range", "missing_connection"])
def test_bad_configuration_fails_the_task_before_any_commit(existing, case, capfd):
    make, expected = CASES[case]
    before = files(existing)
    run = one_task_dag(f"lance_bad_{case}", make, retries=3).test()
    assert str(run.state) == "failed"
    (ti,) = run.get_task_instances()
    assert str(ti.state) == "failed" and ti.try_number == 1  # an AirflowFailException: no retry
    log = "".join(capfd.readouterr())
    assert "LanceConfigError" in log
    for text in expected:
        assert text in log, (text, log[-3000:])
    assert lf.dataset(existing).version == 1 and files(existing) == before
