"""Bad run configuration fails the run with a DatasetConfigError naming the dataset, the field and
the fix, and leaves every dataset at its last good version (nothing half-committed)."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dagster import AssetKey
from dagster_support import NAME, defs_for, run, step_error
from datagen import simple_table

import lance_ops.format as lf
from lance_ops.assets.configs import (
    AppendConfig,
    ChangeFeedConfig,
    ObserveConfig,
    UpsertConfig,
    _OptionalDelete,
)
from lance_ops.orchestration.errors import DatasetConfigError
from lance_ops.orchestration.settings import parse_settings


@pytest.fixture(scope="module")
def world(tmp_path_factory, spark, module_instance):
    root = tmp_path_factory.mktemp("bad")
    lf.write_dataset(pa.table({"id": pa.array(range(100), pa.int64()), "kind": ["a"] * 100,
                               "amount": pa.array([1.5] * 100)}), str(root / "events"),
                     enable_stable_row_ids=True, max_rows_per_file=50)
    lf.write_dataset(simple_table(0, 50), str(root / "plain"))  # no stable row ids
    settings, defs = defs_for(root, extra={"plain": {"uri": "plain"}})
    return {"root": root, "defs": defs, "settings": settings, "instance": module_instance}


def versions(world, name=NAME):
    return [v["version"] for v in lf.dataset(str(world["root"] / name)).versions()]


def failed_with(result, field, *words):
    """The run failed with a DatasetConfigError on ``field`` whose message holds ``words``."""
    assert not result.success
    err = step_error(result)
    assert err.cls_name == "DatasetConfigError", err.to_string()
    assert f"field `{field}`" in err.message and "Fix:" in err.message, err.message
    for w in words:
        assert w in err.message, err.message
    return err.message


def test_unknown_dataset(world):
    defs, inst = world["defs"], world["instance"]
    r = run(defs, inst, "observe", ObserveConfig(dataset="evnets"), dataset="evnets", expect_success=False)
    failed_with(r, "dataset", "'evnets'", "['events', 'plain']")
    r = run(defs, inst, "write_change_feed", ChangeFeedConfig(dataset="nope", begin_version=0), dataset="nope",
            expect_success=False)
    failed_with(r, "dataset", "'nope'")
    with pytest.raises(DatasetConfigError, match=r"use one of \['events', 'plain'\]"):
        world["settings"].dataset("evnets")


def test_bad_predicate_names_the_dataset_columns(world):
    defs, inst = world["defs"], world["instance"]
    before = versions(world)
    r = run(defs, inst, "delete", _OptionalDelete(where="idd > 5"), expect_success=False)
    msg = failed_with(r, "delete.where", "dataset 'events'", "'idd > 5'", "['id', 'kind', 'amount']")
    assert "_rowaddr`]" not in msg  # not Spark's suggestion from the scanned columns only
    # the format API's SQL check runs before Spark: a syntax error points at its position
    r = run(defs, inst, "delete", _OptionalDelete(where="id >"), expect_success=False)
    failed_with(r, "delete.where", "'id >'", "position 3", "pylance's SQL")
    r = run(defs, inst, "delete", _OptionalDelete(where="id > 1.5"), expect_success=False)
    failed_with(r, "delete.where", "1.5", "int64")
    r = run(defs, inst, "delete", expect_success=False)  # lance_delete without a predicate
    failed_with(r, "delete.where", "needs a predicate", 'e.g. "id < 100"')
    assert versions(world) == before


def test_wrong_schema_source(world, tmp_path):
    defs, inst = world["defs"], world["instance"]
    before = versions(world)
    data = world["root"] / NAME / "data"
    files = sorted(p.name for p in data.iterdir())
    src = tmp_path / "landing.parquet"
    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int64()), "label": ["x", "y"]}), src)
    r = run(defs, inst, "append", AppendConfig(path=str(src), format="parquet"), expect_success=False)
    failed_with(r, "append.path", "missing columns ['amount', 'kind']", "columns not in the dataset ['label']")
    r = run(defs, inst, "upsert", UpsertConfig(on=["key"]), expect_success=False)
    failed_with(r, "upsert.on", "['key']", "['id', 'kind', 'amount']")
    assert versions(world) == before
    assert sorted(p.name for p in data.iterdir()) == files  # no data file was written


def test_operation_and_job_must_agree(world):
    defs, inst = world["defs"], world["instance"]
    r = run(defs, inst, "compact", run_config={"ops": {NAME: {"config": {"operation": "delete"}}}},
            expect_success=False)
    failed_with(r, "operation", "job lance_compact runs compact", "launch lance_delete")


def test_dataset_without_stable_row_ids_has_no_change_feed(world):
    defs, inst = world["defs"], world["instance"]
    graph = defs.get_repository_def().asset_graph
    assert AssetKey(["plain_change_feed"]) not in graph.get_all_asset_keys()
    assert AssetKey(["events_change_feed"]) in graph.get_all_asset_keys()
    plain = graph.get(AssetKey(["plain"]))
    assert "**No change feed**" in plain.description and "without stable row ids" in plain.description
    assert plain.metadata["lance_ops/change_feed"].value.startswith("none: ")
    before = versions(world, "plain")
    r = run(defs, inst, "write_change_feed", ChangeFeedConfig(dataset="plain", begin_version=0), dataset="plain",
            expect_success=False)
    failed_with(r, "change_feed", "dataset 'plain'", "stable row ids", "enable_stable_row_ids=True")
    assert versions(world, "plain") == before


def test_change_feed_asset_on_a_dataset_recreated_without_row_ids(world, tmp_path):
    """Loaded with stable row ids, overwritten by pylance-style defaults later: the partition run fails typed."""
    uri = tmp_path / "later"
    lf.write_dataset(simple_table(0, 10), str(uri), enable_stable_row_ids=True)
    settings = parse_settings(f"datasets:\n  later:\n    uri: {uri}\n")
    from lance_ops.assets.definitions import build_definitions

    defs = build_definitions(settings)
    assert AssetKey(["later_change_feed"]) in defs.get_repository_def().asset_graph.get_all_asset_keys()
    import shutil

    shutil.rmtree(uri)
    lf.write_dataset(simple_table(0, 10), str(uri))  # recreated without stable row ids
    world["instance"].add_dynamic_partitions("later_versions", ["1"])
    r = run(defs, world["instance"], "change_feed", dataset="later", tags={
        "dagster/asset_partition_range_start": "1", "dagster/asset_partition_range_end": "1"}, expect_success=False)
    failed_with(r, "change_feed", "dataset 'later'", "has no stable row ids", "change_feed.enabled: false")
