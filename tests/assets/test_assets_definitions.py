"""The code location: what it defines, its config file, and ``dagster definitions validate``."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from dagster import (
    AssetKey,
    BackfillPolicy,
    DefaultScheduleStatus,
    DynamicPartitionsDefinition,
    RunConfig,
)
from dagster_support import NAME, defs_for

from lance_ops.assets.configs import CompactConfig
from lance_ops.assets.definitions import build_definitions
from lance_ops.assets.resources import LanceDatasetResource, SparkResource
from lance_ops.assets.settings import DEFAULT_CONFIG_YAML, load_settings, parse_settings

ROOT = Path(__file__).resolve().parents[2]
DAGSTER = str(Path(sys.executable).parent / "dagster")
OPERATIONS = ["append", "delete", "upsert", "materialize_deletions", "compact", "write_change_feed",
              "cleanup_old_versions", "observe"]


def test_code_location_defines_assets_jobs_sensors_schedules_checks(tmp_path):
    settings, defs = defs_for(tmp_path)
    repo = defs.get_repository_def()
    assert {k.to_user_string() for k in repo.asset_graph.get_all_asset_keys()} == {NAME, f"{NAME}_change_feed"}
    jobs = {j.name for j in repo.get_all_jobs()} - {"__ASSET_JOB"}
    assert jobs == {f"{NAME}_{op}" for op in OPERATIONS} | {f"{NAME}_checks", f"{NAME}_change_feed_partitions"}
    assert {s.name for s in repo.sensor_defs} == {
        f"{NAME}_compaction_sensor", f"{NAME}_new_versions_sensor", f"{NAME}_checks_after_maintenance"}
    schedules = {s.name: s for s in repo.schedule_defs}
    assert schedules[f"{NAME}_append_schedule"].default_status == DefaultScheduleStatus.STOPPED
    assert schedules[f"{NAME}_nightly_compaction"].cron_schedule == "0 2 * * *"
    assert schedules[f"{NAME}_nightly_compaction"].default_status == DefaultScheduleStatus.RUNNING
    assert schedules[f"{NAME}_nightly_cleanup"].cron_schedule == "0 3 * * *"
    assert {k.name for k in repo.asset_graph.asset_check_keys} == {
        "row_ids_unique", "compaction_preserves_rows", "deletions_materialized", "maintenance_versions_empty"}
    cf = repo.assets_defs_by_key[AssetKey([f"{NAME}_change_feed"])]
    assert isinstance(cf.partitions_def, DynamicPartitionsDefinition) and cf.partitions_def.name == f"{NAME}_versions"
    assert cf.backfill_policy == BackfillPolicy.single_run()
    assert AssetKey([NAME]) in cf.asset_deps[AssetKey([f"{NAME}_change_feed"])]
    res = defs.resources
    assert isinstance(res["spark"], SparkResource) and res["spark"].master == "local[2]"
    assert isinstance(res[f"lance_{NAME}"], LanceDatasetResource) and res[f"lance_{NAME}"].uri == str(tmp_path / "events")


def test_maintenance_ops_share_one_pool_per_dataset(tmp_path):
    _, defs = defs_for(tmp_path)
    pools = {op: defs.resolve_job_def(f"{NAME}_{op}").graph.node_defs[0].pool for op in OPERATIONS}
    assert pools == {
        "append": None, "write_change_feed": None, "observe": None,  # never conflict with a rewrite
        "delete": "lance-events", "upsert": "lance-events", "materialize_deletions": "lance-events",
        "compact": "lance-events", "cleanup_old_versions": "lance-events",
    }


def test_launchpad_config_is_typed(tmp_path):
    from dagster import DagsterInvalidConfigError, validate_run_config

    _, defs = defs_for(tmp_path)
    job = defs.resolve_job_def(f"{NAME}_compact")
    good = RunConfig(ops={f"compact_{NAME}": CompactConfig(dry_run=True)}).to_config_dict()
    resolved = validate_run_config(job, good)["ops"][f"compact_{NAME}"]["config"]
    assert resolved["dry_run"] is True and resolved["target_rows_per_fragment"] == 1_048_576
    assert resolved["materialize_deletions_threshold"] == 0.1 and resolved["max_rows_per_group"] == 1024
    with pytest.raises(DagsterInvalidConfigError, match="target_rows"):
        validate_run_config(job, {"ops": {f"compact_{NAME}": {"config": {"target_rows": 5}}}})
    with pytest.raises(DagsterInvalidConfigError, match="where"):
        validate_run_config(defs.resolve_job_def(f"{NAME}_delete"), {"ops": {f"delete_{NAME}": {"config": {}}}})
    feed = validate_run_config(defs.resolve_job_def(f"{NAME}_write_change_feed"),
                               {"ops": {f"write_change_feed_{NAME}": {"config": {"begin_version": 2,
                                                                                "format": "lance"}}}})
    assert feed["ops"][f"write_change_feed_{NAME}"]["config"]["format"] == "lance"


def test_embedded_default_and_example_config(tmp_path, monkeypatch):
    monkeypatch.delenv("LANCE_OPS_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    default = load_settings()
    (d,) = default.datasets
    assert d.name == "events" and d.uri == str(tmp_path / ".lance_ops/demo/events")
    assert default.spark.master == "local[*]" and d.change_feed.sink_uri == str(tmp_path / ".lance_ops/demo/events_changes")
    assert default.spark.merged_conf()["spark.ui.enabled"] == "false"
    example = load_settings(ROOT / "lance_ops.yaml.example")
    events, gcs = example.datasets
    assert events.uri == str(ROOT / ".lance_ops/events") and events.policy.cleanup_retain_versions == 10
    assert gcs.uri == "gs://my-bucket/lance/clicks" and gcs.storage_options == {"project": "my-gcp-project"}
    assert gcs.storage_options_env == {"token": "LANCE_OPS_GCS_TOKEN"}
    assert gcs.source.path == "gs://my-bucket/landing/clicks/"
    defs = build_definitions(example)  # two datasets side by side
    assert {s.name for s in defs.get_repository_def().sensor_defs} >= {"clicks_gcs_compaction_sensor"}
    with pytest.raises(ValueError, match="needs source.path"):
        parse_settings("datasets:\n  x:\n    uri: /tmp/x\n    source: {format: parquet}\n")
    with pytest.raises(ValueError, match="Python identifier"):
        parse_settings("datasets:\n  bad-name:\n    uri: /tmp/x\n")
    assert "events" in DEFAULT_CONFIG_YAML


def test_secrets_come_from_the_environment_and_stay_out_of_config(monkeypatch):
    settings = parse_settings(
        "datasets:\n  g:\n    uri: gs://b/t\n    storage_options: {token: {env: TEST_LANCE_TOKEN}, project: p}\n"
    )
    defs = build_definitions(settings)
    res = defs.resources["lance_g"]
    monkeypatch.delenv("TEST_LANCE_TOKEN", raising=False)
    with pytest.raises(RuntimeError, match=r"comes from \$TEST_LANCE_TOKEN, which is not set"):
        res.resolved_storage_options()
    monkeypatch.setenv("TEST_LANCE_TOKEN", "s3cr3t-value")
    assert res.resolved_storage_options() == {"project": "p", "token": "s3cr3t-value"}
    assert "s3cr3t-value" not in repr(res) and "s3cr3t-value" not in repr(settings)


def test_dagster_definitions_validate_passes(tmp_path):
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path)}
    env.pop("LANCE_OPS_CONFIG", None)
    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    out = subprocess.run([DAGSTER, "definitions", "validate", "-w", "workspace.yaml"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "All code locations passed validation" in out.stdout + out.stderr
    # The example config (two datasets, one on GCS) loads too: nothing is opened at load time.
    env["LANCE_OPS_CONFIG"] = str(ROOT / "lance_ops.yaml.example")
    out = subprocess.run([DAGSTER, "definitions", "validate", "-w", "workspace.yaml"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    # A broken config fails validation with the reason.
    bad = tmp_path / "bad.yaml"
    bad.write_text("datasets: {}\n")
    env["LANCE_OPS_CONFIG"] = str(bad)
    out = subprocess.run([DAGSTER, "definitions", "validate", "-w", "workspace.yaml"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "non-empty 'datasets' mapping" in out.stdout + out.stderr
