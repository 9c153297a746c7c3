"""Scalar indices built by lance_ops (``create_scalar_index``, ``optimize_indices``) are used by
pylance 14 and lancedb 0.40 and answer exactly, at file formats 2.0 and 2.2, with and without
stable row ids; their files are laid out as pylance 14 writes them; pylance's own maintenance
keeps them right afterwards.
"""

import os
from datetime import timedelta

import lance
import lancedb
import numpy as np
import pyarrow as pa
import pytest
from file_versions import pin_file_version
from index_support import QUERIES, SCALAR, copy, follow_ups, index_name, indices_used, table, wrong_answers

import lance_ops.format as lf
from lance_ops.format.errors import (
    InvalidArgumentError,
    RetryableCommitConflictError,
    SchemaError,
    UnsupportedFeatureError,
)
from lance_ops.format.file.reader import DataFileReader
from lance_ops.format.index.metadata import IndexMetadata, decode_index_section
from lance_ops.format.index.rowaddr import decode_row_addr_treemap
from lance_ops.format.ops.index_build import (
    commit_index_build,
    execute_index_task,
    plan_create_scalar_index,
)

KINDS = ("BTREE", "BITMAP", "LABEL_LIST", "ZONEMAP")
ROWS, PER_FILE = 2400, 600


@pytest.fixture(params=("2.0", "2.2"), autouse=True)
def file_version(request, monkeypatch):
    """This suite runs at 2.0 and 2.2 (overrides the interop conftest's three versions)."""
    return pin_file_version(monkeypatch, request.param)


@pytest.fixture(params=[False, True], ids=["addresses", "stable_row_ids"])
def stable(request):
    return request.param


def _write(uri: str, stable: bool, file_version: str) -> None:
    lance.write_dataset(table(ROWS), uri, max_rows_per_file=PER_FILE, enable_stable_row_ids=stable,
                        data_storage_version=file_version)
    lance.dataset(uri).delete("id % 10 = 0")


def _create_all(uri: str) -> lf.LanceDataset:
    ds = lf.dataset(uri)
    for k in KINDS:
        ds.create_scalar_index(SCALAR[k], k, name=index_name(k))
    return ds


def _segments(uri: str) -> dict[str, list[IndexMetadata]]:
    m = lf.dataset(uri).manifest
    out: dict[str, list[IndexMetadata]] = {}
    for i in decode_index_section(m.index_section):
        out.setdefault(i.name, []).append(i)
    return out


def _unindexed(uri: str) -> dict[str, int]:
    ds = lance.dataset(uri)
    return {index_name(k): ds.stats.index_stats(index_name(k))["num_unindexed_rows"] for k in KINDS}


def _new_rows_found(uri: str, start: int) -> list[tuple[str, int, int]]:
    """Queries that hit only appended rows: indexed answer vs brute force."""
    ds = lance.dataset(uri)
    bad = []
    for q in (f"id = {start + 1}", f"id >= {start} AND id < {start + 40}", f"val = {(start + 1) * 3 % 1000}"):
        a = ds.to_table(columns=["id"], filter=q)["id"].to_pylist()
        b = ds.to_table(columns=["id"], filter=q, use_scalar_index=False)["id"].to_pylist()
        if sorted(a) != sorted(b) or not b:
            bad.append((q, len(a), len(b)))
    return bad


@pytest.mark.interop
def test_create_scalar_index_is_used_by_pylance(tmp_path, stable, file_version):
    uri = str(tmp_path / "ds")
    _write(uri, stable, file_version)
    before = lance.dataset(uri).version
    ds = _create_all(uri)
    assert ds.version == before + len(KINDS)
    pl = lance.dataset(uri)
    assert indices_used(pl, KINDS) == dict.fromkeys(KINDS, True)
    assert wrong_answers(pl, KINDS) == []
    assert _unindexed(uri) == dict.fromkeys(map(index_name, KINDS), 0)
    assert {d.name: d.num_rows_indexed for d in pl.describe_indices()} == dict.fromkeys(
        map(index_name, KINDS), ROWS - ROWS // 10)
    segs = _segments(uri)
    assert {n: [s.index_version for s in v] for n, v in segs.items()} == {
        "btree_idx": [1 if stable else 0], "bitmap_idx": [0], "label_list_idx": [1], "zonemap_idx": [0]}
    for s in (v[0] for v in segs.values()):
        assert s.fragment_ids == frozenset(range(ROWS // PER_FILE))
        for f in s.files:
            r = DataFileReader(ds._store, f"{s.directory}/{f.path}")
            assert ".".join(map(str, r.version)) == file_version


def _read(store, directory: str, name: str) -> tuple[DataFileReader, pa.Table]:
    r = DataFileReader(store, f"{directory}/{name}")
    return r, pa.Table.from_batches(list(r.read(batch_size=1 << 20)), schema=r.schema.to_arrow())


def _row_sets(t: pa.Table) -> list[list[int]]:
    return [decode_row_addr_treemap(b).addrs.tolist() for b in t["bitmaps"].to_pylist()]


def _same_content(kind: str, ours: pa.Table, theirs: pa.Table, name: str) -> None:
    if name == "page_data.lance":  # ties may come in another order: compare (value, id) pairs
        key = [("values", "ascending"), ("ids", "ascending")]
        assert ours.sort_by(key).equals(theirs.sort_by(key))
        assert ours["values"].equals(theirs["values"])
    elif "bitmaps" in ours.column_names:
        assert ours["keys"].equals(theirs["keys"])
        assert _row_sets(ours) == _row_sets(theirs)
    else:
        assert ours.equals(theirs), kind


@pytest.mark.interop
def test_files_laid_out_as_pylance_writes_them(tmp_path, stable, file_version):
    ours_uri, theirs_uri = str(tmp_path / "ours"), str(tmp_path / "theirs")
    _write(ours_uri, stable, file_version)
    copy(ours_uri, theirs_uri)
    _create_all(ours_uri)
    pl = lance.dataset(theirs_uri)
    for k in KINDS:
        pl.create_scalar_index(SCALAR[k], k, name=index_name(k))
    ours, theirs = _segments(ours_uri), _segments(theirs_uri)
    store = lf.dataset(ours_uri)._store
    tstore = lf.dataset(theirs_uri)._store
    for k in KINDS:
        (o,), (t,) = ours[index_name(k)], theirs[index_name(k)]
        assert (o.type_url, o.details, o.index_version, o.fields, o.fragment_ids) == (
            t.type_url, t.details, t.index_version, t.fields, t.fragment_ids), k
        assert [f.path for f in o.files] == [f.path for f in t.files]
        for f in o.files:
            assert store.size(f"{o.directory}/{f.path}") == f.size_bytes
            ro, to = _read(store, o.directory, f.path)
            rt, tt = _read(tstore, t.directory, f.path)
            assert ro.version == rt.version
            assert ro.schema.to_arrow().remove_metadata() == rt.schema.to_arrow().remove_metadata()
            assert dict(ro.schema.metadata) == dict(rt.schema.metadata)
            assert ro._gbo.shape[0] == rt._gbo.shape[0]
            for g in range(1, ro._gbo.shape[0]):
                a, b = decode_row_addr_treemap(ro.global_buffer(g)), decode_row_addr_treemap(rt.global_buffer(g))
                assert a.addrs.tolist() == b.addrs.tolist()
            _same_content(k, to, tt, f.path)


@pytest.mark.interop
def test_optimize_indices_adds_and_merges_segments_as_pylance(tmp_path, stable, file_version):
    uri, twin = str(tmp_path / "ds"), str(tmp_path / "twin")
    _write(uri, stable, file_version)
    _create_all(uri)
    copy(uri, twin)
    for u in (uri, twin):
        lance.write_dataset(table(600, start=3000), u, mode="append")
    lf.dataset(uri).optimize.optimize_indices(num_indices_to_merge=0)
    lance.dataset(twin).optimize.optimize_indices(num_indices_to_merge=0)
    new_frag = max(f.fragment_id for f in lance.dataset(uri).get_fragments())
    segs = _segments(uri)
    for k in KINDS:
        old, new = segs[index_name(k)]
        assert new.fragment_ids == frozenset({new_frag}) and new.uuid != old.uuid
        assert [s.fragment_ids for s in segs[index_name(k)]] == [s.fragment_ids for s in _segments(twin)[index_name(k)]]
    assert _unindexed(uri) == dict.fromkeys(map(index_name, KINDS), 0)
    assert indices_used(lance.dataset(uri), KINDS) == dict.fromkeys(KINDS, True)
    assert wrong_answers(lance.dataset(uri), KINDS) == []
    assert _new_rows_found(uri, 3000) == []

    # nothing unindexed and one segment selected: no commit (as pylance)
    v = lf.dataset(uri).version
    ds = lf.dataset(uri)
    assert ds.optimize_indices(num_indices_to_merge=1 if not stable else 0) is None
    assert ds.version == v

    for u in (uri, twin):
        lance.write_dataset(table(600, start=4000), u, mode="append")
    lf.dataset(uri).optimize.optimize_indices()  # default: merge the newest segment
    lance.dataset(twin).optimize.optimize_indices()
    for k in KINDS:
        got = [s.fragment_ids for s in _segments(uri)[index_name(k)]]
        assert got == [s.fragment_ids for s in _segments(twin)[index_name(k)]]
        # with stable row ids the old segment covers fragments with deletions: pylance merges it too
        assert len(got) == (1 if stable else 2)
    assert _unindexed(uri) == dict.fromkeys(map(index_name, KINDS), 0)
    assert wrong_answers(lance.dataset(uri), KINDS) == []
    assert _new_rows_found(uri, 4000) == []
    assert follow_ups(uri, KINDS) == [(s, []) for s in
                                      ("append", "delete", "compact_files", "cleanup_old_versions", "optimize_indices")]


@pytest.mark.interop
def test_optimize_indices_after_lance_ops_compaction(tmp_path, stable, file_version):
    uri = str(tmp_path / "ds")
    _write(uri, stable, file_version)
    _create_all(uri)
    lf.write_dataset(table(500, start=3000), uri, mode="append", max_rows_per_file=250)
    lf.dataset(uri).compact_files(target_rows_per_fragment=1200)
    lf.dataset(uri).optimize.optimize_indices(num_indices_to_merge=0)
    assert _unindexed(uri) == dict.fromkeys(map(index_name, KINDS), 0)
    assert wrong_answers(lance.dataset(uri), KINDS) == []
    assert _new_rows_found(uri, 3000) == []
    lance.dataset(uri).optimize.compact_files(target_rows_per_fragment=5000)
    lance.dataset(uri).cleanup_old_versions(older_than=timedelta(0))
    assert wrong_answers(lance.dataset(uri), KINDS) == []


def _lancedb_table(path: str, stable: bool, file_version: str):
    """A lancedb database whose table ``t`` pylance wrote (lancedb opens ``<path>/t.lance``)."""
    lance.write_dataset(table(ROWS), os.path.join(path, "t.lance"), max_rows_per_file=PER_FILE,
                        enable_stable_row_ids=stable, data_storage_version=file_version)
    return lancedb.connect(path)


@pytest.mark.interop
def test_lancedb_uses_them(tmp_path, stable, file_version):
    db = _lancedb_table(str(tmp_path), stable, file_version)
    uri = str(tmp_path / "t.lance")
    _create_all(uri)
    lf.write_dataset(table(600, start=3000), uri, mode="append")
    lf.dataset(uri).optimize.optimize_indices(num_indices_to_merge=0)
    t = db.open_table("t")
    listed = {i.name for i in t.list_indices()}
    # lancedb 0.40 (Lance core 13) reads BTREE index version 0 only: pylance 14's (and so lance_ops')
    # BTREE on a dataset with stable row ids is version 1, which it leaves out and answers by scan
    used_by_lancedb = [k for k in KINDS if not (k == "BTREE" and stable)]
    assert listed == {index_name(k) for k in used_by_lancedb}
    brute = lance.dataset(uri)
    for k in used_by_lancedb:
        for q in [*QUERIES[k], "id = 3001"] if k == "BTREE" else QUERIES[k]:
            search = t.search().where(q).select(["id"]).limit(None)
            assert f"@{index_name(k)}(" in search.explain_plan(True), (k, q)
            got = sorted(search.to_arrow()["id"].to_pylist())
            assert got == sorted(brute.to_table(columns=["id"], filter=q, use_scalar_index=False)["id"].to_pylist())


@pytest.mark.interop
def test_errors_and_failed_commit_leave_nothing(tmp_path, file_version):
    uri = str(tmp_path / "ds")
    _write(uri, False, file_version)
    ds = lf.dataset(uri)
    with pytest.raises(UnsupportedFeatureError, match="IVF_PQ"):
        ds.create_scalar_index("id", "IVF_PQ")
    with pytest.raises(SchemaError, match="nope"):
        ds.create_scalar_index("nope", "BTREE")
    with pytest.raises(UnsupportedFeatureError, match="cat"):
        ds.create_scalar_index("cat", "LABEL_LIST")
    ds.create_scalar_index("id", "BTREE")
    with pytest.raises(InvalidArgumentError, match="id_idx"):
        ds.create_scalar_index("id", "BITMAP", replace=False)
    before = ds.version
    replaced = ds
    assert replaced.create_scalar_index("id", "BITMAP") is None
    assert [(i.name, i.kind) for s in _segments(uri).values() for i in s] == [("id_idx", "BITMAP")]
    assert replaced.version == before + 1
    with pytest.raises(ValueError, match="num_indices_to_merge"):
        replaced.optimize_indices(num_indices_to_merge=-1)
    with pytest.raises(KeyError, match="nope"):
        replaced.optimize_indices(index_names=["nope"])

    # a compaction lands between planning and commit: retryable, and the segment's files are gone
    m = lf.dataset(uri).manifest
    plan = plan_create_scalar_index(m, "val", "ZONEMAP")
    seg = execute_index_task(ds._store, m, plan.tasks[0])
    assert os.path.isdir(os.path.join(uri, seg.directory))
    lance.dataset(uri).optimize.compact_files(target_rows_per_fragment=5000)
    last = lance.dataset(uri).version
    with pytest.raises(RetryableCommitConflictError, match="rewritten"):
        commit_index_build(ds._store, plan, [seg])
    assert not os.path.exists(os.path.join(uri, seg.directory))
    assert lance.dataset(uri).version == last
    assert "val_idx" not in {i.name for i in lance.dataset(uri).describe_indices()}


@pytest.mark.interop
def test_large_category_like_btree(tmp_path, file_version):
    """150k rows of few distinct values (the dictionary-code sort path), NaN and nulls included."""
    uri = str(tmp_path / "ds")
    i = np.arange(150_000)
    t = pa.table({
        "id": i,
        "f": pa.array(np.where(i % 1000 == 5, np.nan, (i * 7 % 100) * 0.5), mask=i % 777 == 0),
        "s": pa.array([f"k{v % 40:02d}" for v in i]),
    })
    lance.write_dataset(t, uri, max_rows_per_file=40_000, data_storage_version=file_version)
    ds = lf.dataset(uri)
    ds.create_scalar_index("f", "BTREE")
    ds.create_scalar_index("s", "BTREE")
    pl = lance.dataset(uri)
    for q, name in (("f = 12.5", "f_idx"), ("f < 3", "f_idx"), ("f IS NULL", "f_idx"), ("s = 'k07'", "s_idx"),
                    ("s >= 'k35'", "s_idx")):
        assert f"@{name}(" in pl.scanner(columns=["id"], filter=q).explain_plan()
        got = sorted(pl.to_table(columns=["id"], filter=q)["id"].to_pylist())
        assert got and got == sorted(pl.to_table(columns=["id"], filter=q, use_scalar_index=False)["id"].to_pylist())


@pytest.mark.interop
def test_optimize_indices_over_lancedb_built_indices(tmp_path, stable, file_version):
    """lancedb 0.40 builds BTREE / BITMAP / LABEL_LIST; lance_ops adds the appended rows as pylance
    14 does (on a twin): a segment each, except lancedb's row-id BTREE (index version 0 with stable
    row ids), which is rewritten whole in pylance's format."""
    opts = {"new_table_enable_stable_row_ids": "true"} if stable else {}
    db = lancedb.connect(str(tmp_path / "db"), storage_options=opts)
    t = db.create_table("t", table(ROWS), data_storage_version=file_version)
    kinds = ("BTREE", "BITMAP", "LABEL_LIST")
    for k in kinds:
        t.create_scalar_index(SCALAR[k], index_type=k, name=index_name(k))
    t.add(table(600, start=3000))
    uri = str(tmp_path / "db" / "t.lance")
    twin = copy(uri, str(tmp_path / "twin.lance"))
    assert lf.dataset(uri).has_stable_row_ids is stable
    lf.dataset(uri).optimize.optimize_indices(num_indices_to_merge=0)
    lance.dataset(twin).optimize.optimize_indices(num_indices_to_merge=0)
    ours, theirs = _segments(uri), _segments(twin)
    for k in kinds:
        got = [(s.fragment_ids, s.index_version) for s in ours[index_name(k)]]
        assert got == [(s.fragment_ids, s.index_version) for s in theirs[index_name(k)]], k
    assert len(ours["btree_idx"]) == (1 if stable else 2)
    pl = lance.dataset(uri)
    assert {k: pl.stats.index_stats(index_name(k))["num_unindexed_rows"] for k in kinds} == dict.fromkeys(kinds, 0)
    assert indices_used(pl, kinds) == dict.fromkeys(kinds, True)
    assert wrong_answers(pl, kinds) == []
    assert _new_rows_found(uri, 3000) == []
    ldb = db.open_table("t")
    for k in kinds if not stable else kinds[1:]:  # lancedb 0.40 leaves a version-1 BTREE out
        for q in QUERIES[k]:
            search = ldb.search().where(q).select(["id"]).limit(None)
            assert f"@{index_name(k)}(" in search.explain_plan(True), (k, q)
            assert sorted(search.to_arrow()["id"].to_pylist()) == sorted(
                pl.to_table(columns=["id"], filter=q, use_scalar_index=False)["id"].to_pylist())
