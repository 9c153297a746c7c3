"""Dagster ops commit idempotently: the commit carries ``txnAppId`` = ``dagster/<root run id>/<op>``,
so the op's retry (or a re-execution of the run) after an ambiguous failure commits at most once."""

import lance
from dagster_support import NAME, defs_for, run

import lance_ops.format as lf
from lance_ops import jobs as lance_jobs
from lance_ops.assets.configs import AppendConfig, DeleteConfig
from lance_ops.format.idempotency import TXN_APP_ID, TXN_VERSION


def test_op_commits_carry_the_run_key_and_a_retry_commits_once(tmp_path, spark, instance):
    settings, defs = defs_for(tmp_path)
    uri = settings.datasets[0].uri
    r1 = run(defs, instance, "append", AppendConfig(rows=500, max_rows_per_file=500))
    props = lance.dataset(uri).read_transaction(1).transaction_properties
    assert props[TXN_APP_ID] == f"dagster/{r1.run_id}/append_{NAME}" and props[TXN_VERSION] == "0"
    rows = lf.dataset(uri).count_rows()
    # the op of run 1 retried after an ambiguous failure: same properties, nothing new
    again = lance_jobs.append(spark, uri, spark.createDataFrame(lf.dataset(uri).to_table().slice(0, 7).to_pandas()),
                              transaction_properties=props)
    assert (again.version, again.rows_written) == (1, 0)
    assert lf.dataset(uri).version == 1 and lf.dataset(uri).count_rows() == rows
    # another run is another write; its delete carries its own run id
    r2 = run(defs, instance, "delete", DeleteConfig(where="id < 10"))
    assert lance.dataset(uri).read_transaction(2).transaction_properties[TXN_APP_ID] == f"dagster/{r2.run_id}/delete_{NAME}"
    assert lf.dataset(uri).count_rows() == rows - 10
