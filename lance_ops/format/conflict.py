"""Conflict checks between my uncommitted transaction and one committed meanwhile.

One check per operation kind (FORMAT_NOTES.md §10; lance ``conflict_resolver.rs``).  A check
returns None when the two are compatible (the commit is rebased onto the newer version) and
raises :class:`RetryableCommitConflictError` (redo the work on the new version) or
:class:`IncompatibleTransactionError` otherwise.
"""

from collections.abc import Callable

from .errors import IncompatibleTransactionError, RetryableCommitConflictError
from .operations import (
    Append,
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

# Committed operations that never invalidate the fragments another transaction planned on.
_HARMLESS_UNMODELLED = {"create_index"}


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
    if isinstance(b, Unmodelled) and b.name not in _HARMLESS_UNMODELLED:
        _fail(retry, mine, theirs, version, f"unknown committed operation {b.name!r}")
    if isinstance(a, Append | ReserveFragments):
        return set()
    if isinstance(b, Append | ReserveFragments | UpdateConfig):
        return set()
    if isinstance(b, Unmodelled):  # create_index
        if isinstance(a, Rewrite):
            _fail(retry, mine, theirs, version, "an index was created over fragments being rewritten")
        return set()
    common = touched_fragments(a) & touched_fragments(b)
    if not common:
        return set()
    if isinstance(b, Rewrite):
        _fail(retry, mine, theirs, version, f"fragments {sorted(common)} were rewritten (compacted)")
    # b is a Delete or an Update touching my fragments: mergeable by row, decided in rebase.
    return common


CheckFn = Callable[[Transaction, Transaction, int], None]
