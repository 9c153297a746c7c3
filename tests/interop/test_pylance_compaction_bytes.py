"""Compaction's ``max_bytes_per_file`` and ``batch_size`` on both libraries (issue 34,
docs/PYLANCE_TESTS.md): pylance's rewrite closes an output file after the read batch that brings
the bytes its encoders flushed (whole 8 MiB pages) to the limit, so tiny limits give files of
8 MiB of data, or of one batch when a batch is larger.
"""

import lance
import pyarrow as pa
import pytest

import lance_ops.format as lf

pytestmark = [pytest.mark.interop, pytest.mark.slow]

IMPLS = {"pylance": lance, "lance_ops": lf}
WIDE = pa.table({"a": pa.FixedSizeListArray.from_arrays(pa.array(range(4 * 1024 * 1024)), 1024)})  # 32 MiB


@pytest.mark.parametrize(("limit", "batch_size"), [(1000, 128), (3 << 20, 64), (12 << 20, 128), (1000, 2048)])
def test_compaction_cuts_files_by_flushed_pages(tmp_path, limit, batch_size):
    got = {}
    for name, impl in IMPLS.items():
        uri = tmp_path / name
        ds = impl.write_dataset(WIDE, uri, max_rows_per_file=2048, data_storage_version="2.2")
        metrics = ds.optimize.compact_files(target_rows_per_fragment=100 * 1024, materialize_deletions=False,
                                            max_bytes_per_file=limit, batch_size=batch_size)
        got[name] = ([f.count_rows() for f in ds.get_fragments()], metrics.fragments_added, metrics.files_added)
        assert IMPLS["pylance" if name == "lance_ops" else "lance_ops"].dataset(uri).to_table() == WIDE
    assert got["lance_ops"] == got["pylance"]


def test_compaction_plan_takes_max_bytes(tmp_path):
    ds = lf.write_dataset(WIDE, tmp_path / "t", max_rows_per_file=2048, data_storage_version="2.2")
    plan = lf.Compaction.plan(ds, options=dict(target_rows_per_fragment=100 * 1024, max_bytes_per_file=1000,
                                               batch_size=128))
    metrics = lf.Compaction.commit(ds, [task.execute(ds) for task in plan.tasks])
    assert (metrics.fragments_removed, metrics.fragments_added) == (2, 4)
    assert [f.count_rows() for f in lance.dataset(tmp_path / "t").get_fragments()] == [1024] * 4


def test_compaction_max_bytes_refused_with_stable_row_ids(tmp_path):
    ds = lf.write_dataset(pa.table({"a": range(10)}), tmp_path / "t", max_rows_per_file=5,
                          enable_stable_row_ids=True)
    with pytest.raises(lf.errors.UnsupportedFeatureError, match="max_bytes_per_file"):
        ds.optimize.compact_files(max_bytes_per_file=1000)
    assert ds.version == 1 and len(ds.get_fragments()) == 2
