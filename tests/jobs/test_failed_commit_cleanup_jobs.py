"""A Spark job whose commit loses to a concurrent writer leaves none of its files behind.

The concurrent commit is made at the right moment by the job's own input: a Python function in
the source DataFrame (or the predicate) commits a conflicting transaction once, on an executor,
after the job read its version and before it commits.  Compaction jobs plan on a stale
``read_version`` instead.  Afterwards ``data/``, ``_deletions/``, ``_indices/`` and
``_transactions/`` hold nothing that no version references.
"""

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from datagen import simple_table

import lance_ops.format as lf
from lance_ops import jobs
from lance_ops.format.errors import LanceOpsError
from lance_ops.format.testing.files import unreferenced_files


@pytest.fixture
def uri(tmp_path):
    """4 fragments of 10 rows (ids 0..39), no stable row ids; rows 10, 11 deleted (version 2)."""
    path = str(tmp_path / "ds")
    lf.write_dataset(simple_table(0, 40), path, max_rows_per_file=10)
    lf.dataset(path).delete(pc.field("id").isin([10, 11]))
    return path


def rival_source(spark, uri: str, marker: str, rival: str, table: pa.Table):
    """``table`` as a DataFrame whose computation commits ``rival`` (``overwrite`` or
    ``delete12``) once, on an executor (everything the function needs is inside it: it is
    shipped to the Python workers, which cannot import the test modules)."""

    def produce(batches):
        import os

        import pyarrow as pa
        import pyarrow.compute as pc

        import lance_ops.format as lf

        yield from batches
        try:  # once, whatever the partitions and task retries
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            return
        if rival == "overwrite":
            lf.write_dataset(pa.table({"id": pa.array(range(500, 505), pa.int64()),
                                       "val": [f"v{i}" for i in range(500, 505)],
                                       "score": [i * 0.5 for i in range(500, 505)]}), uri, mode="overwrite")
        else:
            lf.dataset(uri).delete(pc.field("id") == 12)

    df = spark.createDataFrame(table.to_pandas()).coalesce(1)
    return df.mapInArrow(produce, df.schema)


def assert_clean(uri: str, version: int) -> None:
    assert unreferenced_files(uri) == []
    assert lf.dataset(uri).version == version


def test_append_job_losing_to_an_overwrite(spark, uri, tmp_path):
    df = rival_source(spark, uri, str(tmp_path / "m"), "overwrite", simple_table(100, 20))
    with pytest.raises(LanceOpsError):
        jobs.append(spark, uri, df, max_rows_per_file=10)
    assert_clean(uri, 3)
    assert lf.dataset(uri).count_rows() == 5


def test_df_write_losing_to_an_overwrite(spark, uri, tmp_path):
    df = rival_source(spark, uri, str(tmp_path / "m"), "overwrite", simple_table(100, 20))
    with pytest.raises(Exception, match="replaced|[Cc]onflict"):
        df.write.format("lance").mode("append").option("max_rows_per_file", 10).save(uri)
    assert_clean(uri, 3)
    assert lf.dataset(uri).count_rows() == 5


def test_delete_job_losing_to_a_delete_of_the_same_row(spark, uri, tmp_path, monkeypatch):
    marker = str(tmp_path / "m")

    def rival(row_id):
        import os

        import pyarrow.compute as pc

        import lance_ops.format as lf

        try:
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL))
            lf.dataset(uri).delete(pc.field("id") == 12)
        except FileExistsError:
            pass
        return True

    spark.udf.register("rival_delete", rival, "boolean")
    # the fault: the predicate Spark evaluates also calls the rival UDF (the SQL the job
    # validates, in pylance's dialect, has no such function)
    spark_sql = lf.transpile_sql
    monkeypatch.setattr(lf, "transpile_sql", lambda text, dialect: f"({spark_sql(text, dialect)}) AND rival_delete(id)")
    with pytest.raises(LanceOpsError, match="changed by both"):
        jobs.delete(spark, uri, "id IN (12, 25, 33)")
    assert_clean(uri, 3)
    assert lf.dataset(uri).count_rows() == 37


def test_upsert_job_losing_to_a_delete_of_a_matched_row(spark, uri, tmp_path):
    source = simple_table(12, 2).set_column(1, "val", pa.array(["U", "U"]))
    df = rival_source(spark, uri, str(tmp_path / "m"), "delete12", source)
    with pytest.raises(LanceOpsError):
        jobs.upsert(spark, uri, df, on=["id"])
    assert_clean(uri, 3)
    assert "U" not in lf.dataset(uri).to_table(columns=["val"]).column("val").to_pylist()


def test_compact_job_losing_to_a_delete(spark, uri):
    lf.dataset(uri).delete(pc.field("id") == 3)
    with pytest.raises(LanceOpsError):
        jobs.compact(spark, uri, target_rows_per_fragment=1000, read_version=2)
    assert_clean(uri, 4)  # the ReserveFragments landed; the Rewrite's files are gone
    assert lf.dataset(uri).count_rows() == 37


def test_materialize_deletions_job_losing_to_a_delete(spark, uri):
    lf.dataset(uri).delete(pc.field("id") == 15)
    with pytest.raises(LanceOpsError):
        jobs.materialize_deletions(spark, uri, 0.1, read_version=2)
    assert_clean(uri, 4)
    assert lf.dataset(uri).count_rows() == 37


def lose_every_race(monkeypatch) -> list[int]:
    """From now on every manifest put on the driver loses its race (a rival always got there
    first); returns the list of versions it was asked to put."""
    from lance_ops.format.txn.handlers import ConditionalPutCommitHandler

    puts: list[int] = []

    def lose(self, manifest, txn, scheme):  # type: ignore[no-untyped-def]
        puts.append(manifest.version)
        return False

    monkeypatch.setattr(ConditionalPutCommitHandler, "put_manifest_if_absent", lose)
    return puts


@pytest.mark.parametrize("job", ["compact", "optimize_indices"])
def test_driver_commit_retries_as_commit_options_say(spark, uri, monkeypatch, job):
    """``CommitOptions.max_retries`` reaches the compaction and index-build commits: with 1 the
    job gives up after 2 lost races (the default would try 21 times), and leaves nothing."""
    kwargs = {"target_rows_per_fragment": 1000}
    if job == "optimize_indices":
        lf.dataset(uri).create_scalar_index("id", "BTREE")
        lf.write_dataset(simple_table(100, 10), uri, mode="append")
        kwargs = {}
    version = lf.dataset(uri).version
    puts = lose_every_race(monkeypatch)
    with pytest.raises(lf.CommitConflictError, match="gave up after 1 lost races"):
        getattr(jobs, job)(spark, uri, commit=lf.CommitOptions(max_retries=1), **kwargs)
    # (compaction: its first commit, ReserveFragments, already gives up)
    assert puts == [version + 1, version + 1]
    assert_clean(uri, version)


def test_data_source_max_retries_option_is_checked(spark, uri):
    df = spark.createDataFrame(simple_table(100, 5).to_pandas())
    with pytest.raises(Exception, match="max_retries"):
        df.write.format("lance").mode("append").option("max_retries", "-1").save(uri)
    assert_clean(uri, 2)
