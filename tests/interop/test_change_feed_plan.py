"""The change feed plans its rows as it reads them (``feed_plan.streamed_plan``), one fragment
at a time; that plan must be the whole-range plan (``feed_rows``: ``end_changes``,
``begin_changes``, ``first_gone``), row for row and in the same order.

pylance builds the history at file format 2.2 with stable row ids: fragments of 100 rows, an
update (rows move to a new fragment), a delete, a compaction (rows move again, without an update),
a delete of moved rows and an update of them, an append, a delete that removes the first fragment and ``add_columns`` (rows
updated in place).
"""

import itertools

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_ops.format as lf
from lance_ops.format.ops.change_feed import plan as feed_plan
from lance_ops.format.ops.change_feed.plan import streamed_plan
from lance_ops.format.ops.change_feed.rows import RowIds, begin_changes, end_changes, first_gone
from lance_ops.format.txn.handlers import checkout_manifest

pytestmark = [pytest.mark.interop, pytest.mark.parametrize("file_version", ("2.2",), indirect=True)]


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    uri = str(tmp_path_factory.mktemp("plan") / "ds")
    ids = np.arange(600, dtype=np.int64)
    lance.write_dataset(pa.table({"id": ids, "s": pa.array([f"v{i}" for i in ids])}), uri,
                        max_rows_per_file=100, enable_stable_row_ids=True, data_storage_version="2.2")  # v1
    lance.dataset(uri).update({"s": "'u2'"}, where="id % 7 = 0")  # v2
    lance.dataset(uri).delete("id >= 150 AND id < 180")  # v3
    lance.dataset(uri).optimize.compact_files(target_rows_per_fragment=250, materialize_deletions_threshold=0.01)  # v4, v5
    lance.dataset(uri).delete("id % 11 = 0")  # v6: rows the compaction moved, and rows it did not
    lance.dataset(uri).update({"s": "'u6'"}, where="id % 5 = 0")  # v7
    lance.write_dataset(pa.table({"id": np.arange(600, 650), "s": pa.array(["n"] * 50)}), uri, mode="append")  # v8
    first = lance.dataset(uri).get_fragments()[0].to_table(columns=["id"])["id"].to_pylist()
    lance.dataset(uri).delete(f"id IN ({', '.join(map(str, first))})")  # v9: the first fragment goes
    assert len(lance.dataset(uri).get_fragments()) == 3
    lance.dataset(uri).add_columns({"z": "id * 2"})  # v10: every row updated in its own fragment
    assert lance.dataset(uri).version == 10
    return uri


def whole_plan(store, handler, b: int, e: int) -> list[tuple]:
    """The plan as ``change_feed`` made it before it streamed: every row of the range first."""
    end = checkout_manifest(store, e, handler)[0]
    ids = RowIds(store)
    changed = end_changes(store, end, b, e, ids)
    out = [("insert", c.fragment.id, c.inserts, c.insert_ids, c.insert_versions) for c in changed if c.inserts.size]
    out += [("update_postimage", c.fragment.id, c.posts, c.post_ids, c.post_versions) for c in changed if c.posts.size]
    if b == 0:
        return out
    start = checkout_manifest(store, b, handler)[0]
    rank = {f.id: i for i, f in enumerate(start.fragments)}
    side = begin_changes(store, start, end, b, changed, ids)
    out += [("update_preimage", fid, *side.pre[fid]) for fid in sorted(side.pre, key=rank.__getitem__)
            if side.pre[fid][0].size]
    dead = side.dead
    if dead.ids.size:
        checks = [handler.read_manifest(v).manifest for v in range(b + 1, e)]
        gone = first_gone(store, checks, b, list(rank), dead, e, ids)
        for fid, idx in sorted(dead.by_fragment().items(), key=lambda kv: rank[kv[0]]):
            out.append(("delete", fid, dead.offsets[idx], dead.ids[idx], gone[idx]))
    return out


def streamed(store, handler, b: int, e: int) -> list[tuple]:
    end = checkout_manifest(store, e, handler)[0]
    start = checkout_manifest(store, b, handler)[0] if b else None
    checks = [handler.read_manifest(v).manifest for v in range(b + 1, e)]
    return [(kind, frag.id, *arrays) for kind, frag, *arrays in streamed_plan(store, start, end, b, e, checks)]


@pytest.mark.parametrize(("keys", "chunk"), (("uint32", 1 << 21), ("uint64", 16), ("apart", 16)),
                         ids=("ids_in_uint32-one_delete_chunk", "ids_in_uint64-delete_chunks_of_16",
                              "ids_apart-delete_chunks_of_16"))
def test_streamed_plan_is_the_whole_plan(history, monkeypatch, keys, chunk):
    monkeypatch.setattr(feed_plan, "DELETE_CHUNK_ROWS", chunk)  # 16: deletes found again, dated in chunks
    if keys != "uint32":
        monkeypatch.setattr(feed_plan, "KEY_DTYPES", (np.uint64,))
    if keys == "apart":
        monkeypatch.setattr(feed_plan, "PACKED_ID_LIMIT", 1)
    ds = lf.dataset(history)
    kinds = set()
    for b, e in itertools.combinations(range(11), 2):
        want, got = whole_plan(ds._store, ds._handler, b, e), streamed(ds._store, ds._handler, b, e)
        assert [w[:2] for w in want] == [g[:2] for g in got], (b, e)
        for w, g in zip(want, got, strict=True):
            for a, c in zip(w[2:], g[2:], strict=True):
                assert a.dtype == c.dtype and np.array_equal(a, c), (b, e, w[:2])
        kinds |= {w[0] for w in want}
    assert kinds == {"insert", "update_postimage", "update_preimage", "delete"}
    # (5, 8]: the rows the compaction moved are deleted (v6) and updated (v7) from their new fragments
    live = [i for i in range(600) if not 150 <= i < 180]
    got = {k: sum(g[2].size for g in streamed(ds._store, ds._handler, 5, 8) if g[0] == k) for k in kinds}
    updated = len([i for i in live if i % 5 == 0 and i % 11])
    assert got == {"insert": 50, "update_postimage": updated, "update_preimage": updated,
                   "delete": len([i for i in live if i % 11 == 0])}


@pytest.mark.parametrize("kinds", [("insert", "update_postimage"), ("update_preimage",), ("delete",),
                                   ("insert", "delete"), "update_postimage"])
def test_change_types_keep_exactly_those_rows(history, kinds):
    """``change_types`` gives the rows of those kinds of the whole feed, in the same order, for
    every range of the history (the begin side unread when neither pre-images nor deletes)."""
    import pyarrow.compute as pc

    from lance_ops.format.errors import InvalidArgumentError

    ds = lf.dataset(history)
    wanted = pa.array([kinds] if isinstance(kinds, str) else list(kinds))
    for b, e in itertools.combinations(range(0, 11, 2), 2):
        full = ds.change_feed(b, e)
        got = ds.change_feed(b, e, change_types=kinds)
        assert got.equals(full.filter(pc.is_in(full.column("_change_type"), wanted))), (b, e)
    with pytest.raises(InvalidArgumentError, match="upsert"):
        ds.change_feed(1, 3, change_types=["upsert"])
