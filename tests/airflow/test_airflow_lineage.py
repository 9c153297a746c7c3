"""OpenLineage through the Airflow OpenLineage provider (issue 31, item 4): a real DAG run whose
Lance operators answer ``get_openlineage_facets_on_start/complete``; the provider writes the
events with its file transport, and they validate against the OpenLineage JSON schema and name
the Lance dataset and version."""

import pytest
from conftest import HOME, load_dag
from lineage_schema import validate_event

import lance_ops.format as lf
from lance_ops.orchestration.lineage import events_in

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

LOG = HOME / "openlineage.jsonl"  # the provider's file transport (conftest's ENV)

DAG = '''
import pendulum
from airflow.sdk import DAG
from lance_ops.airflow.operators.lance import LanceAppendOperator, LanceDeleteOperator

with DAG("lance_lineage", start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), schedule=None, catchup=False):
    LanceAppendOperator(task_id="append", dataset="events") >> LanceDeleteOperator(
        task_id="delete", dataset="events", where="id < 10")
'''


def test_a_dag_run_emits_lance_lineage_through_the_provider(airflow_db, fresh_dataset, spark):
    LOG.unlink(missing_ok=True)
    run = load_dag("lance_lineage", DAG).test()
    assert str(run.state) == "success"
    events = [e for e in events_in(str(LOG)) if e["job"]["name"].startswith("lance_lineage.")]
    by_task = {(e["job"]["name"], e["eventType"]): e for e in events}
    assert set(by_task) == {(f"lance_lineage.{t}", s) for t in ("append", "delete") for s in ("START", "COMPLETE")}
    for e in events:
        validate_event(e, known_only=True)  # the provider's own facets (airflow, ...) are its business
        assert e["job"]["namespace"] == "airflow_test"
    uri = fresh_dataset
    start = by_task[("lance_lineage.append", "START")]
    assert [(o["namespace"], o["name"]) for o in start["outputs"]] == [("file", uri)]
    for task, version, read in (("append", 1, None), ("delete", 2, 1)):
        done = by_task[(f"lance_lineage.{task}", "COMPLETE")]
        (out,) = done["outputs"]
        assert (out["namespace"], out["name"], out["facets"]["version"]["datasetVersion"]) == ("file", uri, str(version))
        assert "id" in [f["name"] for f in out["facets"]["schema"]["fields"]]
        facet = done["run"]["facets"]["lance_ops"]
        assert (facet["operation"], facet["dataset"], facet["version"]) == (task, "events", version)
        assert [i["facets"]["version"]["datasetVersion"] for i in done["inputs"]] == ([str(read)] if read else [])
    append = by_task[("lance_lineage.append", "COMPLETE")]
    assert append["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 500
    assert by_task[("lance_lineage.delete", "COMPLETE")]["run"]["facets"]["lance_ops"]["metrics"]["num_deleted_rows"] == 10
    assert lf.dataset(uri).version == 2
