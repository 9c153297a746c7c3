"""The Spark change feed across schema evolution equals the oracle (tests/evolved.py), and the
per-version sink backfill (what the Dagster change-feed asset runs) works over every version."""

import os

import pyarrow.parquet as pq
import pytest
from evolved import Oracle, build_history, normalize, same_feed

import lance_ops.format as lf
from lance_ops import jobs


@pytest.fixture(scope="module")
def evolved(tmp_path_factory):
    uri = str(tmp_path_factory.mktemp("cdf_evo") / "ds")
    steps = build_history(uri)
    return uri, steps, Oracle(uri)


def test_spark_change_feed_across_evolution(spark, evolved):
    uri, steps, oracle = evolved
    by_step = {what: v for v, what in steps.items()}
    latest = oracle.latest
    # the whole history, a span over a rename and an update, and a cast alone (every
    # range is checked in process by tests/interop/test_change_feed_evolution.py)
    ranges = [(1, latest), (by_step["rename"] - 1, by_step["update"]), (by_step["cast"] - 1, by_step["cast"])]
    for b, e in ranges:
        got = normalize([r.asDict() for r in jobs.change_feed(spark, uri, b, e).collect()])
        assert same_feed(got, oracle.feed(b, e)), (b, e, [steps.get(v) for v in range(b + 1, e + 1)])
    with pytest.raises(lf.SchemaChangeError, match="renamed"):
        jobs.change_feed(spark, uri, by_step["rename"] - 1, by_step["rename"], on_schema_change="fail")


def test_per_version_backfill_to_parquet_across_evolutions(spark, evolved, tmp_path):
    """The Dagster backfill writes partition v = the changes of (v-1, v], one range at a time:
    here the partitions of the versions that evolved the schema."""
    uri, steps, oracle = evolved
    sink = str(tmp_path / "sink")
    total = 0
    evolutions = ("add_columns udf", "rename", "nullable", "drop", "merge")
    for v in sorted(v for v, what in steps.items() if what in evolutions):
        res = jobs.write_change_feed(spark, uri, v - 1, v, sink, format="parquet")
        want = oracle.feed(v - 1, v)
        assert res.rows_written == len(want), v
        path = jobs.range_location(sink, v - 1, v)
        files = [os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs if f.endswith(".parquet")]
        rows = [r for f in files for r in pq.read_table(f).to_pylist()]
        assert len(rows) == len(want)
        total += len(rows)
    assert total > 0
