"""Index coverage in Dagster: each version's metadata, the compaction's output, the
``index_coverage`` check (warns below ``policy.min_index_coverage``, names the
``lance_optimize_indices`` job), the job itself, the sensor that requests it and
``lance_maintain`` running it after a compaction."""

import io

import lance
import pytest
from dagster import AssetCheckSeverity
from dagster_support import (
    NAME,
    checks,
    data_version,
    defs_for,
    job_md,
    materializations,
    md,
    run,
    settings_for,
)
from datagen import simple_table
from test_assets_sensors import c, requests, tick

import lance_ops.format as lf
from lance_ops.assets.configs import AppendConfig, CompactConfig, DeleteConfig, OptimizeIndicesConfig
from lance_ops.cli import main
from lance_ops.orchestration.maintain import decide_maintenance


@pytest.fixture(scope="module")
def indexed(tmp_path_factory, spark, module_instance):
    """Generated data appended through Dagster (3 fragments), then pylance builds a BTREE on
    ``id`` and a BITMAP on ``kind``, and 1 row in 3 is deleted through Dagster."""
    root = tmp_path_factory.mktemp("idx")
    settings, defs = defs_for(root, min_index_coverage=0.9)
    inst = module_instance
    run(defs, inst, "append", AppendConfig(rows=3000, max_rows_per_file=1000))
    uri = settings.datasets[0].uri
    ds = lance.dataset(uri)
    ds.create_scalar_index("id", "BTREE")
    ds.create_scalar_index("kind", "BITMAP")
    run(defs, inst, "delete", DeleteConfig(where="id % 3 = 0"))
    return {"defs": defs, "instance": inst, "uri": uri}


def test_compaction_reports_remapped_indices_and_keeps_coverage(indexed):
    defs, inst, uri = indexed["defs"], indexed["instance"], indexed["uri"]
    result = run(defs, inst, "compact", CompactConfig(target_rows_per_fragment=10_000))
    out = job_md(materializations(result)[-1])
    assert lf.dataset(uri).has_stable_row_ids  # (the change feed needs them): only BTREE holds addresses
    assert out["indices_remapped"] == ["id_idx"] and out["fragments_skipped"] == []
    last = md(materializations(result)[-1])
    assert last["indices"] == 2 and last["min_index_coverage"] == 1.0
    assert "| id_idx | BTree | id | 2000 | 0 | 100.0% |" in last["index_coverage"]
    ds = lance.dataset(uri)
    assert {d.name: d.num_rows_indexed for d in ds.describe_indices()} == {"id_idx": 2000, "kind_idx": 2000}
    assert ds.to_table(filter="id = 1").num_rows == 1 and "ScalarIndexQuery" in ds.scanner(filter="id = 1").explain_plan()
    (check,) = [c for name, c in checks(run(defs, inst, "checks")).items() if name == "index_coverage"]
    assert check.passed


def test_index_coverage_check_warns_until_the_optimize_indices_job_runs(indexed):
    defs, inst, uri = indexed["defs"], indexed["instance"], indexed["uri"]
    result = run(defs, inst, "append", AppendConfig(rows=500))  # 500 new rows no index covers (2000 indexed)
    assert md(materializations(result)[-1])["index_coverage/id_idx"] == 0.8  # each index's coverage, plotted
    found = checks(run(defs, inst, "checks"))["index_coverage"]
    assert not found.passed and found.severity == AssetCheckSeverity.WARN
    meta = {k: v.value for k, v in found.metadata.items()}
    assert sorted(meta["below_threshold"]) == ["id_idx", "kind_idx"]
    assert meta["remedy"].startswith("run the lance_optimize_indices job (lance-ops run optimize_indices)")
    assert "pylance" not in meta["remedy"] and "lance_optimize_indices" in found.description
    assert {r["name"]: r["coverage"] for r in meta["indices"]} == {"id_idx": 0.8, "kind_idx": 0.8}
    result = run(defs, inst, "optimize_indices", OptimizeIndicesConfig(num_indices_to_merge=0))
    (mat,) = materializations(result)
    out, meta = job_md(mat), md(mat)
    assert out["indices"] == ["id_idx", "kind_idx"] and out["segments_added"] == 2 and out["rows_indexed"] == 1000
    assert meta["index_coverage/id_idx"] == meta["index_coverage/kind_idx"] == meta["min_index_coverage"] == 1.0
    assert checks(run(defs, inst, "checks"))["index_coverage"].passed
    ds = lance.dataset(uri)
    assert {n: ds.index_statistics(n)["num_unindexed_rows"] for n in ("id_idx", "kind_idx")} == {"id_idx": 0, "kind_idx": 0}
    q = "id >= 2990"  # the appended rows' ids follow the dataset's
    assert "ScalarIndexQuery" in ds.scanner(filter=q).explain_plan()
    got = ds.to_table(columns=["id"], filter=q)["id"].to_pylist()
    assert len(got) > 500 and sorted(got) == sorted(ds.to_table(columns=["id"], filter=q, use_scalar_index=False)["id"].to_pylist())


def _indexed_dataset(uri: str, rows: int = 3000) -> None:
    """3 fragments of 1000 rows, a pylance BTREE on ``id``."""
    lf.write_dataset(simple_table(0, rows), uri, enable_stable_row_ids=True, max_rows_per_file=1000)
    lance.dataset(uri).create_scalar_index("id", "BTREE")


def test_sensor_requests_optimize_indices_after_compaction_where_both_are_due(tmp_path, spark, instance):
    settings, defs = defs_for(tmp_path, target_rows_per_fragment=10_000, min_small_fragments=4, min_index_coverage=0.9)
    uri = str(tmp_path / "events")
    _indexed_dataset(uri)
    first = tick(defs, instance, "compaction_sensor")
    assert requests(first) == [] and "within the policy" in first.skip_reason.skip_message  # 3 small, all indexed
    lf.write_dataset(simple_table(3000, 1000), uri, mode="append")  # 4 small fragments, and 75% coverage
    (req,) = requests(tick(defs, instance, "compaction_sensor", cursor=c(2)))
    assert req.job_name == "lance_compact"  # compaction first
    run(defs, instance, "compact", run_config=req.run_config, tags=req.tags)
    latest = lf.dataset(uri).version
    nxt = tick(defs, instance, "compaction_sensor", cursor=c(3))
    (req,) = requests(nxt)
    assert req.job_name == "lance_optimize_indices" and req.run_key == f"{NAME}:optimize_indices:v{latest}"
    assert "index 'id_idx': 1000 unindexed rows (coverage 75.0%" in req.tags["lance_ops/reason"]  # the planner's
    assert req.run_config["ops"][NAME]["config"]["optimize_indices"]["index_names"] == ["id_idx"]
    result = run(defs, instance, "optimize_indices", run_config=req.run_config, tags=req.tags)
    assert [data_version(m) for m in materializations(result)] == [str(latest + 1)]
    assert md(materializations(result)[-1])["index_coverage/id_idx"] == 1.0
    assert lance.dataset(uri).index_statistics("id_idx")["num_unindexed_rows"] == 0
    assert requests(tick(defs, instance, "compaction_sensor", cursor=nxt.cursor)) == []
    # min_index_coverage 0 turns index runs off
    lf.write_dataset(simple_table(4000, 1000), uri, mode="append")  # 80% covered
    res = defs.resources["lance_events"]
    off, _ = defs_for(tmp_path / "off", min_index_coverage=0.0)

    def wants_index(policy) -> bool:
        return "optimize_indices" in [a.operation for a in decide_maintenance(res.table(), policy)]

    assert not wants_index(off.datasets[0].policy) and wants_index(settings.datasets[0].policy)


def test_lance_maintain_compacts_then_optimizes_indices(tmp_path, spark, instance):
    _, defs = defs_for(tmp_path, target_rows_per_fragment=10_000, min_small_fragments=4, min_index_coverage=0.9)
    uri = str(tmp_path / "events")
    _indexed_dataset(uri)
    lf.write_dataset(simple_table(3000, 1000), uri, mode="append")
    before = lf.dataset(uri).version
    result = run(defs, instance, "maintain")
    mats = materializations(result)
    ops = [m.tags["lance_ops/operation"] for m in mats]
    assert ops[-1] == "optimize_indices" and set(ops[:-1]) == {"compact"}
    assert [data_version(m) for m in mats] == [str(v) for v in range(before + 1, before + 1 + len(mats))]
    # compaction keeps indexed and unindexed fragments apart (as pylance): 3 indexed -> 1, the new one stays
    assert job_md(mats[-2])["fragments_removed"] == 3 and job_md(mats[-1])["indices"] == ["id_idx"]
    assert md(mats[-1])["index_coverage/id_idx"] == 1.0 and md(mats[-1])["fragments"] == 2
    ds = lance.dataset(uri)
    assert ds.index_statistics("id_idx")["num_unindexed_rows"] == 0 and len(ds.get_fragments()) == 2
    assert sorted(ds.to_table(filter="id >= 2990 AND id < 3010")["id"].to_pylist()) == list(range(2990, 3010))
    nothing = run(defs, instance, "maintain")
    assert materializations(nothing) == []  # within the policy: an observation only


def test_cli_run_optimize_indices(tmp_path, spark, monkeypatch):
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    settings = settings_for(tmp_path, min_index_coverage=0.9)
    uri = settings.datasets[0].uri
    _indexed_dataset(uri)
    lf.write_dataset(simple_table(3000, 1000), uri, mode="append")
    buf = io.StringIO()
    cfg = str(tmp_path / "lance_ops.yaml")
    assert main(["run", "optimize_indices", "--config", cfg, "--num-indices-to-merge", "0",
                 "--index-names", "id_idx"], out=buf) == 0
    assert "SUCCESS" in buf.getvalue()
    assert lance.dataset(uri).index_statistics("id_idx")["num_unindexed_rows"] == 0
    assert len(lance.dataset(uri).describe_indices()[0].segments) == 2
    buf = io.StringIO()
    assert main(["run", "optimize_indices", "--config", cfg, "--index-names", "no_such_idx"], out=buf) == 1
