"""Which rows of which fragments the change feed reads, from manifest metadata alone.

The version sequences (``_row_created_at_version``, ``_row_last_updated_at_version``), row id
sequences and deletion vectors of a fragment are all in the manifest (or beside it), so the
change feed picks its rows before it opens any data file:

- inserts / update post-images: fragments of the end version whose version runs hold a value in
  ``(begin, end]``; a fragment without one costs one pass over its runs and nothing else;
- rows that left a fragment of the begin version: fragments removed since, or whose deletion
  vector changed (only those fragments' row ids and deletion vectors are decoded);
- where such a row went: a fragment that did not exist at ``begin`` holding its id (an update
  or a compaction moved it) or nowhere (deleted).  A fragment whose rows were all created after
  ``begin`` cannot hold one and is skipped.

Memory grows with the rows that changed (and with the fragments rewritten in the range, whose
rows all count as having left), never with the rows that did not.
"""

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from .. import rowids
from ..deletion import read_deletion_file
from ..errors import CorruptFileError
from ..fragment import FragmentMetadata
from ..manifest import Manifest
from ..store import ObjectStore

__all__ = ["EndChanges", "Leavers", "end_changes", "leavers", "live_among", "live_mask", "version_runs"]

_EMPTY_IDS = np.empty(0, dtype=np.uint64)
_EMPTY_OFFSETS = np.empty(0, dtype=np.int64)


def version_runs(manifest: Manifest, frag: FragmentMetadata, *, created: bool) -> tuple[np.ndarray, np.ndarray]:
    """``(versions, lengths)`` of a fragment's version runs (one run of version 1 without a sequence)."""
    data = frag.created_at_versions if created else frag.last_updated_at_versions
    if data is None:  # as pylance reports a fragment without a sequence
        return np.ones(1, dtype=np.uint64), np.array([frag.physical_rows], dtype=np.int64)
    name = "inline_created_at_versions" if created else "inline_last_updated_at_versions"
    source = manifest.source
    with rowids.inline_field(source, frag.id, name):
        return rowids.decode_version_runs(data, expected_len=frag.physical_rows, path=source or "<inline>")


def live_mask(store: ObjectStore, manifest: Manifest, frag: FragmentMetadata) -> np.ndarray | None:
    """False for the deleted physical rows of ``frag``; None when nothing is deleted."""
    if frag.deletion_file is None:
        return None
    deleted = read_deletion_file(
        store, frag.id, frag.deletion_file.to_proto(), physical_rows=frag.physical_rows, bases=manifest.bases
    )
    if not len(deleted):
        return None
    live = np.ones(frag.physical_rows, dtype=bool)
    live[deleted] = False
    return live


def _row_ids(store: ObjectStore, manifest: Manifest, frag: FragmentMetadata) -> np.ndarray:
    if frag.row_ids is None:
        raise CorruptFileError(manifest.source or store.uri,
                               f"fragment {frag.id} has no row ids but the dataset uses stable row ids")
    return rowids.fragment_row_ids(frag, manifest.source)


@dataclass(frozen=True)
class EndChanges:
    """The inserted and updated live rows of one fragment of the end version (physical offsets)."""

    fragment: FragmentMetadata
    inserts: np.ndarray
    posts: np.ndarray  # update post-images
    post_ids: np.ndarray  # their row ids
    post_versions: np.ndarray  # their _row_last_updated_at_version


def end_changes(store: ObjectStore, end: Manifest, begin: int, stop: int) -> list[EndChanges]:
    """The fragments of ``end`` with inserted (``begin < created <= stop``) or updated
    (``created <= begin < updated <= stop``) live rows, and those rows; the others are pruned
    from their version runs without reading anything."""
    out = []
    lo, hi = np.uint64(begin), np.uint64(stop)
    for frag in end.fragments:
        cv, cl = version_runs(end, frag, created=True)
        uv, ul = version_runs(end, frag, created=False)
        if not (((cv > lo) & (cv <= hi)).any() or ((uv > lo) & (uv <= hi)).any()):
            continue
        c, u = np.repeat(cv, cl), np.repeat(uv, ul)
        ins = (c > lo) & (c <= hi)
        post = (c <= lo) & (u > lo) & (u <= hi)
        live = live_mask(store, end, frag)
        if live is not None:
            ins &= live
            post &= live
        if not (ins.any() or post.any()):
            continue
        posts = np.flatnonzero(post)
        post_ids = _row_ids(store, end, frag)[posts] if posts.size else _EMPTY_IDS
        out.append(EndChanges(frag, np.flatnonzero(ins), posts, post_ids, u[posts]))
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
        """Begin fragment id -> sorted physical offsets of its rows here."""
        order = np.lexsort((self.offsets, self.fragments))
        frags, offs = self.fragments[order], self.offsets[order]
        ids, starts = np.unique(frags, return_index=True)
        bounds = [*starts.tolist(), frags.size]
        return {int(f): offs[bounds[i]: bounds[i + 1]] for i, f in enumerate(ids.tolist())}


def leavers(
    store: ObjectStore, start: Manifest, end: Manifest, in_place_posts: dict[int, np.ndarray]
) -> tuple[Leavers, dict[int, np.ndarray]]:
    """Rows that left their begin fragment, and, per begin fragment, the offsets of its rows
    updated in place (``in_place_posts``: end fragment id -> post-image offsets) that were live
    at ``begin``.  Fragments with the same id, rows and deletion vector at both ends cost nothing."""
    at_end = {f.id: f for f in end.fragments}
    ids, frags, offs = [], [], []
    in_place: dict[int, np.ndarray] = {}
    for frag in start.fragments:
        other = at_end.get(frag.id)
        posts = in_place_posts.get(frag.id, _EMPTY_OFFSETS)
        if other is not None and other.physical_rows != frag.physical_rows:
            other = None  # not the same rows: as if removed
        if other is not None and other.deletion_file == frag.deletion_file:
            if posts.size:
                in_place[frag.id] = posts
            continue
        live_b = live_mask(store, start, frag)
        if other is not None:
            live_e = live_mask(store, end, other)
            gone = ~live_e if live_e is not None else np.zeros(frag.physical_rows, dtype=bool)
            if live_b is not None:
                gone &= live_b
            if posts.size:
                in_place[frag.id] = posts if live_b is None else posts[live_b[posts]]
        else:
            gone = live_b if live_b is not None else np.ones(frag.physical_rows, dtype=bool)
        rows = np.flatnonzero(gone)
        if rows.size == 0:
            continue
        ids.append(_row_ids(store, start, frag)[rows])
        frags.append(np.full(rows.size, frag.id, dtype=np.int64))
        offs.append(rows)
    if not ids:
        return Leavers(_EMPTY_IDS, _EMPTY_OFFSETS, _EMPTY_OFFSETS), in_place
    all_ids = np.concatenate(ids)
    order = np.argsort(all_ids, kind="stable")
    return Leavers(all_ids[order], np.concatenate(frags)[order], np.concatenate(offs)[order]), in_place


def live_among(
    store: ObjectStore, manifest: Manifest, begin_fragments: Iterable[int], begin: int, rows: Leavers
) -> np.ndarray:
    """Which of ``rows`` (rows of the begin version's fragments ``begin_fragments``) are live in
    ``manifest``: still live in their fragment, or live under their id in a fragment added since
    ``begin`` (one whose rows were all created after ``begin`` cannot hold them: skipped)."""
    alive = np.zeros(rows.ids.size, dtype=bool)
    if rows.ids.size == 0:
        return alive
    old = set(begin_fragments)
    order = np.argsort(rows.fragments, kind="stable")
    frag_sorted = rows.fragments[order]
    lo = np.uint64(begin)
    for frag in manifest.fragments:
        if frag.id in old:
            a, b = np.searchsorted(frag_sorted, [frag.id, frag.id + 1])
            if a == b:
                continue
            idx = order[a:b]
            live = live_mask(store, manifest, frag)
            alive[idx] = True if live is None else live[rows.offsets[idx]]
            continue
        cv, _ = version_runs(manifest, frag, created=True)
        if not (cv <= lo).any():
            continue  # only rows created after begin: none of ours
        ids = _row_ids(store, manifest, frag)
        live = live_mask(store, manifest, frag)
        if live is not None:
            ids = ids[live]
        pos = np.clip(np.searchsorted(rows.ids, ids), 0, rows.ids.size - 1)
        hit = rows.ids[pos] == ids
        alive[pos[hit]] = True
    return alive
