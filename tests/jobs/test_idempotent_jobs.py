"""Idempotent Spark writes (Delta's ``txnAppId``/``txnVersion``): a job retried after an
ambiguous failure commits at most once and leaves no files behind."""

import os

import lance
from datagen import simple_table

import lance_ops.format as lf
from lance_ops import jobs
from lance_ops.format.txn.idempotency import TXN_APP_ID, TXN_VERSION


def data_files(uri: str) -> set[str]:
    return set(os.listdir(os.path.join(uri, "data")))


def test_dataframe_writer_options_commit_once(spark, uri):
    lf.write_dataset(simple_table(0, 10), uri)
    df = spark.createDataFrame(simple_table(10, 20).to_pandas()).repartition(2)

    def save(version: int) -> None:
        (df.write.format("lance").mode("append").option("txnAppId", "nightly-load")
         .option("txnVersion", version).save(uri))

    save(1)
    files = data_files(uri)
    save(1)  # Spark (or a scheduler) retries the job after an ambiguous failure
    assert lf.dataset(uri).version == 2 and lance.dataset(uri).count_rows() == 30
    assert data_files(uri) == files  # the retry's files were removed
    txn = lance.dataset(uri).read_transaction(2)
    assert txn.transaction_properties[TXN_APP_ID] == "nightly-load"
    save(2)  # the next batch of the same writer
    assert lf.dataset(uri).version == 3 and lf.dataset(uri).count_rows() == 50


def test_append_job_with_the_run_id_commits_once(spark, uri):
    lf.write_dataset(simple_table(0, 10), uri)
    df = spark.createDataFrame(simple_table(10, 5).to_pandas())
    props = {"dagster/run_id": "run-1", TXN_APP_ID: "dagster/run-1/append_events", TXN_VERSION: "0"}
    first = jobs.append(spark, uri, df, transaction_properties=props)
    again = jobs.append(spark, uri, df, transaction_properties=props)
    assert (first.version, first.rows_written) == (2, 5)
    assert (again.version, again.rows_written) == (2, 0)  # the earlier commit, nothing new
    assert lf.dataset(uri).version == 2 and lf.dataset(uri).count_rows() == 15
    # a delete retried with the same key after its first attempt committed: no second version
    d1 = jobs.delete(spark, uri, "id < 3", transaction_properties={TXN_APP_ID: "dagster/run-1/delete", TXN_VERSION: "0"})
    assert d1.version == 3 and lf.dataset(uri).count_rows() == 12
