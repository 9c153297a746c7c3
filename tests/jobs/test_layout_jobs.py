"""jobs.compact with the layout options: data_storage_version (upgrade, resumable) and
cluster_by / strategy (clustered compaction), on a real local SparkSession."""

import lance
import numpy as np
import pyarrow as pa

import lance_ops.format as lf
from lance_ops import jobs


def _write(uri: str) -> None:
    rng = np.random.default_rng(5)
    t = pa.table({"id": np.arange(2000), "k": rng.permutation(2000), "s": [f"v{i % 13}" for i in range(2000)]})
    lance.write_dataset(t, uri, max_rows_per_file=200, data_storage_version="2.0", enable_stable_row_ids=True)


def test_spark_upgrade_then_cluster(spark, tmp_path):
    uri = str(tmp_path / "ds")
    _write(uri)
    before = lf.dataset(uri).to_table(columns=["id", "k", "s", "_rowid", "_row_created_at_version"]).sort_by("id")
    first = jobs.compact(spark, uri, data_storage_version="2.2", target_rows_per_fragment=400, max_source_fragments=2)
    assert first.fragments_removed == 2 and first.fragments_added == 1
    versions = {d.file_major_version * 10 + d.file_minor_version for f in lance.dataset(uri).get_fragments()
                for d in f.metadata.files}
    assert versions == {20, 22}  # mixed, readable by pylance
    assert lance.dataset(uri).count_rows() == 2000
    while jobs.compact(spark, uri, data_storage_version="2.2", target_rows_per_fragment=400,
                       max_source_fragments=2).fragments_removed:
        pass
    assert {d.file_minor_version for f in lance.dataset(uri).get_fragments() for d in f.metadata.files} == {2}
    lance.dataset(uri).create_scalar_index("k", "ZONEMAP")
    clustered = jobs.compact(spark, uri, cluster_by=["k"], strategy="sort", target_rows_per_fragment=200)
    assert clustered.fragments_removed > 0 and clustered.fragments_added == 10
    for f in lance.dataset(uri).get_fragments():
        k = f.to_table(columns=["k"])["k"].to_numpy()
        assert (np.diff(k) >= 0).all()
    after = lf.dataset(uri).to_table(columns=["id", "k", "s", "_rowid", "_row_created_at_version"]).sort_by("id")
    assert after.equals(before)
    assert jobs.compact(spark, uri, cluster_by=["k"], target_rows_per_fragment=200).fragments_removed == 0
    plan = lance.dataset(uri).scanner(filter="k < 150", columns=["id"]).analyze_plan()
    assert "fragments_scanned=1," in plan
