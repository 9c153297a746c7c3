"""``LanceDataset.merge_insert`` against pylance 14's on the same data.

Two copies of one pylance-built dataset (with and without stable row ids, every file format of
the interop conftest); the same source is merged into one by pylance and into the other by
lance_ops; both must then read the same (rows, ``_rowid``, both row version columns) in both
libraries, and return the same counts.  pylance conditions are SQL, ours Arrow expressions.
"""

import os
import shutil

import lance
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from datagen import META

import lance_ops.format as lf
from lance_ops.format.errors import AmbiguousMergeInsertError, CommitConflictError

pytestmark = pytest.mark.interop

COLS = ["id", "val", "score"]


def base_table(n: int = 60) -> pa.Table:
    ids = pa.array([None if i == 7 else i for i in range(n)], pa.int64())  # one null key
    return pa.table({"id": ids, "val": pa.array([f"v{i}" for i in range(n)]),
                     "score": pa.array([float(i) for i in range(n)])})


def source_table() -> pa.Table:
    ids = [3, 25, 41, 59, 100, 101, None]  # 4 matched, 2 new, 1 null key (never matches)
    return pa.table({"id": pa.array(ids, pa.int64()), "val": pa.array([f"s{i}" for i in ids]),
                     "score": pa.array([-1.0, 30.0, -3.0, 80.0, 5.0, 6.0, 7.0])})


@pytest.fixture(params=[True, False], ids=["stable", "unstable"])
def pair(request, tmp_path):
    """(pylance copy, lance_ops copy) of a dataset pylance wrote in two versions."""
    theirs, ours = str(tmp_path / "theirs"), str(tmp_path / "ours")
    lance.write_dataset(base_table().slice(0, 40), theirs, enable_stable_row_ids=request.param, max_rows_per_file=25)
    lance.write_dataset(base_table().slice(40), theirs, mode="append")
    shutil.copytree(theirs, ours)
    return theirs, ours


def rows(uri: str, reader) -> list[tuple]:
    ds = reader.dataset(uri)
    cols = COLS + (META if ds.has_stable_row_ids else [])
    t = ds.to_table(columns=cols).to_pylist()
    return sorted((tuple(r[c] for c in cols) for r in t), key=lambda r: tuple((x is None, x or 0) for x in r))


def assert_same(theirs: str, ours: str) -> None:
    expected = rows(theirs, lance)
    assert rows(ours, lance) == expected
    assert rows(ours, lf) == expected
    assert lance.dataset(ours).version == lance.dataset(theirs).version


CASES = {
    "upsert": (lambda b: b.when_matched_update_all().when_not_matched_insert_all(),) * 2,
    "update_only": (lambda b: b.when_matched_update_all(),) * 2,
    "insert_only": (lambda b: b.when_not_matched_insert_all(),) * 2,
    "delete_by_source": (lambda b: b.when_not_matched_by_source_delete(),) * 2,
    "upsert_and_delete_by_source": (lambda b: b.when_matched_update_all().when_not_matched_insert_all()
                                    .when_not_matched_by_source_delete(),) * 2,
    "conditional_update": (
        lambda b: b.when_matched_update_all("source.score > target.score").when_not_matched_insert_all(),
        lambda b: b.when_matched_update_all(pc.field("source", "score") > pc.field("target", "score"))
        .when_not_matched_insert_all(),
    ),
    "conditional_delete": (
        lambda b: b.when_matched_update_all().when_not_matched_by_source_delete("id >= 30"),
        lambda b: b.when_matched_update_all().when_not_matched_by_source_delete(pc.field("id") >= 30),
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_merge_insert_matches_pylance(pair, case):
    theirs, ours = pair
    build_theirs, build_ours = CASES[case]
    expected = build_theirs(lance.dataset(theirs).merge_insert("id")).execute(source_table())
    got = build_ours(lf.dataset(ours).merge_insert("id")).execute(source_table())
    assert got == expected
    assert_same(theirs, ours)
    # the new version is one Update that pylance continues from: another merge, then compaction
    src2 = pa.table({"id": pa.array([3, 200], pa.int64()), "val": ["t3", "t200"], "score": [0.5, 0.25]})
    stats = []
    for uri in (theirs, ours):
        ds = lance.dataset(uri)
        stats.append(ds.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(src2))
        lance.dataset(uri).optimize.compact_files()
    assert stats[0] == stats[1] and stats[0]["num_inserted_rows"] == 1
    assert_same(theirs, ours)


def test_upsert_counts_and_row_ids(pair):
    theirs, ours = pair
    before = {r[0]: r for r in rows(ours, lf)}
    stats = lf.dataset(ours).merge_insert("id").when_matched_update_all().when_not_matched_insert_all() \
        .execute(source_table())
    assert stats == {"num_inserted_rows": 3, "num_updated_rows": 4, "num_deleted_rows": 0}
    after = {r[0]: r for r in rows(ours, lf) if r[0] is not None}
    assert after[25][1:3] == ("s25", 30.0)
    if lf.dataset(ours).has_stable_row_ids:
        for k in (3, 25, 41, 59):  # same _rowid and created_at, last_updated = new version 3
            assert after[k][3:5] == before[k][3:5] and after[k][5] == 3
        assert sorted(after[k][3] for k in (100, 101)) == [60, 61]


def test_execute_uncommitted_then_commit(pair):
    theirs, ours = pair
    txn, stats = lance.dataset(theirs).merge_insert("id").when_matched_update_all() \
        .when_not_matched_insert_all().execute_uncommitted(source_table())
    lance.LanceDataset.commit(theirs, txn)
    txn2, stats2 = lf.dataset(ours).merge_insert("id").when_matched_update_all() \
        .when_not_matched_insert_all().execute_uncommitted(source_table())
    assert stats2 == stats and isinstance(txn2.operation, lf.Update) and txn2.read_version == 2
    assert lance.dataset(ours).version == 2  # nothing committed yet
    assert lf.commit(ours, txn2).version == 3
    assert_same(theirs, ours)


def test_update_covers_every_field(pair):
    _, ours = pair
    txn, _ = lf.dataset(ours).merge_insert("id").when_matched_update_all().execute_uncommitted(source_table())
    ds = lf.dataset(ours)
    assert list(txn.operation.fields_for_preserving_frag_bitmap) == [f.id for f in ds.lance_schema.fields]
    assert list(txn.operation.fields_modified) == []


def test_ambiguous_source_is_refused_like_pylance(pair):
    theirs, ours = pair
    dup = pa.table({"id": pa.array([5, 5], pa.int64()), "val": ["a", "b"], "score": [0.0, 1.0]})
    with pytest.raises(OSError, match="Ambiguous merge inserts are prohibited"):
        lance.dataset(theirs).merge_insert("id").when_matched_update_all().execute(dup)
    with pytest.raises(AmbiguousMergeInsertError, match=r"Ambiguous merge inserts are prohibited.*\(id = 5\)") as e:
        lf.dataset(ours).merge_insert("id").when_matched_update_all().execute(dup)
    assert isinstance(e.value, ValueError) and ours in str(e.value)
    assert lance.dataset(ours).version == 2
    assert unreferenced_files(ours) == set()


def test_bad_sql_and_bad_keys_are_typed_errors(pair):
    _, ours = pair
    ds = lf.dataset(ours)
    with pytest.raises(lf.SQLUnknownColumnError, match="'nope'"):
        ds.merge_insert("id").when_matched_update_all("source.nope > target.score")
    with pytest.raises(lf.SQLParseError, match="position"):
        ds.merge_insert("id").when_not_matched_by_source_delete("score >")
    with pytest.raises(lf.SchemaError, match=r"key column\(s\) \['nope'\]"):
        ds.merge_insert("nope")
    with pytest.raises(lf.SchemaError, match="unexpected \\['nope'\\]"):
        ds.merge_insert("id").when_matched_update_all().execute(source_table().append_column("nope", pa.array([1] * 7)))


@pytest.mark.parametrize("drop", [["score"], ["val"], ["val", "score"]])
def test_a_source_lacking_columns_updates_only_the_columns_it_has(pair, drop):
    """pylance's partial-column merge_insert: matched rows keep the target's values of the columns
    the source lacks, inserted rows get nulls; same rows, _rowid and version columns as pylance."""
    theirs, ours = pair
    src = source_table().drop_columns(drop)
    expected = lance.dataset(theirs).merge_insert("id").when_matched_update_all().when_not_matched_insert_all() \
        .execute(src)
    got = lf.dataset(ours).merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(src)
    assert got == expected
    assert_same(theirs, ours)


def test_reader_and_batch_sources(pair):
    theirs, ours = pair
    src = source_table()
    lance.dataset(theirs).merge_insert("id").when_matched_update_all().execute(src)
    lf.dataset(ours).merge_insert("id").when_matched_update_all().execute(pa.RecordBatchReader.from_batches(
        src.schema, src.to_batches()))
    assert_same(theirs, ours)
    lance.dataset(theirs).merge_insert("id").when_not_matched_insert_all().execute(src)
    lf.dataset(ours).merge_insert("id").when_not_matched_insert_all().execute(src.combine_chunks().to_batches()[0])
    assert_same(theirs, ours)


def referenced(uri: str) -> set[str]:
    out = set()
    for v in lance.dataset(uri).versions():
        for f in lf.dataset(uri, version=v["version"]).manifest.fragments:
            out |= {f"data/{df.path}" for df in f.files}
            if f.deletion_file is not None:
                from lance_ops.format.table.deletion import deletion_file_path
                out.add(deletion_file_path(f.id, f.deletion_file.to_proto()))
    return out


def on_disk(uri: str) -> set[str]:
    out = set()
    for d in ("data", "_deletions"):
        for root, _, files in os.walk(os.path.join(uri, d)):
            out |= {os.path.relpath(os.path.join(root, f), uri) for f in files}
    return out


def unreferenced_files(uri: str) -> set[str]:
    return on_disk(uri) - referenced(uri)


def test_lost_commit_leaves_no_files(pair):
    _, ours = pair
    stale = lf.dataset(ours)  # pinned at version 2
    lance.dataset(ours).delete("id = 3 OR id = 41 OR id = 59")  # a concurrent delete of rows the merge updates
    assert unreferenced_files(ours) == set()
    with pytest.raises(CommitConflictError):
        stale.merge_insert("id").when_matched_update_all().when_not_matched_insert_all() \
            .when_not_matched_by_source_delete(pc.field("id") > 50).execute(source_table())
    assert lance.dataset(ours).version == 3
    assert unreferenced_files(ours) == set()


def layout(uri: str) -> list[list]:
    """Per fragment (manifest order): its ids in row-address order."""
    t = lance.dataset(uri).to_table(columns=["id"], with_row_address=True)
    frags: dict[int, list] = {}
    for i, addr in sorted(zip(t["id"].to_pylist(), t["_rowaddr"].to_pylist(), strict=True), key=lambda p: p[1]):
        frags.setdefault(addr >> 32, []).append(i)
    return list(frags.values())


def test_matched_and_inserted_rows_share_the_new_fragments_as_pylance_writes_them(pair):
    """Found by tests/interop/test_model_based.py: pylance 14 writes the matched rows (target order
    here) and then the inserted rows (source order) into one new fragment; with stable row ids the
    transaction's fragment carries the matched rows' ids only and the commit numbers the rest
    (docs/FORMAT.md §16). lance_ops wrote two fragments, so later compactions planned otherwise."""
    theirs, ours = pair
    src = pa.table({"id": pa.array([41, 100, 3, 101], pa.int64()), "val": ["a", "b", "c", "d"],
                    "score": [1.0, 2.0, 3.0, 4.0]})
    for lib, uri in ((lance, theirs), (lf, ours)):
        lib.dataset(uri).merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(src)
    assert layout(ours) == layout(theirs)
    assert layout(ours)[-1] == [3, 41, 100, 101]
    ds = lance.dataset(ours)
    got = ds.to_table(columns=["id"] + META, filter="id >= 100").sort_by("id").to_pylist()
    assert got == lance.dataset(theirs).to_table(columns=["id"] + META, filter="id >= 100").sort_by("id").to_pylist()
    if ds.has_stable_row_ids:  # fresh ids after the 60 the dataset had, created at the merge's version
        assert [(r["_rowid"], r["_row_created_at_version"]) for r in got] == [(60, 3), (61, 3)]
    assert_same(theirs, ours)
