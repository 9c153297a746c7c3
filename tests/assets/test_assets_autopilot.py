"""The Dagster autopilot over a fleet root of 20 tables, with a real Dagster instance: one run
per chosen action, run keys stable while a table is unchanged (Dagster launches a key once),
what the tick's budget left out logged on the tick, every run's commit stamped with its run id."""

import json
import os

from dagster import SensorResult, build_sensor_context
from planner import tables as T

import lance_ops.format as lf
from lance_ops.assets.autopilot import JOB_NAME, SENSOR_NAME, autopilot_definitions
from lance_ops.orchestration.planner import FleetBudget, history
from lance_ops.orchestration.settings import parse_settings


def _fleet(root):
    for i in range(20):  # 15 tables of 6 small fragments (compaction), 5 healthy ones
        uri = os.path.join(root, f"t{i:02d}")
        if i < 15:
            T.small_fragments(uri, 6)
        else:
            T.healthy(uri)


def _tick(defs, instance, cursor=None):
    sensor = defs.get_sensor_def(SENSOR_NAME)
    with build_sensor_context(instance=instance, cursor=cursor) as ctx:
        return sensor(ctx)


def _skipped_rows(table):
    return [r for r in history(table) if r["status"] == "skipped"]


def test_autopilot_sensor_over_a_root_of_20_tables(tmp_path, instance):
    root = tmp_path / "lake"
    _fleet(str(root))
    settings = parse_settings("roots:\n  - uri: lake\n    policy: {target_rows_per_fragment: 1000, "
                              "min_small_fragments: 4}\n", base_dir=tmp_path)
    defs = autopilot_definitions(settings, FleetBudget(max_runs=10))
    job = defs.get_job_def(JOB_NAME)
    first = _tick(defs, instance)
    assert isinstance(first, SensorResult) and len(first.run_requests) == 10
    keys = [r.run_key for r in first.run_requests]
    assert len(set(keys)) == 10 and all(k.endswith(":compact:6") for k in keys)
    req = first.run_requests[0]
    assert req.tags["lance_ops/operation"] == "compact" and "6 small fragments" in req.tags["lance_ops/reasons"]
    # the five the run budget left out are in their tables' ledgers, once (the cursor remembers them)
    left_out = sorted({f"{root}/t{i:02d}" for i in range(15)} - {r.tags["lance_ops/table"] for r in first.run_requests})
    assert len(left_out) == 5 and [len(_skipped_rows(t)) for t in left_out] == [1] * 5
    (row,) = _skipped_rows(left_out[0])
    assert (row["operation"], row["why"], row["who"].split(":")[0]) == ("compact", "run budget: 10 runs chosen",
                                                                        "dagster")
    again = _tick(defs, instance, first.cursor)  # nothing ran: the same keys, which Dagster does not launch twice
    assert [r.run_key for r in again.run_requests] == keys
    assert [len(_skipped_rows(t)) for t in left_out] == [1] * 5
    for r in first.run_requests:
        result = job.execute_in_process(run_config=r.run_config, instance=instance, tags=r.tags)
        assert result.success
        out = result.output_for_node("run_planned_action")
        assert out["status"] == "ran" and out["fragments_removed"] == 6
        table = r.tags["lance_ops/table"]
        (latest,) = history(table, limit=1)
        assert latest["run_id"] == result.run_id and latest["who"].startswith("dagster:")
    second = _tick(defs, instance)  # the five the run budget left out
    assert len(second.run_requests) == 5 and not set(r.run_key for r in second.run_requests) & set(keys)
    for r in second.run_requests:
        assert job.execute_in_process(run_config=r.run_config, instance=instance, tags=r.tags).success
    last = _tick(defs, instance)
    assert isinstance(last, SensorResult) and not last.run_requests
    assert last.skip_reason.skip_message.startswith("20 tables planned, 20 need nothing")


def test_a_request_whose_work_is_done_runs_nothing(tmp_path, instance):
    root = tmp_path / "lake"
    T.small_fragments(str(root / "t"), 6)
    settings = parse_settings("roots:\n  - uri: lake\n    policy: {target_rows_per_fragment: 1000, "
                              "min_small_fragments: 4}\n", base_dir=tmp_path)
    defs = autopilot_definitions(settings)
    (req,) = _tick(defs, instance).run_requests
    job = defs.get_job_def(JOB_NAME)
    assert job.execute_in_process(run_config=req.run_config, instance=instance).success
    version = lf.dataset(str(root / "t")).version
    dup = job.execute_in_process(run_config=req.run_config, instance=instance)  # a duplicate launch
    assert dup.output_for_node("run_planned_action")["status"] == "skipped"
    assert lf.dataset(str(root / "t")).version == version
    action = json.loads(req.run_config["ops"]["run_planned_action"]["config"]["action"])
    assert action["details"]["bins"] == [[0, 1, 2, 3, 4, 5]]
