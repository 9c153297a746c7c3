"""IVF_FLAT / IVF_PQ segments added by lance_ops' ``optimize_indices`` are what pylance 14's own
``optimize_indices`` writes on the same data (partition assignment, PQ codes, row order, loss:
file contents equal), pylance and lancedb 0.40 use them (``ANNIvfPartition``, no scan of
unindexed rows) and answer exactly with every partition probed, at 2.0 and 2.2, with and without
stable row ids, for l2 and cosine.
"""

import os

import lance
import lancedb
import numpy as np
import pyarrow as pa
import pytest
from file_versions import pin_file_version
from index_support import QUERY_VECTOR, copy, follow_ups, index_name, table, vector_column, wrong_answers

import lance_ops.format as lf
from lance_ops.format.file.reader import DataFileReader
from lance_ops.format.index.metadata import IndexMetadata, decode_index_section

KINDS = ("IVF_PQ", "IVF_FLAT")


@pytest.fixture(params=("2.0", "2.2"), autouse=True)
def file_version(request, monkeypatch):
    """This suite runs at 2.0 and 2.2 (overrides the interop conftest's three versions)."""
    return pin_file_version(monkeypatch, request.param)


def _build(uri: str, *, stable: bool, file_version: str, metric: str) -> None:
    lance.write_dataset(table(2400), uri, max_rows_per_file=600, enable_stable_row_ids=stable,
                        data_storage_version=file_version)
    lance.dataset(uri).delete("id % 10 = 0")
    ds = lance.dataset(uri)
    ds.create_index(vector_column("IVF_PQ"), "IVF_PQ", name=index_name("IVF_PQ"), num_partitions=2,
                    num_sub_vectors=2, metric=metric)
    ds.create_index(vector_column("IVF_FLAT"), "IVF_FLAT", name=index_name("IVF_FLAT"), num_partitions=2, metric=metric)


def _segments(uri: str) -> tuple[lf.LanceDataset, dict[str, list[IndexMetadata]]]:
    ds = lf.dataset(uri)
    out: dict[str, list[IndexMetadata]] = {}
    for i in decode_index_section(ds.manifest.index_section):
        out.setdefault(i.name, []).append(i)
    return ds, out


def _contents(ds: lf.LanceDataset, seg: IndexMetadata) -> dict[str, tuple]:
    out = {}
    for f in seg.files:
        r = DataFileReader(ds._store, f"{seg.directory}/{f.path}")
        t = pa.Table.from_batches(list(r.read(batch_size=1 << 20)), schema=r.schema.to_arrow())
        out[f.path] = (r.version, r.schema.to_arrow(), dict(r.schema.metadata), t,
                       [r.global_buffer(k) for k in range(1, r._gbo.shape[0])])
    return out


def _same_as_twin(uri: str, twin: str) -> None:
    ours, a = _segments(uri)
    theirs, b = _segments(twin)
    for k in KINDS:
        name = index_name(k)
        assert [s.fragment_ids for s in a[name]] == [s.fragment_ids for s in b[name]], k
        for x, y in zip(a[name], b[name], strict=True):
            assert (x.type_url, x.details, x.index_version, x.fields) == (y.type_url, y.details, y.index_version, y.fields)
            if x.uuid != y.uuid:  # a segment each side wrote: same files, same contents
                cx, cy = _contents(ours, x), _contents(theirs, y)
                assert cx.keys() == cy.keys()
                for f in cx:
                    vx, sx, mx, tx, gx = cx[f]
                    vy, sy, my, ty, gy = cy[f]
                    assert (vx, sx, mx) == (vy, sy, my), (k, f)
                    assert tx.equals(ty), (k, f)
                    assert gx == gy, (k, f)


def _ann_plan_ok(uri: str, metric: str) -> dict[str, bool]:
    ds = lance.dataset(uri)
    out = {}
    for k in KINDS:
        plan = ds.scanner(columns=["id"], nearest={"column": vector_column(k), "q": QUERY_VECTOR, "k": 10, "nprobes": 2,
                                                   "refine_factor": 400, "metric": metric},
                          disable_scoring_autoprojection=True).explain_plan()
        out[k] = "ANNIvfPartition" in plan and "LanceScan" not in plan
    return out


def _exact(uri: str, metric: str) -> list[tuple]:
    ds = lance.dataset(uri)
    bad = []
    for k in KINDS:
        q = {"column": vector_column(k), "q": QUERY_VECTOR, "k": 10, "metric": metric}
        a = ds.to_table(columns=["id"], nearest={**q, "nprobes": 2, "refine_factor": 400},
                        disable_scoring_autoprojection=True)["id"].to_pylist()
        b = ds.to_table(columns=["id"], nearest={**q, "use_index": False}, disable_scoring_autoprojection=True)["id"].to_pylist()
        if a != b:
            bad.append((k, a, b))
    return bad


@pytest.mark.interop
@pytest.mark.parametrize("metric", ["l2", "cosine"])
@pytest.mark.parametrize("stable", [False, True], ids=["addresses", "stable_row_ids"])
def test_vector_segments_as_pylance_writes_them(tmp_path, stable, metric, file_version):
    uri, twin = str(tmp_path / "ds"), str(tmp_path / "twin")
    _build(uri, stable=stable, file_version=file_version, metric=metric)
    copy(uri, twin)
    for u in (uri, twin):
        lance.write_dataset(table(600, start=3000), u, mode="append")
    lf.dataset(uri).optimize.optimize_indices(num_indices_to_merge=0)
    lance.dataset(twin).optimize.optimize_indices(num_indices_to_merge=0)
    _same_as_twin(uri, twin)
    assert len(_segments(uri)[1][index_name("IVF_PQ")]) == 2
    ds = lance.dataset(uri)
    assert {k: ds.stats.index_stats(index_name(k))["num_unindexed_rows"] for k in KINDS} == dict.fromkeys(KINDS, 0)
    assert _ann_plan_ok(uri, metric) == dict.fromkeys(KINDS, True)
    assert _exact(uri, metric) == []

    for u in (uri, twin):  # the newest segment merged with the new rows, on the same model
        lance.write_dataset(table(300, start=4000), u, mode="append")
    lf.dataset(uri).optimize.optimize_indices(num_indices_to_merge=1)
    lance.dataset(twin).optimize.optimize_indices(num_indices_to_merge=1)
    _same_as_twin(uri, twin)
    assert _exact(uri, metric) == []
    if metric == "l2":
        assert follow_ups(uri, KINDS) == [(s, []) for s in
                                          ("append", "delete", "compact_files", "cleanup_old_versions", "optimize_indices")]


@pytest.mark.interop
@pytest.mark.parametrize("stable", [False, True], ids=["addresses", "stable_row_ids"])
def test_lancedb_uses_vector_segments(tmp_path, stable, file_version):
    path = str(tmp_path / "db")
    uri = os.path.join(path, "t.lance")
    _build(uri, stable=stable, file_version=file_version, metric="l2")
    lf.write_dataset(table(600, start=3000), uri, mode="append")
    lf.dataset(uri).optimize.optimize_indices(num_indices_to_merge=0)
    t = lancedb.connect(path).open_table("t")
    assert {index_name(k) for k in KINDS} <= {i.name for i in t.list_indices()}
    brute = lance.dataset(uri)
    for k in KINDS:
        col = vector_column(k)
        search = t.search(QUERY_VECTOR, vector_column_name=col).nprobes(2).refine_factor(400).limit(10).select(["id"])
        plan = search.explain_plan(True)
        assert "ANNIvfPartition" in plan and "LanceScan" not in plan, k
        got = search.to_arrow()["id"].to_pylist()
        want = brute.to_table(columns=["id"], nearest={"column": col, "q": QUERY_VECTOR, "k": 10, "use_index": False},
                              disable_scoring_autoprojection=True)["id"].to_pylist()
        assert got == want, k
    assert wrong_answers(brute, KINDS) == []
    assert np.isfinite(brute.stats.index_stats(index_name("IVF_PQ"))["num_indexed_rows"])


@pytest.mark.interop
@pytest.mark.parametrize("metric", ["l2", "cosine"])
@pytest.mark.parametrize("stable", [False, True], ids=["addresses", "stable_row_ids"])
def test_create_index_trained_by_lance_ops(tmp_path, stable, metric, file_version):
    """lance_ops trains IVF_PQ / IVF_FLAT (NumPy k-means on a sample); pylance and lancedb use the
    index, answer exactly with every partition probed, and keep it right through their own
    append, delete, compaction, cleanup and optimize_indices."""
    path = str(tmp_path / "db")
    uri = os.path.join(path, "t.lance")
    lance.write_dataset(table(2400), uri, max_rows_per_file=600, enable_stable_row_ids=stable,
                        data_storage_version=file_version)
    ds = lf.dataset(uri)
    ds.create_index(vector_column("IVF_PQ"), "IVF_PQ", name=index_name("IVF_PQ"), num_partitions=2,
                    num_sub_vectors=2, metric=metric)
    ds.create_index(vector_column("IVF_FLAT"), "IVF_FLAT", name=index_name("IVF_FLAT"), num_partitions=2,
                    metric=metric)
    twin = str(tmp_path / "twin")
    lance.write_dataset(table(2400), twin, max_rows_per_file=600, enable_stable_row_ids=stable,
                        data_storage_version=file_version)
    pl_twin = lance.dataset(twin)
    pl_twin.create_index(vector_column("IVF_PQ"), "IVF_PQ", name=index_name("IVF_PQ"), num_partitions=2,
                         num_sub_vectors=2, metric=metric)
    pl_twin.create_index(vector_column("IVF_FLAT"), "IVF_FLAT", name=index_name("IVF_FLAT"), num_partitions=2,
                         metric=metric)
    ours, theirs = _segments(uri)[1], _segments(twin)[1]
    for k in KINDS:
        (o,), (t,) = ours[index_name(k)], theirs[index_name(k)]
        assert (o.kind, o.type_url, o.index_version, o.fields, o.fragment_ids) == (
            t.kind, t.type_url, t.index_version, t.fields, t.fragment_ids)
        assert sorted(o.details) == sorted(t.details)  # same fields and parameters (map order aside)
        co, ct = _contents(ds, o), _contents(lf.dataset(twin), t)
        for f in co:
            assert (co[f][0], co[f][1], co[f][2]) == (ct[f][0], ct[f][1], ct[f][2]), (k, f)  # version, schema, metadata
            assert co[f][3].num_rows == ct[f][3].num_rows
    assert _ann_plan_ok(uri, metric) == dict.fromkeys(KINDS, True)
    assert _exact(uri, metric) == []
    t = lancedb.connect(path).open_table("t")
    assert {index_name(k) for k in KINDS} <= {i.name for i in t.list_indices()}
    search = t.search(QUERY_VECTOR, vector_column_name=vector_column("IVF_PQ")).metric(metric)
    search = search.nprobes(2).refine_factor(400).limit(10).select(["id"])
    assert "ANNIvfPartition" in search.explain_plan(True)
    if metric == "l2":
        assert follow_ups(uri, KINDS) == [(s, []) for s in
                                          ("append", "delete", "compact_files", "cleanup_old_versions", "optimize_indices")]
