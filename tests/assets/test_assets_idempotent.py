"""Dagster operations commit idempotently: append, delete and upsert carry ``txnAppId`` =
``dagster/<root run id>/<dataset>/<operation>``, so a retry of the step (or a re-execution of the
run) after an ambiguous failure commits at most once."""

import lance
import pyarrow as pa
from dagster import RetryPolicy, asset, materialize
from dagster_support import NAME, defs_for, run

import lance_ops.format as lf
from lance_ops import jobs as lance_jobs
from lance_ops.assets.configs import AppendConfig, DeleteConfig
from lance_ops.assets.io_manager import LanceIOManager
from lance_ops.format.txn.idempotency import TXN_APP_ID, TXN_VERSION


def test_op_commits_carry_the_run_key_and_a_retry_commits_once(tmp_path, spark, instance):
    settings, defs = defs_for(tmp_path)
    uri = settings.datasets[0].uri
    r1 = run(defs, instance, "append", AppendConfig(rows=500, max_rows_per_file=500))
    props = lance.dataset(uri).read_transaction(1).transaction_properties
    assert props[TXN_APP_ID] == f"dagster/{r1.run_id}/{NAME}/append" and props[TXN_VERSION] == "0"
    rows = lf.dataset(uri).count_rows()
    # the step of run 1 retried after an ambiguous failure: same properties, nothing new
    again = lance_jobs.append(spark, uri, spark.createDataFrame(lf.dataset(uri).to_table().slice(0, 7).to_pandas()),
                              transaction_properties=props)
    assert (again.version, again.rows_written) == (1, 0)
    assert lf.dataset(uri).version == 1 and lf.dataset(uri).count_rows() == rows
    # another run is another write; its delete carries its own run id
    r2 = run(defs, instance, "delete", DeleteConfig(where="id < 10"))
    assert lance.dataset(uri).read_transaction(2).transaction_properties[TXN_APP_ID] == f"dagster/{r2.run_id}/{NAME}/delete"
    assert lf.dataset(uri).count_rows() == rows - 10


FAILED_ATTEMPTS: list[str] = []


class FlakyAfterCommit(LanceIOManager):
    """Fault injection: the first write commits, then the step fails as if the answer was lost."""

    def handle_output(self, context, obj) -> None:
        super().handle_output(context, obj)
        if not FAILED_ATTEMPTS:
            FAILED_ATTEMPTS.append(context.run_id)
            raise ConnectionError("injected: the commit landed but its answer was lost")


def test_io_manager_write_retried_by_dagster_commits_once(tmp_path, instance):
    @asset(metadata={"mode": "append"}, retry_policy=RetryPolicy(max_retries=1))
    def events() -> pa.Table:
        return pa.table({"id": pa.array(range(5), pa.int64())})

    io = FlakyAfterCommit(root_uri=str(tmp_path / "lake"))
    result = materialize([events], resources={"io_manager": io}, instance=instance)
    assert result.success and FAILED_ATTEMPTS == [result.run_id]  # one failed attempt, retried
    uri = str(tmp_path / "lake" / "events.lance")
    assert lance.dataset(uri).version == 1 and lance.dataset(uri).count_rows() == 5
    props = lance.dataset(uri).read_transaction(1).transaction_properties
    assert props[TXN_APP_ID] == f"dagster/{result.run_id}/events"
    # another run is another write
    assert materialize([events], resources={"io_manager": LanceIOManager(root_uri=str(tmp_path / "lake"))},
                       instance=instance).success
    assert lance.dataset(uri).version == 2 and lance.dataset(uri).count_rows() == 10
