"""The code location: what it defines, its config file, and ``dagster definitions validate``."""

import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from dagster import (
    AssetKey,
    BackfillPolicy,
    DefaultScheduleStatus,
    DefaultSensorStatus,
    DynamicPartitionsDefinition,
    build_schedule_context,
)
from dagster_support import NAME, defs_for

from lance_ops.assets.definitions import build_definitions
from lance_ops.assets.resources import LanceDatasetResource, SparkResource
from lance_ops.orchestration.settings import DEFAULT_CONFIG_YAML, load_settings, parse_settings

ROOT = Path(__file__).resolve().parents[2]
DAGSTER = str(Path(sys.executable).parent / "dagster")
OPERATIONS = ["maintain", "append", "delete", "upsert", "compact", "materialize_deletions", "optimize_indices",
              "cleanup_old_versions", "remove_orphan_files", "restore"]
JOBS = {f"lance_{op}" for op in OPERATIONS} | {"lance_checks", "lance_write_change_feed", "lance_observe",
                                               "lance_autopilot"}
SENSORS = {"lance_compaction_sensor", "lance_new_versions_sensor", "lance_checks_after_maintenance",
           "lance_pool_limits", "lance_automation_sensor", "lance_autopilot_sensor"}
SCHEDULES = {"lance_append_schedule", "lance_nightly_compaction", "lance_nightly_cleanup"}


def names(defs):
    repo = defs.get_repository_def()
    return ({j.name for j in repo.get_all_jobs()} - {"__ASSET_JOB"}, {s.name for s in repo.sensor_defs},
            {s.name for s in repo.schedule_defs})


def test_code_location_defines_assets_jobs_sensors_schedules_checks(tmp_path):
    settings, defs = defs_for(tmp_path)
    repo = defs.get_repository_def()
    assert {k.to_user_string() for k in repo.asset_graph.get_all_asset_keys()} == {NAME, f"{NAME}_change_feed"}
    assert names(defs) == (JOBS, SENSORS, SCHEDULES)
    schedules = {s.name: s for s in repo.schedule_defs}
    assert schedules["lance_append_schedule"].default_status == DefaultScheduleStatus.STOPPED
    assert schedules["lance_nightly_compaction"].cron_schedule == "0 2 * * *"
    assert schedules["lance_nightly_compaction"].default_status == DefaultScheduleStatus.RUNNING
    assert schedules["lance_nightly_cleanup"].cron_schedule == "0 3 * * *"
    sensors = {s.name: s for s in repo.sensor_defs}  # the autopilot is there, off until turned on
    assert sensors["lance_autopilot_sensor"].default_status == DefaultSensorStatus.STOPPED
    assert {k.name for k in repo.asset_graph.asset_check_keys} == {
        "row_ids_unique", "compaction_preserves_rows", "deletions_materialized", "maintenance_versions_empty",
        "change_feed_lag", "index_coverage"}
    cf = repo.assets_defs_by_key[AssetKey([f"{NAME}_change_feed"])]
    assert isinstance(cf.partitions_def, DynamicPartitionsDefinition) and cf.partitions_def.name == f"{NAME}_versions"
    assert cf.backfill_policy == BackfillPolicy.single_run()
    assert cf.specs_by_key[cf.key].automation_condition.get_label() == "new version partitions"
    assert AssetKey([NAME]) in cf.asset_deps[AssetKey([f"{NAME}_change_feed"])]
    # the dataset is a materialisable asset (not external), written by every lance_<operation> job
    ds = repo.assets_defs_by_key[AssetKey([NAME])]
    assert ds.is_executable and ds.is_materializable
    for op in OPERATIONS:
        assert AssetKey([NAME]) in defs.resolve_job_def(f"lance_{op}").asset_layer.selected_asset_keys
        assert defs.resolve_job_def(f"lance_{op}").tags["lance_ops/operation"] == op
    res = defs.resources
    assert isinstance(res["spark"], SparkResource) and res["spark"].master == "local[2]"
    assert isinstance(res[f"lance_{NAME}"], LanceDatasetResource) and res[f"lance_{NAME}"].uri == str(tmp_path / "events")


def test_fifty_datasets_add_assets_but_no_jobs_sensors_or_schedules(tmp_path):
    extra = {f"ds{i:02d}": {"uri": f"ds{i:02d}"} for i in range(49)}
    extra["ds48"]["policy"] = {"compaction_cron": "0 4 * * *"}  # its own cron: one more schedule
    settings, defs = defs_for(tmp_path, extra=extra)
    assert len(settings.datasets) == 50
    jobs, sensors, schedules = names(defs)
    assert jobs == JOBS and sensors == SENSORS
    assert schedules == SCHEDULES | {"lance_nightly_compaction__0_4_x_x_x"}
    repo = defs.get_repository_def()
    assert len(repo.asset_graph.get_all_asset_keys()) == 100  # a dataset and its change feed each
    by_name = {s.name: s for s in repo.schedule_defs}
    assert by_name["lance_nightly_compaction__0_4_x_x_x"].cron_schedule == "0 4 * * *"
    with build_schedule_context(scheduled_execution_time=datetime(2026, 1, 2, 2, tzinfo=UTC)) as ctx:
        reqs = by_name["lance_nightly_compaction"].evaluate_tick(ctx).run_requests
    assert len(reqs) == 49 and {tuple(r.asset_selection[0].path) for r in reqs} == (
        {("events",)} | {(f"ds{i:02d}",) for i in range(48)})
    assert by_name["lance_nightly_compaction"].job_name == "lance_compact"
    assert all(r.run_key.endswith(":compact:2026-01-02T02:00:00+00:00") for r in reqs)


def test_each_dataset_writes_in_its_own_pool(tmp_path):
    _, defs = defs_for(tmp_path, extra={"clicks": {"uri": "clicks"}})
    repo = defs.get_repository_def()
    pools = {k.to_user_string(): a.op.pool for k, a in repo.assets_defs_by_key.items()}
    assert pools == {"events": "lance-events", "clicks": "lance-clicks",
                     "events_change_feed": None, "clicks_change_feed": None}


def test_launchpad_defaults_are_the_policy(tmp_path):
    from dagster import DagsterInvalidConfigError, validate_run_config

    _, defs = defs_for(tmp_path, target_rows_per_fragment=20_000, max_rows_per_group=256,
                       deleted_ratio_threshold=0.3, cleanup_retain_versions=4)
    job = defs.resolve_job_def("lance_compact")
    resolved = validate_run_config(job, {})["ops"][NAME]["config"]
    assert resolved["operation"] is None
    assert resolved["compact"] == {"target_rows_per_fragment": 20_000, "max_rows_per_group": 256,
                                   "materialize_deletions": True, "materialize_deletions_threshold": 0.3,
                                   "max_source_fragments": None, "max_source_rows": None, "max_source_bytes": None,
                                   "bin_order": "manifest", "data_storage_version": None, "cluster_by": [],
                                   "strategy": "sort", "dry_run": False}
    assert resolved["materialize_deletions"]["threshold"] == 0.3
    assert resolved["cleanup_old_versions"]["retain_versions"] == 4
    assert resolved["remove_orphan_files"] == {"older_than_hours": 1.0, "dry_run": False,
                                               "retention_duration_check": True}  # policy.orphan_min_age_hours
    assert resolved["restore"] == {"version": None, "timestamp": None, "tag": None, "tag_current": True}
    assert resolved["append"]["rows"] == 4000 and resolved["append"]["format"] == "generate"
    schema = job.run_config_schema.config_type.fields["ops"].config_type.fields[NAME].config_type
    compact = schema.fields["config"].config_type.fields["compact"].config_type
    assert compact.fields["target_rows_per_fragment"].default_value == 20_000  # what the launchpad scaffolds
    with pytest.raises(DagsterInvalidConfigError, match="target_rows"):
        validate_run_config(job, {"ops": {NAME: {"config": {"compact": {"target_rows": 5}}}}})
    with pytest.raises(DagsterInvalidConfigError, match="operation"):
        validate_run_config(job, {"ops": {NAME: {"config": {"operation": "vacuum"}}}})
    feed = validate_run_config(defs.resolve_job_def("lance_write_change_feed"),
                               {"ops": {"write_change_feed": {"config": {"dataset": NAME, "begin_version": 2,
                                                                         "format": "lance"}}}})
    assert feed["ops"]["write_change_feed"]["config"]["format"] == "lance"


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
    defs = build_definitions(example)  # two datasets side by side, one set of jobs and sensors
    # their append crons differ (events every 15 minutes): one more append schedule, named after the cron
    assert names(defs) == (JOBS, SENSORS, SCHEDULES | {"lance_append_schedule__0_x_x_x_x__off"})
    assert {k.to_user_string() for k in defs.get_repository_def().asset_graph.get_all_asset_keys()} == {
        "events", "events_change_feed", "clicks_gcs", "clicks_gcs_change_feed"}
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
