"""The sensors, evaluated with real contexts on real datasets.

Datasets are written with lance_ops.format (a writer outside Dagster, and fast); the runs the
compaction sensor requests are executed through Dagster (Spark) to show they do what was asked.
"""

import pyarrow.compute as pc
import pytest
from dagster import AssetKey, SensorResult, SkipReason, build_run_status_sensor_context, build_sensor_context
from dagster_support import NAME, data_version, defs_for, materializations, md, run
from datagen import simple_table

import lance_ops.format as lf
from lance_ops.assets.ops import resource_key


def tick(defs, instance, sensor, cursor=None):
    """Call the sensor as a test would (returns SensorResult or SkipReason)."""
    res = {resource_key(NAME): defs.resources[resource_key(NAME)]}
    ctx = build_sensor_context(instance=instance, cursor=cursor, resources=res)
    return defs.get_sensor_def(f"{NAME}_{sensor}")(ctx)


def requests(result):
    return list(result.run_requests or []) if isinstance(result, SensorResult) else []


def cursor_of(result, previous=None):
    return result.cursor if isinstance(result, SensorResult) and result.cursor else previous


def test_compaction_sensor_small_fragments(tmp_path, spark, instance):
    _, defs = defs_for(tmp_path, target_rows_per_fragment=10_000, min_small_fragments=4)
    uri = str(tmp_path / "events")
    assert isinstance(tick(defs, instance, "compaction_sensor"), SkipReason)  # no dataset yet
    lf.write_dataset(simple_table(0, 3000), uri, enable_stable_row_ids=True, max_rows_per_file=1000)
    below = tick(defs, instance, "compaction_sensor")
    assert requests(below) == [] and below.cursor == "1"  # 3 small fragments < 4
    lf.write_dataset(simple_table(3000, 1000), uri, mode="append")
    above = tick(defs, instance, "compaction_sensor", cursor="1")
    (req,) = requests(above)
    assert above.cursor == "2"
    assert req.job_name == f"{NAME}_compact" and req.run_key == f"{NAME}_compact-v2"
    assert req.run_config["ops"][f"compact_{NAME}"]["config"]["target_rows_per_fragment"] == 10_000
    assert "4 small fragments >= 4" in req.tags["lance_ops/reason"] and req.tags["lance_ops/version"] == "2"
    again = tick(defs, instance, "compaction_sensor", cursor=above.cursor)
    assert isinstance(again, SkipReason) and "no new version since 2" in again.skip_message
    # Run what was requested: one fragment, and the next tick asks for nothing.
    result = run(defs, instance, "compact", run_config=req.run_config, tags=req.tags)
    assert [data_version(m) for m in materializations(result)] == ["3", "4"]
    assert len(lf.dataset(uri).get_fragments()) == 1
    after = tick(defs, instance, "compaction_sensor", cursor=above.cursor)
    assert requests(after) == [] and after.cursor == "4"
    # The run-status sensor asks for the asset checks after the compaction succeeded.
    success = next(e for e in result.all_events if e.event_type_value == "PIPELINE_SUCCESS")
    checks_sensor = defs.get_sensor_def(f"{NAME}_checks_after_maintenance")
    ctx = build_run_status_sensor_context(sensor_name=checks_sensor.name, dagster_event=success,
                                          dagster_instance=instance, dagster_run=result.dagster_run)
    req = checks_sensor(ctx)
    assert req.run_key == f"checks-after-{result.run_id}"
    evaluations = run(defs, instance, "checks", tags=req.tags).get_asset_check_evaluations()
    assert {c.check_name: c.passed for c in evaluations} == {
        "row_ids_unique": True, "compaction_preserves_rows": True, "deletions_materialized": True,
        "maintenance_versions_empty": True}


def test_compaction_sensor_deleted_ratio_requests_materialisation(tmp_path, spark, instance):
    _, defs = defs_for(tmp_path, target_rows_per_fragment=10_000, min_small_fragments=4, deleted_ratio_threshold=0.2)
    uri = str(tmp_path / "events")
    ds = lf.write_dataset(simple_table(0, 4000), uri, enable_stable_row_ids=True, max_rows_per_file=2000)
    ds.delete(pc.field("id") < 600)  # 15% of the rows
    below = tick(defs, instance, "compaction_sensor")
    assert requests(below) == [] and below.cursor == "2"
    lf.dataset(uri).delete(pc.field("id") < 1000)  # 25%
    above = tick(defs, instance, "compaction_sensor", cursor=below.cursor)
    (req,) = requests(above)
    assert req.job_name == f"{NAME}_materialize_deletions" and req.run_key == f"{NAME}_materialize_deletions-v3"
    assert req.run_config["ops"][f"materialize_deletions_{NAME}"]["config"]["threshold"] == 0.2
    assert "deleted ratio 0.250 >= 0.2" in req.tags["lance_ops/reason"]
    assert isinstance(tick(defs, instance, "compaction_sensor", cursor=above.cursor), SkipReason)
    result = run(defs, instance, "materialize_deletions", run_config=req.run_config)
    assert md(materializations(result)[-1])["deleted_rows"] == 0
    after = tick(defs, instance, "compaction_sensor", cursor=above.cursor)
    assert requests(after) == [] and after.cursor == "5"


def test_compaction_sensor_versions_since_compaction(tmp_path, instance):
    _, defs = defs_for(tmp_path, target_rows_per_fragment=100, min_small_fragments=100,
                       max_versions_since_compaction=3)
    uri = str(tmp_path / "events")
    lf.write_dataset(simple_table(0, 500), uri, enable_stable_row_ids=True)
    lf.write_dataset(simple_table(500, 500), uri, mode="append")
    assert requests(tick(defs, instance, "compaction_sensor")) == []  # 2 versions, no compaction yet
    lf.write_dataset(simple_table(1000, 500), uri, mode="append")
    (req,) = requests(tick(defs, instance, "compaction_sensor", cursor="2"))
    assert req.run_key == f"{NAME}_compact-v3" and "3 versions since the last compaction >= 3" in req.tags["lance_ops/reason"]
    lf.dataset(uri).compact_files(target_rows_per_fragment=100_000)  # v4 reserve, v5 rewrite: the count restarts
    assert requests(tick(defs, instance, "compaction_sensor", cursor="3")) == []


def test_compaction_sensor_evaluate_tick_resolves_like_the_daemon(tmp_path):
    from dagster import instance_for_test

    _, defs = defs_for(tmp_path, target_rows_per_fragment=10_000, min_small_fragments=2)
    uri = str(tmp_path / "events")
    lf.write_dataset(simple_table(0, 3000), uri, enable_stable_row_ids=True, max_rows_per_file=1000)
    sensor = defs.get_sensor_def(f"{NAME}_compaction_sensor")
    res = {resource_key(NAME): defs.resources[resource_key(NAME)]}
    with instance_for_test() as inst:
        # The context owns the instance it builds from the ref: close it (with) before the temp dir goes.
        with build_sensor_context(instance_ref=inst.get_ref(), definitions=defs, resources=res, cursor="0") as ctx:
            data = sensor.evaluate_tick(ctx)
        (req,) = data.run_requests
        assert req.job_name == f"{NAME}_compact" and data.cursor == "1"
        with build_sensor_context(instance_ref=inst.get_ref(), definitions=defs, resources=res,
                                  cursor=data.cursor) as ctx:
            assert sensor.evaluate_tick(ctx).run_requests == []


def test_new_versions_sensor_adds_one_partition_per_version(tmp_path, instance):
    _, defs = defs_for(tmp_path)
    uri = str(tmp_path / "events")
    assert isinstance(tick(defs, instance, "new_versions_sensor"), SkipReason)
    lf.write_dataset(simple_table(0, 100), uri, enable_stable_row_ids=True)
    for i in range(2):
        lf.write_dataset(simple_table(100 * (i + 1), 100), uri, mode="append")
    first = tick(defs, instance, "new_versions_sensor")
    (add,) = first.dynamic_partitions_requests
    assert add.partitions_def_name == f"{NAME}_versions" and list(add.partition_keys) == ["1", "2", "3"]
    assert first.cursor == "3"
    (obs,) = first.asset_events  # written outside Dagster: observed
    assert obs.asset_key == AssetKey([NAME]) and data_version(obs) == "3" and md(obs)["rows"] == 300
    assert isinstance(tick(defs, instance, "new_versions_sensor", cursor="3"), SkipReason)
    instance.add_dynamic_partitions(add.partitions_def_name, list(add.partition_keys))  # as the daemon would
    lf.write_dataset(simple_table(400, 100), uri, mode="append")
    second = tick(defs, instance, "new_versions_sensor", cursor="3")
    assert [list(r.partition_keys) for r in second.dynamic_partitions_requests] == [["4"]] and second.cursor == "4"


@pytest.mark.parametrize("sensor", ["compaction_sensor", "new_versions_sensor", "checks_after_maintenance"])
def test_sensors_are_off_unless_the_policy_turns_them_on(tmp_path, sensor):
    from dagster import DefaultSensorStatus

    _, off = defs_for(tmp_path / "a")  # policy default
    _, on = defs_for(tmp_path / "b", sensors_enabled=True)
    assert off.get_sensor_def(f"{NAME}_{sensor}").default_status == DefaultSensorStatus.STOPPED
    assert on.get_sensor_def(f"{NAME}_{sensor}").default_status == DefaultSensorStatus.RUNNING
