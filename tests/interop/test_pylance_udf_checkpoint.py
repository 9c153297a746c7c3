"""pylance's resumable batch UDF on both libraries (issue 34, docs/PYLANCE_TESTS.md):
``batch_udf(checkpoint_file=...)`` keeps the batches computed while ``add_columns`` runs, so a
run that failed part-way and is started again does not compute them again; the file is removed
once ``add_columns`` succeeds."""

import os

import lance
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_ops.format as lf

pytestmark = pytest.mark.interop


@pytest.mark.parametrize("name", ["pylance", "lance_ops"])
def test_failed_udf_resumes_from_its_checkpoint(tmp_path, name):
    impl = {"pylance": lance, "lance_ops": lf}[name]
    uri, cache = tmp_path / "t", tmp_path / "cache.sqlite"
    ds = impl.write_dataset(pa.table({"a": range(100), "b": range(100)}), uri, max_rows_per_file=20)
    seen = []

    @impl.batch_udf(checkpoint_file=cache)
    def failing(batch):
        seen.append(batch["a"][0].as_py())
        if batch["a"][0].as_py() >= 50:
            raise RuntimeError("I failed")
        return pa.record_batch([pc.multiply(batch["a"], pa.scalar(2))], ["a_times_2"])

    with pytest.raises(Exception, match="I failed"):
        ds.add_columns(failing, read_columns=["a"])
    assert ds.version == 1 and os.path.exists(cache)
    again = []

    @impl.batch_udf(checkpoint_file=cache)
    def resumed(batch):
        again.append(batch["a"][0].as_py())
        return pa.record_batch([pc.multiply(batch["a"], pa.scalar(2))], ["a_times_2"])

    ds.add_columns(resumed, read_columns=["a"])
    assert not os.path.exists(cache)
    # batches starting at 0, 20 and 40 were computed by the failed run: only the schema probe
    # (the first batch) and the rest run again
    assert sorted(set(again) - {0}) == [60, 80]
    for reader in (lance, lf):
        got = reader.dataset(uri).to_table()
        assert got.column("a_times_2").to_pylist() == [2 * i for i in range(100)]
