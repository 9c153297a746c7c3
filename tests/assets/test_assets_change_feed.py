"""The change feed asset: one partition per version, rebuilt by an asset backfill in one run,
materialised by its automation condition when versions appear, readable from the sink root.

The backfill goes through Dagster's own asset-backfill machinery (what the UI and
``launchPartitionBackfill`` create), driven without the daemon; it uses internal ``dagster._``
APIs (test-only, pinned by dagster 1.13.27 in this venv).
"""

import logging
import textwrap

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from dagster import AssetKey, instance_for_test
from dagster_support import NAME, checks, defs_for, md, run
from datagen import simple_table

import lance_ops.format as lf
from lance_ops import jobs
from lance_ops.assets.change_feed import partition_change_counts, partition_path

SORT = [("_rowid", "ascending"), ("_change_type", "ascending")]
COLUMNS = ["id", "val", "score", "_rowid", "_change_type", "_commit_version", "_commit_timestamp"]


def build_history(uri: str) -> int:
    """v1 create, v2 append, v3 delete, v4 update, v5-v6 compaction (maintenance only)."""
    ds = lf.write_dataset(simple_table(0, 300), uri, enable_stable_row_ids=True, max_rows_per_file=100)
    ds = lf.write_dataset(simple_table(300, 100), uri, mode="append")
    ds.delete(pc.field("id") < 50)
    ds.update({"val": "'changed'"}, where=(pc.field("id") >= 290) & (pc.field("id") < 310))
    ds.compact_files(target_rows_per_fragment=10_000)
    return lf.dataset(uri).version


def backfill_all(instance, code_file, keys):
    """Create an asset backfill of every partition and drive it to completion without the daemon."""
    from dagster._core.execution.backfill import BulkActionStatus, PartitionBackfill
    from dagster._core.test_utils import create_test_daemon_workspace_context
    from dagster._core.workspace.load_target import PythonFileTarget
    from dagster._daemon.backfill import execute_backfill_iteration
    from dagster._time import get_current_timestamp

    target = PythonFileTarget(python_file=str(code_file), attribute="defs", working_directory=str(code_file.parent),
                              location_name="lance_ops_test")
    with create_test_daemon_workspace_context(target, instance) as wctx:
        backfill = PartitionBackfill.from_asset_partitions(
            backfill_id="cfall", asset_graph=wctx.create_request_context().asset_graph, partition_names=keys,
            asset_selection=[AssetKey([f"{NAME}_change_feed"])], backfill_timestamp=get_current_timestamp(),
            tags={}, dynamic_partitions_store=instance, all_partitions=False, title=None, description=None,
            run_config=None,
        )
        instance.add_backfill(backfill)
        for _ in range(20):
            if instance.get_backfill("cfall").status != BulkActionStatus.REQUESTED:
                break
            list(execute_backfill_iteration(wctx, logging.getLogger("backfill")))
        return instance.get_backfill("cfall")


@pytest.fixture(scope="module")
def history(tmp_path_factory, spark):
    root = tmp_path_factory.mktemp("cf")
    settings, defs = defs_for(root)
    d = settings.datasets[0]
    latest = build_history(d.uri)
    code = root / "code_location.py"
    code.write_text(textwrap.dedent(f"""
        from lance_ops.assets.definitions import build_definitions
        from lance_ops.orchestration.settings import load_settings
        defs = build_definitions(load_settings({str(root / "lance_ops.yaml")!r}))
    """))
    return {"root": root, "d": d, "defs": defs, "latest": latest, "code": code}


def sink_partition(d, v):
    return pq.read_table(partition_path(d, v)).select(COLUMNS).sort_by(SORT)


def test_backfill_over_every_version_equals_the_spark_change_feed(history, spark):
    d, defs, latest = history["d"], history["defs"], history["latest"]
    assert latest == 6
    with instance_for_test(synchronous_run_coordinator=True, synchronous_run_launcher=True) as instance:
        # The new-versions sensor adds the partitions (applied here as the daemon would).
        from dagster import build_sensor_context

        from lance_ops.assets.operations import resource_key

        ctx = build_sensor_context(instance=instance, resources={resource_key(NAME): defs.resources[resource_key(NAME)]})
        (add,) = defs.get_sensor_def("lance_new_versions_sensor")(ctx).dynamic_partitions_requests
        keys = list(add.partition_keys)
        assert keys == ["1", "2", "3", "4", "5", "6"]
        instance.add_dynamic_partitions(add.partitions_def_name, keys)

        backfill = backfill_all(instance, history["code"], keys)
        assert backfill.status.value == "COMPLETED_SUCCESS"
        runs = instance.get_runs()
        assert len(runs) == 1  # BackfillPolicy.single_run(): the whole range in one run
        assert instance.get_materialized_partitions(AssetKey([f"{NAME}_change_feed"])) == set(keys)
        # each partition's materialisation has its own counts, not the run's totals
        records = instance.fetch_materializations(AssetKey([f"{NAME}_change_feed"]), limit=20).records
        per_partition = {r.partition_key: md(r.asset_materialization) for r in records}
        assert {k: (m["dagster/row_count"], m["insert"], m["delete"], m["update_postimage"])
                for k, m in per_partition.items()} == {
            "1": (300, 300, 0, 0), "2": (100, 100, 0, 0), "3": (50, 0, 50, 0), "4": (40, 0, 0, 20),
            "5": (0, 0, 0, 0), "6": (0, 0, 0, 0)}
        assert per_partition["3"]["dagster/uri"] == partition_path(d, 3) and per_partition["3"]["lance/version"] == 3

    for v in range(1, latest + 1):
        ours = sink_partition(d, v)
        spark_df = jobs.change_feed(spark, d.uri, v - 1, v).toArrow()
        theirs = spark_df.select(COLUMNS).cast(ours.schema).sort_by(SORT)
        assert ours.equals(theirs), f"partition {v} differs from jobs.change_feed({v - 1}, {v})"
        oracle = lf.dataset(d.uri).change_feed(v - 1, v)  # in-process lance_ops.format
        assert sorted(zip(ours["_rowid"].to_pylist(), ours["_change_type"].to_pylist(), strict=True)) == sorted(
            zip(oracle["_rowid"].to_pylist(), oracle["_change_type"].to_pylist(), strict=True)
        ), f"partition {v} differs from the in-process change feed"
    counts = {v: partition_change_counts(d, v, {}) for v in range(1, latest + 1)}
    assert counts == {
        1: {"insert": 300}, 2: {"insert": 100}, 3: {"delete": 50},
        4: {"update_preimage": 20, "update_postimage": 20}, 5: {}, 6: {},
    }


def test_partition_range_run_is_idempotent_and_runs_the_check(history, instance):
    d, defs, latest = history["d"], history["defs"], history["latest"]
    instance.add_dynamic_partitions(f"{NAME}_versions", [str(v) for v in range(1, latest + 1)])
    tags = {"dagster/asset_partition_range_start": "3", "dagster/asset_partition_range_end": str(latest)}
    first = run(defs, instance, "change_feed", tags=tags)
    before = {v: sink_partition(d, v) for v in range(3, latest + 1)}
    second = run(defs, instance, "change_feed", tags=tags)
    for v in range(3, latest + 1):
        assert sink_partition(d, v).equals(before[v])
    for result in (first, second):
        mats = result.get_asset_materialization_events()
        assert sorted(int(m.partition) for m in mats) == [3, 4, 5, 6]
        counts = {m.partition: {k: v for k, v in md(m.event_specific_data.materialization).items()
                                if k in ("insert", "update_preimage", "update_postimage", "delete") and v}
                  for m in mats}
        assert counts == {"3": {"delete": 50}, "4": {"update_preimage": 20, "update_postimage": 20}, "5": {}, "6": {}}
        check = checks(result)["maintenance_versions_empty"]
        assert check.passed and check.metadata["versions"].value == ["5", "6"]
        assert checks(result)["change_feed_lag"].passed  # the lag check runs with its asset too


def test_dagster_cli_materializes_a_partition_range_in_one_run(history, tmp_path):
    """``dagster asset materialize --partition-range 2...4`` (what a user types), on a persistent
    instance in its own process: one run writes partitions 2-4 with the expected changes."""
    import os
    import subprocess
    import sys

    from dagster import DagsterInstance

    d = history["d"]
    home = tmp_path / "dagster_home"
    home.mkdir()
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    with DagsterInstance.from_ref(DagsterInstance.local_temp(str(home)).get_ref()) as instance:
        instance.add_dynamic_partitions(f"{NAME}_versions", [str(v) for v in range(1, history["latest"] + 1)])
    dagster = os.path.join(os.path.dirname(sys.executable), "dagster")
    proc = subprocess.run(
        [dagster, "asset", "materialize", "-f", str(history["code"]), "--select", f"{NAME}_change_feed",
         "--partition-range", "2...4"],
        cwd=str(history["root"]), env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    with DagsterInstance.from_ref(DagsterInstance.local_temp(str(home)).get_ref()) as instance:
        runs = instance.get_runs()
        assert len(runs) == 1 and runs[0].status.value == "SUCCESS"
        assert instance.get_materialized_partitions(AssetKey([f"{NAME}_change_feed"])) == {"2", "3", "4"}
    counts = {v: partition_change_counts(d, v, {}) for v in (2, 3, 4)}
    assert counts == {2: {"insert": 100}, 3: {"delete": 50}, 4: {"update_preimage": 20, "update_postimage": 20}}


def test_the_sink_reads_from_its_root_with_pyarrow_pandas_and_spark(history, spark, instance):
    """No leading underscore in the range directories: readers that skip ``_*`` see every change."""
    import pandas as pd

    d, defs, latest = history["d"], history["defs"], history["latest"]
    instance.add_dynamic_partitions(f"{NAME}_versions", [str(v) for v in range(1, latest + 1)])
    run(defs, instance, "change_feed",
        tags={"dagster/asset_partition_range_start": "1", "dagster/asset_partition_range_end": str(latest)})
    sink = d.change_feed.sink_uri
    total = 300 + 100 + 50 + 40
    table = pq.read_table(sink)
    assert table.num_rows == total
    assert sorted(set(table["change_range"].to_pylist())) == ["0-1", "1-2", "2-3", "3-4"]  # 5, 6: no rows
    assert len(pd.read_parquet(sink)) == total
    back = spark.read.parquet(sink)
    assert back.count() == total
    assert sorted(r[0] for r in back.select("change_range").distinct().collect()) == ["0-1", "1-2", "2-3", "3-4"]


def test_new_versions_are_materialised_by_the_automation_condition(tmp_path, spark):
    """The change feed's condition requests each version partition once, when it appears (the
    automation sensor evaluates it under the daemon; ``evaluate_automation_conditions`` here)."""
    from dagster import evaluate_automation_conditions

    _, defs = defs_for(tmp_path)
    uri = str(tmp_path / "events")
    key = AssetKey([f"{NAME}_change_feed"])
    lf.write_dataset(simple_table(0, 100), uri, enable_stable_row_ids=True)
    with instance_for_test() as instance:
        instance.add_dynamic_partitions(f"{NAME}_versions", ["1"])
        first = evaluate_automation_conditions(defs=defs, instance=instance)
        assert first.total_requested == 0  # present before the condition was applied: a backfill's job
        lf.write_dataset(simple_table(100, 50), uri, mode="append")
        lf.dataset(uri).delete(pc.field("id") < 10)
        instance.add_dynamic_partitions(f"{NAME}_versions", ["2", "3"])  # what lance_new_versions_sensor adds
        second = evaluate_automation_conditions(defs=defs, instance=instance, cursor=first.cursor)
        assert second.get_requested_partitions(key) == {"2", "3"}
        # the daemon launches them as one run (BackfillPolicy.single_run; tests/assets/test_assets_daemon.py)
        tags = {"dagster/asset_partition_range_start": "2", "dagster/asset_partition_range_end": "3"}
        result = run(defs, instance, "change_feed", tags=dict(tags))
        counts = {m.partition: md(m.event_specific_data.materialization) for m in result.get_asset_materialization_events()}
        assert {k: (v["insert"], v["delete"]) for k, v in counts.items()} == {"2": (50, 0), "3": (0, 10)}
        third = evaluate_automation_conditions(defs=defs, instance=instance, cursor=second.cursor)
        assert third.total_requested == 0  # materialised: never requested again
