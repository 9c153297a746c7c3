"""What compaction must do for the dataset's indices: plan constraints and remapped indices.

Planning (as pylance 14's ``plan_compaction``, upstream ``rust/lance/src/dataset/optimize.rs``):
a group never mixes fragments covered by different sets of indices, so every group is either
inside an index's coverage or outside it and the coverage can move with it.

Carrying coverage (:mod:`lance_ops.format.index.coverage` for the bitmap rules):

What happens to an index is read from one table, (kind, ``index_version``, row-id mode) ->
action (:mod:`lance_ops.format.index.handling`):

- stable row ids: the Rewrite moves the bitmaps of indices holding row ids (lancedb's BTREE,
  version 0, among them); only indices holding row addresses (pylance 14's BTREE, version 1)
  are remapped;
- no stable row ids: every index covering a rewritten fragment is remapped before the commit
  (:func:`lance_ops.format.index.remap.remap_index`) and listed in ``rewritten_indices``; when
  pylance deferred earlier remaps to its fragment reuse index, addresses go through those
  first, so the remapped files hold current addresses.

An index lance_ops cannot carry (a kind or version it does not know, or no fragment bitmap) is never
dropped silently: by
default the fragments it covers stay out of the plan and the metrics say why; with
``ignore_remap=True`` (pylance's ``IgnoreRemap``) they are compacted and the metrics list the
coverage that was dropped.  ZONEMAP and BLOOMFILTER coverage of rewritten fragments is dropped
as pylance drops it, and reported the same way.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from lance_ops.format.index.handling import IndexAction, handling
from lance_ops.format.index.metadata import FRAG_REUSE_INDEX_NAME, IndexMetadata, decode_index_section
from lance_ops.format.index.remap import RemappedIndex, remap_index
from lance_ops.format.index.reuse import effective_bitmap, read_reuse_versions, reuse_maps, reused_fragments
from lance_ops.format.index.rowaddr import address_map
from lance_ops.format.index.unreferenced import prune_empty_index_dirs
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.table.fragment import FragmentMetadata
from lance_ops.format.table.manifest import Manifest
from lance_ops.format.txn.operations import RewrittenIndex


@dataclass(frozen=True)
class IndexConstraints:
    """Per fragment: which indices cover it (``key``) and why lance_ops cannot carry them."""

    key: dict[int, frozenset[str]] = field(default_factory=dict)
    blocked: dict[int, list[str]] = field(default_factory=dict)  # fragment id -> reasons
    #: fragment id -> messages about coverage a rewrite of it drops (ignore_remap / zone maps)
    drops: dict[int, list[str]] = field(default_factory=dict)


def _why_not(index: IndexMetadata, *, stable: bool) -> str | None:
    how = handling(index, stable=stable)
    if how.action is not IndexAction.UNKNOWN:
        return None
    details = f" ({index.type_url})" if index.kind == "IVF" or index.kind == "UNKNOWN" else ""
    return how.reason + details


def index_constraints(store: ObjectStore, manifest: Manifest, *, ignore_remap: bool = False) -> IndexConstraints:
    """The planner's view of ``manifest``'s indices (empty when it has none)."""
    indices = decode_index_section(manifest.index_section, f"{store.uri} version {manifest.version}")
    if not indices:
        return IndexConstraints()
    stable = manifest.uses_stable_row_ids
    reuse = [i for i in indices if i.name == FRAG_REUSE_INDEX_NAME]
    versions = read_reuse_versions(store, reuse[0]) if reuse and not stable else ()
    out = IndexConstraints()
    live = {f.id for f in manifest.fragments}
    for idx in indices:
        raw = idx.fragment_ids
        covered = frozenset(live) if raw is None else effective_bitmap(raw, versions) & live
        for fid in covered:
            out.key.setdefault(fid, frozenset())
            out.key[fid] = out.key[fid] | {idx.uuid}
        if idx.is_system:
            continue
        why = _why_not(idx, stable=stable)
        label = f"index {idx.name!r} ({idx.kind})"
        for fid in covered:
            if why is not None and not ignore_remap:
                out.blocked.setdefault(fid, []).append(f"{label} {why}")
            elif why is not None:
                out.drops.setdefault(fid, []).append(f"{label} {why}: its coverage was dropped (ignore_remap=True)")
            elif handling(idx, stable=stable).action is IndexAction.DROP:
                out.drops.setdefault(fid, []).append(
                    f"{label}: coverage dropped as pylance drops it (zone maps and bloom filters hold row "
                    "addresses and are not remapped); pylance optimize_indices restores it"
                )
    return out


def summarize(frag_ids: Sequence[int], messages: dict[int, list[str]]) -> tuple[str, ...]:
    """One line per distinct message, naming the fragments it applies to."""
    by_msg: dict[str, list[int]] = {}
    for fid in frag_ids:
        for msg in messages.get(fid, ()):
            by_msg.setdefault(msg, []).append(fid)
    return tuple(f"fragments {sorted(set(f))}: {m}" for m, f in sorted(by_msg.items()))


@dataclass(frozen=True)
class IndexRemap:
    """Remapped copies written for one Rewrite (nothing committed yet)."""

    rewritten: tuple[RewrittenIndex, ...] = ()
    remapped: tuple[RemappedIndex, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(sorted({r.old.name for r in self.remapped}))

    def discard(self, store: ObjectStore) -> None:
        """Remove the written index directories (the commit did not happen)."""
        paths = [f"_indices/{r.new_uuid}/{f.path}" for r in self.remapped for f in r.files]
        for rel in paths:
            store.delete(rel)
        prune_empty_index_dirs(store, paths)


def remap_indices(
    store: ObjectStore,
    manifest: Manifest,
    groups: Sequence[tuple[Sequence[FragmentMetadata], Sequence[FragmentMetadata]]],
    orders: Sequence[Any] = (),
) -> IndexRemap:
    """Remap every index of ``manifest`` that holds row addresses and covers a rewritten fragment
    (``REMAP`` in :mod:`lance_ops.format.index.handling`).

    ``groups`` are ``(old fragments, new fragments with their final ids)``; ``orders`` the row
    order of each clustered group (None for a group that kept its rows' order).  Indices lance_ops
    cannot remap are skipped here (the planner kept their fragments out, or the caller chose
    to drop their coverage).
    """
    stable = manifest.uses_stable_row_ids
    indices = decode_index_section(manifest.index_section, f"{store.uri} version {manifest.version}")
    old_ids = {f.id for old, _ in groups for f in old}
    reuse = [i for i in indices if i.name == FRAG_REUSE_INDEX_NAME]
    versions = read_reuse_versions(store, reuse[0]) if reuse and not stable else ()
    todo = [
        i for i in indices
        if not i.is_system and i.fragment_ids is not None and effective_bitmap(i.fragment_ids, versions) & old_ids
        and handling(i, stable=stable).action is IndexAction.REMAP
    ]
    if not todo:
        return IndexRemap()
    where = f"{store.uri}: {FRAG_REUSE_INDEX_NAME}"
    amap = address_map(store, groups, reuse=reuse_maps(versions, where), reuse_fragments=reused_fragments(versions),
                       orders=orders)
    done: list[RemappedIndex] = []
    try:
        for idx in todo:
            done.append(remap_index(store, idx, amap, stable=stable))
    except BaseException:
        IndexRemap(remapped=tuple(done)).discard(store)
        raise
    rewritten = tuple(
        RewrittenIndex(r.old.uuid, r.new_uuid, r.old.type_url, r.old.details, r.old.index_version, r.files)
        for r in done
    )
    return IndexRemap(rewritten, tuple(done))
