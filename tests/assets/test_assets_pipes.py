"""Spark on a standalone cluster through Dagster Pipes: the dataset operations run as spark-submit
applications (a master and two 1-core workers on 127.0.0.1, started by the ``cluster`` fixture
of tests/jobs/test_cluster.py), and report logs, results and versions back through dagster-pipes.
"""

import json
import os
import sys
from pathlib import Path

import pyspark
import pytest
from dagster import AssetKey
from dagster_support import NAME, data_version, failures, job_md, materializations, md, run, step_error

import lance_ops.format as lf
from lance_ops.assets.configs import AppendConfig, CompactConfig, _OptionalDelete
from lance_ops.assets.definitions import build_definitions
from lance_ops.assets.resources import PipesSparkSubmitResource
from lance_ops.orchestration.settings import parse_settings

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "jobs"))
from test_cluster import cluster  # noqa: E402,F401  (the standalone-cluster fixture of tests/jobs)

SPARK_SUBMIT = str(Path(sys.executable).parent / "spark-submit")


def run_log(instance, result) -> str:
    """Every user log line of the run (what the run's log view shows)."""
    return "\n".join(e.user_message for e in instance.all_logs(result.run_id) if e.user_message)


@pytest.fixture
def pipes_defs(cluster, tmp_path):  # noqa: F811
    url, env = cluster
    doc = {
        "spark": {"submit": {
            "spark_submit": SPARK_SUBMIT if os.path.exists(SPARK_SUBMIT) else
            os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-submit"),
            "master": url,
            "conf": {"spark.executor.memory": "512m", "spark.cores.max": "2", "spark.driver.memory": "512m"},
            "env": {"SPARK_LOCAL_IP": "127.0.0.1", "SPARK_HOME": env["SPARK_HOME"]},
        }},
        "datasets": {NAME: {"uri": str(tmp_path / "events"), "source": {"format": "generate", "rows": 3000},
                            "policy": {"target_rows_per_fragment": 10_000, "min_small_fragments": 2}}},
    }
    return build_definitions(parse_settings(json.dumps(doc), base_dir=tmp_path))


def test_operations_run_as_spark_submit_through_pipes(pipes_defs, instance, tmp_path):
    defs = pipes_defs
    assert isinstance(defs.resources["spark"], PipesSparkSubmitResource)
    uri = str(tmp_path / "events")
    r1 = run(defs, instance, "append", AppendConfig(rows=3000, max_rows_per_file=500))
    (m1,) = materializations(r1)
    assert data_version(m1) == "1" and md(m1)["dagster/row_count"] == 3000
    job = job_md(m1)
    assert job["rows_written"] == 3000 and job["executors"] == 2  # two workers ran the tasks
    assert job["pipes_data_version"] == "1"  # the version the driver reported through dagster-pipes
    assert md(m1)["committed_by_run"] == r1.run_id  # the driver stamped the commit with the Dagster run id
    logs = run_log(instance, r1)
    assert "spark-submit driver: append on" in logs and "append result:" in logs  # driver logs came back
    r2 = run(defs, instance, "compact", CompactConfig())  # the policy's 10k target
    mats = materializations(r2)
    assert [data_version(m) for m in mats] == ["2", "3"] and md(mats[-1])["fragments"] == 1
    assert job_md(mats[-1])["fragments_removed"] == 6 and job_md(mats[-1])["executors"] == 2
    assert md(mats[-1])["lance_ops/rewrite"]["fingerprint_before"] == md(mats[-1])["lance_ops/rewrite"]["fingerprint_after"]
    ds = lf.dataset(uri)
    assert ds.version == 3 and ds.count_rows() == 3000 and len(ds.get_fragments()) == 1
    assert sorted(ds.to_table(columns=["_rowid"])["_rowid"].to_pylist()) == list(range(3000))
    # a typed error on the driver comes back typed, and nothing is committed
    bad = run(defs, instance, "delete", _OptionalDelete(where="idd > 5"), expect_success=False)
    err = step_error(bad)
    assert err.cls_name == "DatasetConfigError", failures(bad)
    assert "field `delete.where`" in err.message and "['id', 'kind', 'amount']" in err.message
    assert lf.dataset(uri).version == 3
    assert instance.get_latest_materialization_event(AssetKey([NAME])).asset_materialization.tags[
        "dagster/data_version"] == "3"


def test_the_driver_script_needs_dagster_pipes_but_not_dagster():
    import subprocess

    code = ("import sys, lance_ops.assets.spark_pipes_main, lance_ops.orchestration.tasks; "
            "bad = [m for m in sys.modules if m == 'dagster' or m.startswith('dagster.')]; "
            "assert not bad, bad[:5]; assert 'dagster_pipes' in sys.modules")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
