"""Maintain the dataset when its policy asks: the deferrable maintenance sensor waits (in the
triggerer, no worker slot) until compaction or deletion materialisation is due by the thresholds
of lance_ops.yaml's ``policy:``, then ``LanceMaintainOperator`` runs what the policy asks for and
``LanceCleanupOperator`` removes old versions by the same policy."""

from _common import CONN_ID, DATASET, DEFAULT_ARGS, START
from airflow.sdk import DAG

from lance_ops.airflow import LanceCleanupOperator, LanceMaintainOperator, LanceMaintenanceSensor

with DAG("lance_maintenance", schedule="@daily", start_date=START, catchup=False, default_args=DEFAULT_ARGS,
         tags=["lance_ops"], doc_md=__doc__):
    due = LanceMaintenanceSensor(task_id="maintenance_due", dataset=DATASET, lance_conn_id=CONN_ID,
                                 poll_interval=2, timeout=6 * 3600)
    maintain = LanceMaintainOperator(task_id="maintain", dataset=DATASET, lance_conn_id=CONN_ID)
    cleanup = LanceCleanupOperator(task_id="cleanup", dataset=DATASET, lance_conn_id=CONN_ID)
    due >> maintain >> cleanup
