"""Conflict checks between my uncommitted transaction and one committed meanwhile.

One check per operation kind (docs/FORMAT.md §10; lance ``conflict_resolver.rs``).  A check
returns None when the two are compatible (the commit is rebased onto the newer version) and
raises :class:`RetryableCommitConflictError` (redo the work on the new version) or
:class:`IncompatibleTransactionError` otherwise.
"""

from collections.abc import Callable

from .errors import IncompatibleTransactionError, RetryableCommitConflictError
from .index.metadata import FRAG_REUSE_INDEX_NAME
from .operations import (
    Append,
    CreateIndex,
    Delete,
    Operation,
    Overwrite,
    ReserveFragments,
    Restore,
    Rewrite,
    Unmodelled,
    Update,
    UpdateConfig,
)
from .transaction import Transaction


def touched_fragments(op: Operation) -> set[int]:
    """Ids of existing fragments an operation modifies or removes."""
    if isinstance(op, Delete):
        return {f.id for f in op.updated_fragments} | set(op.deleted_fragment_ids)
    if isinstance(op, Update):
        return {f.id for f in op.updated_fragments} | set(op.removed_fragment_ids)
    if isinstance(op, Rewrite):
        return {f.id for g in op.groups for f in g.old_fragments}
    return set()


def _fail(kind: type, mine: Transaction, theirs: Transaction, version: int, why: str) -> None:
    raise kind(
        f"{mine.operation.name} planned on version {mine.read_version} conflicts with the "
        f"{theirs.operation.name} committed as version {version}: {why}",
        read_version=mine.read_version,
        conflicting_version=version,
        operation=mine.operation,
        other_operation=theirs.operation,
    )


def _config_keys(op: Operation) -> set[str]:
    if isinstance(op, UpdateConfig):
        return set(op.upsert_values) | set(op.delete_keys)
    if isinstance(op, Overwrite) and op.config_upsert_values:
        return set(op.config_upsert_values)
    return set()


def check(mine: Transaction, theirs: Transaction, version: int) -> set[int]:
    """Raise if ``mine`` cannot be rebased over ``theirs`` (committed as ``version``).

    Returns the fragment ids both modified where a rebase can still reconcile them (their
    deletion vectors merge, or my rewrite translates their deletions); empty when independent.
    """
    a, b = mine.operation, theirs.operation
    retry, incompatible = RetryableCommitConflictError, IncompatibleTransactionError

    if isinstance(a, Restore):
        return set()
    if isinstance(a, Overwrite):
        if isinstance(b, Overwrite | UpdateConfig) and _config_keys(a) & _config_keys(b):
            _fail(incompatible, mine, theirs, version, "both set the same config keys")
        return set()
    if isinstance(a, UpdateConfig):
        if isinstance(b, Overwrite | UpdateConfig) and _config_keys(a) & _config_keys(b):
            _fail(incompatible, mine, theirs, version, f"both change config keys {_config_keys(a) & _config_keys(b)}")
        return set()
    # Everything below plans on the fragments of its read version.
    if isinstance(b, Overwrite | Restore):
        _fail(incompatible, mine, theirs, version, "the dataset was replaced")
    if isinstance(b, Unmodelled):
        _fail(retry, mine, theirs, version, f"unknown committed operation {b.name!r}")
    if isinstance(a, Append | ReserveFragments):
        return set()
    if isinstance(a, CreateIndex):
        _check_create_index(mine, theirs, version)
        return set()
    if isinstance(b, Append | ReserveFragments | UpdateConfig):
        return set()
    if isinstance(b, CreateIndex):
        if isinstance(a, Rewrite):
            _check_rewrite_vs_create_index(mine, theirs, version)
        return set()  # Delete / Update: row ids stay valid (pylance allows it optimistically)
    if isinstance(a, Rewrite) and isinstance(b, Rewrite):
        both = {r.old_id for r in a.rewritten_indices} & {r.old_id for r in b.rewritten_indices}
        if both:
            # stricter than pylance, which lets the later remap of the same index be skipped
            # (losing that index's coverage of the later group)
            _fail(retry, mine, theirs, version, f"both remapped index(es) {sorted(both)}")
    common = touched_fragments(a) & touched_fragments(b)
    if not common:
        return set()
    if isinstance(b, Rewrite):
        _fail(retry, mine, theirs, version, f"fragments {sorted(common)} were rewritten (compacted)")
    # b is a Delete or an Update touching my fragments: mergeable by row, decided in rebase.
    return common


def _check_rewrite_vs_create_index(mine: Transaction, theirs: Transaction, version: int) -> None:
    """My compaction (which remaps, never defers) vs an index committed meanwhile, as pylance's
    ``check_rewrite_txn``: retryable if the new index covers a fragment I rewrite (its rows
    would keep their old addresses) or stores no bitmap; an index committed together with the
    fragment reuse index must replace exactly one index, else the two are incompatible."""
    assert isinstance(mine.operation, Rewrite) and isinstance(theirs.operation, CreateIndex)
    new = theirs.operation.new_indices
    if any(i.name == FRAG_REUSE_INDEX_NAME for i in new):
        if len(new) != 1 or len(theirs.operation.removed_indices) != 1:
            _fail(IncompatibleTransactionError, mine, theirs, version,
                  "a fragment reuse index was committed together with other indices")
        return
    old = {f.id for g in mine.operation.groups for f in g.old_fragments}
    for idx in new:
        if idx.fragment_ids is None:
            _fail(RetryableCommitConflictError, mine, theirs, version,
                  f"index {idx.name!r} was created without a fragment bitmap")
        hit = sorted(old & (idx.fragment_ids or frozenset()))
        if hit:
            _fail(RetryableCommitConflictError, mine, theirs, version,
                  f"index {idx.name!r} was created over fragments {hit} being rewritten")


def _check_create_index(mine: Transaction, theirs: Transaction, version: int) -> None:
    """My new index segments vs what landed meanwhile (pylance's ``check_create_index_txn``,
    stricter where row ids could change under the segments): retryable when a compaction or an
    update rewrote fragments my segments cover or remapped a segment I replace, or another
    ``CreateIndex`` replaced the same segments or wrote an index of the same name."""
    a, b = mine.operation, theirs.operation
    assert isinstance(a, CreateIndex)
    mine_frags = set().union(*(i.fragment_ids or () for i in a.new_indices))
    removed = {i.uuid for i in a.removed_indices}
    names = {i.name for i in a.new_indices}
    why = ""
    if isinstance(b, Rewrite):
        hit = mine_frags & touched_fragments(b)
        remapped = removed & {r.old_id for r in b.rewritten_indices}
        if hit:
            why = f"fragments {sorted(hit)} my index segments cover were rewritten"
        elif remapped:
            why = f"index segment(s) {sorted(remapped)} I replace were remapped"
    elif isinstance(b, Update):
        hit = mine_frags & touched_fragments(b)
        if hit:
            why = f"rows of fragments {sorted(hit)} my index segments cover were updated"
    elif isinstance(b, CreateIndex):
        both = names & {i.name for i in b.new_indices} or removed & {i.uuid for i in b.removed_indices}
        if both:
            why = f"index {sorted(both)} was changed too"
    if why:
        _fail(RetryableCommitConflictError, mine, theirs, version, why)


CheckFn = Callable[[Transaction, Transaction, int], None]
