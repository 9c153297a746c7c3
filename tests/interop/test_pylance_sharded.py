"""pylance's ``ShardedBatchIterator`` on both libraries (issue 34, docs/PYLANCE_TESTS.md): shard
``rank`` of ``world_size`` by fragment or by runs of ``batch_size`` rows, with its deprecation
warning."""

import lance
import pyarrow as pa
import pytest
from lance._dataset.sharded_batch_iterator import ShardedBatchIterator as PylanceSharded

import lance_ops.format as lf

pytestmark = pytest.mark.interop

ITERATORS = {"pylance": (lance, PylanceSharded), "lance_ops": (lf, lf.ShardedBatchIterator)}


@pytest.mark.parametrize(("rows", "per_file", "kwargs"), [
    (1000, 100, {}),
    (1000, 100, {"batch_size": 15, "granularity": "batch"}),
    (1186, 1000, {"batch_size": 100, "granularity": "batch"}),
    (1000, 300, {"batch_size": 64, "with_row_id": True}),
])
@pytest.mark.parametrize("rank", [0, 1, 2])
def test_shards_as_pylance(tmp_path, rows, per_file, kwargs, rank):
    got = {}
    for name, (impl, sharded) in ITERATORS.items():
        ds = impl.write_dataset(pa.table({"a": range(rows)}), tmp_path / name, max_rows_per_file=per_file)
        with pytest.warns(UserWarning, match="deprecated"):
            it = sharded(ds if kwargs else tmp_path / name, rank, 3, columns=["a"], **kwargs)
        got[name] = pa.Table.from_batches(list(it)).to_pydict()
    assert got["lance_ops"] == got["pylance"]
    assert got["lance_ops"]["a"]


def test_unknown_granularity_refused(tmp_path):
    lf.write_dataset(pa.table({"a": range(10)}), tmp_path / "t")
    with pytest.warns(UserWarning), pytest.raises(lf.errors.InvalidArgumentError, match="granularity"):
        lf.ShardedBatchIterator(tmp_path / "t", 0, 2, granularity="row")


@pytest.mark.parametrize("sizes", [(1000, 186), (100, 1000, 50, 7), (5, 5, 500)])
def test_offset_skips_only_leading_fragments(tmp_path, sizes):
    """A smaller fragment after the first kept one is not skipped by the offset (it was: offset
    400 over fragments of 1000 and 186 rows began at row 214)."""
    start = 0
    for n in sizes:
        lf.write_dataset(pa.table({"a": range(start, start + n)}), tmp_path / "t",
                              mode="append" if start else "create")
        start += n
    for offset in (0, 3, 50, 400, 1000, 1100, start - 1):
        for limit in (3, 100, None):
            want = lance.dataset(tmp_path / "t").to_table(offset=offset, limit=limit)
            assert lf.dataset(tmp_path / "t").to_table(offset=offset, limit=limit) == want, (offset, limit)
            assert want["a"].to_pylist() == list(range(offset, start if limit is None else min(start, offset + limit)))


def test_manifest_needs_migration(tmp_path):
    """``manifest_needs_migration`` (pylance's ``lance.lance``): a new dataset needs none, on
    either library's writes."""
    from lance.lance import manifest_needs_migration as pylance_needs

    for name, impl in (("pylance", lance), ("lance_ops", lf)):
        impl.write_dataset(pa.table({"x": [1, 2, 3]}), tmp_path / name)
        impl.dataset(tmp_path / name).delete("x = 2")
        for reader_needs, reader in ((pylance_needs, lance), (lf.manifest_needs_migration, lf)):
            assert reader_needs(reader.dataset(tmp_path / name)) is False
