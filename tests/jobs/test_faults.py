"""A write task that raises midway: a retry adds its rows once; a failed job commits nothing, leaves no files."""

import os
from collections.abc import Iterator

import lance
import pyarrow as pa
import pytest
from datagen import simple_table
from helpers import data_files, referenced_files, snapshot

from lance_ops import jobs


def failing_source(spark, n: int, marker: str, *, always: bool):
    """``n`` rows in 4 partitions; partition 2 raises after its first batch (once, or every time).

    The failure happens in a Python task upstream of the writer, in the same Spark task, so the
    writer has already written a file for that task when its input breaks.
    """

    def inject(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        for i, b in enumerate(batches):
            if i == 1 and ctx.partitionId() == 2:
                first = not os.path.exists(marker)
                if always or first:
                    open(marker, "a").close()
                    raise RuntimeError(f"injected failure in partition 2, attempt {ctx.attemptNumber()}")
            yield b

    df = spark.createDataFrame(simple_table(0, n).to_pandas()).repartition(4, "id")
    return df.mapInArrow(inject, df.schema)


@pytest.fixture
def small_batches(spark):
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "100")
    yield
    spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")


def test_retried_task_adds_its_rows_once(spark, uri, tmp_path, small_batches):
    jobs.append(spark, uri, spark.createDataFrame(simple_table(10_000, 10).to_pandas()), enable_stable_row_ids=True)
    marker = str(tmp_path / "failed-once")
    df = failing_source(spark, 2000, marker, always=False)
    result = jobs.append(spark, uri, df, max_rows_per_file=150)
    assert os.path.exists(marker)  # the first attempt of partition 2 did fail
    assert result.version == 2 and result.rows_written == 2000
    t = snapshot(uri)
    assert t.num_rows == 2010
    assert sorted(t["id"].to_pylist()) == list(range(2000)) + list(range(10_000, 10_010))  # no duplicates
    assert t["_rowid"].to_pylist() == list(range(2010))
    assert len(lance.dataset(uri).versions()) == 2
    assert data_files(uri) == referenced_files(uri)  # the failed attempt's file was removed


def test_failed_job_commits_nothing_and_removes_its_files(spark, uri, tmp_path, small_batches):
    jobs.append(spark, uri, spark.createDataFrame(simple_table(0, 10).to_pandas()))
    before = data_files(uri)
    df = failing_source(spark, 2000, str(tmp_path / "always"), always=True)
    with pytest.raises(Exception, match="injected failure"):
        df.write.format("lance").mode("append").option("max_rows_per_file", 150).save(uri)
    ds = lance.dataset(uri)
    assert ds.version == 1 and ds.count_rows() == 10
    assert data_files(uri) == before  # abort() removed the files of the tasks that had finished


def test_a_task_still_running_after_the_abort_writes_no_new_file(spark, uri):
    """Spark calls abort() without waiting for the failed stage's other tasks: a task that opens
    its next file after the abort marker is refused, and leaves neither the file nor its marker."""
    from lance_ops.jobs import JobAbortedError
    from lance_ops.jobs.source import STAGING_DIR, StagingStore, aborted_marker

    jobs.append(spark, uri, spark.createDataFrame(simple_table(0, 10).to_pandas()))
    before = data_files(uri)
    store = StagingStore(uri, None, "w-late")
    store.put(aborted_marker("w-late"), b"")
    with pytest.raises(JobAbortedError, match=r"ds: Spark write w-late was aborted"):
        store.open_output("data/late.lance")
    assert data_files(uri) == before
    assert os.listdir(os.path.join(uri, STAGING_DIR, "w-late")) == []


def test_abort_sweeps_again_after_the_task_kill_timeout(spark, uri):
    """A task staged its file before the abort and creates it while abort() sweeps: the second
    sweep, Spark's kill timeout later, removes it; then no staging marker or abort marker is left."""
    import threading
    import time

    from lance_ops.jobs.source import ABORT_GRACE_S, STAGING_DIR, LanceDataSource, StagingStore

    jobs.append(spark, uri, spark.createDataFrame(simple_table(0, 10).to_pandas()))
    before = data_files(uri)
    writer = LanceDataSource({"path": uri, "write_id": "w-race"}).writer(
        spark.createDataFrame(simple_table(0, 1).to_pandas()).schema, False)
    store = StagingStore(uri, None, "w-race")
    store.put(f"{store.staging}/slow.lance", b"")  # staged before the abort began

    def slow_task() -> None:
        time.sleep(ABORT_GRACE_S / 3)  # after the first sweep, before the second
        with open(os.path.join(uri, "data", "slow.lance"), "wb") as f:
            f.write(b"partial")

    t = threading.Thread(target=slow_task)
    t.start()
    writer.abort([])
    t.join()
    assert data_files(uri) == before
    assert not os.path.exists(os.path.join(uri, STAGING_DIR))
