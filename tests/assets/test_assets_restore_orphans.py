"""The guarded restore and the orphan sweep through Dagster (``lance_restore``,
``lance_remove_orphan_files`` on a real instance) and ``lance-ops run``: a restore to a version, a
tag and a time is one stamped materialisation and can be undone; a target cleanup removed fails
typed; the sweep's dry run reports files and bytes, the real one removes them."""

import io
import os
import time
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest
from dagster_support import (
    NAME,
    data_version,
    defs_for,
    job_md,
    materializations,
    observations,
    run,
    step_error,
)

import lance_ops.format as lf
from lance_ops.assets.configs import RemoveOrphanFilesConfig, RestoreConfig
from lance_ops.cli import main


def _rows(start: int, n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64()), "kind": ["click"] * n,
                     "amount": pa.array([1.0] * n)})


@pytest.fixture
def world(tmp_path, instance):
    settings, defs = defs_for(tmp_path)
    uri = settings.datasets[0].uri
    lf.write_dataset(_rows(0, 10), uri, enable_stable_row_ids=True)
    lf.write_dataset(_rows(10, 10), uri, mode="append")
    lf.write_dataset(_rows(20, 10), uri, mode="append")
    return {"defs": defs, "instance": instance, "uri": uri, "cfg": str(tmp_path / "lance_ops.yaml")}


def test_restore_by_version_tag_and_time_then_undo(world):
    defs, inst, uri = world["defs"], world["instance"], world["uri"]
    result = run(defs, inst, "restore", RestoreConfig(version=1))
    (m,) = materializations(result)
    out = job_md(m)
    assert data_version(m) == "4" and (out["restored_version"], out["previous_version"]) == (1, 3)
    assert lf.dataset(uri).count_rows() == 10
    props = lf.dataset(uri).read_transaction(4).properties
    assert props["dagster/run_id"] == result.run_id and props["lance_ops/operation"] == "restore"
    assert lf.dataset(uri).tags.list()[out["undo_tag"]]["version"] == 3
    undo = run(defs, inst, "restore", RestoreConfig(tag=out["undo_tag"], tag_current=False))
    assert job_md(materializations(undo)[0])["restored_version"] == 3 and lf.dataset(uri).count_rows() == 30
    when = datetime.now(UTC).isoformat()
    lf.write_dataset(_rows(30, 5), uri, mode="append")  # version 6, after `when`
    back = run(defs, inst, "restore", RestoreConfig(timestamp=when))
    assert job_md(materializations(back)[0])["restored_version"] == 5 and lf.dataset(uri).count_rows() == 30


def test_restore_refuses_a_removed_target_and_a_bad_config(world):
    defs, inst, uri = world["defs"], world["instance"], world["uri"]
    lf.dataset(uri).cleanup_old_versions(timedelta(0), 1, retention_duration_check=False)
    failed = run(defs, inst, "restore", RestoreConfig(version=1), expect_success=False)
    err = step_error(failed)
    assert err.cls_name == "VersionRemovedError" and "removed by cleanup" in err.message
    assert lf.dataset(uri).version == 3 and lf.dataset(uri).tags.list() == {}  # nothing written, no tag
    bad = run(defs, inst, "restore", RestoreConfig(version=2, tag="x"), expect_success=False)
    assert "exactly one target" in step_error(bad).message


def test_orphan_sweep_dry_run_then_sweep(world):
    defs, inst, uri = world["defs"], world["instance"], world["uri"]
    stray = os.path.join(uri, "data", "stray.lance")
    with open(stray, "wb") as f:
        f.write(b"x" * 300)
    old = time.time() - 3 * 3600
    os.utime(stray, (old, old))
    dry = job_md(observations(run(defs, inst, "remove_orphan_files", RemoveOrphanFilesConfig(dry_run=True)))[0])
    assert (dry["files_removed"], dry["bytes_removed"], dry["dry_run"]) == (1, 300, True)
    assert dry["paths"] == ["data/stray.lance"] and os.path.exists(stray)
    done = run(defs, inst, "remove_orphan_files")  # the policy's grace (orphan_min_age_hours: 1 h)
    assert job_md(observations(done)[0])["files_removed"] == 1 and not os.path.exists(stray)
    assert materializations(done) == [] and lf.dataset(uri).count_rows() == 30


def test_cli_runs_restore_and_the_sweep(world, monkeypatch):
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    uri, cfg = world["uri"], world["cfg"]
    buf = io.StringIO()
    assert main(["run", "restore", "--config", cfg, "--dataset", NAME, "--version", "2"], out=buf) == 0
    assert "SUCCESS" in buf.getvalue() and "restored_version=2" in buf.getvalue()
    assert lf.dataset(uri).count_rows() == 20 and lf.dataset(uri).version == 4
    buf = io.StringIO()
    assert main(["run", "remove_orphan_files", "--config", cfg, "--dry-run"], out=buf) == 0
    assert "files_removed=0" in buf.getvalue()
    lf.dataset(uri).cleanup_old_versions(timedelta(0), 1, retention_duration_check=False)
    assert main(["run", "restore", "--config", cfg, "--tag", "nope"], out=io.StringIO()) == 1
    assert main(["run", "restore", "--config", cfg, "--version", "1"], out=io.StringIO()) == 1
    assert lf.dataset(uri).version == 4
