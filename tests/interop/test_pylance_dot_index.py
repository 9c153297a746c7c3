"""IVF_FLAT / IVF_PQ indices with metric ``dot`` on both libraries (issue 34,
docs/PYLANCE_TESTS.md): lance_ops trains them (partitions by the largest dot product, PQ codes of
the vectors themselves: pylance's PQ uses no residual for dot), pylance opens them and, with every
partition probed and refined, answers exactly; ``optimize_indices`` after an append extends a dot
index either library built.
"""

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_ops.format as lf

pytestmark = pytest.mark.interop

IMPLS = {"pylance": lance, "lance_ops": lf}
DIM = 16


def _table(rng, start, n):
    v = rng.normal(size=(n, DIM)).astype(np.float32)
    return v, pa.table({"id": pa.array(range(start, start + n), pa.int64()),
                        "vector": pa.FixedSizeListArray.from_arrays(pa.array(v.ravel()), DIM)})


def _exact_ids(v, q, k=10):
    return np.argsort(-(v.astype(np.float64) @ q), kind="stable")[:k].tolist()


@pytest.mark.parametrize("kind", ["IVF_FLAT", "IVF_PQ"])
@pytest.mark.parametrize(("builder", "extender"), [("lance_ops", "lance_ops"), ("pylance", "lance_ops"),
                                                   ("lance_ops", "pylance")])
def test_dot_index_answers_exactly(tmp_path, kind, builder, extender):
    rng = np.random.default_rng(7)
    v1, t1 = _table(rng, 0, 2000)
    v2, t2 = _table(rng, 2000, 300)
    uri = tmp_path / "t"
    ds = IMPLS[builder].write_dataset(t1, uri, data_storage_version="2.2")
    ds.create_index("vector", index_type=kind, num_partitions=4, num_sub_vectors=4, metric="dot")
    for impl in IMPLS.values():
        stats = impl.dataset(uri).stats.index_stats("vector_idx")
        assert stats["index_type"] == kind and stats["indices"][0]["metric_type"] == "dot"
    ext = IMPLS[extender].dataset(uri)
    ext.insert(t2) if extender == "lance_ops" else lance.write_dataset(t2, uri, mode="append")
    ext = IMPLS[extender].dataset(uri)
    ext.optimize.optimize_indices()
    assert IMPLS[extender].dataset(uri).stats.index_stats("vector_idx")["num_unindexed_rows"] == 0
    v = np.concatenate([v1, v2])
    for q in rng.normal(size=(3, DIM)).astype(np.float32):
        want = _exact_ids(v, q.astype(np.float64))
        got = lance.dataset(uri).to_table(nearest={"column": "vector", "q": q, "k": 10, "nprobes": 4,
                                                   "refine_factor": 500})
        assert got["id"].to_pylist() == want
        np.testing.assert_allclose(got["_distance"].to_numpy(), 1 - v[want] @ q, rtol=1e-4, atol=1e-4)
        ours = lf.dataset(uri).to_table(nearest={"column": "vector", "q": q, "k": 10})
        assert ours["id"].to_pylist() == want


def test_hamming_index_still_refused(tmp_path):
    data = pa.table({"vector": pa.array([[1] * 16] * 300, pa.list_(pa.uint8(), 16))})
    ds = lf.write_dataset(data, tmp_path / "t")
    with pytest.raises(lf.errors.UnsupportedFeatureError, match="hamming"):
        ds.create_index("vector", index_type="IVF_FLAT", num_partitions=4, metric="hamming")
