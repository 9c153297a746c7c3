"""A failed automatic cleanup after a commit is logged, never raised: the commit has landed."""

import logging

import pyarrow as pa

import lance_ops.format as lf
from lance_ops.format.ops import auto_cleanup


def test_a_failing_auto_cleanup_leaves_the_commit_landed(tmp_path, monkeypatch, caplog):
    uri = str(tmp_path / "ds")
    lf.write_dataset(pa.table({"x": [1]}), uri, auto_cleanup_options={"interval": 2, "older_than_seconds": 0})

    def broken(*args, **kwargs):
        raise RuntimeError("injected: cleanup failed")

    monkeypatch.setattr(auto_cleanup, "cleanup_old_versions", broken)
    with caplog.at_level(logging.ERROR, logger=auto_cleanup.__name__):
        ds = lf.write_dataset(pa.table({"x": [2]}), uri, mode="append")  # version 2: the hook runs
    assert ds.version == 2 and sorted(lf.dataset(uri).to_table()["x"].to_pylist()) == [1, 2]
    assert [v["version"] for v in lf.dataset(uri).versions()] == [1, 2]
    assert "auto cleanup after version 2 failed: injected: cleanup failed" in caplog.text
