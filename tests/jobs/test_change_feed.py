"""The change feed: Spark DataFrames == brute-force diff by _rowid == in-process reference; sinks; stream."""

import lance
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from datagen import simple_table
from helpers import brute_force_feed, commit_times, normalize_feed, reference_feed, without_timestamps

import lance_ops.format as lf
from lance_ops import jobs


def frame(spark, table: pa.Table, parts: int = 2):
    return spark.createDataFrame(table.to_pandas()).repartition(parts)


def feed_rows(df) -> list[tuple]:
    return normalize_feed([r.asDict() for r in df.collect()])


@pytest.fixture(scope="module")
def history(spark, tmp_path_factory):
    """Appends, deletes, an update, upserts (the Spark job), a compaction and a deletion
    materialisation.  Steps other than the upserts run in process: they are tested as jobs
    elsewhere, and the history is what matters here."""
    uri = str(tmp_path_factory.mktemp("cdf") / "ds")
    lf.write_dataset(simple_table(0, 200), uri, enable_stable_row_ids=True, max_rows_per_file=50)  # v1
    lf.write_dataset(simple_table(200, 50), uri, mode="append")  # v2
    lf.dataset(uri).delete(pc.field("id").isin(list(range(0, 250, 5))))  # v3
    lf.dataset(uri).update({"score": -1.0}, pc.field("id").isin([1, 2, 201, 202]))  # v4
    up = pa.table({"id": pa.array([2, 3, 203, 204, 900, 901]), "val": pa.array(["u"] * 6),
                   "score": pa.array([7.0] * 6)})
    jobs.upsert(spark, uri, frame(spark, up), on=["id"])  # v5
    lf.dataset(uri).compact_files(target_rows_per_fragment=120)  # v6 reserve, v7 rewrite
    lf.dataset(uri).delete(pc.field("id").isin([3, 4, 6, 900]) | (pc.field("id") > 240))  # v8
    up2 = pa.table({"id": pa.array([901, 7, 902]), "val": pa.array(["w"] * 3), "score": pa.array([8.0] * 3)})
    jobs.upsert(spark, uri, frame(spark, up2, 1), on=["id"])  # v9
    lf.dataset(uri).materialize_deletions(threshold=0.01)  # v10 reserve, v11 rewrite
    assert lance.dataset(uri).version == 11
    return uri


# whole history, one op at a time (update, upsert), spans over deletes + upserts + compactions,
# and ranges holding only a compaction / a deletion materialisation (no change rows)
RANGES = [(0, 11), (1, 11), (3, 4), (4, 5), (2, 9), (5, 7), (9, 11)]


def test_change_feed_equals_brute_force_and_reference(spark, history):
    uri = history
    for b, e in RANGES:
        got = feed_rows(jobs.change_feed(spark, uri, b, e))
        assert got == reference_feed(uri, b, e), (b, e)
        brute = brute_force_feed(uri, b, e)
        assert without_timestamps(got) == without_timestamps(brute), (b, e)
        # pylance truncates commit times to microseconds, lance_ops rounds: at most 1 us apart
        mine, theirs = commit_times(got), commit_times(brute)
        assert mine.keys() == theirs.keys()
        assert all(abs((mine[v] - theirs[v]).total_seconds()) <= 1e-6 for v in mine), (b, e)
        kinds = {dict(t[:-1])["_change_type"] for t in got}
        if (b, e) == (2, 9):
            assert kinds == {"insert", "update_preimage", "update_postimage", "delete"}
        if (b, e) in ((5, 7), (9, 11)):  # compaction, deletion materialisation: no change rows
            assert got == []


def test_change_feed_batch_source_and_schema(spark, history):
    uri = history
    df = jobs.change_feed(spark, uri, 2, 9)
    assert df.columns == ["id", "val", "score", "_rowid", "_change_type", "_commit_version", "_commit_timestamp"]
    batch = spark.read.format("lance_changes").option("startingVersion", 3).option("endingVersion", 9).load(uri)
    assert feed_rows(batch) == reference_feed(uri, 2, 9)


def test_write_change_feed_is_idempotent(spark, history, tmp_path):
    uri = history
    pq_sink = str(tmp_path / "cdf_parquet")
    for _ in range(2):
        r = jobs.write_change_feed(spark, uri, 3, 9, pq_sink, format="parquet")
    back = spark.read.parquet(pq_sink)
    assert back.count() == r.rows_written == len(reference_feed(uri, 3, 9))
    assert feed_rows(back.drop("change_range")) == reference_feed(uri, 3, 9)

    sink = str(tmp_path / "cdf_lance")
    first = jobs.write_change_feed(spark, uri, 0, 5, sink)
    again = jobs.write_change_feed(spark, uri, 0, 5, sink)  # re-run: replaces, never duplicates
    nxt = jobs.write_change_feed(spark, uri, 5, 11, sink)
    assert (first.sink_version, again.sink_version, nxt.sink_version) == (1, 2, 3)
    stored = lance.dataset(sink).to_table()
    want = reference_feed(uri, 0, 5) + reference_feed(uri, 5, 11)
    got = normalize_feed(
        [{("_rowid" if k == jobs.SINK_ROW_ID else k): v for k, v in r.items()} for r in stored.to_pylist()]
    )
    assert got == sorted(want, key=repr)


def test_streaming_change_feed_available_now(spark, uri, tmp_path):
    lf.write_dataset(simple_table(0, 30), uri, enable_stable_row_ids=True)  # v1
    lf.write_dataset(simple_table(30, 10), uri, mode="append")  # v2
    lf.dataset(uri).delete(pc.field("id") < 5)  # v3
    sink, ck = str(tmp_path / "sink"), str(tmp_path / "ck")

    def run(**options):
        reader = spark.readStream.format("lance_changes").option("startingVersion", 2)
        for k, v in options.items():
            reader = reader.option(k, v)
        q = (reader.load(uri).writeStream.format("parquet").option("path", sink)
             .option("checkpointLocation", ck).trigger(availableNow=True).start())
        q.awaitTermination(120)
        assert q.exception() is None
        return [p["batchId"] for p in q.recentProgress if p["numInputRows"] > 0]

    assert len(run()) == 1  # (1, 3] in one micro-batch
    assert feed_rows(spark.read.parquet(sink)) == reference_feed(uri, 1, 3)
    lf.dataset(uri).update({"val": "'x'"}, pc.field("id") == 7)  # v4
    lf.write_dataset(simple_table(40, 5), uri, mode="append")  # v5
    batches = run(maxVersionsPerTrigger=1)  # restart from the checkpoint: only v4, v5, one each
    assert len(batches) == 2
    want = reference_feed(uri, 1, 3) + reference_feed(uri, 3, 4) + reference_feed(uri, 4, 5)
    assert feed_rows(spark.read.parquet(sink)) == sorted(want, key=repr)
