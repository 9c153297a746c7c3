"""Rebasing my transaction over one committed meanwhile that touched the same fragments.

- Delete/Update over Delete/Update (as pylance's ``finish()``): if both only changed the
  fragment's deletion vector and no row was removed by both, the vectors are merged into a
  new deletion file; otherwise the caller must redo its work (retryable conflict).
- Rewrite (compaction) over Delete/Update, with stable row ids (beyond pylance, lance#6150):
  the rows the other transaction removed are found by row id in my new fragments and added to
  their deletion vectors, so the compaction still lands and the deletion is not lost.
"""

import numpy as np

from . import rowids
from .bases import BasePath
from .deletion import deleted_offsets, with_deletions
from .errors import RetryableCommitConflictError
from .fragment import FragmentMetadata
from .manifest import Manifest
from .operations import Delete, Operation, Rewrite, RewriteGroup, Update
from .store import ObjectStore
from .transaction import Transaction


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
    op = txn.operation
    v = theirs_manifest.version
    bases = theirs_manifest.bases  # a branch keeps its base paths: one map for every version

    def _retry(txn: Transaction, version: int, why: str) -> RetryableCommitConflictError:
        return _retry_error(txn, version, why, other)

    if isinstance(op, Delete | Update):
        updated = {f.id: f for f in op.updated_fragments}
        removed = set(op.deleted_fragment_ids if isinstance(op, Delete) else op.removed_fragment_ids)
        for fid in sorted(common):
            base = state.seen[fid]
            theirs = theirs_manifest.fragment(fid)
            if theirs is None:
                raise _retry(txn, v, f"fragment {fid} was deleted entirely")
            if theirs.files != base.files:
                raise _retry(txn, v, f"fragment {fid} data files changed")
            mine_new = _mine_removed(store, updated.get(fid), base, bases)
            theirs_new = np.setdiff1d(deleted_offsets(store, theirs, bases=bases), deleted_offsets(store, base, bases=bases))
            both = np.intersect1d(mine_new, theirs_new)
            if both.size:
                raise _retry(txn, v, f"{both.size} row(s) of fragment {fid} were changed by both")
            merged = with_deletions(store, theirs, mine_new, v, bases=bases)
            if merged is not None:
                state.written.append(merged)
            state.seen[fid] = theirs
            state.source[fid] = theirs_manifest.source
            if merged is None:
                updated.pop(fid, None)
                removed.add(fid)
            else:
                updated[fid] = merged
                removed.discard(fid)
        frags = list(updated.values())
        new_op: Delete | Update
        if isinstance(op, Delete):
            new_op = Delete(frags, sorted(removed), op.predicate)
        else:
            new_op = Update(sorted(removed), frags, op.new_fragments, op.fields_modified,
                            op.fields_for_preserving_frag_bitmap)
        return Transaction(txn.read_version, new_op, txn.uuid, txn.tag, txn.properties)
    if isinstance(op, Rewrite):
        if not stable_row_ids:
            raise _retry(txn, v, f"fragments {sorted(common)} being compacted were modified (no stable row ids)")
        gone_ids = []
        for fid in sorted(common):
            base = state.seen[fid]
            theirs = theirs_manifest.fragment(fid)
            if theirs is not None and theirs.files != base.files:
                raise _retry(txn, v, f"fragment {fid} data files changed")
            before = deleted_offsets(store, base, bases=bases)
            if theirs is None:
                offsets = np.setdiff1d(np.arange(base.physical_rows, dtype=np.uint32), before)
            else:
                offsets = np.setdiff1d(deleted_offsets(store, theirs, bases=bases), before)
                state.seen[fid] = theirs
                state.source[fid] = theirs_manifest.source
            if offsets.size:
                if base.row_ids is None:
                    raise _retry(txn, v, f"fragment {fid} has no row ids")
                ids = rowids.fragment_row_ids(base, state.source.get(fid, theirs_manifest.source))
                gone_ids.append(ids[offsets.astype(np.intp)])
        if not gone_ids:
            return txn
        gone = np.concatenate(gone_ids)
        groups = []
        for g in op.groups:
            new_frags = []
            for nf in g.new_fragments:
                if nf.row_ids is None or nf.id == 0:
                    raise _retry(txn, v, "compacted fragment has no row ids or no reserved fragment id")
                ids = rowids.fragment_row_ids(nf, f"transaction {txn.file_name}")
                hit = np.flatnonzero(np.isin(ids, gone)).astype(np.uint32)
                if hit.size:
                    merged = with_deletions(store, nf, hit, v, bases=bases)
                    if merged is not None:
                        state.written.append(merged)
                    if merged is None and op.rewritten_indices:
                        # remapped index files name its rows: the fragment cannot just vanish
                        raise _retry(txn, v, f"every row of compacted fragment {nf.id} was deleted meanwhile")
                    if merged is None:
                        continue  # every row of the new fragment is gone: drop it
                    nf = merged
                new_frags.append(nf)
            groups.append(RewriteGroup(g.old_fragments, new_frags))
        return Transaction(txn.read_version, Rewrite(groups, op.rewritten_indices), txn.uuid, txn.tag, txn.properties)
    raise _retry(txn, v, f"fragments {sorted(common)} were modified")
