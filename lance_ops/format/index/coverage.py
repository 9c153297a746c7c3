"""Index coverage (fragment bitmaps) through the operations lance_ops commits.

Rules, as pylance 14.0.2 applies them (verified on datasets it built; upstream
``rust/lance/src/dataset/transaction.rs`` ``build_manifest``, ``recalculate_fragment_bitmap``,
``handle_rewrite_indices``, ``register_pure_rewrite_rows_update_frags_in_indices``):

- Rewrite (compaction), stable row ids: what an index holds decides (the table of
  (kind, ``index_version``, row-id mode) in :mod:`.handling`).  ``FOLLOW`` indices store row
  ids, which survive the rewrite, so a group's coverage moves to its new fragments (all of a
  group's old fragments must be covered, or none -- the planner never mixes them).  ``REMAP``
  indices (pylance 14's BTREE, version 1) are remapped and listed in ``rewritten_indices`` like
  without stable row ids; ``DROP`` (ZONEMAP, BLOOMFILTER) and ``UNKNOWN`` indices lose the
  group's old fragments (``UNKNOWN`` only rewritten with ``ignore_remap``).
- Rewrite, no stable row ids: only the indices the Rewrite lists in ``rewritten_indices`` change
  (new uuid, new files, bitmap moved to the new fragments); others keep their bitmap as it was
  (pylance leaves ZONEMAP/BLOOMFILTER naming the removed fragments: they then cover nothing).
  lance_ops adds back the old fragments that had deleted rows for the kinds that keep those rows
  as tombstones (see :mod:`.remap`).
- Update, stable row ids: a new fragment whose every row kept its row id (a pure rewrite) joins
  the bitmap of every index that covers all fragments the rows came from, unless the index is
  on a field listed in ``fields_for_preserving_frag_bitmap`` (the SET columns) or does not
  hold row ids (``FOLLOW`` in :mod:`.handling`: pylance 14's BTREE, ZONEMAP and BLOOMFILTER
  hold addresses, which point at the rows' old places).  Without stable row ids
  nothing joins.  ``fields_modified`` (in-place column rewrites) removes the updated fragments
  from indices on those fields.
- Delete, Append, ReserveFragments, UpdateConfig: unchanged (bitmaps keep ids of fragments
  deleted since; an index is kept even when it covers no live fragment).  Overwrite: no indices.
"""

from collections.abc import Iterable, Mapping, Sequence

from lance_ops.format.errors import IncompatibleTransactionError
from lance_ops.format.index.handling import TOMBSTONE_KINDS, IndexAction, handling
from lance_ops.format.index.metadata import IndexFile, IndexMetadata
from lance_ops.format.index.reuse import effective_bitmap, inline_reuse_versions

Group = tuple[Sequence[int], Sequence[int]]  # (old fragment ids, new fragment ids)


def moved_bitmap(bitmap: frozenset[int], groups: Iterable[Group], *, index: str) -> frozenset[int]:
    """``bitmap`` with each fully covered group's old fragments replaced by its new ones.

    Raises:
        IncompatibleTransactionError: a group mixes covered and uncovered fragments.
    """
    out = set(bitmap)
    for old, new in groups:
        inside = [f in bitmap for f in old]
        if not any(inside):
            continue
        if not all(inside):
            raise IncompatibleTransactionError(
                f"a rewrite group {sorted(old)} mixes fragments index {index!r} covers and fragments it does not"
            )
        out.difference_update(old)
        out.update(new)
    return frozenset(out)


def dropped_bitmap(bitmap: frozenset[int], groups: Iterable[Group]) -> frozenset[int]:
    """``bitmap`` without the old fragments of every group."""
    gone = {f for old, _ in groups for f in old}
    return frozenset(bitmap - gone)


def rewrite_coverage(
    indices: Sequence[IndexMetadata],
    groups: Sequence[Group],
    *,
    stable: bool,
    remapped: Mapping[str, tuple[str, tuple[IndexFile, ...]]],
    tombstone_fragments: Iterable[int] = (),
) -> tuple[IndexMetadata, ...]:
    """Index section after a Rewrite (compaction).

    Args:
        remapped: old uuid -> (new uuid, new files) of every index the Rewrite remapped (its
            ``rewritten_indices``); an old uuid no longer present (dropped meanwhile) is
            skipped, as pylance does.
        tombstone_fragments: old fragments with deleted rows; they stay in the bitmap of a
            remapped index whose kind keeps deleted rows as tombstones (:mod:`.remap`).
    """
    tomb = frozenset(tombstone_fragments)
    # a remapped index's files hold addresses past pylance's deferred remaps (:mod:`.reuse`): its
    # bitmap is the one pylance would see through them
    reuse = inline_reuse_versions(indices) if remapped and not stable else ()
    out = []
    for idx in indices:
        hit = remapped.get(idx.uuid)
        bitmap = idx.fragment_ids
        if hit is not None:
            if bitmap is None:
                raise IncompatibleTransactionError(f"index {idx.name!r} stores no fragment bitmap; it cannot be remapped")
            new_uuid, files = hit
            moved = moved_bitmap(effective_bitmap(bitmap, reuse or ()), groups, index=idx.name)
            if idx.kind in TOMBSTONE_KINDS:
                moved = moved | (tomb & bitmap)
            idx = idx.with_changes(uuid=new_uuid, files=files, fragment_ids=moved)
        elif stable and bitmap is not None:
            if idx.is_system or handling(idx, stable=True).action is IndexAction.FOLLOW:
                idx = idx.with_changes(fragment_ids=moved_bitmap(bitmap, groups, index=idx.name))
            else:  # addresses not remapped here: zone maps, bloom filters (as pylance), UNKNOWN (ignore_remap)
                idx = idx.with_changes(fragment_ids=dropped_bitmap(bitmap, groups))
        out.append(idx)
    return tuple(out)


def update_coverage(
    indices: Sequence[IndexMetadata],
    *,
    stable: bool,
    original_fragment_ids: Iterable[int],
    updated_fragment_ids: Iterable[int],
    pure_rewrite_fragment_ids: Iterable[int],
    fields_for_preserving_frag_bitmap: Iterable[int],
    fields_modified: Iterable[int] = (),
) -> tuple[IndexMetadata, ...]:
    """Index section after an Update (see the module docstring)."""
    modified = set(fields_modified)
    preserving = set(fields_for_preserving_frag_bitmap)
    original = set(original_fragment_ids)
    pure = set(pure_rewrite_fragment_ids)
    updated = set(updated_fragment_ids)
    out = []
    for idx in indices:
        bitmap = idx.fragment_ids
        if bitmap is not None and modified and modified & set(idx.fields):
            bitmap = bitmap - updated
        if (
            stable
            and bitmap is not None
            and pure
            and not idx.is_system
            and handling(idx, stable=True).action is IndexAction.FOLLOW
            and not preserving & set(idx.fields)
            and original <= bitmap
        ):
            bitmap = bitmap | pure
        if bitmap is not idx.fragment_ids and bitmap is not None:
            idx = idx.with_changes(fragment_ids=frozenset(bitmap))
        out.append(idx)
    return tuple(out)
