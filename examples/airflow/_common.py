"""What the example DAGs share: the dataset (a name in ``lance_ops.yaml``, found through
``LANCE_OPS_CONFIG`` as Dagster finds it) and the Lance connection."""

import os
from datetime import datetime, timedelta

DATASET = os.environ.get("LANCE_OPS_DATASET", "events")
CONN_ID = os.environ.get("LANCE_OPS_CONN_ID", "lance_default")
START = datetime(2026, 1, 1)
DEFAULT_ARGS = {"retries": 2, "retry_delay": timedelta(seconds=2), "owner": "lance_ops"}
