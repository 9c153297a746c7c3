"""Deletes, updates, restores and compaction, interleaved between lance_ops and pylance.

pylance 14 is the oracle: every version either library wrote reads identically in both, rows,
``_rowid`` and both row version columns included.
"""

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from datagen import META, simple_table

import lance_ops.format as lf

pytestmark = pytest.mark.interop

COLS = ["id", "val", "score"]


def assert_versions_agree(uri: str, columns=COLS) -> int:
    """Every version reads the same in lance_ops and pylance; returns the latest version."""
    latest = lance.dataset(uri).version
    assert lf.dataset(uri).version == latest
    for v in range(1, latest + 1):
        ours = lf.dataset(uri, version=v)
        theirs = lance.dataset(uri, version=v)
        a = ours.to_table(columns=columns + META)
        b = theirs.to_table(columns=columns + META)
        assert a.equals(b), f"version {v}:\nours:   {a.slice(0, 8)}\ntheirs: {b.slice(0, 8)}"
        assert ours.count_rows() == theirs.count_rows() == a.num_rows
        # addresses too: both see the same fragments and deletion vectors
        ra = ours.to_table(columns=["id"], with_row_address=True)
        rb = theirs.to_table(columns=["id"], with_row_address=True)
        assert ra.equals(rb), f"version {v}: row addresses differ"
    return latest


def ids_of(uri: str, version: int | None = None) -> list[int]:
    return sorted(lance.dataset(uri, version=version).to_table(columns=["id"])["id"].to_pylist())


def by_id(table: pa.Table) -> dict[int, dict]:
    return {r["id"]: r for r in table.to_pylist()}


# ------------------------------------------------------------------ lance_ops writes
@pytest.mark.parametrize("stable", [True, False], ids=["stable_ids", "address_ids"])
def test_our_deletes_both_file_kinds_and_whole_fragment(uri, stable):
    lf.write_dataset(simple_table(0, 12000), uri, enable_stable_row_ids=stable, max_rows_per_file=6000)
    ds = lf.dataset(uri)
    ds.delete(pc.field("id") < 10)  # 10 rows of fragment 0: .arrow
    ds.delete((pc.field("id") >= 6000) & (pc.field("id") < 11500))  # 5500 rows of fragment 1: .bin
    frags = {f.id: f for f in ds.manifest.fragments}
    assert frags[0].deletion_file.extension == "arrow" and frags[0].deletion_file.num_deleted_rows == 10
    assert frags[1].deletion_file.extension == "bin" and frags[1].deletion_file.num_deleted_rows == 5500
    ds.delete((pc.field("id") >= 10) & (pc.field("id") < 20))  # a second delete: union, still .arrow
    assert ds.manifest.fragment(0).deletion_file.num_deleted_rows == 20
    ds.delete(pc.field("id") < 6000)  # the rest of fragment 0: it leaves the manifest
    assert [f.id for f in ds.manifest.fragments] == [1]
    assert ds.manifest.reader_feature_flags & 1 and ds.manifest.writer_feature_flags & 1
    assert ds.version == 5
    assert assert_versions_agree(uri) == 5
    assert ids_of(uri) == list(range(11500, 12000))
    assert ids_of(uri, 3) == list(range(10, 6000)) + list(range(11500, 12000))
    theirs = lance.dataset(uri)
    assert theirs.count_rows() == 500
    assert [f.fragment_id for f in theirs.get_fragments()] == [1]
    # pylance keeps going on top of our deletion files (union with ours)
    theirs.delete("id >= 11990")
    assert lf.dataset(uri).count_rows() == 490
    assert lf.dataset(uri).manifest.fragment(1).deletion_file.num_deleted_rows == 5510
    assert_versions_agree(uri)


def test_our_update_keeps_stable_row_ids(uri):
    lf.write_dataset(simple_table(0, 30), uri, enable_stable_row_ids=True, max_rows_per_file=10)
    lf.write_dataset(simple_table(30, 10), uri, mode="append")
    before = by_id(lance.dataset(uri).to_table(columns=COLS + META))
    ds = lf.dataset(uri)
    ds.update(
        {"val": "'new'", "score": pc.field("score") * 10}, where=pc.field("id").isin([1, 15, 16, 35])
    )
    assert ds.version == 3
    theirs = lance.dataset(uri)
    after = by_id(theirs.to_table(columns=COLS + META))
    assert sorted(after) == list(range(40))
    for i in (1, 15, 16, 35):
        assert after[i]["val"] == "new" and after[i]["score"] == before[i]["score"] * 10
        assert after[i]["_rowid"] == before[i]["_rowid"] == i
        assert after[i]["_row_created_at_version"] == before[i]["_row_created_at_version"]
        assert after[i]["_row_last_updated_at_version"] == 3
    assert after[35]["_row_created_at_version"] == 2 and after[1]["_row_created_at_version"] == 1
    for i in set(range(40)) - {1, 15, 16, 35}:
        assert after[i] == before[i]
    # pylance finds the updated rows by their (kept) row ids
    assert theirs._take_rows([15], columns=["val"])["val"].to_pylist() == ["new"]
    # update of a whole fragment removes it and the rows live on in a new fragment
    ds.update({"val": "'all'"}, where=pc.field("id") >= 30)
    assert all(f.id != 3 for f in ds.manifest.fragments)
    assert assert_versions_agree(uri) == 4
    last = by_id(lance.dataset(uri).to_table(columns=COLS + META))
    assert [last[i]["_row_last_updated_at_version"] for i in (30, 35, 39)] == [4, 4, 4]
    assert [last[i]["_rowid"] for i in (30, 35, 39)] == [30, 35, 39]
    assert [last[i]["_row_created_at_version"] for i in (30, 35, 39)] == [2, 2, 2]


def test_our_update_without_stable_row_ids_gives_new_addresses(uri):
    lf.write_dataset(simple_table(0, 20), uri, max_rows_per_file=10)
    ds = lf.dataset(uri)
    ds.update({"val": "'u'"}, where=pc.field("id").isin([3, 14]))
    new_frag = max(f.id for f in ds.manifest.fragments)
    assert new_frag == 2
    theirs = lance.dataset(uri).to_table(columns=["id", "val", "_rowid"])
    rows = by_id(theirs)
    # the updated rows moved: their _rowid is now their address in the new fragment
    assert sorted([rows[3]["_rowid"], rows[14]["_rowid"]]) == [(2 << 32) + 0, (2 << 32) + 1]
    assert rows[4]["_rowid"] == 4 and rows[15]["_rowid"] == (1 << 32) + 5
    assert rows[3]["val"] == rows[14]["val"] == "u"
    assert assert_versions_agree(uri) == 2


@pytest.mark.parametrize("stable", [True, False], ids=["stable_ids", "address_ids"])
def test_our_restore(uri, stable):
    lf.write_dataset(simple_table(0, 20), uri, enable_stable_row_ids=stable, max_rows_per_file=10)
    ds = lf.dataset(uri)
    ds.delete(pc.field("id") < 3)
    ds.update({"val": "'x'"}, where=pc.field("id") == 10)
    ds = lf.write_dataset(simple_table(20, 5), uri, mode="append")
    ds = lf.dataset(uri, version=2)
    ds.restore()
    assert ds.version == 5
    assert ids_of(uri) == list(range(3, 20))
    ds.restore(4)
    assert ds.version == 6 and ids_of(uri) == list(range(3, 25))
    # appends after a restore continue fragment ids (and row ids) beyond everything ever used
    ds = lf.write_dataset(simple_table(100, 2), uri, mode="append")
    assert max(f.id for f in ds.manifest.fragments) == 4
    assert assert_versions_agree(uri) == 7
    if stable:
        rid = by_id(lance.dataset(uri).to_table(columns=["id", "_rowid"]))
        assert rid[100]["_rowid"] == 25 and rid[101]["_rowid"] == 26
    # pylance restores on top of our history too
    lance.dataset(uri, version=3).restore()
    assert ids_of(uri) == list(range(3, 20))
    assert assert_versions_agree(uri) == 8


# ------------------------------------------------------------------- pylance writes
@pytest.mark.parametrize("stable", [True, False], ids=["stable_ids", "address_ids"])
def test_we_mutate_what_pylance_mutated(uri, stable):
    lance.write_dataset(simple_table(0, 100), uri,
                        enable_stable_row_ids=stable, max_rows_per_file=30)
    theirs = lance.dataset(uri)
    theirs.delete("id < 5 OR id = 40")
    theirs.update({"val": "'p'"}, where="id >= 50 AND id < 55")
    assert assert_versions_agree(uri) == 3
    ours = lf.dataset(uri)
    ours.delete(pc.field("id").isin([6, 41, 52]))  # unions with pylance's deletion files
    ours.update({"score": pc.field("score") + 1000}, where=pc.field("id").isin([7, 53, 99]))
    ours.delete(pc.field("id") >= 90)  # fragment 3 (ids 90..99) goes entirely
    assert ours.version == 6
    assert assert_versions_agree(uri) == 6
    theirs = lance.dataset(uri)
    theirs.delete("id = 8")
    theirs.update({"val": "'q'"}, where="id = 53")
    lance.write_dataset(simple_table(200, 5), uri, mode="append")
    assert assert_versions_agree(uri) == 9
    rows = by_id(lf.dataset(uri).to_table(columns=COLS + META))
    expected = set(range(100)) - set(range(5)) - {40, 6, 41, 52, 8} - set(range(90, 100)) | set(range(200, 205))
    assert set(rows) == expected
    assert rows[53]["val"] == "q" and rows[53]["score"] == 53 * 0.5 + 1000
    assert rows[7]["score"] == 7 * 0.5 + 1000 and rows[50]["val"] == "p"
    if stable:
        assert rows[53]["_rowid"] == 53 and rows[53]["_row_last_updated_at_version"] == 8
        assert rows[7]["_row_last_updated_at_version"] == 5 and rows[7]["_row_created_at_version"] == 1
        assert rows[200]["_rowid"] == 100


def mixed_history(uri: str) -> None:
    """Both libraries append, delete, update and compact in turns (stable row ids)."""
    lf.write_dataset(simple_table(0, 40), uri, enable_stable_row_ids=True, max_rows_per_file=10)  # 1
    lance.write_dataset(simple_table(40, 20), uri, mode="append", max_rows_per_file=10)  # 2
    lf.dataset(uri).delete(pc.field("id").isin([0, 1, 45]))  # 3
    lance.dataset(uri).delete("id = 2 OR id = 46")  # 4
    lf.dataset(uri).update({"val": "'ours'"}, where=pc.field("id").isin([3, 47]))  # 5
    lance.dataset(uri).update({"val": "'theirs'"}, where="id = 4 OR id = 48")  # 6
    lf.write_dataset(simple_table(60, 5), uri, mode="append")  # 7
    lance.dataset(uri).optimize.compact_files(target_rows_per_fragment=25)  # 8, 9
    lf.dataset(uri).delete(pc.field("id").isin([5, 61]))  # 10
    lf.dataset(uri).compact_files(target_rows_per_fragment=1000)  # 11, 12
    lance.dataset(uri).update({"score": "score + 100"}, where="id = 6 OR id = 62")  # 13
    lance.write_dataset(simple_table(70, 3), uri, mode="append")  # 14
    lf.dataset(uri).update({"val": "'last'"}, where=pc.field("id").isin([7, 71]))  # 15
    lance.dataset(uri).delete("id = 70")  # 16


def test_mixed_history(uri):
    mixed_history(uri)
    assert assert_versions_agree(uri) == 16
    rows = by_id(lf.dataset(uri).to_table(columns=COLS + META))
    assert set(rows) == (set(range(65)) | {70, 71, 72}) - {0, 1, 2, 45, 46, 5, 61, 70}
    assert [rows[i]["val"] for i in (3, 47, 4, 48, 7, 71)] == ["ours", "ours", "theirs", "theirs", "last", "last"]
    assert rows[6]["score"] == 103 and rows[62]["score"] == 131
    # compaction by either side kept every row's id and versions
    assert all(rows[i]["_rowid"] == i for i in rows if i < 65)
    assert rows[71]["_rowid"] == 66 and rows[71]["_row_created_at_version"] == 14
    assert rows[71]["_row_last_updated_at_version"] == 15
    assert rows[3]["_row_last_updated_at_version"] == 5 and rows[3]["_row_created_at_version"] == 1
    assert rows[47]["_row_created_at_version"] == 2
    ids = lf.dataset(uri).to_table(columns=["_rowid"])["_rowid"].to_numpy()
    assert len(np.unique(ids)) == len(ids)


def _feed_part(feed: pa.Table, kind: str) -> list[tuple]:
    part = feed.filter(pc.equal(feed["_change_type"], kind))
    return sorted(zip(*(part[c].to_pylist() for c in ["_rowid", *COLS]), strict=True))


def _delta_part(reader) -> list[tuple]:
    table = reader.read_all() if hasattr(reader, "read_all") else reader
    return sorted(zip(*(table[c].to_pylist() for c in ["_rowid", *COLS]), strict=True))


def test_change_feed_matches_pylance_delta(uri):
    mixed_history(uri)
    ours = lf.dataset(uri)
    checked = 0
    for begin, end in [(1, 16), (1, 2), (2, 5), (3, 8), (4, 6), (6, 13), (8, 9), (9, 12), (12, 16), (14, 16)]:
        # pylance scans the handle it is called on: open it at ``end`` (docs/FORMAT.md §13)
        delta = lance.dataset(uri, version=end).delta(begin_version=begin, end_version=end)
        feed = ours.change_feed(begin, end)
        inserted = _delta_part(delta.get_inserted_rows())
        updated = _delta_part(delta.get_updated_rows())
        assert _feed_part(feed, "insert") == inserted, (begin, end)
        assert _feed_part(feed, "update_postimage") == updated, (begin, end)
        checked += len(inserted) + len(updated)
        pre = _feed_part(feed, "update_preimage")
        assert [r[0] for r in pre] == [r[0] for r in updated]
    assert checked > 50
    # compactions (8-9, 11-12) change nothing a reader can see
    assert ours.change_feed(8, 9).num_rows == 0 and ours.change_feed(11, 12).num_rows == 0
    full = ours.change_feed(1, 16)
    assert sorted(r[1] for r in _feed_part(full, "insert")) == [i for i in [*range(40, 65), 71, 72] if i not in (45, 46, 61)]
    deleted = full.filter(pc.equal(full["_change_type"], "delete"))
    assert sorted(deleted["id"].to_pylist()) == [0, 1, 2, 5]
