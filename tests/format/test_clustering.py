"""The row order of clustered compaction and its bookkeeping (docs/FORMAT.md §18)."""

import numpy as np
import pyarrow as pa
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
