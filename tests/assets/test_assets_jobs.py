"""Every dataset job (``lance_<operation>`` on the dataset's asset), run twice through Dagster on a
real instance, checked against lance_ops.format.

The tests share one dataset and run in file order (a lifecycle: create, append, delete,
upsert, materialise deletions, compact, change feed, observe, cleanup).  Each runs its job
twice and checks what the second run did (nothing, or the same again).
"""

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from dagster_support import (
    NAME,
    data_version,
    defs_for,
    job_md,
    materializations,
    md,
    observations,
    output_metadata,
    run,
)

import lance_ops.format as lf
from lance_ops.assets.configs import (
    AppendConfig,
    ChangeFeedConfig,
    CleanupConfig,
    CompactConfig,
    DeleteConfig,
    MaterializeDeletionsConfig,
    UpsertConfig,
)
from lance_ops.assets.stats import fingerprint

META = ["_rowid", "_row_created_at_version", "_row_last_updated_at_version"]


@pytest.fixture(scope="module")
def world(tmp_path_factory, spark, module_instance):
    root = tmp_path_factory.mktemp("jobs")
    settings, defs = defs_for(root)
    return {"root": root, "d": settings.datasets[0], "defs": defs, "instance": module_instance}


def latest(world):
    return lf.dataset(world["d"].uri)


def live_ids(world) -> np.ndarray:
    return latest(world).to_table(columns=["id"])["id"].to_numpy()


def test_append_twice_creates_then_appends(world):
    defs, inst = world["defs"], world["instance"]
    r1 = run(defs, inst, "append", AppendConfig(rows=3000, max_rows_per_file=1500))
    r2 = run(defs, inst, "append", AppendConfig(rows=3000, max_rows_per_file=1500))
    (m1,), (m2,) = materializations(r1), materializations(r2)
    assert (data_version(m1), data_version(m2)) == ("1", "2")
    assert r1.dagster_run.tags["lance_ops/operation"] == "append" and r1.dagster_run.job_name == "lance_append"
    ds = latest(world)
    assert ds.version == 2 and ds.has_stable_row_ids
    assert md(m1)["dagster/row_count"] == 3000 and md(m2)["dagster/row_count"] == 6000 == ds.count_rows()
    assert md(m2)["fragments"] == len(ds.get_fragments()) == 4  # 2 Spark partitions of 1500 rows per append
    assert md(m2)["small_fragments"] == 4 and md(m2)["deleted_rows"] == 0 and md(m2)["deleted_ratio"] == 0.0
    assert md(m1)["last_operation"] == "overwrite" and md(m2)["last_operation"] == "append"
    assert md(m2)["file_version"] == "2.2" and md(m2)["size_bytes"] > 0  # "stable", the default
    assert md(m2)["dagster/uri"] == world["d"].uri and md(m2)["dagster/table_name"] == NAME
    assert md(m2)["lance/version"] == 2
    assert [c.name for c in md(m2)["dagster/column_schema"].columns] == ["id", "kind", "amount"]
    assert [c.type for c in md(m2)["dagster/column_schema"].columns] == ["int64", "string", "double"]
    assert abs(md(m2)["committed_at"] - ds.manifest.timestamp_ns / 1e9) < 1e-3  # a timestamp, not a float
    assert type(m2.metadata["committed_at"]).__name__ == "TimestampMetadataValue"
    # the run id is stamped into the Lance commit itself, so writers outside Dagster can trace it
    assert md(m2)["committed_by_run"] == r2.run_id and "dagster_run_id" not in md(m2)
    job = job_md(m2)
    assert job["rows_written"] == 3000 and job["fragments_added"] == 2 and job["operation"] == "append"
    # job metrics stay in one JSON entry (not plotted): no sparse per-metric plots on the asset
    assert not {"rows_written", "seconds", "tasks_planned", "fragments_added"} & set(md(m2))
    # ids continue from the dataset's next row id: no id repeats, row ids dense
    t = ds.to_table(columns=["id", "_rowid", "_row_created_at_version"])
    assert sorted(t["id"].to_pylist()) == list(range(6000))
    assert sorted(t["_rowid"].to_pylist()) == list(range(6000))
    assert pc.sum(pc.equal(t["_row_created_at_version"], 2)).as_py() == 3000


def test_delete_twice_second_is_a_no_op(world):
    defs, inst = world["defs"], world["instance"]
    assert int((live_ids(world) % 4 == 0).sum()) == 1500
    r1 = run(defs, inst, "delete", DeleteConfig(where="id % 4 = 0"))
    r2 = run(defs, inst, "delete", DeleteConfig(where="id % 4 = 0"))
    (m1,) = materializations(r1)
    assert data_version(m1) == "3" and job_md(m1)["num_deleted_rows"] == 1500
    assert md(m1)["dagster/row_count"] == 4500 and md(m1)["deleted_rows"] == 1500 and md(m1)["deleted_ratio"] == 0.25
    # nothing matched the second time: no new version, an observation of version 3
    assert materializations(r2) == []
    (o2,) = observations(r2)
    assert data_version(o2) == "3" and job_md(o2)["num_deleted_rows"] == 0 and job_md(o2)["version"] is None
    ds = latest(world)
    assert ds.version == 3 and ds.count_rows() == 4500 and int((live_ids(world) % 4 == 0).sum()) == 0


def test_upsert_twice_updates_then_updates_the_same_rows(world):
    defs, inst = world["defs"], world["instance"]
    cfg = UpsertConfig(start_id=5000, rows=2000, tag="upserted")  # 5000..5999 exist (750 live), 6000.. are new
    r1 = run(defs, inst, "upsert", cfg)
    rows_after_first = latest(world).count_rows()
    r2 = run(defs, inst, "upsert", cfg)
    (m1,), (m2,) = materializations(r1), materializations(r2)
    assert (job_md(m1)["num_updated_rows"], job_md(m1)["num_inserted_rows"]) == (750, 1250)
    assert (job_md(m2)["num_updated_rows"], job_md(m2)["num_inserted_rows"]) == (2000, 0)
    assert md(m1)["last_operation"] == md(m2)["last_operation"] == "update"
    ds = latest(world)
    assert rows_after_first == ds.count_rows() == 4500 + 1250
    t = ds.to_table(columns=["id", "kind", "_row_last_updated_at_version"], filter=pc.field("kind") == "upserted")
    assert sorted(t["id"].to_pylist()) == list(range(5000, 7000))
    assert set(t["_row_last_updated_at_version"].to_pylist()) == {ds.version}


def test_materialize_deletions_twice(world):
    defs, inst = world["defs"], world["instance"]
    before = latest(world)
    with_deletions = [f.fragment_id for f in before.get_fragments() if f.metadata.num_deleted_rows]
    assert with_deletions
    r1 = run(defs, inst, "materialize_deletions", MaterializeDeletionsConfig(threshold=0.1))
    r2 = run(defs, inst, "materialize_deletions", MaterializeDeletionsConfig(threshold=0.1))
    mats = materializations(r1)
    assert [md(m)["last_operation"] for m in mats] == ["reserve_fragments", "rewrite"]
    assert [int(data_version(m)) for m in mats] == [before.version + 1, before.version + 2]
    last = md(mats[-1])
    evidence = last["lance_ops/rewrite"]
    assert last["deleted_rows"] == 0 and evidence["version"] == before.version + 2
    assert evidence["fingerprint_before"] == evidence["fingerprint_after"]
    assert evidence["rows_before"] == last["dagster/row_count"] == before.count_rows()
    assert materializations(r2) == [] and job_md(observations(r2)[0])["version"] is None
    after = latest(world)
    assert all(f.deletion_file is None for f in after.get_fragments())
    assert fingerprint(after) == fingerprint(before)


def test_compact_dry_run_then_twice(world):
    defs, inst = world["defs"], world["instance"]
    before = latest(world)
    n_before = len(before.get_fragments())
    dry = run(defs, inst, "compact", CompactConfig(target_rows_per_fragment=10_000, dry_run=True))
    assert materializations(dry) == []
    (obs,) = observations(dry)
    assert data_version(obs) == str(before.version) and job_md(obs)["fragments_removed"] == n_before
    assert obs.tags["lance_ops/operation"] == "compact.dry_run"
    assert latest(world).version == before.version
    r1 = run(defs, inst, "compact", CompactConfig(target_rows_per_fragment=10_000))
    r2 = run(defs, inst, "compact", CompactConfig(target_rows_per_fragment=10_000))
    mats = materializations(r1)
    assert [md(m)["last_operation"] for m in mats] == ["reserve_fragments", "rewrite"]
    last = md(mats[-1])
    assert last["fragments"] == 1 and job_md(mats[-1])["fragments_removed"] == n_before and last["small_fragments"] == 1
    evidence = last["lance_ops/rewrite"]
    assert evidence["fingerprint_before"] == evidence["fingerprint_after"]
    assert evidence["rows_moved"] == before.count_rows()
    assert materializations(r2) == [] and job_md(observations(r2)[0])["tasks_planned"] == 0
    after = latest(world)
    assert len(after.get_fragments()) == 1 and fingerprint(after) == fingerprint(before)


def test_write_change_feed_twice_is_idempotent(world, tmp_path):
    defs, inst = world["defs"], world["instance"]
    end = latest(world).version
    sink = str(tmp_path / "feed")
    cfg = ChangeFeedConfig(dataset=NAME, begin_version=2, end_version=end, sink_uri=sink)
    r1 = run(defs, inst, "write_change_feed", cfg)
    first = pq.read_table(output_metadata(r1)["location"]).sort_by([("_rowid", "ascending"), ("_change_type", "ascending")])
    r2 = run(defs, inst, "write_change_feed", cfg)
    second = pq.read_table(output_metadata(r2)["location"]).sort_by([("_rowid", "ascending"), ("_change_type", "ascending")])
    assert output_metadata(r1)["rows_written"] == output_metadata(r2)["rows_written"] == first.num_rows
    assert first.equals(second)
    oracle = latest(world).change_feed(2, end)
    counts = {r["values"]: r["counts"] for r in pc.value_counts(first["_change_type"]).to_pylist()}
    want = {r["values"]: r["counts"] for r in pc.value_counts(oracle["_change_type"]).to_pylist()}
    assert counts == want and want["delete"] == 1500  # re-inserted ids get new row ids
    assert sorted(first["_rowid"].to_pylist()) == sorted(oracle["_rowid"].to_pylist())


def test_observe_twice_and_a_writer_outside_dagster(world):
    d, defs, inst = world["d"], world["defs"], world["instance"]
    v = latest(world).version
    r1, r2 = run(defs, inst, "observe"), run(defs, inst, "observe")
    (o1,), (o2,) = observations(r1), observations(r2)
    assert data_version(o1) == data_version(o2) == str(v) and md(o1)["dagster/row_count"] == md(o2)["dagster/row_count"]
    lf.write_dataset(latest(world).to_table(columns=["id", "kind", "amount"], limit=10), d.uri, mode="append")
    (o3,) = observations(run(defs, inst, "observe"))
    assert data_version(o3) == str(v + 1) and md(o3)["dagster/row_count"] == md(o1)["dagster/row_count"] + 10
    assert md(o3)["last_operation"] == "append" and md(o3)["committed_by_run"] == ""
    from dagster import AssetKey

    assert inst.get_latest_data_version_record(AssetKey([NAME])) is not None


def test_cleanup_twice(world):
    defs, inst = world["defs"], world["instance"]
    before = latest(world)
    n = len(before.versions())
    assert n >= 10
    cfg = CleanupConfig(older_than_days=0, retain_versions=3, retention_duration_check=False)
    r1 = run(defs, inst, "cleanup_old_versions", cfg)
    r2 = run(defs, inst, "cleanup_old_versions", cfg)
    (o1,), (o2,) = observations(r1), observations(r2)
    # versions the earlier Spark jobs read are still under their reader leases (lease_ttl after the
    # last task): cleanup keeps exactly those and reports them
    leased = set(job_md(o1)["leased_versions"])
    kept = sorted(leased | set(range(before.version - 2, before.version + 1)))
    assert leased <= {v["version"] for v in before.versions()}
    assert job_md(o1)["old_versions"] == n - len(kept)  # their data files may still be a leased version's
    assert job_md(o1)["bytes_removed"] > 0
    assert job_md(o2)["old_versions"] == 0 and job_md(o2)["bytes_removed"] == 0
    after = latest(world)
    assert [v["version"] for v in after.versions()] == kept
    assert after.to_table().equals(before.to_table())
    assert np.array_equal(np.sort(after.to_table(columns=META)["_rowid"].to_numpy()),
                          np.sort(before.to_table(columns=META)["_rowid"].to_numpy()))
