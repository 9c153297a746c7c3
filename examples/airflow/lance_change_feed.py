"""The change feed, one mapped task per new version (dynamic task mapping).

``new_versions`` (a version sensor) finds the versions this run covers, and
``write_change_feed`` maps over them, each writing ``(v-1, v]`` to the sink of lance_ops.yaml's
``change_feed:`` (parquet: the ``change_range=<v-1>-<v>`` directories of the Dagster change feed
asset).

- Scheduled and backfill runs cover their data interval: the versions committed in
  ``(data_interval_start, data_interval_end]`` by their commit timestamps (none: the mapped task
  is skipped).  Backfill past hours with
  ``airflow backfill create --dag-id lance_change_feed --from-date 2026-11-25T00:00:00+00:00
  --to-date 2026-11-25T23:00:00+00:00`` (the DAG unpaused; the scheduler runs the backfill's
  runs): each run writes the versions of its own hour, so runs never overlap.
- Manual runs (``airflow dags trigger``, ``dag.test()``) wait, deferred, for the versions beyond
  the one the previous run saw.
"""

from datetime import timedelta
from typing import Any

from _common import CONN_ID, DATASET, DEFAULT_ARGS, START
from airflow.sdk import DAG, CronTriggerTimetable, task

from lance_ops.airflow import LanceChangeFeedOperator, LanceVersionSensor, lance_asset

# Runs at the top of each hour; a run's data interval is the hour before it.
HOURLY = CronTriggerTimetable("@hourly", timezone="UTC", interval=timedelta(hours=1))

with DAG("lance_change_feed", schedule=HOURLY, start_date=START, catchup=False, default_args=DEFAULT_ARGS,
         max_active_runs=1, tags=["lance_ops"], doc_md=__doc__):
    seen = LanceVersionSensor(task_id="new_versions", dataset=DATASET, lance_conn_id=CONN_ID, poll_interval=2,
                              timeout=3600, data_interval=True)

    @task
    def versions(found: dict[str, Any]) -> list[int]:
        """The versions to write, one mapped task each."""
        return list(found["new_versions"])

    LanceChangeFeedOperator.partial(
        task_id="write_change_feed", dataset=DATASET, lance_conn_id=CONN_ID,
        outlets=[lance_asset(DATASET, change_feed=True)],  # mapped operators declare outlets in partial
    ).expand(
        end_version=versions(seen.output))
