"""The change feed's rows planned as they are read, one fragment at a time (:mod:`.feed_rows`).

:func:`streamed_plan` yields the same rows, in the same order, as planning the whole range
first (:func:`.feed_rows.end_changes`, :func:`.feed_rows.begin_changes`,
:func:`.feed_rows.first_gone`), but holds only:

- inserts, then update post-images: one fragment of the end version at a time (two passes over
  its version runs, one per kind);
- update pre-images: one fragment of the begin version at a time, its rows that left told apart
  by :class:`MovedIds`, the one structure that spans the range: the ids of the rows live at the
  end in fragments added since ``begin`` that existed at ``begin`` (updated or moved by a
  compaction), packed with the rank of their update version into one sorted integer per row:
  4 bytes per updated or moved row while the dataset's ids leave room (below 2**31 with one
  update version in the range, 2**30 with two or three, ...), else 8; 12 when the ids are too
  large to pack;
- deletes: rows gone at the end, gathered over begin fragments up to :data:`DELETE_CHUNK_ROWS`
  before :func:`.feed_rows.first_gone` dates them (kept from the pre-image pass when they fit
  one chunk, else found again in a second pass over the begin fragments).

So the planning memory is one fragment's changed rows, a delete chunk and :class:`MovedIds`;
only the last grows with the range (with the rows an update or compaction moved), never with the
unchanged rows.
"""

from collections.abc import Collection, Iterator, Sequence

import numpy as np

from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.ops.change_feed.rows import (
    Leavers,
    RowIds,
    _deleted,
    _expand,
    _not_in,
    _order,
    _pieces,
    first_gone,
    fragment_changes,
    fragment_leavers,
    version_runs,
)
from lance_ops.format.table.fragment import FragmentMetadata
from lance_ops.format.table.manifest import Manifest

__all__ = ["DELETE_CHUNK_ROWS", "MovedIds", "PlannedRows", "streamed_plan"]

#: deleted rows dated (``first_gone``) together: bounds the delete side's planning memory
#: (24 bytes per row) while sharing each intermediate version's pass over its fragments
DELETE_CHUNK_ROWS = 1 << 21

#: the kinds of rows read from the end version
END_KINDS = frozenset({"insert", "update_postimage"})

#: ``(kind, fragment, offsets, ids, versions)``: rows of one fragment to emit (offsets sorted);
#: kind "insert"/"update_postimage" are read from the end version, the others from ``begin``
PlannedRows = tuple[str, FragmentMetadata, np.ndarray, np.ndarray, np.ndarray]

#: ids from this on are kept apart from their versions (12 bytes a row instead of 8); ids that
#: large only come from writers far from today's, so tests lower it to exercise that path
PACKED_ID_LIMIT = 1 << 64
#: the integers ids and ranks are packed into, narrowest first (tests leave out the narrow one)
KEY_DTYPES: tuple[type, ...] = (np.uint32, np.uint64)


class MovedIds:
    """Row ids live at the end in fragments added since ``begin`` whose rows existed at
    ``begin``, each with its update version if it was updated in ``(begin, stop]`` (a
    pre-image's ``_commit_version``) or 0 (moved only, e.g. by a compaction)."""

    def __init__(self, store: ObjectStore, start: Manifest, end: Manifest, begin: int, stop: int, ids: RowIds) -> None:
        self.begin = begin
        lo, hi = np.uint64(begin), np.uint64(stop)
        old = {f.id for f in start.fragments}
        # pass 1 (version runs only): the pieces of rows that existed at begin, to size the array
        pieces = []
        for frag in end.fragments:
            if frag.id in old:
                continue
            cv, cl = version_runs(end, frag, created=True)
            if not (cv <= lo).any():
                continue  # only rows created after begin: none left a begin fragment
            uv, ul = version_runs(end, frag, created=False)
            starts, lengths, c, u = _pieces(cv, cl, uv, ul)
            keep = c <= lo
            code = np.where((u > lo) & (u <= hi), u - lo, np.uint64(0))
            pieces.append((frag, starts[keep], lengths[keep], code[keep]))
        #: the update versions (minus begin) met; a row keeps its rank among them (0: not updated)
        self.versions = np.unique(np.concatenate([p[3][p[3] > 0] for p in pieces] or [np.empty(0, np.uint64)]))
        self.shift = np.uint64(max(1, int(self.versions.size).bit_length()))
        self.keys: np.ndarray = np.empty(0, dtype=np.uint64)
        self.codes: np.ndarray | None = None
        # ids below ``limit`` share one integer with their rank: 4 bytes a row while the
        # dataset's ids (below next_row_id) leave room, else 8; ids too large for that: apart
        for dtype in KEY_DTYPES:
            bits = 8 * np.dtype(dtype).itemsize - int(self.shift)
            self.limit = min(1 << bits, PACKED_ID_LIMIT)
            if np.dtype(dtype).itemsize < 8 and end.next_row_id > self.limit:
                continue
            keys = self._packed(store, end, pieces, ids, dtype)
            if keys is not None:
                self.keys = keys
                return
        self._unpacked(store, end, pieces, ids)

    def _packed(self, store: ObjectStore, end: Manifest, pieces: list, ids: RowIds, dtype: type) -> np.ndarray | None:
        """The sorted ``id << shift | rank`` of every row (None: an id reaches ``limit``),
        expanded one fragment at a time straight into the array."""
        keys: np.ndarray = np.empty(sum(int(p[2].sum()) for p in pieces), dtype=dtype)
        at = 0
        for frag, offs, codes in _live_rows(store, end, pieces):
            if not offs.size:
                continue
            got = ids.at(end, frag, offs)
            if int(got.max()) >= self.limit:
                return None
            rank = np.searchsorted(self.versions, codes).astype(np.uint64) + np.uint64(1)
            rank[codes == 0] = 0
            keys[at: at + got.size] = (got << self.shift) | rank
            at += got.size
        # rows deleted since leave slack at the end: copied away only when it is large
        keys = keys[:at] if 4 * (keys.size - at) <= keys.size else keys[:at].copy()
        keys.sort(kind="stable")  # sorted runs, one per fragment: merged, not re-sorted
        return keys

    def _unpacked(self, store: ObjectStore, end: Manifest, pieces: list, ids: RowIds) -> None:
        """Ids too large to share a uint64 with their version: ids and versions apart."""
        id_parts, code_parts = [], []
        for frag, offs, codes in _live_rows(store, end, pieces):
            id_parts.append(ids.at(end, frag, offs))
            code_parts.append(codes.astype(np.uint32))
        keys = np.concatenate(id_parts)
        codes = np.concatenate(code_parts)
        order = _order(keys)
        self.keys = keys if order is None else keys[order]
        self.codes = codes if order is None else codes[order]

    @property
    def nbytes(self) -> int:
        return self.keys.nbytes + (0 if self.codes is None else self.codes.nbytes)

    def _ranked(self, k: np.ndarray) -> np.ndarray:
        """Version offsets (0: not updated) of packed keys ``k`` (uint64): one lookup of each
        key's rank in ``[0, *versions]``."""
        lut = np.zeros(self.versions.size + 1, dtype=np.int64)
        lut[1:] = self.versions
        return lut.take((k & ((np.uint64(1) << self.shift) - np.uint64(1))).astype(np.intp))

    def _all_moved(self, q: np.ndarray) -> np.ndarray | None:
        """The common case without a binary search per id: ``q`` sorted, and every id in its
        span moved (e.g. all of a fragment's rows that left it were updated)."""
        if int(q[-1]) + 1 >= self.limit or not (q[1:] > q[:-1]).all():
            return None
        a, b = np.searchsorted(self.keys, np.array([int(q[0]) << int(self.shift), (int(q[-1]) + 1) << int(self.shift)],
                                                   dtype=np.uint64).astype(self.keys.dtype, copy=False))
        if b - a != q.size:
            return None
        k = self.keys[a:b].astype(np.uint64)
        if not np.array_equal(k >> self.shift, q):
            return None
        return self._ranked(k)

    def lookup(self, q: np.ndarray) -> np.ndarray:
        """Per id of ``q``: -1 not live in those fragments (deleted), 0 moved without an update,
        else its update version minus ``begin``."""
        out = np.full(q.size, -1, dtype=np.int64)
        n = self.keys.size
        if n == 0 or q.size == 0:
            return out
        if self.codes is None:
            q = np.asarray(q, dtype=np.uint64)
            whole = self._all_moved(q)
            if whole is not None:
                return whole
            small = None if int(q.max()) < self.limit else q < np.uint64(self.limit)
            qs = (q if small is None else np.where(small, q, np.uint64(0))) << self.shift
            pos = np.searchsorted(self.keys, qs.astype(self.keys.dtype))
            np.minimum(pos, n - 1, out=pos)
            k = self.keys[pos].astype(np.uint64)
            hit = (k >> self.shift) == q
            if small is not None:
                hit &= small
            out[hit] = self._ranked(k[hit])
            return out
        pos = np.minimum(np.searchsorted(self.keys, q), n - 1)
        hit = self.keys[pos] == q
        out[hit] = self.codes[pos[hit]].astype(np.int64)
        return out


def _end_side(
    store: ObjectStore, end: Manifest, begin: int, stop: int, ids: RowIds, kinds: Collection[str] = END_KINDS,
) -> Iterator[PlannedRows]:
    for frag in end.fragments if "insert" in kinds else ():
        c = fragment_changes(store, end, frag, begin, stop, ids, posts=False)
        if c is not None and c.inserts.size:
            yield "insert", frag, c.inserts, c.insert_ids, c.insert_versions
    for frag in end.fragments if "update_postimage" in kinds else ():
        c = fragment_changes(store, end, frag, begin, stop, ids, inserts=False)
        if c is not None and c.posts.size:
            yield "update_postimage", frag, c.posts, c.post_ids, c.post_versions


def _left(
    store: ObjectStore, start: Manifest, end: Manifest, begin: int, stop: int, ids: RowIds, moved: MovedIds,
    *, in_place: bool,
) -> Iterator[tuple[FragmentMetadata, np.ndarray, np.ndarray, np.ndarray, tuple | None]]:
    """Per begin fragment: offsets and ids of its rows that left it, their :meth:`MovedIds.lookup`,
    and (``in_place``) its rows updated in place."""
    at_end = {f.id: f for f in end.fragments}
    for frag in start.fragments:
        other = at_end.get(frag.id)
        c = None
        if in_place and other is not None and other.physical_rows == frag.physical_rows:
            c = fragment_changes(store, end, other, begin, stop, ids, inserts=False)
        rows, updated_here = fragment_leavers(store, start, end, frag, other, c)
        rids = ids.at(start, frag, rows)
        yield frag, rows, rids, moved.lookup(rids), updated_here


def streamed_plan(
    store: ObjectStore,
    start: Manifest | None,
    end: Manifest,
    begin: int,
    stop: int,
    checks: Sequence[Manifest],
    ids: RowIds | None = None,
    end_kinds: Collection[str] = END_KINDS,
) -> Iterator[PlannedRows]:
    """The change feed's rows of ``(begin, stop]`` in feed order: inserts, update post-images
    (end fragment order), update pre-images, deletes (begin fragment order); ``start`` is the
    begin version's manifest (None for ``begin`` 0) and ``checks`` the versions in between
    (ascending), for dating deletes.  ``end_kinds``: which of inserts and post-images to plan."""
    ids = ids if ids is not None else RowIds(store)
    yield from _end_side(store, end, begin, stop, ids, end_kinds)
    if start is None:
        return
    moved = MovedIds(store, start, end, begin, stop, ids)
    # the deleted rows met on the way are kept for the delete side unless they outgrow a chunk
    # (then the begin fragments are walked again for them)
    kept: list[tuple[int, np.ndarray, np.ndarray]] | None = []
    n_dead = 0
    for frag, rows, rids, code, here in _left(store, start, end, begin, stop, ids, moved, in_place=True):
        gone = code < 0
        if gone.any():
            n_dead += int(gone.sum())
            if kept is not None and n_dead <= DELETE_CHUNK_ROWS:
                kept.append((frag.id, rows[gone], rids[gone]))
            else:
                kept = None
        pre = code > 0
        parts = (rows[pre], rids[pre], (code[pre] + begin).astype(np.uint64))
        if here is not None:
            o = np.concatenate([here[0], parts[0]])
            k = np.argsort(o, kind="stable")
            parts = (o[k], np.concatenate([here[1], parts[1]])[k], np.concatenate([here[2], parts[2]])[k])
        if parts[0].size:
            yield "update_preimage", frag, *parts
    if n_dead == 0:
        return
    if kept is None:
        walk = ((f.id, r[c < 0], i[c < 0]) for f, r, i, c, _ in
                _left(store, start, end, begin, stop, ids, moved, in_place=False))
        kept_iter: Iterator[tuple[int, np.ndarray, np.ndarray]] = (k for k in walk if k[1].size)
    else:
        kept_iter = iter(kept)
    begin_frags = [f.id for f in start.fragments]
    rank = {fid: i for i, fid in enumerate(begin_frags)}
    frags = {f.id: f for f in start.fragments}
    chunk: list[tuple[int, np.ndarray, np.ndarray]] = []
    held = 0

    def dated() -> Iterator[PlannedRows]:
        dead_ids = np.concatenate([c[2] for c in chunk])
        dead_frags = np.concatenate([np.full(c[1].size, c[0], dtype=np.int64) for c in chunk])
        dead_offs = np.concatenate([c[1] for c in chunk])
        order = _order(dead_ids)
        dead = Leavers(dead_ids, dead_frags, dead_offs) if order is None else \
            Leavers(dead_ids[order], dead_frags[order], dead_offs[order])
        gone = first_gone(store, checks, begin, begin_frags, dead, stop, ids)
        for fid, idx in sorted(dead.by_fragment().items(), key=lambda kv: rank[kv[0]]):
            yield "delete", frags[fid], dead.offsets[idx], dead.ids[idx], gone[idx]

    for part in kept_iter:
        chunk.append(part)
        held += part[1].size
        if held >= DELETE_CHUNK_ROWS:
            yield from dated()
            chunk, held = [], 0
    if chunk:
        yield from dated()


def _live_rows(store: ObjectStore, end: Manifest, pieces: list) -> Iterator[tuple[FragmentMetadata, np.ndarray, np.ndarray]]:
    """``(fragment, physical offsets, version codes)`` of the rows of each of ``pieces`` that
    are live at ``end`` (its deletion vector applied)."""
    for frag, starts, lengths, code in pieces:
        offs, codes = _expand(starts, lengths, code)
        deleted = _deleted(store, end, frag)
        if deleted.size:
            live = _not_in(offs, deleted)
            offs, codes = offs[live], codes[live]
        yield frag, offs, codes
