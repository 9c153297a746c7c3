"""pylance's ``nearest=`` scan keyword (exact search) on both libraries (issue 34, docs/PYLANCE_TESTS.md).

Each test runs the same calls on ``lance`` (pylance 14) and ``lance_ops.format``: the rows, the
``_distance`` values and column order, and the builtin exception types and messages pylance code
matches on.  Vectors are chosen so that no two distances tie (pylance breaks ties on float32
rounding, lance_ops on row id).
"""

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_ops.format as lf

pytestmark = pytest.mark.interop

IMPLS = {"pylance": lance, "lance_ops": lf}
RNG = np.random.default_rng(34)
VECS = RNG.standard_normal((60, 8)).astype(np.float32)
Q = RNG.standard_normal(8)


def _data() -> pa.Table:
    flat = pa.array(VECS.ravel(), pa.float32())
    return pa.table({"id": pa.array(range(60), pa.int64()), "kind": pa.array(["a", "b", "c"] * 20),
                     "v": pa.FixedSizeListArray.from_arrays(flat, 8)})


def both(tmp_path, fn, **write):
    out = []
    for name, impl in IMPLS.items():
        ds = impl.write_dataset(_data(), str(tmp_path / name), **write)
        out.append(fn(ds))
    return out


def same_tables(a: pa.Table, b: pa.Table) -> None:
    assert a.column_names == b.column_names
    assert a.schema == b.schema
    for name in a.column_names:
        if name == "_distance":
            np.testing.assert_allclose(a[name].to_numpy(), b[name].to_numpy(), rtol=1e-5, atol=1e-6)
        else:
            assert a[name].to_pylist() == b[name].to_pylist(), name


@pytest.mark.parametrize("metric", ["l2", "cosine", "dot"])
def test_nearest_rows_distances_and_order(tmp_path, metric):
    a, b = both(tmp_path, lambda ds: ds.to_table(nearest={"column": "v", "q": Q, "k": 7, "metric": metric}))
    assert a.num_rows == 7
    same_tables(a, b)


@pytest.mark.parametrize("kw", [
    {"columns": ["id"], "with_row_id": True},
    {"columns": ["_distance", "id"]},
    {"columns": ["_rowid", "id"], "disable_scoring_autoprojection": False},
    {"columns": ["id"], "disable_scoring_autoprojection": True},
    {"columns": ["id"], "with_row_address": True, "with_row_id": True},
    {"columns": ["id"], "limit": 4, "offset": 1},  # k from the limit, then the offset
    {"columns": ["id"], "limit": 12},
    {"columns": ["id", "kind"], "filter": "kind = 'b'"},  # post-filter: fewer than k
    {"columns": ["id", "kind"], "filter": "kind = 'b'", "prefilter": True},
])
def test_nearest_projection_limit_filter(tmp_path, kw):
    def run(ds):
        spec = {"column": "v", "q": Q.tolist()} | ({} if "limit" in kw else {"k": 6})
        return ds.scanner(nearest=spec, **kw).to_table()

    a, b = both(tmp_path, run)
    same_tables(a, b)


def test_nearest_skips_deleted_null_and_nan_vectors(tmp_path):
    def run(ds):
        ds.delete("id < 3")
        vecs = pa.array([None, [float("nan")] * 8], pa.list_(pa.float32(), 8))
        extra = pa.table({"id": pa.array([100, 101], pa.int64()), "kind": ["z", "z"], "v": vecs})
        ds.insert(extra)
        return ds.to_table(columns=["id"], nearest={"column": "v", "q": Q, "k": 100})

    a, b = both(tmp_path, run)
    assert a.num_rows == 57
    same_tables(a, b)


def test_nearest_fast_search_reads_only_indexed_fragments(tmp_path):
    def run(ds):
        ds.create_index("v", index_type="IVF_FLAT", num_partitions=1)
        ds.insert(pa.table({"id": pa.array([200], pa.int64()), "kind": ["n"],
                            "v": pa.array([Q.astype(np.float32).tolist()], pa.list_(pa.float32(), 8))}))
        fast = ds.to_table(columns=["id"], nearest={"column": "v", "q": Q, "k": 100}, fast_search=True)
        full = ds.to_table(columns=["id"], nearest={"column": "v", "q": Q, "k": 100})
        return fast["id"].to_pylist(), full["id"].to_pylist()

    (fa, ua), (fb, ub) = both(tmp_path, run)
    assert 200 not in fa and ua[0] == 200
    assert sorted(fa) == sorted(fb) and sorted(ua) == sorted(ub) and ua[0] == ub[0]


def test_nearest_metric_defaults_to_the_index_metric(tmp_path):
    """The index's metric when the index may be used, l2 with ``use_index=False``."""
    def run(ds):
        ds.create_index("v", index_type="IVF_FLAT", num_partitions=1, metric="cosine")
        return [ds.to_table(columns=["id"], nearest={"column": "v", "q": Q, "k": 5} | extra)
                for extra in ({}, {"use_index": False}, {"use_index": False, "metric": "cosine"})]

    a, b = both(tmp_path, run)
    for x, y in zip(a, b, strict=True):
        same_tables(x, y)
    assert a[0]["id"] == a[2]["id"] and a[0]["id"] != a[1]["id"]


@pytest.mark.parametrize("spec, kw, kind, match", [
    ({"column": "v", "q": [1.0, 2.0]}, {}, ValueError, "Query vector size 2 does not match index column size 8"),
    ({"column": "id", "q": [1.0] * 8}, {}, TypeError, "Query column id must be a vector"),
    ({"column": "zz", "q": [1.0] * 8}, {}, ValueError, "Embedding column zz is not in the dataset"),
    ({"column": "v", "q": [1.0] * 8, "k": 0}, {}, ValueError, "Nearest-K must be > 0 but got 0"),
    ({"column": "v", "q": [1.0] * 8, "metric": "foo"}, {}, ValueError, "Metric type 'foo' is not supported"),
    ({"column": "v", "q": [1.0] * 8}, {"with_row_id": True, "include_deleted_rows": True}, ValueError,
     "Cannot include deleted rows in a nearest neighbor search"),
])
def test_nearest_errors(tmp_path, spec, kw, kind, match):
    for name, impl in IMPLS.items():
        ds = impl.write_dataset(_data(), str(tmp_path / name))
        with pytest.raises(kind, match=match):
            ds.to_table(nearest=spec, **kw)


def test_nearest_on_chosen_fragments_needs_prefilter(tmp_path):
    for name, impl in IMPLS.items():
        ds = impl.write_dataset(_data(), str(tmp_path / name), max_rows_per_file=20)
        with pytest.raises(ValueError, match="This operation is not supported for fragment scan"):
            ds.scanner(nearest={"column": "v", "q": Q}, fragments=[impl.LanceFragment(ds, 0)]).to_table()
        got = ds.scanner(nearest={"column": "v", "q": Q, "k": 30}, columns=["id"], prefilter=True, filter="id >= 0",
                         fragments=[impl.LanceFragment(ds, 1)]).to_table()
        assert sorted(got["id"].to_pylist()) == list(range(20, 40)), name


def test_nearest_fixed_shape_tensor_and_scalar_query(tmp_path):
    tensor = pa.fixed_shape_tensor(pa.float32(), [4])
    storage = pa.array([[1, 2, 3, 4], [10, 20, 30, 40], [100, 200, 300, 400]], pa.list_(pa.float32(), 4))
    data = pa.table({"t": pa.ExtensionArray.from_storage(tensor, storage)})
    out = []
    for name, impl in IMPLS.items():
        ds = impl.write_dataset(data, str(tmp_path / name))
        q = pa.ExtensionArray.from_storage(tensor, storage.slice(1, 1))[0]
        out.append(ds.to_table(nearest={"column": "t", "k": 2, "q": q}))
    a, b = out  # both read the tensor column as the extension type
    assert a["_distance"].to_pylist() == b["_distance"].to_pylist() == [0.0, 2430.0]
    assert a["t"].type == b["t"].type == tensor
    assert a["t"].combine_chunks().storage.to_pylist() == b["t"].combine_chunks().storage.to_pylist()
