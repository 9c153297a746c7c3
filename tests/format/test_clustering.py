"""The row order of clustered compaction and its bookkeeping (docs/FORMAT.md §18)."""

import shutil
import tempfile

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_ops.format as lf
from lance_ops.format.errors import InvalidArgumentError, SchemaError
from lance_ops.format.ops.compaction.clustering import (
    FRAGMENTS_KEY,
    cluster_order,
    clustered_fragments,
    decode_ids,
    encode_ids,
    zorder_keys,
)


def test_sort_puts_nulls_then_nan_then_values_and_strings_by_bytes():
    t = pa.table({"x": pa.array([3.0, None, float("nan"), -1.0, 0.0]), "s": ["b", "a", None, "B", "é"]})
    assert t.take(cluster_order(t, ["x"], "sort"))["x"].to_pylist()[:2] == [None, pytest.approx(float("nan"), nan_ok=True)]
    assert t.take(cluster_order(t, ["x"], "sort"))["x"].to_pylist()[2:] == [-1.0, 0.0, 3.0]
    assert t.take(cluster_order(t, ["s"], "sort"))["s"].to_pylist() == [None, "B", "a", "b", "é"]


def test_zorder_interleaves_ranks_most_significant_bit_first():
    # two columns of 4 distinct values each: ranks 0..3 -> scaled to 32 bits, so the interleaved
    # key orders the 2x2 quadrants first (the classic Z shape)
    xs, ys = np.meshgrid(np.arange(4), np.arange(4))
    t = pa.table({"x": xs.ravel(), "y": ys.ravel()})
    order = cluster_order(t, ["x", "y"], "zorder")
    got = list(zip(t["x"].to_numpy()[order].tolist(), t["y"].to_numpy()[order].tolist(), strict=True))
    assert got[:4] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert set(got[4:8]) == {(0, 2), (0, 3), (1, 2), (1, 3)}
    assert got[-1] == (3, 3)
    # ranks make any type comparable, nulls rank first
    t2 = pa.table({"s": ["b", None, "a"], "f": [0.5, 0.25, None]})
    z = zorder_keys(t2, ["s", "f"])
    assert z.dtype == np.uint64 and int(np.argmin(z)) == 1


def test_fragment_id_ranges_round_trip():
    assert encode_ids([7, 1, 2, 3, 9, 10]) == "1-3,7,9-10"
    assert decode_ids("1-3,7,9-10") == {1, 2, 3, 7, 9, 10}
    assert clustered_fragments({"lance_ops.clustering.columns": "a", FRAGMENTS_KEY: "1-2"}, ["a"], "sort") == {1, 2}
    assert clustered_fragments({"lance_ops.clustering.columns": "a", FRAGMENTS_KEY: "1-2"}, ["a"], "zorder") == set()
    with pytest.raises(InvalidArgumentError, match=FRAGMENTS_KEY):
        decode_ids("1-x")


def test_bad_cluster_columns_are_refused_before_anything_is_written(tmp_path):
    uri = str(tmp_path / "ds")
    lf.write_dataset(pa.table({"id": [1, 2], "l": [[1], [2]]}), uri)
    ds = lf.dataset(uri)
    with pytest.raises(SchemaError, match="nope"):
        ds.optimize.compact_files(cluster_by=["nope"])
    with pytest.raises(SchemaError, match="'l' has type list"):
        ds.optimize.compact_files(cluster_by=["l"])
    with pytest.raises(InvalidArgumentError, match="strategy"):
        ds.optimize.compact_files(cluster_by=["id"], strategy="hilbert")
    assert lf.dataset(uri).version == 1


def test_clustered_compaction_in_process_orders_and_records(tmp_path):
    uri = str(tmp_path / "ds")
    rng = np.random.default_rng(0)
    for i in range(4):
        lf.write_dataset(pa.table({"id": np.arange(i * 100, i * 100 + 100), "k": rng.permutation(100) + i * 100}),
                         uri, mode="append" if i else "create", enable_stable_row_ids=True)
    ds = lf.dataset(uri)
    before = ds.to_table(columns=["id", "k", "_rowid", "_row_created_at_version"]).sort_by("id")
    m = ds.optimize.compact_files(cluster_by="k", target_rows_per_fragment=200)
    assert (m.fragments_removed, m.fragments_added) == (4, 2)
    t = ds.to_table(columns=["k"])
    assert t["k"].to_pylist() == sorted(t["k"].to_pylist())
    assert ds.to_table(columns=["id", "k", "_rowid", "_row_created_at_version"]).sort_by("id").equals(before)
    assert ds.config()["lance_ops.clustering.fragments"] == "4-5"
    assert ds.optimize.compact_files(cluster_by=["k"], target_rows_per_fragment=200).fragments_removed == 0


@pytest.mark.parametrize("strategy", ["zorder", "sort"])
def test_spilled_rewrite_writes_what_the_in_memory_one_writes(tmp_path, monkeypatch, strategy):
    """Past SPILL_ABOVE_BYTES a task spills its groups, cut by output file, to temporary IPC files
    (an external sort): the same rows in the same order in the same fragments, with the same row
    ids and versions, and no temporary file left."""
    from lance_ops.format.ops.compaction import clustered_rewrite

    rng = np.random.default_rng(7)
    src = str(tmp_path / "src")
    for i in range(6):
        n = 500
        k = rng.integers(0, 300, n).astype(float)
        k[rng.random(n) < 0.05] = np.nan
        t = pa.table({"id": np.arange(i * n, (i + 1) * n), "k": pa.array(k, mask=rng.random(n) < 0.05),
                      "g": [f"g{x}" for x in rng.integers(0, 50, n)]})
        lf.write_dataset(t, src, mode="append" if i else "create", enable_stable_row_ids=True,
                         data_storage_version="2.2")
    lf.dataset(src).delete("id % 7 = 3")
    cols = ["id", "k", "g", "_rowid", "_row_created_at_version", "_row_last_updated_at_version"]

    def run(name: str) -> tuple[pa.Table, list[int]]:
        uri = str(tmp_path / name)
        shutil.copytree(src, uri)
        ds = lf.dataset(uri)
        ds.optimize.compact_files(cluster_by=["k", "g"], strategy=strategy, target_rows_per_fragment=500)
        t = ds.to_table(columns=cols)  # NaN as -1 (Table.equals holds NaN unequal to itself)
        t = t.set_column(1, "k", pc.if_else(pc.is_nan(t["k"]), -1.0, t["k"]))
        return t, [f.count_rows() for f in ds.get_fragments()]

    held, held_sizes = run("held")
    spill_root = tmp_path / "tmp"
    spill_root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spill_root))
    monkeypatch.setattr(clustered_rewrite, "SPILL_ABOVE_BYTES", 0)
    monkeypatch.setattr(clustered_rewrite, "GROUP_ROWS", 700)
    spilled, spilled_sizes = run("spilled")
    assert spilled.equals(held) and spilled_sizes == held_sizes == [515] + [514] * 4
    assert sorted(spilled["id"].to_pylist()) == [i for i in range(3000) if i % 7 != 3]
    assert list(spill_root.iterdir()) == []
