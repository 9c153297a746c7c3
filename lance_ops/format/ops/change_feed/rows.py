"""Which rows of which fragments the change feed reads, from manifest metadata alone.

The version sequences (``_row_created_at_version``, ``_row_last_updated_at_version``), row id
sequences and deletion vectors of a fragment are all in the manifest (or beside it), so the
change feed picks its rows before it opens any data file:

- inserts / update post-images: fragments of the end version whose version runs hold a value in
  ``(begin, end]``; a fragment without one costs one pass over its runs and nothing else, and in
  one with changes the rows are expanded only for the runs that match;
- rows that left a fragment of the begin version: fragments removed since, or whose deletion
  vector changed (the difference of the two deletion vectors; only those rows' ids are looked
  up, without expanding a fragment whose ids are one range);
- where such a row went: a fragment that did not exist at ``begin`` holding its id (an update
  or a compaction moved it) or nowhere (deleted).  A fragment whose rows were all created after
  ``begin`` cannot hold one and is skipped.

Every chosen row comes with its row id and commit version, aligned with its physical offset, so
a reader decodes only the user columns of the spans holding chosen rows (in-process:
:mod:`.change_feed`, one fragment at a time through :mod:`.feed_plan`; on many workers:
:mod:`.distributed`).  The whole-range functions here hold every changed row (and every row of
the fragments rewritten in the range, whose rows all count as having left), never the rows that
did not change; :mod:`.feed_plan` streams the same plan per fragment.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from lance_ops.format.errors import CorruptFileError
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.table import rowids
from lance_ops.format.table.deletion import read_deletion_file
from lance_ops.format.table.fragment import FragmentMetadata
from lance_ops.format.table.manifest import Manifest

__all__ = [
    "BeginChanges",
    "EndChanges",
    "Leavers",
    "RowIds",
    "begin_changes",
    "end_changes",
    "first_gone",
    "fragment_changes",
    "fragment_leavers",
    "leavers",
    "live_among",
    "version_runs",
]

_EMPTY_IDS = np.empty(0, dtype=np.uint64)
_EMPTY_OFFSETS = np.empty(0, dtype=np.int64)


def version_runs(manifest: Manifest, frag: FragmentMetadata, *, created: bool) -> tuple[np.ndarray, np.ndarray]:
    """``(versions, lengths)`` of a fragment's version runs (one run of version 1 without a sequence)."""
    return rowids.fragment_version_runs(frag, manifest.source, created=created)


def _deleted(store: ObjectStore, manifest: Manifest, frag: FragmentMetadata) -> np.ndarray:
    """Sorted deleted physical offsets of ``frag`` (int64; empty when nothing is deleted)."""
    if frag.deletion_file is None:
        return _EMPTY_OFFSETS
    out = read_deletion_file(
        store, frag.id, frag.deletion_file.to_proto(), physical_rows=frag.physical_rows, bases=manifest.bases
    )
    return out.astype(np.int64)


def _not_in(values: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    """Mask of ``values`` absent from the sorted array ``sorted_set``."""
    if sorted_set.size == 0 or values.size == 0:
        return np.ones(values.size, dtype=bool)
    pos = np.clip(np.searchsorted(sorted_set, values), 0, sorted_set.size - 1)
    return sorted_set[pos] != values


#: decoded row ids one feed keeps for reuse (8 bytes each), oldest dropped first
_CACHED_IDS = 4 * 1024 * 1024


def _joined(parts: list[np.ndarray], empty: np.ndarray) -> np.ndarray:
    return empty if not parts else parts[0] if len(parts) == 1 else np.concatenate(parts)


def _sorted(a: np.ndarray) -> bool:
    return a.size < 2 or bool((a[1:] >= a[:-1]).all())


def _order(a: np.ndarray) -> np.ndarray | None:
    """A stable sorting permutation of ``a``, None when ``a`` is already sorted (the common
    case: ids and offsets come out of fragments in order)."""
    return None if _sorted(a) else np.argsort(a, kind="stable")


class RowIds:
    """Row ids of fragments, decoded at most once per fragment for one feed; a fragment whose
    ids are one range is never expanded."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store
        self._decoded: dict[int, tuple[bytes, np.ndarray]] = {}
        self._held = 0

    def _range(self, manifest: Manifest, frag: FragmentMetadata) -> tuple[int, int] | None:
        if frag.row_ids is None:
            raise CorruptFileError(manifest.source or self.store.uri,
                                   f"fragment {frag.id} has no row ids but the dataset uses stable row ids")
        return rowids.fragment_row_id_range(frag, manifest.source)

    def all(self, manifest: Manifest, frag: FragmentMetadata) -> np.ndarray:
        """Every physical row's id (read-only)."""
        key = id(frag.row_ids)
        hit = self._decoded.get(key)
        if hit is not None and hit[0] is frag.row_ids:
            return hit[1]
        self._range(manifest, frag)  # (checks that there are ids)
        ids = rowids.fragment_row_ids(frag, manifest.source)
        ids.setflags(write=False)
        assert frag.row_ids is not None
        while self._decoded and self._held + ids.size > _CACHED_IDS:
            self._held -= next(iter(self._decoded.values()))[1].size
            del self._decoded[next(iter(self._decoded))]
        self._decoded[key] = (frag.row_ids, ids)
        self._held += ids.size
        return ids

    def at(self, manifest: Manifest, frag: FragmentMetadata, offsets: np.ndarray) -> np.ndarray:
        """The ids of the physical rows ``offsets``."""
        if offsets.size == 0:
            self._range(manifest, frag)
            return _EMPTY_IDS
        rng = self._range(manifest, frag)
        if rng is not None:
            return offsets.astype(np.uint64) + np.uint64(rng[0])
        return self.all(manifest, frag)[offsets]


def _pieces(cv: np.ndarray, cl: np.ndarray, uv: np.ndarray, ul: np.ndarray) -> tuple[np.ndarray, ...]:
    """The row range cut where either version sequence changes: ``(starts, lengths, created,
    updated)`` per piece."""
    c_end, u_end = np.cumsum(cl), np.cumsum(ul)
    ends = np.union1d(c_end, u_end)
    ends = ends[ends > 0]
    starts = np.concatenate([np.zeros(1, dtype=np.int64), ends[:-1]])
    c = cv[np.searchsorted(c_end, starts, side="right")]
    u = uv[np.searchsorted(u_end, starts, side="right")]
    return starts, ends - starts, c, u


def _expand(starts: np.ndarray, lengths: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(offsets, value per offset)`` of the pieces ``[start, start+length)``."""
    total = int(lengths.sum())
    if total == 0:
        return _EMPTY_OFFSETS, _EMPTY_IDS
    first = np.cumsum(lengths) - lengths  # position of each piece's first row in the output
    offsets = np.arange(total, dtype=np.int64) + np.repeat(starts - first, lengths)
    return offsets, np.repeat(values, lengths)


@dataclass(frozen=True)
class EndChanges:
    """The inserted and updated live rows of one fragment of the end version (physical offsets,
    sorted), with their row ids and versions (created for inserts, last updated for updates)."""

    fragment: FragmentMetadata
    inserts: np.ndarray
    insert_ids: np.ndarray
    insert_versions: np.ndarray
    posts: np.ndarray  # update post-images
    post_ids: np.ndarray
    post_versions: np.ndarray  # their _row_last_updated_at_version


def fragment_changes(
    store: ObjectStore, end: Manifest, frag: FragmentMetadata, begin: int, stop: int, ids: RowIds,
    *, inserts: bool = True, posts: bool = True,
) -> EndChanges | None:
    """:func:`end_changes` of one fragment of ``end`` (None when it holds none); ``inserts`` /
    ``posts`` False leaves that kind out (empty), so a caller can plan one kind at a time."""
    lo, hi = np.uint64(begin), np.uint64(stop)
    cv, cl = version_runs(end, frag, created=True)
    uv, ul = version_runs(end, frag, created=False)
    if not (((cv > lo) & (cv <= hi)).any() or ((uv > lo) & (uv <= hi)).any()):
        return None
    starts, lengths, c, u = _pieces(cv, cl, uv, ul)
    ins_p = (c > lo) & (c <= hi) & inserts
    post_p = (c <= lo) & (u > lo) & (u <= hi) & posts
    ins, ins_v = _expand(starts[ins_p], lengths[ins_p], c[ins_p])
    posts_, post_v = _expand(starts[post_p], lengths[post_p], u[post_p])
    if not (ins.size or posts_.size):
        return None
    deleted = _deleted(store, end, frag)
    if deleted.size:
        keep = _not_in(ins, deleted)
        ins, ins_v = ins[keep], ins_v[keep]
        keep = _not_in(posts_, deleted)
        posts_, post_v = posts_[keep], post_v[keep]
    if not (ins.size or posts_.size):
        return None
    return EndChanges(frag, ins, ids.at(end, frag, ins), ins_v, posts_, ids.at(end, frag, posts_), post_v)


def end_changes(
    store: ObjectStore, end: Manifest, begin: int, stop: int, ids: RowIds | None = None
) -> list[EndChanges]:
    """The fragments of ``end`` with inserted (``begin < created <= stop``) or updated
    (``created <= begin < updated <= stop``) live rows, and those rows; the others are pruned
    from their version runs without reading anything."""
    ids = ids if ids is not None else RowIds(store)
    out = []
    for frag in end.fragments:
        c = fragment_changes(store, end, frag, begin, stop, ids)
        if c is not None:
            out.append(c)
    return out


@dataclass(frozen=True)
class Leavers:
    """Rows live in a fragment of the begin version and no longer live there at the end,
    sorted by row id: ``ids``, their begin ``fragments`` and physical ``offsets``."""

    ids: np.ndarray
    fragments: np.ndarray
    offsets: np.ndarray

    def subset(self, keep: np.ndarray) -> "Leavers":
        return Leavers(self.ids[keep], self.fragments[keep], self.offsets[keep])

    def by_fragment(self) -> dict[int, np.ndarray]:
        """Begin fragment id -> positions (into these rows) of its rows, by physical offset."""
        if _sorted(self.fragments):  # the common case: rows in begin fragment order
            fids, starts = np.unique(self.fragments, return_index=True)
            bounds = [*starts.tolist(), self.fragments.size]
            out = {}
            for i, f in enumerate(fids.tolist()):
                o = _order(self.offsets[bounds[i]: bounds[i + 1]])
                out[int(f)] = np.arange(bounds[i], bounds[i + 1]) if o is None else o + bounds[i]
            return out
        order = np.lexsort((self.offsets, self.fragments))
        frags = self.fragments[order]
        fids, starts = np.unique(frags, return_index=True)
        bounds = [*starts.tolist(), frags.size]
        return {int(f): order[bounds[i]: bounds[i + 1]] for i, f in enumerate(fids.tolist())}


def fragment_leavers(
    store: ObjectStore,
    start: Manifest,
    end: Manifest,
    frag: FragmentMetadata,
    other: FragmentMetadata | None,
    changes: EndChanges | None,
) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray] | None]:
    """:func:`leavers` of one fragment ``frag`` of ``start``: the sorted physical offsets of its
    rows live at begin and no longer live in it at the end (``other``: the end version's fragment
    with its id, if any), and ``(offsets, ids, versions)`` of its rows updated in place that were
    live at begin (``changes``: the end fragment's :func:`fragment_changes`), or None."""
    c = changes if changes is not None and changes.posts.size else None
    if other is not None and other.physical_rows != frag.physical_rows:
        other = None  # not the same rows: as if removed
    if other is not None and other.deletion_file == frag.deletion_file:
        return _EMPTY_OFFSETS, None if c is None else (c.posts, c.post_ids, c.post_versions)
    del_b = _deleted(store, start, frag)
    in_place = None
    if other is not None:
        rows = _deleted(store, end, other)
        if del_b.size:
            rows = rows[_not_in(rows, del_b)]
        if c is not None:
            keep = _not_in(c.posts, del_b)
            in_place = (c.posts[keep], c.post_ids[keep], c.post_versions[keep])
    elif del_b.size:
        live = np.ones(frag.physical_rows, dtype=bool)
        live[del_b] = False
        rows = np.flatnonzero(live)
    else:
        rows = np.arange(frag.physical_rows, dtype=np.int64)
    return rows, in_place


def leavers(
    store: ObjectStore,
    start: Manifest,
    end: Manifest,
    in_place_posts: dict[int, EndChanges],
    ids: RowIds | None = None,
) -> tuple[Leavers, dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]]:
    """Rows that left their begin fragment, and, per begin fragment, ``(offsets, ids, versions)``
    of its rows updated in place (``in_place_posts``: end fragment id -> its changes) that were
    live at ``begin``.  Fragments with the same id, rows and deletion vector at both ends cost
    nothing."""
    ids = ids if ids is not None else RowIds(store)
    at_end = {f.id: f for f in end.fragments}
    found: list[tuple[FragmentMetadata, np.ndarray]] = []
    in_place: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    for frag in start.fragments:
        rows, pre = fragment_leavers(store, start, end, frag, at_end.get(frag.id), in_place_posts.get(frag.id))
        if pre is not None:
            in_place[frag.id] = pre
        if rows.size:
            found.append((frag, rows))
    if not found:
        return Leavers(_EMPTY_IDS, _EMPTY_OFFSETS, _EMPTY_OFFSETS), in_place
    total = sum(r.size for _, r in found)  # filled in place: no second copy of every array
    all_ids = np.empty(total, dtype=np.uint64)
    all_frags = np.empty(total, dtype=np.int64)
    all_offs = found[0][1] if len(found) == 1 else np.empty(total, dtype=np.int64)
    at = 0
    for frag, rows in found:
        all_ids[at: at + rows.size] = ids.at(start, frag, rows)
        all_frags[at: at + rows.size] = frag.id
        if len(found) > 1:
            all_offs[at: at + rows.size] = rows
        at += rows.size
    order = _order(all_ids)
    if order is None:
        return Leavers(all_ids, all_frags, all_offs), in_place
    return Leavers(all_ids[order], all_frags[order], all_offs[order]), in_place


def live_among(
    store: ObjectStore,
    manifest: Manifest,
    begin_fragments: Iterable[int],
    begin: int,
    rows: Leavers,
    ids: RowIds | None = None,
    *,
    left_there: bool = False,
) -> np.ndarray:
    """Which of ``rows`` (rows of the begin version's fragments ``begin_fragments``) are live in
    ``manifest``: still live in their fragment, or live under their id in a fragment added since
    ``begin`` (one whose rows were all created after ``begin`` cannot hold them: skipped).
    ``left_there``: ``rows`` are :func:`leavers` of ``manifest``, so none is live in its own
    fragment there (only the fragments added since ``begin`` are looked at)."""
    ids = ids if ids is not None else RowIds(store)
    alive = np.zeros(rows.ids.size, dtype=bool)
    if rows.ids.size == 0:
        return alive
    old = set(begin_fragments)
    order = None if left_there else _order(rows.fragments)
    frag_sorted = rows.fragments if order is None else rows.fragments[order]
    lo = np.uint64(begin)
    for frag in manifest.fragments:
        if frag.id in old:
            if left_there:
                continue
            a, b = np.searchsorted(frag_sorted, [frag.id, frag.id + 1])
            if a == b:
                continue
            idx = slice(a, b) if order is None else order[a:b]
            alive[idx] = _not_in(rows.offsets[idx], _deleted(store, manifest, frag))
            continue
        cv, _ = version_runs(manifest, frag, created=True)
        if not (cv <= lo).any():
            continue  # only rows created after begin: none of ours
        rng = ids._range(manifest, frag)
        deleted = _deleted(store, manifest, frag)
        if rng is not None:  # ids [s, e): a row is here if its id is in range and not deleted
            a, b = np.searchsorted(rows.ids, [rng[0], rng[1]])
            if a == b:
                continue
            hit = np.arange(a, b)
            local = (rows.ids[a:b] - np.uint64(rng[0])).astype(np.int64)
            alive[hit[_not_in(local, deleted)]] = True
            continue
        frag_ids = ids.all(manifest, frag)
        if deleted.size:
            frag_ids = np.delete(frag_ids, deleted)
        if frag_ids.size == rows.ids.size and np.array_equal(frag_ids, rows.ids):
            alive[:] = True  # e.g. an update that moved exactly these rows here
            continue
        pos = np.clip(np.searchsorted(rows.ids, frag_ids), 0, rows.ids.size - 1)
        hit = rows.ids[pos] == frag_ids
        alive[pos[hit]] = True
    return alive


@dataclass(frozen=True)
class BeginChanges:
    """What the begin version contributes: per begin fragment id, the update pre-images
    ``(offsets, ids, versions)`` (sorted by offset; version = the post-image's), and the rows
    deleted in the range (``dead``, sorted by id; their versions come from :func:`first_gone`)."""

    pre: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]
    dead: Leavers


def begin_changes(
    store: ObjectStore, start: Manifest, end: Manifest, begin: int, changed: Sequence[EndChanges],
    ids: RowIds | None = None,
) -> BeginChanges:
    """Update pre-images and deleted rows of the begin version ``start`` for the end version's
    ``changed`` rows (:func:`end_changes`), from metadata alone."""
    ids = ids if ids is not None else RowIds(store)
    with_posts = [c for c in changed if c.posts.size]
    post_ids = _joined([c.post_ids for c in with_posts], _EMPTY_IDS)
    post_versions = _joined([c.post_versions for c in with_posts], _EMPTY_IDS)
    order = _order(post_ids)
    if order is not None:
        post_ids, post_versions = post_ids[order], post_versions[order]
    left, in_place = leavers(store, start, end, {c.fragment.id: c for c in with_posts}, ids)
    begin_ids = [f.id for f in start.fragments]
    moved = live_among(store, end, begin_ids, begin, left, ids, left_there=True)
    pre = dict(in_place)
    if post_ids.size and left.ids.size:
        if post_ids.size == left.ids.size and np.array_equal(post_ids, left.ids):
            pos, is_pre = np.arange(post_ids.size), moved  # the rows that left are the updated ones
        else:
            pos = np.searchsorted(post_ids, left.ids)
            np.minimum(pos, post_ids.size - 1, out=pos)
            is_pre = post_ids[pos] == left.ids
            is_pre &= moved
        for fid, idx in left.by_fragment().items():  # per fragment: no copy of every leaver
            sel = idx[is_pre[idx]]
            if not sel.size:
                continue
            parts = (left.offsets[sel], left.ids[sel], post_versions[pos[sel]])
            if fid in pre:
                o = np.concatenate([pre[fid][0], parts[0]])
                k = np.argsort(o, kind="stable")
                parts = (o[k], np.concatenate([pre[fid][1], parts[1]])[k],
                         np.concatenate([pre[fid][2], parts[2]])[k])
            pre[fid] = parts
        del pos, is_pre
    return BeginChanges(pre, left.subset(~moved))


def first_gone(
    store: ObjectStore,
    checks: Sequence[Manifest],
    begin: int,
    begin_fragments: Iterable[int],
    dead: Leavers,
    default: int,
    ids: RowIds | None = None,
) -> np.ndarray:
    """For rows live at ``begin`` and gone at the end (sorted by id): the first of the versions
    ``checks`` (ascending, between the two) without them, else ``default``; metadata only."""
    ids = ids if ids is not None else RowIds(store)
    frag_ids = list(begin_fragments)
    out = np.full(dead.ids.size, default, dtype=np.uint64)
    pending = np.arange(dead.ids.size)
    for m in checks:
        if pending.size == 0:
            break
        alive = live_among(store, m, frag_ids, begin, dead.subset(pending), ids)
        out[pending[~alive]] = m.version
        pending = pending[alive]
    return out
