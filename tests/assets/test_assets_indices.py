"""Index coverage in Dagster: each version's metadata, the compaction's output, and the
``index_coverage`` check (warns below ``policy.min_index_coverage``, names optimize_indices)."""

import lance
import pytest
from dagster import AssetCheckSeverity
from dagster_support import checks, defs_for, job_md, materializations, md, run

import lance_ops.format as lf
from lance_ops.assets.configs import AppendConfig, CompactConfig, DeleteConfig


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


def test_index_coverage_check_warns_until_pylance_optimizes_the_indices(indexed):
    defs, inst, uri = indexed["defs"], indexed["instance"], indexed["uri"]
    run(defs, inst, "append", AppendConfig(rows=500))  # 500 new rows no index covers (2000 indexed)
    found = checks(run(defs, inst, "checks"))["index_coverage"]
    assert not found.passed and found.severity == AssetCheckSeverity.WARN
    meta = {k: v.value for k, v in found.metadata.items()}
    assert sorted(meta["below_threshold"]) == ["id_idx", "kind_idx"] and "optimize_indices" in meta["remedy"]
    assert {r["name"]: r["coverage"] for r in meta["indices"]} == {"id_idx": 0.8, "kind_idx": 0.8}
    lance.dataset(uri).optimize.optimize_indices()
    found = checks(run(defs, inst, "checks"))["index_coverage"]
    assert found.passed
    assert {d.name: d.coverage for d in lf.dataset(uri).describe_indices()} == {"id_idx": 1.0, "kind_idx": 1.0}
