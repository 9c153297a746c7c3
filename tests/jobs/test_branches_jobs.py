"""The Spark jobs on a branch pylance created (addressed by its URI ``<root>/tree/<branch>``, as
pylance opens it), and versions named by tags: pylance reads the results and main is untouched.
(Appends to a branch go through the same commit path; tests/interop/test_branches.py covers them.)"""

import os
from datetime import timedelta

import lance
import pyarrow as pa
import pytest
from datagen import simple_table

import lance_ops.format as lf
from lance_ops import jobs

COLS = ["id", "val", "score", "_rowid", "_row_created_at_version", "_row_last_updated_at_version"]


@pytest.fixture
def branched(tmp_path):
    uri = str(tmp_path / "ds")
    ds = lance.write_dataset(simple_table(0, 40), uri, enable_stable_row_ids=True, max_rows_per_file=10)
    ds = lance.write_dataset(simple_table(40, 10), uri, mode="append")
    dev = ds.create_branch("dev", 1)
    lance.write_dataset(simple_table(100, 5), dev, mode="append")
    lance.dataset(uri).tags.create("release", ("dev", 2))
    return uri, os.path.join(uri, "tree", "dev")


def test_jobs_maintain_a_branch(spark, branched):
    uri, dev = branched
    main_before = lance.dataset(uri).to_table(columns=COLS)
    jobs.delete(spark, dev, "id < 5")
    up = pa.table({"id": pa.array([6, 7, 200]), "val": pa.array(["u"] * 3), "score": pa.array([1.0] * 3)})
    jobs.upsert(spark, dev, spark.createDataFrame(up.to_pandas()), on=["id"])
    jobs.compact(spark, dev, target_rows_per_fragment=1000)
    theirs = lance.dataset(dev)
    ours = lf.dataset(uri, branch="dev")
    assert theirs.version == ours.version and theirs.to_table(columns=COLS).equals(ours.to_table(columns=COLS))
    ids = sorted(theirs.to_table(columns=["id"])["id"].to_pylist())
    assert ids == [*range(5, 40), 100, 101, 102, 103, 104, 200]
    assert lance.dataset(uri).to_table(columns=COLS).equals(main_before)
    # the change feed of the branch, versions named by a tag and by number
    feed = jobs.change_feed(spark, dev, "release", ours.version).collect()  # a tag names the begin version
    kinds = {r["_change_type"] for r in feed}
    assert kinds == {"insert", "delete", "update_preimage", "update_postimage"}
    # cleanup of main keeps what the branch and its tag still read
    lf.dataset(uri).cleanup_old_versions(older_than=timedelta(0), retention_duration_check=False)
    assert lance.dataset(uri, version="release").count_rows() == 45
    assert lance.dataset(dev).count_rows() == len(ids)
