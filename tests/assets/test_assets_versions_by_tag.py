"""Versions named by tag in Dagster run config and IO manager metadata, as pylance names them.

pylance builds the history (tags on main and on a branch); the ``lance_write_change_feed`` job
configured by tags writes the rows it writes when configured by numbers, a branch's changes go to
their own sink, and a bad reference fails typed before anything is written.
"""

import io
import os

import lance
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dagster import AssetIn, asset, materialize
from dagster_support import NAME, defs_for, output_metadata, run, step_error
from datagen import simple_table

from lance_ops.assets.configs import ChangeFeedConfig
from lance_ops.assets.io_manager import LanceIOManager
from lance_ops.cli import main
from lance_ops.format import TagError

SORT = [("_rowid", "ascending"), ("_change_type", "ascending")]


@pytest.fixture(scope="module")
def world(tmp_path_factory, spark, module_instance):
    """main: v1 create (tag ``base``), v2 append, v3 delete, v4 update (tag ``gold``);
    branch ``dev`` from v2 with one append (tag ``release`` = (dev, 3))."""
    root = tmp_path_factory.mktemp("bytag")
    settings, defs = defs_for(root)
    uri = settings.datasets[0].uri
    ds = lance.write_dataset(simple_table(0, 60), uri, enable_stable_row_ids=True, max_rows_per_file=20)
    ds = lance.write_dataset(simple_table(60, 20), uri, mode="append")
    dev = ds.create_branch("dev", 2)
    lance.write_dataset(simple_table(100, 5), dev, mode="append")
    ds = lance.dataset(uri)
    ds.delete("id < 10")
    ds.update({"val": "'changed'"}, where="id >= 55 AND id < 65")
    ds = lance.dataset(uri)
    ds.tags.create("base", 1)
    ds.tags.create("gold", 4)
    ds.tags.create("release", ("dev", 3))
    return {"root": root, "uri": uri, "defs": defs, "instance": module_instance}


def failed_with(result, field, *words):
    """The run failed with a DatasetConfigError on ``field`` whose message holds ``words``."""
    assert not result.success
    err = step_error(result)
    assert err.cls_name == "DatasetConfigError", err.to_string()
    assert f"field `{field}`" in err.message, err.message
    for w in words:
        assert w in err.message, err.message
    return err.message


def sink_rows(result):
    return pq.read_table(output_metadata(result)["location"]).sort_by(SORT)


def test_a_change_feed_by_tags_writes_what_numbers_write(world, monkeypatch):
    defs, inst, root = world["defs"], world["instance"], world["root"]
    by_tag = run(defs, inst, "write_change_feed",
                 ChangeFeedConfig(dataset=NAME, begin_tag="base", end_tag="gold", sink_uri=str(root / "by_tag")))
    by_num = run(defs, inst, "write_change_feed",
                 ChangeFeedConfig(dataset=NAME, begin_version=1, end_version=4, sink_uri=str(root / "by_num")))
    tagged, numbered = sink_rows(by_tag), sink_rows(by_num)
    assert tagged.equals(numbered)
    kinds = dict(zip(*pa.compute.value_counts(tagged["_change_type"]).flatten(), strict=True))
    assert {k.as_py(): v.as_py() for k, v in kinds.items()} == {
        "insert": 20, "delete": 10, "update_preimage": 5, "update_postimage": 5}  # 60-64: inserted in the range
    md = output_metadata(by_tag)
    assert (md["begin_version"], md["end_version"], md["rows_written"]) == (1, 4, 40) and "branch" not in md
    # the CLI takes the same fields as options; the end defaults to the latest version (4)
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    out = io.StringIO()
    assert main(["run", "change_feed", "--config", str(root / "lance_ops.yaml"), "--begin-tag", "base",
                 "--sink-uri", str(root / "cli")], out=out) == 0, out.getvalue()
    assert pq.read_table(root / "cli" / "change_range=1-4").sort_by(SORT).equals(numbered)


def test_a_tag_on_a_branch_runs_the_change_feed_of_that_branch(world):
    defs, inst, root = world["defs"], world["instance"], world["root"]
    r = run(defs, inst, "write_change_feed", ChangeFeedConfig(dataset=NAME, begin_version=2, end_tag="release"))
    md = output_metadata(r)
    assert (md["begin_version"], md["end_version"], md["branch"]) == (2, 3, "dev")
    assert md["location"] == str(root / "events_changes_ranges_dev" / "change_range=2-3")  # not main's sink
    rows = sink_rows(r)
    assert rows["_change_type"].to_pylist() == ["insert"] * 5 and sorted(rows["id"].to_pylist()) == [*range(100, 105)]
    # the same range named by branch and numbers
    again = run(defs, inst, "write_change_feed", ChangeFeedConfig(dataset=NAME, branch="dev", begin_version=2,
                                                                    sink_uri=str(root / "dev_by_num")))
    assert sink_rows(again).equals(rows)
    assert lance.dataset(os.path.join(world["uri"], "tree", "dev")).version == 3  # the branch is untouched


def test_bad_references_fail_typed_and_write_nothing(world):
    defs, inst, root = world["defs"], world["instance"], world["root"]
    sink = root / "never"

    def fails(field, *words, **cfg):
        r = run(defs, inst, "write_change_feed", ChangeFeedConfig(dataset=NAME, sink_uri=str(sink), **cfg),
                expect_success=False)
        msg = failed_with(r, field, *words)
        assert not sink.exists(), msg
        return msg

    fails("begin_tag", "begin_tag='glod'", "does not exist", "tags: ['base', 'gold', 'release']", begin_tag="glod")
    fails("end_tag", "end_tag='nope'", end_version=None, begin_version=0, end_tag="nope")
    fails("begin_tag", "both begin_version=1 and begin_tag='base'", begin_version=1, begin_tag="base")
    fails("begin_version", "no begin version", end_tag="gold")
    fails("end_tag", "spans two branches", "'release' is on branch dev", begin_tag="base", end_tag="release")
    fails("begin_tag", "begin 'gold' is version 4, after end 'base' (version 1)", begin_tag="gold", end_tag="base")
    fails("end_tag", "tag 'release' points into branch dev, not 'nope'", branch="nope", begin_version=0,
          end_tag="release")
    fails("branch", "branch='nope'", branch="nope", begin_version=0)


def test_io_manager_input_pinned_to_a_tag(tmp_path, instance):
    calls = {"n": 0}

    @asset
    def orders() -> pa.Table:
        calls["n"] += 1
        return pa.table({"id": pa.array(range(calls["n"] * 2), pa.int64())})

    @asset(ins={"orders": AssetIn(metadata={"version": "first"})})
    def first_ids(orders: pa.Table) -> pa.Table:
        return orders

    io = LanceIOManager(root_uri=str(tmp_path / "lake"))
    materialize([orders], resources={"io_manager": io}, instance=instance)
    lance.dataset(str(tmp_path / "lake" / "orders.lance")).tags.create("first", 1)
    materialize([orders], resources={"io_manager": io}, instance=instance)  # v2: 4 rows
    r = materialize([orders, first_ids], selection=[first_ids], resources={"io_manager": io}, instance=instance)
    assert r.success
    assert lance.dataset(str(tmp_path / "lake" / "first_ids.lance")).to_table()["id"].to_pylist() == [0, 1]
    # a branch pylance made: by (branch, version) and by its latest
    dev = lance.dataset(str(tmp_path / "lake" / "orders.lance")).create_branch("dev", 1)
    lance.write_dataset(pa.table({"id": pa.array([100], pa.int64())}), dev, mode="append")

    @asset(ins={"orders": AssetIn(metadata={"version": ["dev", 2]})})
    def dev_ids(orders: pa.Table) -> pa.Table:
        return orders

    @asset(ins={"orders": AssetIn(metadata={"branch": "dev"})})
    def dev_latest(orders: pa.Table) -> pa.Table:
        return orders

    materialize([orders, dev_ids, dev_latest], selection=[dev_ids, dev_latest], resources={"io_manager": io},
                instance=instance)
    for name in ("dev_ids", "dev_latest"):
        assert lance.dataset(str(tmp_path / "lake" / f"{name}.lance")).to_table()["id"].to_pylist() == [0, 1, 100]

    @asset(name="first_ids", ins={"orders": AssetIn(metadata={"version": "frist"})})
    def bad(orders: pa.Table) -> pa.Table:
        return orders

    with pytest.raises(TagError, match="'frist' does not exist"):
        materialize([orders, bad], selection=[bad], resources={"io_manager": io}, instance=instance)
