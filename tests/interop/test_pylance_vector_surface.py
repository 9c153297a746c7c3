"""pylance's vector-index surface on both libraries (issue 34, docs/PYLANCE_TESTS.md): ``create_index``
with given ``ivf_centroids`` / ``pq_codebook``, ``target_partition_size`` and ``index_file_version``,
the statistics pylance reports for them, ``index_stats`` of a missing name, ``ds.sample`` and
``lance.util.validate_vector_index``.  Each test runs the same calls on ``lance`` (pylance 14) and
``lance_ops.format``; indices lance_ops builds are also read back by pylance.
"""

import lance
import lance.util
import numpy as np
import pyarrow as pa
import pytest
from lance.indices import IndexFileVersion

import lance_ops.format as lf

pytestmark = pytest.mark.interop

IMPLS = {"pylance": lance, "lance_ops": lf}
RNG = np.random.default_rng(7)
MAT = RNG.standard_normal((400, 16)).astype(np.float32)


def _data() -> pa.Table:
    return lf.vec_to_table(MAT).append_column("id", pa.array(range(400), pa.int64()))


def _stats(uri: str) -> dict:
    """What pylance reports of the index (for both libraries' files), without uuid/uri/loss."""
    s = lance.dataset(uri).stats.index_stats("vector_idx")["indices"][0]
    return {k: v for k, v in s.items() if k not in ("uuid", "uri", "loss", "centroids", "partitions")}


@pytest.mark.parametrize("metric", ["l2", "cosine"])
def test_given_centroids_and_codebook_are_used(tmp_path, metric):
    centroids = RNG.standard_normal((3, 16)).astype(np.float32)
    codebook = RNG.standard_normal((4, 256, 4)).astype(np.float32)
    stats, centres = [], []
    for name, impl in IMPLS.items():
        uri = str(tmp_path / name)
        ds = impl.write_dataset(_data(), uri)
        out = ds.create_index(["vector"], index_type="IVF_PQ", metric=metric, ivf_centroids=centroids,
                              pq_codebook=pa.FixedShapeTensorArray.from_numpy_ndarray(codebook),
                              num_partitions=3, num_sub_vectors=4)
        assert out is ds
        stats.append(_stats(uri))
        centres.append(np.asarray(impl.dataset(uri).stats.index_stats("vector_idx")["indices"][0]["centroids"]))
        mine = impl.dataset(uri).stats.index_stats("vector_idx")["indices"][0]
        assert mine["sub_index"]["metric_type"] == "l2" and mine["metric_type"] == metric
    assert stats[0] == stats[1]
    assert stats[0]["num_partitions"] == 3
    np.testing.assert_allclose(centres[0], centres[1], rtol=1e-6)
    np.testing.assert_allclose(centres[1], centroids, rtol=1e-6)


@pytest.mark.parametrize("target, parts", [(400, 1), (200, 2), (150, 2), (100, 4), (500, 1)])
def test_target_partition_size_sets_the_partition_count(tmp_path, target, parts):
    """Rows // target (at least 1); a given ``num_partitions`` wins, at most one per 256 rows for IVF_PQ."""
    for name, impl in IMPLS.items():
        uri = str(tmp_path / name)
        ds = impl.write_dataset(_data(), uri)
        ds.create_index("vector", index_type="IVF_PQ", num_sub_vectors=4, target_partition_size=target)
        assert _stats(uri)["num_partitions"] == parts, name
        ds.create_index("vector", index_type="IVF_PQ", num_sub_vectors=4, num_partitions=3,
                        target_partition_size=target, replace=True)
        assert _stats(uri)["num_partitions"] == 1, name  # 400 rows: one partition of 256 rows at most
        ds.create_index("vector", index_type="IVF_FLAT", num_partitions=3, target_partition_size=target, replace=True)
        assert _stats(uri)["num_partitions"] == 3, name


def test_index_file_version_v3_and_missing_index_stats(tmp_path):
    for name, impl in IMPLS.items():
        uri = str(tmp_path / name)
        ds = impl.write_dataset(_data(), uri)
        ds.create_index("vector", index_type="IVF_FLAT", num_partitions=2, index_file_version=IndexFileVersion.V3)
        assert impl.dataset(uri).stats.index_stats("vector_idx")["indices"][0]["index_file_version"] == "V3"
        assert lf.IndexFileVersion.V3 == IndexFileVersion.V3 == "V3"
        with pytest.raises(KeyError, match='Index "nope_idx" not found'):
            ds.stats.index_stats("nope_idx")


def test_empty_partition_of_given_centroids(tmp_path):
    """A given centroid no vector is nearest to leaves an empty partition (pylance writes it too)."""
    centroids = np.concatenate([MAT[:2], np.full((1, 16), 1e6, np.float32)])
    for name, impl in IMPLS.items():
        uri = str(tmp_path / name)
        impl.write_dataset(_data(), uri).create_index(
            "vector", index_type="IVF_PQ", ivf_centroids=centroids, num_partitions=3, num_sub_vectors=4)
        sizes = [p["size"] for p in lance.dataset(uri).stats.index_stats("vector_idx")["indices"][0]["partitions"]]
        assert sizes[2] == 0 and sum(sizes) == 400, name
        got = lance.dataset(uri).to_table(columns=["id"], nearest={"column": "vector", "q": MAT[5], "k": 1,
                                                                     "nprobes": 3, "refine_factor": 10})
        assert got["id"].to_pylist() == [5], name


def test_sample_and_validate_vector_index(tmp_path):
    for name, impl in IMPLS.items():
        ds = impl.write_dataset(_data(), str(tmp_path / name))
        s = ds.sample(7)
        assert s.num_rows == 7 and s.column_names == ["vector", "id"] and len(set(s["id"].to_pylist())) == 7
        ordered = ds.sample(5, columns=["id"], randomize_order=False)
        assert ordered.column_names == ["id"] and ordered["id"].to_pylist() == sorted(ordered["id"].to_pylist())
        ds.create_index("vector", index_type="IVF_FLAT", num_partitions=2)
        lance.util.validate_vector_index(ds, "vector", sample_size=20)
        lf.validate_vector_index(ds, "vector", sample_size=20)
        other = impl.write_dataset(lf.vec_to_table(MAT + 1), str(tmp_path / f"{name}_other"))
        ds.sample = lambda n, other=other, **kw: other.to_table(limit=n)  # vectors not in ds: the check fails
        for check in (lance.util.validate_vector_index, lf.validate_vector_index):
            with pytest.raises(ValueError, match="Vector index failed sanity check, only 0/20 passed"):
                check(ds, "vector", sample_size=20)
