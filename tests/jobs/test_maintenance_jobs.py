"""jobs.cleanup_old_versions / remove_orphan_files / restore: driver-only jobs the orchestrators
call like the others (no executors needed)."""

import os
import time
from datetime import timedelta

import pytest
from datagen import simple_table

import lance_ops.format as lf
from lance_ops import jobs


@pytest.fixture
def uri(tmp_path):
    uri = str(tmp_path / "ds")
    lf.write_dataset(simple_table(0, 10), uri)  # v1
    lf.write_dataset(simple_table(100, 3), uri, mode="overwrite")  # v2
    return uri


def test_restore_job_stamps_like_other_jobs(uri):
    res = jobs.restore(None, uri, 1, transaction_properties={"dagster/run_id": "abc"})
    assert (res.previous_version, res.restored_version, res.version) == (2, 1, 3)
    props = lf.dataset(uri).read_transaction(3).properties
    assert props["lance_ops.writer"] == "spark" and props["dagster/run_id"] == "abc"
    assert props["lance_ops.restore.undo_tag"] == res.undo_tag == res.to_dict()["undo_tag"]


def test_cleanup_and_sweep_jobs_report_leases_files_and_bytes(uri):
    held = lf.acquire_lease(uri, 1, ttl=60)
    kept = jobs.cleanup_old_versions(None, uri, older_than=timedelta(0), retention_duration_check=False)
    assert kept.mode == "lite" and kept.old_versions == 0
    assert kept.protected_by_leases == (held.id,) and kept.leased_versions == (1,)
    lf.release_lease(uri, held.id)
    done = jobs.cleanup_old_versions(None, uri, older_than=timedelta(0), retention_duration_check=False)
    assert done.old_versions == 1 and done.files_removed >= 2 and done.bytes_removed > 0
    orphan = os.path.join(uri, "data", "left-by-a-killed-writer.lance")
    with open(orphan, "wb") as f:
        f.write(b"z" * 123)
    old = time.time() - 8 * 86400
    os.utime(orphan, (old, old))
    dry = jobs.remove_orphan_files(None, uri, dry_run=True)
    assert (dry.mode, dry.files_removed, dry.bytes_removed) == ("orphans", 1, 123) and os.path.exists(orphan)
    assert jobs.remove_orphan_files(None, uri).removed_paths == ("data/left-by-a-killed-writer.lance",)
    assert not os.path.exists(orphan)
