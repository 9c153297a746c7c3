"""Append the dataset's source (``source:`` in lance_ops.yaml) every hour.

The append commits with ``txnAppId = airflow/<dag_id>/<run_id>/append/-1``: a retried or cleared
task never appends twice.  Its asset event (the dataset's URI) carries version, row_count and
operation, and schedules ``lance_change_feed``'s consumers.
"""

from _common import CONN_ID, DATASET, DEFAULT_ARGS, START
from airflow.sdk import DAG

from lance_ops.airflow import LanceAppendOperator

with DAG("lance_append", schedule="@hourly", start_date=START, catchup=False, default_args=DEFAULT_ARGS,
         tags=["lance_ops"], doc_md=__doc__):
    LanceAppendOperator(task_id="append", dataset=DATASET, lance_conn_id=CONN_ID)
