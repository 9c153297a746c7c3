"""OpenLineage events of Dagster runs and ``lance-ops run`` (issue 31, item 4): with
``openlineage: {enabled: true, transport: {type: file}}`` in lance_ops.yaml every operation emits
START and COMPLETE (or FAIL) events that validate against the OpenLineage JSON schema and name
the Lance dataset and the version it committed."""

import io

import yaml
from dagster_support import NAME, run, settings_for
from lineage_schema import validate_event

import lance_ops.format as lf
from lance_ops.assets.configs import DeleteConfig
from lance_ops.assets.definitions import build_definitions
from lance_ops.cli import main
from lance_ops.orchestration.lineage import events_in
from lance_ops.orchestration.settings import parse_settings


def _with_lineage(root, log) -> str:
    """lance_ops.yaml of ``settings_for(root)`` with the file transport writing ``log``."""
    settings_for(root, rows=300)
    path = root / "lance_ops.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["openlineage"] = {"enabled": True, "transport": {"type": "file", "log_file_path": str(log)}}
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def _check(events, job, uri, version, operation):
    assert [e["eventType"] for e in events] == ["START", "COMPLETE"]
    for e in events:
        validate_event(e)
        assert e["job"]["namespace"] == "lance_ops" and e["job"]["name"] == job
    done = events[1]
    (out,) = done["outputs"]
    assert (out["namespace"], out["name"]) == ("file", uri)
    assert out["facets"]["version"]["datasetVersion"] == str(version) == str(lf.dataset(uri).version)
    assert out["facets"]["storage"]["storageLayer"] == "lance"
    assert "id" in [f["name"] for f in out["facets"]["schema"]["fields"]]
    facet = done["run"]["facets"]["lance_ops"]
    assert (facet["operation"], facet["dataset"], facet["version"]) == (operation, NAME, version)
    return done


def test_a_dagster_run_emits_events_naming_the_dataset_and_version(tmp_path, instance):
    log = tmp_path / "ol.jsonl"
    cfg = _with_lineage(tmp_path, log)
    settings = parse_settings(open(cfg).read(), base_dir=tmp_path, source_path=cfg)
    defs, uri = build_definitions(settings), settings.dataset(NAME).uri
    run(defs, instance, "append")
    done = _check(list(events_in(str(log))), f"lance_append.{NAME}.append", uri, 1, "append")
    stats = done["outputs"][0]["outputFacets"]["outputStatistics"]
    ds = lf.dataset(uri)
    assert (stats["rowCount"], stats["fileCount"]) == (300, len(ds.get_fragments()))
    assert stats["size"] == sum(f.metadata.files[0].file_size_bytes for f in ds.get_fragments()) > 0
    assert done["inputs"] == []  # generated rows: no source dataset
    log.unlink()
    run(defs, instance, "delete", DeleteConfig(where="id < 10"))
    done = _check(list(events_in(str(log))), f"lance_delete.{NAME}.delete", uri, 2, "delete")
    (inp,) = done["inputs"]
    assert (inp["name"], inp["facets"]["version"]["datasetVersion"]) == (uri, "1")
    assert done["run"]["facets"]["lance_ops"]["metrics"]["num_deleted_rows"] == 10
    stats = done["outputs"][0]["outputFacets"]["outputStatistics"]
    assert (stats["rowCount"], stats["size"], stats["fileCount"]) == (0, 0, 1)  # one deletion file


def test_the_cli_emits_the_same_events(tmp_path):
    log = tmp_path / "ol.jsonl"
    cfg = _with_lineage(tmp_path, log)
    uri = str(tmp_path / "events")
    assert main(["run", "append", "--config", cfg], out=io.StringIO()) == 0
    done = _check(list(events_in(str(log))), f"lance_append.{NAME}.append", uri, 1, "append")
    assert done["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 300
