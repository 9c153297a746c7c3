"""The sensors, evaluated with real contexts on real datasets.

Datasets are written with lance_ops.format (a writer outside Dagster, and fast); the runs the
compaction sensor requests are executed through Dagster (Spark) to show they do what was asked.
One sensor of each kind serves every dataset: its cursor is ``{dataset: version}``.
"""

import json

import pyarrow.compute as pc
import pytest
from dagster import AssetKey, SensorResult, build_run_status_sensor_context, build_sensor_context
from dagster_support import NAME, data_version, defs_for, job_md, materializations, md, run
from datagen import simple_table

import lance_ops.format as lf


def dataset_resources(defs):
    return {k: v for k, v in defs.resources.items() if k.startswith("lance_")}


def tick(defs, instance, sensor, cursor=None):
    """Call the sensor as a test would (returns SensorResult or SkipReason)."""
    ctx = build_sensor_context(instance=instance, cursor=cursor, resources=dataset_resources(defs))
    return defs.get_sensor_def(f"lance_{sensor}")(ctx)


def c(version, name=NAME):
    """A cursor that has seen ``version`` of ``name``."""
    return json.dumps({name: version}, separators=(",", ":"))


def requests(result):
    return list(result.run_requests or []) if isinstance(result, SensorResult) else []


def cursor_of(result, previous=None):
    return result.cursor if isinstance(result, SensorResult) and result.cursor else previous


def test_compaction_sensor_small_fragments(tmp_path, spark, instance):
    _, defs = defs_for(tmp_path, target_rows_per_fragment=10_000, min_small_fragments=4)
    uri = str(tmp_path / "events")
    first = tick(defs, instance, "compaction_sensor")  # no dataset yet
    assert requests(first) == [] and first.cursor == "{}"
    lf.write_dataset(simple_table(0, 3000), uri, enable_stable_row_ids=True, max_rows_per_file=1000)
    below = tick(defs, instance, "compaction_sensor")
    assert requests(below) == [] and below.cursor == c(1)  # 3 small fragments < 4
    assert "events v1 within the policy" in below.skip_reason.skip_message
    lf.write_dataset(simple_table(3000, 1000), uri, mode="append")
    above = tick(defs, instance, "compaction_sensor", cursor=c(1))
    (req,) = requests(above)
    assert above.cursor == c(2)
    assert req.job_name == "lance_compact" and req.run_key == f"{NAME}:compact:v2"
    assert req.asset_selection == [AssetKey([NAME])]
    compact = req.run_config["ops"][NAME]["config"]["compact"]  # the plan's parameters over the policy's
    assert (compact["target_rows_per_fragment"], compact["materialize_deletions_threshold"]) == (10_000, 0.2)
    assert "4 small fragments (< 10000 rows, after deletions) >= 4" in req.tags["lance_ops/reason"]
    assert req.tags["lance_ops/version"] == "2"
    again = tick(defs, instance, "compaction_sensor", cursor=above.cursor)
    assert requests(again) == [] and again.skip_reason.skip_message == "no new version"
    # Run what was requested: one fragment (the policy's target), and the next tick asks for nothing.
    result = run(defs, instance, "compact", run_config=req.run_config, tags=req.tags)
    assert [data_version(m) for m in materializations(result)] == ["3", "4"]
    assert job_md(materializations(result)[-1])["fragments_removed"] == 4
    assert len(lf.dataset(uri).get_fragments()) == 1
    after = tick(defs, instance, "compaction_sensor", cursor=above.cursor)
    assert requests(after) == [] and after.cursor == c(4)
    # The run-status sensor asks for the asset checks of the dataset the compaction touched.
    success = next(e for e in result.all_events if e.event_type_value == "PIPELINE_SUCCESS")
    checks_sensor = defs.get_sensor_def("lance_checks_after_maintenance")
    ctx = build_run_status_sensor_context(sensor_name=checks_sensor.name, dagster_event=success,
                                          dagster_instance=instance, dagster_run=result.dagster_run)
    req = checks_sensor(ctx)
    assert req.run_key == f"checks-after-{result.run_id}"
    assert {(k.asset_key.to_user_string(), k.name) for k in req.asset_check_keys} == {
        (NAME, "row_ids_unique"), (NAME, "compaction_preserves_rows"), (NAME, "deletions_materialized"),
        (NAME, "index_coverage"), (f"{NAME}_change_feed", "maintenance_versions_empty")}
    evaluations = run(defs, instance, "checks", tags=req.tags).get_asset_check_evaluations()
    assert {c.check_name: c.passed for c in evaluations} == {
        "row_ids_unique": True, "compaction_preserves_rows": True, "deletions_materialized": True,
        "maintenance_versions_empty": True, "index_coverage": True}


def test_compaction_sensor_deleted_ratio_requests_materialisation(tmp_path, spark, instance):
    _, defs = defs_for(tmp_path, target_rows_per_fragment=10_000, min_small_fragments=4, deleted_ratio_threshold=0.2)
    uri = str(tmp_path / "events")
    ds = lf.write_dataset(simple_table(0, 4000), uri, enable_stable_row_ids=True, max_rows_per_file=2000)
    ds.delete(pc.field("id") < 600)  # 15% of the rows
    below = tick(defs, instance, "compaction_sensor")
    assert requests(below) == [] and below.cursor == c(2)
    lf.dataset(uri).delete(pc.field("id") < 1000)  # 25%
    above = tick(defs, instance, "compaction_sensor", cursor=below.cursor)
    (req,) = requests(above)
    assert req.job_name == "lance_materialize_deletions" and req.run_key == f"{NAME}:materialize_deletions:v3"
    assert "deleted ratio 0.250 >= 0.2" in req.tags["lance_ops/reason"]
    assert requests(tick(defs, instance, "compaction_sensor", cursor=above.cursor)) == []
    result = run(defs, instance, "materialize_deletions", run_config=req.run_config)
    assert job_md(materializations(result)[-1])["fragments_removed"] == 1  # fragment 0: 1000 of 2000 rows deleted
    assert md(materializations(result)[-1])["deleted_rows"] == 0
    after = tick(defs, instance, "compaction_sensor", cursor=above.cursor)
    assert requests(after) == [] and after.cursor == c(5)


def test_compaction_sensor_versions_since_compaction(tmp_path, instance):
    # fragments below the target (so a compaction has bins to rewrite: the planner proposes none
    # that would rewrite nothing), too few to count as many small fragments
    _, defs = defs_for(tmp_path, target_rows_per_fragment=1000, min_small_fragments=100,
                       max_versions_since_compaction=3)
    uri = str(tmp_path / "events")
    lf.write_dataset(simple_table(0, 500), uri, enable_stable_row_ids=True)
    lf.write_dataset(simple_table(500, 500), uri, mode="append")
    assert requests(tick(defs, instance, "compaction_sensor")) == []  # 2 versions, no compaction yet
    lf.write_dataset(simple_table(1000, 500), uri, mode="append")
    (req,) = requests(tick(defs, instance, "compaction_sensor", cursor=c(2)))
    assert req.run_key == f"{NAME}:compact:v3" and "3 versions since the last compaction >= 3" in req.tags["lance_ops/reason"]
    lf.dataset(uri).compact_files(target_rows_per_fragment=100_000)  # v4 reserve, v5 rewrite: the count restarts
    assert requests(tick(defs, instance, "compaction_sensor", cursor=c(3))) == []


def test_compaction_sensor_evaluate_tick_resolves_like_the_daemon(tmp_path):
    from dagster import instance_for_test

    _, defs = defs_for(tmp_path, target_rows_per_fragment=10_000, min_small_fragments=2)
    uri = str(tmp_path / "events")
    lf.write_dataset(simple_table(0, 3000), uri, enable_stable_row_ids=True, max_rows_per_file=1000)
    sensor = defs.get_sensor_def("lance_compaction_sensor")
    res = dataset_resources(defs)
    with instance_for_test() as inst:
        # The context owns the instance it builds from the ref: close it (with) before the temp dir goes.
        with build_sensor_context(instance_ref=inst.get_ref(), definitions=defs, resources=res, cursor=None) as ctx:
            data = sensor.evaluate_tick(ctx)
        (req,) = data.run_requests
        assert req.job_name == "lance_compact" and data.cursor == c(1)
        assert req.asset_selection == [AssetKey([NAME])]
        with build_sensor_context(instance_ref=inst.get_ref(), definitions=defs, resources=res,
                                  cursor=data.cursor) as ctx:
            assert sensor.evaluate_tick(ctx).run_requests == []


def test_new_versions_sensor_adds_one_partition_per_version(tmp_path, instance):
    _, defs = defs_for(tmp_path)
    uri = str(tmp_path / "events")
    assert requests(tick(defs, instance, "new_versions_sensor")) == []
    lf.write_dataset(simple_table(0, 100), uri, enable_stable_row_ids=True)
    for i in range(2):
        lf.write_dataset(simple_table(100 * (i + 1), 100), uri, mode="append")
    first = tick(defs, instance, "new_versions_sensor")
    (add,) = first.dynamic_partitions_requests
    assert add.partitions_def_name == f"{NAME}_versions" and list(add.partition_keys) == ["1", "2", "3"]
    assert first.cursor == c(3)
    (obs,) = first.asset_events  # written outside Dagster: observed
    assert obs.asset_key == AssetKey([NAME]) and data_version(obs) == "3" and md(obs)["dagster/row_count"] == 300
    assert tick(defs, instance, "new_versions_sensor", cursor=c(3)).skip_reason.skip_message == "no new version"
    instance.add_dynamic_partitions(add.partitions_def_name, list(add.partition_keys))  # as the daemon would
    lf.write_dataset(simple_table(400, 100), uri, mode="append")
    second = tick(defs, instance, "new_versions_sensor", cursor=c(3))
    assert [list(r.partition_keys) for r in second.dynamic_partitions_requests] == [["4"]] and second.cursor == c(4)


def test_one_tick_evaluates_every_dataset_with_its_own_cursor(tmp_path, instance):
    """Two datasets, one sensor: each has its own cursor entry; the one without stable row ids gets no
    change-feed partitions, and an unreadable one does not hold the others back."""
    _, defs = defs_for(tmp_path, target_rows_per_fragment=10_000, min_small_fragments=3,
                       extra={"plain": {"uri": "plain"}, "broken": {"uri": "broken"}})
    lf.write_dataset(simple_table(0, 3000), str(tmp_path / "events"), enable_stable_row_ids=True,
                     max_rows_per_file=1000)
    lf.write_dataset(simple_table(0, 100), str(tmp_path / "plain"))
    lf.write_dataset(simple_table(100, 100), str(tmp_path / "plain"), mode="append")
    (tmp_path / "broken" / "_versions").mkdir(parents=True)
    (tmp_path / "broken" / "_versions" / "1.manifest").write_bytes(b"not a manifest")
    _, defs = defs_for(tmp_path, target_rows_per_fragment=10_000, min_small_fragments=3,
                       extra={"plain": {"uri": "plain"}, "broken": {"uri": "broken"}})  # reload: plain has no row ids
    assert AssetKey(["plain_change_feed"]) not in defs.get_repository_def().asset_graph.get_all_asset_keys()
    feed = tick(defs, instance, "new_versions_sensor")
    assert json.loads(feed.cursor) == {NAME: 1, "plain": 2}  # broken: skipped, retried next tick
    assert [(r.partitions_def_name, list(r.partition_keys)) for r in feed.dynamic_partitions_requests] == [
        (f"{NAME}_versions", ["1"])]
    assert {e.asset_key.to_user_string(): data_version(e) for e in feed.asset_events} == {NAME: "1", "plain": "2"}
    compaction = tick(defs, instance, "compaction_sensor", cursor=json.dumps({"plain": 2}))
    (req,) = requests(compaction)
    assert req.run_key == f"{NAME}:compact:v1" and json.loads(compaction.cursor) == {NAME: 1, "plain": 2}


@pytest.mark.parametrize("sensor", ["compaction_sensor", "new_versions_sensor", "checks_after_maintenance",
                                    "automation_sensor"])
def test_sensors_are_off_unless_the_policy_turns_them_on(tmp_path, sensor):
    from dagster import DefaultSensorStatus

    _, off = defs_for(tmp_path / "a")  # policy default
    _, on = defs_for(tmp_path / "b", sensors_enabled=True)
    assert off.get_sensor_def(f"lance_{sensor}").default_status == DefaultSensorStatus.STOPPED
    assert on.get_sensor_def(f"lance_{sensor}").default_status == DefaultSensorStatus.RUNNING
    # the pool limits hold whatever the policy: that sensor always runs
    assert off.get_sensor_def("lance_pool_limits").default_status == DefaultSensorStatus.RUNNING
