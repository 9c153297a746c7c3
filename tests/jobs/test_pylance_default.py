"""Every Spark job on a dataset created with pylance 14's defaults (file format 2.2, stable row
ids): the dataset stays at 2.2, and pylance reads identical rows, ids and row versions."""

import lance
import pyarrow as pa
from datagen import simple_table
from helpers import snapshot

import lance_ops.format as lf
from lance_ops import jobs


def frame(spark, table: pa.Table, parts: int = 2):
    return spark.createDataFrame(table.to_pandas()).repartition(parts)


def file_versions(uri: str) -> set[tuple[int, int]]:
    ds = lance.dataset(uri)
    return {(f.file_major_version, f.file_minor_version) for fr in ds.get_fragments() for f in fr.metadata.data_files()}


def test_every_job_on_a_pylance_default_dataset(spark, uri):
    lance.write_dataset(simple_table(0, 3000), uri, enable_stable_row_ids=True, max_rows_per_file=500)
    assert lance.dataset(uri).data_storage_version == "2.2"

    jobs.append(spark, uri, frame(spark, simple_table(3000, 1000)))
    jobs.delete(spark, uri, "id % 3 = 0")
    updates = simple_table(10, 20).set_column(1, "val", pa.array(["up"] * 20))
    jobs.upsert(spark, uri, frame(spark, updates), on=["id"])
    jobs.materialize_deletions(spark, uri, threshold=0.0)
    jobs.compact(spark, uri, target_rows_per_fragment=2000)

    ds = lance.dataset(uri)
    assert ds.data_storage_version == "2.2" and file_versions(uri) == {(2, 2)}
    ours = lf.dataset(uri)
    theirs = snapshot(uri)
    assert ours.to_table(columns=theirs.column_names).sort_by("_rowid").equals(theirs)
    ids = theirs["id"].to_pylist()
    expected = sorted({i for i in range(4000) if i % 3} | set(range(10, 30)))
    assert sorted(ids) == expected
    up = theirs.filter(pa.compute.is_in(theirs["id"], pa.array(range(10, 30))))
    assert set(up["val"].to_pylist()) == {"up"}
    # the change feed over the whole history matches pylance's own view of each version
    feed = jobs.change_feed(spark, uri, 1, ds.version).collect()
    inserted = {r["_rowid"] for r in feed if r["_change_type"] == "insert"}
    assert set(theirs["_rowid"].to_pylist()) <= inserted | set(snapshot(uri, 1)["_rowid"].to_pylist())
    # and pylance keeps maintaining it
    ds.delete("id < 100")
    lance.write_dataset(simple_table(9000, 10), uri, mode="append")
    assert lf.dataset(uri).to_table(columns=["id"]).num_rows == lance.dataset(uri).count_rows()


def test_append_creates_at_the_asked_file_version_and_keeps_it(spark, uri):
    jobs.append(spark, uri, frame(spark, simple_table(0, 500)), data_storage_version="2.1",
                enable_stable_row_ids=True)
    jobs.append(spark, uri, frame(spark, simple_table(500, 500)))  # an existing dataset keeps its version
    assert lance.dataset(uri).data_storage_version == "2.1" and file_versions(uri) == {(2, 1)}
    assert sorted(lance.dataset(uri).to_table()["id"].to_pylist()) == list(range(1000))
    assert lf.dataset(uri).to_table(columns=["id"]).num_rows == 1000
