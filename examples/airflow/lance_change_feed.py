"""The change feed, one mapped task per new version (dynamic task mapping).

``new_versions`` (a deferrable version sensor) waits for versions beyond the one its previous
run saw; ``write_change_feed`` maps over them, each writing ``(v-1, v]`` to the sink of
lance_ops.yaml's ``change_feed:`` (parquet: the ``change_range=<v-1>-<v>`` directories of the
Dagster change feed asset).  Backfill past intervals with
``airflow dags backfill lance_change_feed --from-date ... --to-date ...``: each run picks up the
versions its predecessor did not.
"""

from typing import Any

from _common import CONN_ID, DATASET, DEFAULT_ARGS, START
from airflow.sdk import DAG, task

from lance_ops.airflow import LanceChangeFeedOperator, LanceVersionSensor, lance_asset

with DAG("lance_change_feed", schedule="@hourly", start_date=START, catchup=False, default_args=DEFAULT_ARGS,
         max_active_runs=1, tags=["lance_ops"], doc_md=__doc__):
    seen = LanceVersionSensor(task_id="new_versions", dataset=DATASET, lance_conn_id=CONN_ID, poll_interval=2,
                              timeout=3600)

    @task
    def versions(found: dict[str, Any]) -> list[int]:
        """The versions to write, one mapped task each."""
        return list(found["new_versions"])

    LanceChangeFeedOperator.partial(
        task_id="write_change_feed", dataset=DATASET, lance_conn_id=CONN_ID,
        outlets=[lance_asset(DATASET, change_feed=True)],  # mapped operators declare outlets in partial
    ).expand(
        end_version=versions(seen.output))
