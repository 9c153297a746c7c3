"""OpenLineage events of lance_ops.orchestration.lineage (issue 31, item 4), without Spark: the
in-process cleanup task and a failing task, emitted with the file transport of lance_ops.yaml and
validated against the OpenLineage JSON schema (tests/data/openlineage)."""

import pyarrow.compute as pc
import pytest
from datagen import simple_table
from lineage_schema import validate_event

import lance_ops.format as lf
from lance_ops.format.errors import SchemaError
from lance_ops.orchestration import TableRef, Task, resolve_params
from lance_ops.orchestration.errors import SettingsError
from lance_ops.orchestration.lineage import dataset_name, events_in, run_with_lineage
from lance_ops.orchestration.settings import parse_settings


def test_dataset_names_follow_the_openlineage_naming_rules(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert dataset_name("/data/events") == ("file", "/data/events")
    assert dataset_name("file:///data/events/") == ("file", "/data/events")
    assert dataset_name("events") == ("file", f"{tmp_path}/events")
    assert dataset_name("gs://bucket/warehouse/events") == ("gs://bucket", "warehouse/events")
    assert dataset_name("s3://bucket/events/") == ("s3://bucket", "events")


def _settings(tmp_path, body: str):
    return parse_settings(f"datasets:\n  events:\n    uri: events\n{body}", base_dir=tmp_path,
                          source_path=str(tmp_path / "lance_ops.yaml"))


def test_off_by_default_one_setting_turns_it_on_and_keys_are_strict(tmp_path):
    assert _settings(tmp_path, "").openlineage.enabled is False
    on = _settings(tmp_path, "openlineage:\n  enabled: true\n").openlineage
    assert (on.enabled, on.transport.type, on.namespace) == (True, "console", "lance_ops")
    ol = _settings(tmp_path, "openlineage:\n  enabled: true\n  transport:\n    type: file\n"
                             "    log_file_path: lineage/events.jsonl\n").openlineage
    assert ol.transport.log_file_path == str(tmp_path / "lineage/events.jsonl")  # relative to the file
    with pytest.raises(SettingsError, match=r"unknown key `openlineage.transport.log_path`; did you mean `log_file_path`"):
        _settings(tmp_path, "openlineage:\n  transport:\n    type: file\n    log_path: x\n")
    with pytest.raises(ValueError, match="type 'file' needs log_file_path"):
        _settings(tmp_path, "openlineage:\n  transport:\n    type: file\n")


def test_a_cleanup_and_a_failed_run_emit_valid_events(tmp_path):
    uri = str(tmp_path / "events")
    lf.write_dataset(simple_table(0, 1000), uri)
    ds = lf.write_dataset(simple_table(1000, 500), uri, mode="append")
    ds.delete(pc.field("id") < 10)
    log = tmp_path / "ol.jsonl"
    ol = _settings(tmp_path, f"openlineage:\n  enabled: true\n  namespace: test\n  transport:\n    type: file\n"
                             f"    log_file_path: {log}\n").openlineage
    task = Task("cleanup_old_versions", TableRef(uri), resolve_params("cleanup_old_versions", None,
                                                                      {"older_than_days": 0.0, "retention_duration_check": False}),
                dataset="events")
    result = run_with_lineage(ol, task, "cli.events.cleanup_old_versions", task.run)
    bad = Task("delete", TableRef(uri), resolve_params("delete", None, {"where": "id < 5"}), dataset="events")

    def fail():
        raise SchemaError(f"{uri}: column 'nope' is not in the dataset")

    with pytest.raises(SchemaError):
        run_with_lineage(ol, bad, "cli.events.delete", fail)
    events = list(events_in(str(log)))
    assert [e["eventType"] for e in events] == ["START", "COMPLETE", "START", "FAIL"]
    for e in events:
        used = validate_event(e)
        assert {"LanceOpsRunFacet.json", "ProcessingEngineRunFacet.json", "JobTypeJobFacet.json",
                "SchemaDatasetFacet.json", "DatasetVersionDatasetFacet.json"} <= set(used)
    start, done = events[0], events[1]
    assert start["run"]["runId"] == done["run"]["runId"] != events[2]["run"]["runId"]
    assert done["job"] == {**done["job"], "namespace": "test", "name": "cli.events.cleanup_old_versions"}
    (inp,) = done["inputs"]
    assert (inp["namespace"], inp["name"], inp["facets"]["version"]["datasetVersion"]) == ("file", uri, "3")
    assert [f["name"] for f in inp["facets"]["schema"]["fields"]] == simple_table(0, 1).schema.names
    (out,) = done["outputs"]  # cleanup commits no version: the dataset, no statistics
    assert (out["namespace"], out["name"], out.get("outputFacets", {})) == ("file", uri, {})
    facet = done["run"]["facets"]["lance_ops"]
    assert (facet["operation"], facet["dataset"], facet.get("version")) == ("cleanup_old_versions", "events", None)
    assert facet["metrics"]["old_versions"] == result.metrics["old_versions"] == 2
    assert facet["_producer"].startswith("https://") and facet["_schemaURL"].endswith("#/$defs/LanceOpsRunFacet")
    failed = events[3]
    assert failed["run"]["facets"]["errorMessage"]["message"] == f"SchemaError: {uri}: column 'nope' is not in the dataset"
    assert failed["inputs"][0]["facets"]["version"]["datasetVersion"] == "3"
