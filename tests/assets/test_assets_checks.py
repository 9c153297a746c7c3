"""Asset checks pass on a healthy dataset and fail on deliberately corrupted copies of it.

The healthy dataset goes through Dagster (Spark jobs): create, delete, materialise deletions,
append, compact, and the change feed of the maintenance versions.  Each corruption is made on
a copy (same versions, so the Dagster events of the healthy runs still describe it).
"""

import shutil

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from dagster_support import NAME, checks, defs_for, run

import lance_ops.format as lf
from lance_ops.assets.change_feed import partition_path
from lance_ops.assets.configs import AppendConfig, CompactConfig, DeleteConfig, MaterializeDeletionsConfig
from lance_ops.assets.stats import OPERATION_PROPERTY, transaction_of
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.table.deletion import deletion_file_path


@pytest.fixture(scope="module")
def healthy(tmp_path_factory, spark, module_instance):
    root = tmp_path_factory.mktemp("checks") / "healthy"
    settings, defs = defs_for(root)
    inst = module_instance
    run(defs, inst, "append", AppendConfig(rows=4000, max_rows_per_file=2000))   # v1: 2 fragments
    run(defs, inst, "delete", DeleteConfig(where="id % 3 = 0"))                   # v2
    run(defs, inst, "materialize_deletions", MaterializeDeletionsConfig())        # v3, v4
    run(defs, inst, "append", AppendConfig(rows=1000))                            # v5
    run(defs, inst, "compact", CompactConfig(target_rows_per_fragment=10_000))    # v6, v7
    latest = lf.dataset(settings.datasets[0].uri).version
    assert latest == 7
    inst.add_dynamic_partitions(f"{NAME}_versions", [str(v) for v in range(1, latest + 1)])
    run(defs, inst, "change_feed",
        tags={"dagster/asset_partition_range_start": "6", "dagster/asset_partition_range_end": "7"})
    return {"root": root, "defs": defs, "d": settings.datasets[0], "instance": inst}


def copy_of(healthy, tmp_path):
    dst = tmp_path / "copy"
    shutil.copytree(healthy["root"], dst, ignore=shutil.ignore_patterns("lance_ops.yaml"))
    settings, defs = defs_for(dst)
    return settings.datasets[0], defs


def check_results(defs, instance):
    result = run(defs, instance, "checks")
    found = checks(result)
    assert set(found) == {"row_ids_unique", "compaction_preserves_rows", "deletions_materialized",
                          "maintenance_versions_empty", "index_coverage"}  # what lance_checks_after_maintenance requests
    return found


def test_checks_pass_on_the_healthy_dataset(healthy):
    found = check_results(healthy["defs"], healthy["instance"])
    assert all(c.passed for c in found.values())
    md = {name: {k: v.value for k, v in c.metadata.items()} for name, c in found.items()}
    assert md["row_ids_unique"]["rows"] == lf.dataset(healthy["d"].uri).count_rows() == 3666
    assert md["row_ids_unique"]["duplicate_row_ids"] == 0
    assert md["compaction_preserves_rows"]["verified"] is True
    assert md["compaction_preserves_rows"]["version"] == 7 and md["compaction_preserves_rows"]["rows_after"] == 3666
    assert md["compaction_preserves_rows"]["fingerprint_now"] == md["compaction_preserves_rows"]["fingerprint_before"]
    assert md["deletions_materialized"]["versions_checked"] == [4]
    assert md["maintenance_versions_empty"]["versions"] == ["6", "7"]


def test_duplicate_row_ids_fail_row_ids_unique(healthy, tmp_path):
    d, defs = copy_of(healthy, tmp_path)
    ds = lf.dataset(d.uri)
    victim = ds.get_fragments()[0].metadata
    rows = ds.to_table(columns=["id", "kind", "amount"], limit=500)
    (frag,) = lf.write_fragments(rows, d.uri)
    stolen = frag.with_changes(row_ids=_first_row_ids(victim, 500))
    lf.commit(d.uri, lf.Append([stolen]), read_version=ds.version)  # 500 row ids now appear twice
    found = check_results(defs, healthy["instance"])
    assert not found["row_ids_unique"].passed
    assert found["row_ids_unique"].metadata["duplicate_row_ids"].value == 500
    assert found["compaction_preserves_rows"].passed and found["deletions_materialized"].passed


def test_changed_rows_after_compaction_fail_compaction_preserves_rows(healthy, tmp_path):
    d, defs = copy_of(healthy, tmp_path)
    ds = lf.dataset(d.uri)
    (frag,) = ds.get_fragments()  # the compaction's only new fragment
    (data_file,) = frag.metadata.files
    table = ds.to_table(columns=["id", "kind", "amount"])
    altered = table.set_column(2, "amount", pc.add(table["amount"], 1.0))  # same width: same file layout
    (tmp_frag,) = lf.write_fragments(altered, str(tmp_path / "scratch"), schema=ds.lance_schema,
                                     max_rows_per_file=1_000_000)
    src = tmp_path / "scratch" / "data" / tmp_frag.files[0].path
    dst = tmp_path / "copy" / "events" / "data" / data_file.path
    assert src.stat().st_size == dst.stat().st_size
    shutil.copyfile(src, dst)  # silent corruption: same rows and ids, different content
    assert lf.dataset(d.uri).to_table(columns=["amount"])["amount"].equals(altered["amount"])
    found = check_results(defs, healthy["instance"])
    c = found["compaction_preserves_rows"]
    assert not c.passed
    assert c.metadata["fingerprint_now"].value != c.metadata["fingerprint_before"].value
    assert c.metadata["rows_after"].value == c.metadata["rows_before"].value == 3666
    assert found["row_ids_unique"].passed


def test_rewrite_leaving_deletion_files_fails_deletions_materialized(healthy, tmp_path):
    d, defs = copy_of(healthy, tmp_path)
    ds = lf.dataset(d.uri)
    ds.delete(pc.field("id") < 100)  # the fragment gets a deletion file
    (old,) = [f.metadata for f in ds.get_fragments() if f.metadata.deletion_file is not None]
    reserved = lf.commit(d.uri, lf.ReserveFragments(1), read_version=ds.version)
    new_id = reserved.manifest.max_fragment_id
    store = ObjectStore(d.uri)
    src = deletion_file_path(old.id, old.deletion_file.to_proto())
    store.put(deletion_file_path(new_id, old.deletion_file.to_proto()), store.read(src))  # keep it readable
    bad = lf.commit(d.uri, lf.Rewrite([lf.RewriteGroup([old], [old.with_changes(id=new_id)])]),
                    read_version=reserved.version,
                    transaction_properties={OPERATION_PROPERTY: "materialize_deletions"})
    assert transaction_of(store, bad.version).operation.name == "rewrite"
    found = check_results(defs, healthy["instance"])
    c = found["deletions_materialized"]
    assert not c.passed
    assert c.metadata["versions_checked"].value == [4, bad.version]
    (problem,) = c.metadata["problems"].value
    assert f"version {bad.version}: rewritten fragment {new_id} has a deletion file" in problem
    assert found["row_ids_unique"].passed


def test_changes_in_a_maintenance_partition_fail_maintenance_versions_empty(healthy, tmp_path):
    d, defs = copy_of(healthy, tmp_path)
    part = partition_path(d, 7)
    good = pq.read_table(part)
    assert good.num_rows == 0
    row = pa.table({name: pa.array([None], type=field.type) for name, field in zip(good.schema.names, good.schema, strict=True)})
    row = row.set_column(good.schema.get_field_index("_change_type"), "_change_type", pa.array(["insert"]))
    pq.write_table(row, f"{part}/part-injected.parquet")
    found = check_results(defs, healthy["instance"])
    c = found["maintenance_versions_empty"]
    assert not c.passed and c.metadata["non_empty"].value == {"7": 1}
    assert found["row_ids_unique"].passed


def _first_row_ids(frag, n):
    from lance_ops.format.table.rowids import decode_row_ids, encode_row_ids

    ids = decode_row_ids(frag.row_ids, expected_len=frag.physical_rows)
    return encode_row_ids(np.asarray(ids[:n], dtype=np.uint64))


def run_checks(defs, instance, *keys):
    from dagster import AssetCheckKey, AssetKey

    selection = {AssetCheckKey(AssetKey([a]), c) for a, c in keys}
    job = defs.resolve_job_def("lance_checks").get_subset(asset_check_selection=selection)
    result = job.execute_in_process(instance=instance, raise_on_error=False)
    assert result.success
    return checks(result)


def test_freshness_checks_appended_recently_and_change_feed_lag(tmp_path, instance):
    from dagster import AssetCheckSeverity, AutomationCondition

    uri = str(tmp_path / "fresh" / "events")
    lf.write_dataset(pa.table({"id": pa.array(range(10), pa.int64())}), uri, enable_stable_row_ids=True)
    lf.dataset(uri).delete(pc.field("id") < 2)  # v2: not an append
    _, loose = defs_for(tmp_path / "fresh", max_hours_between_appends=1, change_feed_max_lag_versions=1)
    _, strict = defs_for(tmp_path / "fresh", max_hours_between_appends=1e-6)  # 3.6 ms
    lag_key = (f"{NAME}_change_feed", "change_feed_lag")
    ok = run_checks(loose, instance, (NAME, "appended_recently"), lag_key)
    fresh = ok["appended_recently"]
    assert fresh.passed and fresh.severity == AssetCheckSeverity.WARN
    assert fresh.metadata["last_append_version"].value == 1 and fresh.metadata["max_hours"].value == 1
    assert fresh.metadata["hours_since_append"].value < 1
    lag = ok["change_feed_lag"]
    assert not lag.passed and lag.metadata["versions_behind"].value == 2  # nothing materialised, 2 versions
    assert "2 versions behind (dataset at 2, change feed at 0); allowed 1" in lag.description
    stale = run_checks(strict, instance, (NAME, "appended_recently"))["appended_recently"]
    assert not stale.passed and stale.metadata["last_append_version"].value == 1
    instance.add_dynamic_partitions(f"{NAME}_versions", ["1"])
    run(loose, instance, "change_feed", tags={"dagster/asset_partition_range_start": "1",
                                               "dagster/asset_partition_range_end": "1"})
    lag = run_checks(loose, instance, lag_key)["change_feed_lag"]
    assert lag.passed and lag.metadata["versions_behind"].value == 1 and lag.metadata["newest_partition"].value == 1
    spec = loose.get_repository_def().asset_graph
    conditions = {k.name: spec.get(k).automation_condition for k in spec.asset_check_keys}
    every_15_minutes = AutomationCondition.cron_tick_passed("*/15 * * * *", "UTC").since_last_handled()
    assert conditions["appended_recently"] == conditions["change_feed_lag"] == every_15_minutes
    assert conditions["row_ids_unique"] is None  # run after maintenance, not on a cron
