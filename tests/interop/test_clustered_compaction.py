"""Clustered compaction (``compact_files(cluster_by=..., strategy=...)``, docs/FORMAT.md §18).

pylance writes a table whose cluster key is spread over every fragment, with a BTREE on ``id``
and ZONEMAP indices on the key; lance_ops clusters it.  A filter selecting 1% of the rows then
opens at most 5% of the fragments (lance_ops' zone-map pruning and pylance's
``fragments_scanned``; every fragment before), and answers identically in lance_ops, pylance and
lancedb; row ids, row versions and the BTREE's answers are exact; the change feed across it is
empty; a second run rewrites nothing, and a run after an append clusters only the new fragments.

The issue asks for 2M rows; ``LANCE_OPS_CLUSTER_ROWS`` sets the size (default 200,000, 64
fragments before and after).
"""

import os
import re

import lance
import lancedb
import numpy as np
import pyarrow as pa
import pytest

import lance_ops.format as lf
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.read.zone_pruning import prune_fragments

ROWS = int(os.environ.get("LANCE_OPS_CLUSTER_ROWS", "200000"))
FRAGMENTS = 64
PER_FRAGMENT = ROWS // FRAGMENTS

CASES = {  # strategy -> (cluster_by, a filter selecting 1% of the rows, stable row ids)
    "sort": (["k"], f"k >= {ROWS // 10} AND k < {ROWS // 10 + ROWS // 100}", False),
    "zorder": (["k", "g"], f"k < {ROWS // 10} AND g < {ROWS // 10}", True),
}


def _table(n: int, seed: int, start: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    k = rng.permutation(n) + start
    g = rng.permutation(n) + start
    return pa.table({
        "id": pa.array(np.arange(start, start + n), pa.int64()),
        "k": pa.array(k, pa.int64()),
        "g": pa.array(g, pa.int64()),
        "s": pa.array([f"s{x % 997}" for x in k]),
    })


def _pylance_fragments_scanned(uri: str, q: str) -> int:
    plan = lance.dataset(uri).scanner(filter=q, columns=["id"]).analyze_plan()
    return int(re.search(r"fragments_scanned=(\d+)", plan).group(1))


def _lance_ops_fragments_read(uri: str, q: str) -> int:
    ds = lf.dataset(uri)
    return len(prune_fragments(ObjectStore(uri), ds._manifest, q, ds._manifest.fragments))


def _meta(uri: str, stable: bool) -> pa.Table:
    # without stable row ids _rowid is the row address, which every compaction changes
    meta = ["_rowid", "_row_created_at_version", "_row_last_updated_at_version"] if stable else []
    cols = ["id", "k", "g", "s", *meta]
    return lf.dataset(uri).to_table(columns=cols).sort_by("id")


@pytest.fixture(params=list(CASES))
def case(request):
    return request.param, *CASES[request.param]


@pytest.mark.interop
def test_clustering_prunes_and_keeps_everything(tmp_path, case):
    strategy, cluster_by, q, stable = case
    uri = str(tmp_path / "t.lance")
    lance.write_dataset(_table(ROWS, 1), uri, max_rows_per_file=PER_FRAGMENT, enable_stable_row_ids=stable)
    ds = lance.dataset(uri)
    ds.create_scalar_index("id", "BTREE")
    for c in cluster_by:
        ds.create_scalar_index(c, "ZONEMAP")
    lance.dataset(uri).delete("id % 97 = 5")
    truth = sorted(lance.dataset(uri).to_table(columns=["id"], filter=q, use_scalar_index=False)["id"].to_pylist())
    assert abs(len(truth) - ROWS // 100) < ROWS // 200  # about 1% of the rows
    assert _pylance_fragments_scanned(uri, q) == FRAGMENTS
    assert _lance_ops_fragments_read(uri, q) == FRAGMENTS
    before = _meta(uri, stable)
    v0 = lf.dataset(uri).version

    m = lf.dataset(uri).optimize.compact_files(cluster_by=cluster_by, strategy=strategy,
                                               target_rows_per_fragment=PER_FRAGMENT)
    assert m.fragments_removed == FRAGMENTS and m.indices_remapped == ("id_idx",)
    assert m.zone_maps_refreshed == tuple(sorted(f"{c}_idx" for c in cluster_by))
    n = len(lf.dataset(uri).get_fragments())
    # row ids (and with stable row ids both version columns) kept row by row
    assert _meta(uri, stable).equals(before)
    assert _lance_ops_fragments_read(uri, q) <= 0.05 * n
    assert _pylance_fragments_scanned(uri, q) <= 0.05 * n
    # the same answers in lance_ops, pylance (zone maps used) and lancedb
    assert sorted(lf.dataset(uri).to_table(columns=["id"], filter=q)["id"].to_pylist()) == truth
    assert sorted(lance.dataset(uri).to_table(columns=["id"], filter=q)["id"].to_pylist()) == truth
    db = lancedb.connect(str(tmp_path))
    assert sorted(db.open_table("t").search().where(q).select(["id"]).limit(None).to_arrow()["id"].to_pylist()) == truth
    # the BTREE follows every row to its new address
    wanted = list(range(3, ROWS, ROWS // 37))
    iq = f"id IN ({', '.join(map(str, wanted))})"
    exact = [w for w in wanted if w % 97 != 5]
    assert sorted(lance.dataset(uri).to_table(columns=["id"], filter=iq)["id"].to_pylist()) == exact
    assert sorted(lance.dataset(uri).to_table(columns=["id"], filter="id = 6")["id"].to_pylist()) == [6]
    # rows are ordered by the key inside each fragment (sort) / the key ranges are narrow (zorder)
    if strategy == "sort":
        for f in lance.dataset(uri).get_fragments():
            k = f.to_table(columns=["k"])["k"].to_numpy()
            assert (np.diff(k) >= 0).all()
    if stable:  # a layout change: the change feed across it is empty
        assert lf.dataset(uri).change_feed(begin_version=v0, end_version=lf.dataset(uri).version).num_rows == 0
    # incremental: nothing new, nothing rewritten
    again = lf.dataset(uri).optimize.compact_files(cluster_by=cluster_by, strategy=strategy,
                                                   target_rows_per_fragment=PER_FRAGMENT)
    assert again.fragments_removed == 0 and again.version is None


@pytest.mark.interop
def test_a_growing_table_clusters_only_new_fragments(tmp_path):
    uri = str(tmp_path / "ds")
    rows = 40_000
    lance.write_dataset(_table(rows, 2), uri, max_rows_per_file=4000)
    lance.dataset(uri).create_scalar_index("k", "ZONEMAP")
    ds = lf.dataset(uri)
    first = ds.optimize.compact_files(cluster_by=["k"], target_rows_per_fragment=4000)
    assert first.fragments_removed == 10
    clustered = {f.fragment_id for f in ds.get_fragments()}
    lf.write_dataset(_table(8000, 3, start=rows), uri, mode="append", max_rows_per_file=2000)
    ds = lf.dataset(uri)
    second = ds.optimize.compact_files(cluster_by=["k"], target_rows_per_fragment=4000)
    assert second.fragments_removed == 4 and second.fragments_added == 2
    assert clustered <= {f.fragment_id for f in ds.get_fragments()}  # the clustered ones untouched
    # another key (or strategy) starts over
    assert ds.optimize.compact_files(cluster_by=["g"], dry_run=True).fragments_removed == 12
    assert lf.dataset(uri).to_table().sort_by("id").equals(lance.dataset(uri).to_table().sort_by("id"))
    assert lance.dataset(uri).count_rows("k < 100") == lf.dataset(uri).count_rows("k < 100") == 100
