"""Rebasing my transaction over one committed meanwhile that touched the same fragments.

- Delete/Update over Delete/Update (as pylance's ``finish()``): if both only changed the
  fragment's deletion vector and no row was removed by both, the vectors are merged into a
  new deletion file; otherwise the caller must redo its work (retryable conflict).
- Rewrite (compaction) over Delete/Update, with stable row ids (beyond pylance, lance#6150):
  the rows the other transaction removed are found by row id in my new fragments and added to
  their deletion vectors, so the compaction still lands and the deletion is not lost.
"""

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import singledispatch

import numpy as np

from lance_ops.format.errors import RetryableCommitConflictError
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.table import rowids
from lance_ops.format.table.bases import BasePath
from lance_ops.format.table.deletion import deleted_offsets, with_deletions
from lance_ops.format.table.fragment import FragmentMetadata
from lance_ops.format.table.manifest import Manifest
from lance_ops.format.txn.operations import Delete, Operation, Rewrite, RewriteGroup, Update
from lance_ops.format.txn.transaction import Transaction


class RebaseState:
    """What my transaction has already absorbed: each touched fragment as last seen."""

    def __init__(self, read_manifest: Manifest) -> None:
        self.seen: dict[int, FragmentMetadata] = {f.id: f for f in read_manifest.fragments}
        #: the manifest each fragment in ``seen`` was last read from (named in errors)
        self.source: dict[int, str] = {f.id: read_manifest.source for f in read_manifest.fragments}
        #: fragments with the deletion files rebases wrote (removed if the commit never lands)
        self.written: list[FragmentMetadata] = []


def _retry_error(txn: Transaction, version: int, why: str, other: Operation | None = None) -> RetryableCommitConflictError:
    name = f" ({other.name})" if other is not None else ""
    return RetryableCommitConflictError(
        f"Retryable commit conflict for version {version}: "
        f"{txn.operation.name} planned on version {txn.read_version} cannot be rebased over version "
        f"{version}{name}: {why}",
        read_version=txn.read_version,
        conflicting_version=version,
        operation=txn.operation,
        other_operation=other,
    )


def _mine_removed(
    store: ObjectStore, mine: FragmentMetadata | None, base: FragmentMetadata, bases: "dict[int, BasePath]"
) -> np.ndarray:
    """Offsets my transaction removes from ``base`` (all live rows if I removed the fragment)."""
    before = deleted_offsets(store, base, bases=bases)
    if mine is None:
        return np.setdiff1d(np.arange(base.physical_rows, dtype=np.uint32), before)
    return np.setdiff1d(deleted_offsets(store, mine, bases=bases), before)


@dataclass(frozen=True)
class _Rebase:
    """One rebase of ``txn`` over ``theirs`` (committed as ``theirs.version``)."""

    store: ObjectStore
    txn: Transaction
    common: set[int]
    theirs: Manifest
    state: RebaseState
    stable_row_ids: bool
    other: Operation | None

    @property
    def bases(self) -> "dict[int, BasePath]":
        return self.theirs.bases  # a branch keeps its base paths: one map for every version

    def retry(self, why: str) -> RetryableCommitConflictError:
        return _retry_error(self.txn, self.theirs.version, why, self.other)

    def absorb(self, fid: int, theirs: FragmentMetadata) -> None:
        """Remember ``theirs`` as the last seen state of fragment ``fid``."""
        self.state.seen[fid] = theirs
        self.state.source[fid] = self.theirs.source

    def with_operation(self, op: Operation) -> Transaction:
        return replace(self.txn, operation=op)


def rebase(
    store: ObjectStore,
    txn: Transaction,
    common: set[int],
    theirs_manifest: Manifest,
    state: RebaseState,
    *,
    stable_row_ids: bool,
    other: Operation | None = None,
) -> Transaction:
    """``txn`` adjusted to sit on top of ``theirs_manifest`` for the fragments in ``common``.

    Args:
        other: the operation committed as ``theirs_manifest`` (named in conflict errors).

    Raises:
        RetryableCommitConflictError: the two cannot be reconciled row by row.
    """
    r = _Rebase(store, txn, common, theirs_manifest, state, stable_row_ids, other)
    return _rebase_op(txn.operation, r)


@singledispatch
def _rebase_op(op: Operation, r: _Rebase) -> Transaction:
    raise r.retry(f"fragments {sorted(r.common)} were modified")


@_rebase_op.register
def _(op: Delete, r: _Rebase) -> Transaction:
    frags, removed = _merge_deletions(r, op.updated_fragments, op.deleted_fragment_ids)
    return r.with_operation(replace(op, updated_fragments=frags, deleted_fragment_ids=removed))


@_rebase_op.register
def _(op: Update, r: _Rebase) -> Transaction:
    frags, removed = _merge_deletions(r, op.updated_fragments, op.removed_fragment_ids)
    return r.with_operation(replace(op, updated_fragments=frags, removed_fragment_ids=removed))


def _merge_deletions(
    r: _Rebase, updated_fragments: Sequence[FragmentMetadata], removed_ids: Sequence[int]
) -> tuple[list[FragmentMetadata], list[int]]:
    """My updated fragments and removed ids with their deletions merged into each common fragment."""
    store, v, bases = r.store, r.theirs.version, r.bases
    updated = {f.id: f for f in updated_fragments}
    removed = set(removed_ids)
    for fid in sorted(r.common):
        base = r.state.seen[fid]
        theirs = r.theirs.fragment(fid)
        if theirs is None:
            raise r.retry(f"fragment {fid} was deleted entirely")
        if theirs.files != base.files:
            raise r.retry(f"fragment {fid} data files changed")
        mine_new = _mine_removed(store, updated.get(fid), base, bases)
        theirs_new = np.setdiff1d(deleted_offsets(store, theirs, bases=bases), deleted_offsets(store, base, bases=bases))
        both = np.intersect1d(mine_new, theirs_new)
        if both.size:
            raise r.retry(f"{both.size} row(s) of fragment {fid} were changed by both")
        merged = with_deletions(store, theirs, mine_new, v, bases=bases)
        if merged is not None:
            r.state.written.append(merged)
        r.absorb(fid, theirs)
        if merged is None:
            updated.pop(fid, None)
            removed.add(fid)
        else:
            updated[fid] = merged
            removed.discard(fid)
    return list(updated.values()), sorted(removed)


@_rebase_op.register
def _(op: Rewrite, r: _Rebase) -> Transaction:
    if not r.stable_row_ids:
        raise r.retry(f"fragments {sorted(r.common)} being compacted were modified (no stable row ids)")
    gone_ids = _row_ids_gone(r)
    if not gone_ids:
        return r.txn
    gone = np.concatenate(gone_ids)
    groups = [RewriteGroup(g.old_fragments, _without_rows(r, op, g.new_fragments, gone)) for g in op.groups]
    return r.with_operation(Rewrite(groups, op.rewritten_indices))


def _row_ids_gone(r: _Rebase) -> list[np.ndarray]:
    """Row ids the committed transaction removed from the fragments my compaction rewrites."""
    store, bases = r.store, r.bases
    gone_ids = []
    for fid in sorted(r.common):
        base = r.state.seen[fid]
        theirs = r.theirs.fragment(fid)
        if theirs is not None and theirs.files != base.files:
            raise r.retry(f"fragment {fid} data files changed")
        before = deleted_offsets(store, base, bases=bases)
        if theirs is None:
            offsets = np.setdiff1d(np.arange(base.physical_rows, dtype=np.uint32), before)
        else:
            offsets = np.setdiff1d(deleted_offsets(store, theirs, bases=bases), before)
            r.absorb(fid, theirs)
        if offsets.size:
            if base.row_ids is None:
                raise r.retry(f"fragment {fid} has no row ids")
            ids = rowids.fragment_row_ids(base, r.state.source.get(fid, r.theirs.source))
            gone_ids.append(ids[offsets.astype(np.intp)])
    return gone_ids


def _without_rows(
    r: _Rebase, op: Rewrite, new_fragments: Sequence[FragmentMetadata], gone: np.ndarray
) -> list[FragmentMetadata]:
    """``new_fragments`` of one group with the rows whose ids are in ``gone`` deleted."""
    out = []
    for nf in new_fragments:
        if nf.row_ids is None or nf.id == 0:
            raise r.retry("compacted fragment has no row ids or no reserved fragment id")
        ids = rowids.fragment_row_ids(nf, f"transaction {r.txn.file_name}")
        hit = np.flatnonzero(np.isin(ids, gone)).astype(np.uint32)
        if hit.size:
            merged = with_deletions(r.store, nf, hit, r.theirs.version, bases=r.bases)
            if merged is not None:
                r.state.written.append(merged)
            if merged is None and op.rewritten_indices:
                # remapped index files name its rows: the fragment cannot just vanish
                raise r.retry(f"every row of compacted fragment {nf.id} was deleted meanwhile")
            if merged is None:
                continue  # every row of the new fragment is gone: drop it
            nf = merged
        out.append(nf)
    return out
