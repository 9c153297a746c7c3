"""Conflict checks between my uncommitted transaction and one committed meanwhile.

One check per operation kind (docs/FORMAT.md §10; lance ``conflict_resolver.rs``).  A check
returns None when the two are compatible (the commit is rebased onto the newer version) and
raises :class:`RetryableCommitConflictError` (redo the work on the new version) or
:class:`IncompatibleTransactionError` otherwise.

Dispatch is by operation type, one ``singledispatch`` table per question: which fragments an
operation touches, which config keys it sets, how my operation checks (``_check_mine``), what a
committed operation means for a plan made on my read version's fragments (``_committed``), and
what else a compaction must check (``_rewrite_against``).
"""

from dataclasses import dataclass
from functools import singledispatch

from lance_ops.format.errors import IncompatibleTransactionError, RetryableCommitConflictError
from lance_ops.format.index.metadata import FRAG_REUSE_INDEX_NAME
from lance_ops.format.txn.operations import (
    Append,
    CreateIndex,
    DataReplacement,
    Delete,
    Merge,
    Operation,
    Overwrite,
    Project,
    ReserveFragments,
    Restore,
    Rewrite,
    Unmodelled,
    Update,
    UpdateConfig,
)
from lance_ops.format.txn.transaction import Transaction


@singledispatch
def touched_fragments(op: Operation) -> set[int]:
    """Ids of existing fragments an operation modifies or removes."""
    return set()


@touched_fragments.register
def _(op: Delete) -> set[int]:
    return {f.id for f in op.updated_fragments} | set(op.deleted_fragment_ids)


@touched_fragments.register
def _(op: Update) -> set[int]:
    return {f.id for f in op.updated_fragments} | set(op.removed_fragment_ids)


@touched_fragments.register
def _(op: Rewrite) -> set[int]:
    return {f.id for g in op.groups for f in g.old_fragments}


@touched_fragments.register
def _(op: Merge) -> set[int]:
    return {f.id for f in op.fragments}


@touched_fragments.register
def _(op: DataReplacement) -> set[int]:
    return {r.fragment_id for r in op.replacements}


def _replaced_fields(op: DataReplacement) -> set[int]:
    return set().union(*(r.new_file.fields for r in op.replacements)) if op.replacements else set()


def _indexed_fields(op: CreateIndex) -> set[int]:
    return {f for i in op.new_indices for f in i.fields}


@singledispatch
def _config_keys(op: Operation) -> set[str]:
    return set()


@_config_keys.register
def _(op: UpdateConfig) -> set[str]:
    schema_keys = {f"schema metadata {k!r}" for k in op.schema_metadata_updates or ()}
    table_keys = {f"table metadata {k!r}" for k in (op.table_metadata_updates.updates
                                                     if op.table_metadata_updates is not None else ())}
    field_keys = {f"field {fid} metadata {k!r}" for fid, u in op.field_metadata_updates.items() for k in u.updates}
    return set(op.upsert_values) | set(op.delete_keys) | schema_keys | table_keys | field_keys


@_config_keys.register
def _(op: Overwrite) -> set[str]:
    return set(op.config_upsert_values or ())


@dataclass(frozen=True)
class _Pair:
    """My transaction, the one committed meanwhile, and the version it became."""

    mine: Transaction
    theirs: Transaction
    version: int

    def fail(self, kind: type, why: str) -> None:
        # pylance's words first, so code matching them ("Retryable commit conflict for version N") works
        lead = f"Retryable commit conflict for version {self.version}: " if kind is RetryableCommitConflictError else ""
        raise kind(
            f"{lead}{self.mine.operation.name} planned on version {self.mine.read_version} conflicts with the "
            f"{self.theirs.operation.name} committed as version {self.version}: {why}",
            read_version=self.mine.read_version,
            conflicting_version=self.version,
            operation=self.mine.operation,
            other_operation=self.theirs.operation,
        )


def check(mine: Transaction, theirs: Transaction, version: int) -> set[int]:
    """Raise if ``mine`` cannot be rebased over ``theirs`` (committed as ``version``).

    Returns the fragment ids both modified where a rebase can still reconcile them (their
    deletion vectors merge, or my rewrite translates their deletions); empty when independent.
    """
    return _check_mine(mine.operation, _Pair(mine, theirs, version))


@singledispatch
def _check_mine(a: Operation, pair: _Pair) -> set[int]:
    """A plan on the fragments of its read version (Append, Delete, Update, ReserveFragments)."""
    return _committed(pair.theirs.operation, a, pair)


@_check_mine.register
def _(a: Restore, pair: _Pair) -> set[int]:
    return set()


@_check_mine.register
def _(a: Overwrite, pair: _Pair) -> set[int]:
    if a.enable_stable_row_ids:  # a migration lists the fragments of its read version: plan it again
        pair.fail(RetryableCommitConflictError, "the migration to stable row ids must be planned on the latest version")
    if _config_keys(a) & _config_keys(pair.theirs.operation):
        pair.fail(IncompatibleTransactionError, "both set the same config keys")
    return set()


@_check_mine.register
def _(a: UpdateConfig, pair: _Pair) -> set[int]:
    both = _config_keys(a) & _config_keys(pair.theirs.operation)
    if both:
        pair.fail(IncompatibleTransactionError, f"both change config keys {both}")
    return set()


@_check_mine.register
def _(a: Rewrite, pair: _Pair) -> set[int]:
    _rewrite_against(pair.theirs.operation, a, pair)
    return _committed(pair.theirs.operation, a, pair)


@_check_mine.register
def _(a: Merge, pair: _Pair) -> set[int]:
    _schema_change_fails(_against_merge(pair.theirs.operation), pair)
    return set()


@_check_mine.register
def _(a: Project, pair: _Pair) -> set[int]:
    _schema_change_fails(_against_project(pair.theirs.operation), pair)
    return set()


def _schema_change_fails(kind: type | None, pair: _Pair) -> None:
    if kind is IncompatibleTransactionError:
        pair.fail(kind, "the dataset was replaced")
    elif kind is not None:
        pair.fail(kind, "the schema or the fragments changed meanwhile; redo the schema change on the new version")


@singledispatch
def _against_merge(b: Operation) -> type | None:
    """The conflict my Merge (new columns, a cast) has with ``b`` committed meanwhile, as
    pylance's ``check_merge_txn``: any change of fragments or schema is retryable."""
    return RetryableCommitConflictError


@_against_merge.register
def _(b: CreateIndex | ReserveFragments | UpdateConfig) -> type | None:
    return None


@_against_merge.register
def _(b: Overwrite | Restore) -> type | None:
    return IncompatibleTransactionError


@singledispatch
def _against_project(b: Operation) -> type | None:
    """My Project (drop, rename, nullability) vs ``b``: only another schema change conflicts."""
    return _against_merge(b)


@_against_project.register
def _(b: Append | Delete | Update | Rewrite) -> type | None:
    return None


@singledispatch
def _committed(b: Operation, a: Operation, pair: _Pair) -> set[int]:
    """What ``b``, committed meanwhile, means for ``a`` planned on its read version's fragments.

    By default (Append, ReserveFragments, UpdateConfig, CreateIndex, Delete, Update): the
    fragments both touched, mergeable by row and decided in rebase.  A CreateIndex touches no
    fragment: a Delete or Update keeps the index's row ids valid (pylance allows it optimistically).
    """
    return touched_fragments(a) & touched_fragments(b)


@_committed.register
def _(b: Overwrite | Restore, a: Operation, pair: _Pair) -> set[int]:
    pair.fail(IncompatibleTransactionError, "the dataset was replaced")
    return set()


@_committed.register
def _(b: Unmodelled, a: Operation, pair: _Pair) -> set[int]:
    pair.fail(RetryableCommitConflictError, f"unknown committed operation {b.name!r}")
    return set()


@_committed.register
def _(b: Rewrite, a: Operation, pair: _Pair) -> set[int]:
    common = touched_fragments(a) & touched_fragments(b)
    if common:
        pair.fail(RetryableCommitConflictError, f"fragments {sorted(common)} were rewritten (compacted)")
    return set()


@_committed.register
def _(b: Merge, a: Operation, pair: _Pair) -> set[int]:
    pair.fail(RetryableCommitConflictError, "columns were added or cast (merge) meanwhile")
    return set()


@_committed.register
def _(b: Project, a: Operation, pair: _Pair) -> set[int]:
    return set()  # metadata only: rows and data files stay valid for a plan made before it


@singledispatch
def _rewrite_against(b: Operation, a: Rewrite, pair: _Pair) -> None:
    """Checks my compaction needs beyond the fragments both touched (none by default)."""


@_rewrite_against.register
def _(b: Rewrite, a: Rewrite, pair: _Pair) -> None:
    both = {r.old_id for r in a.rewritten_indices} & {r.old_id for r in b.rewritten_indices}
    if both:
        # stricter than pylance, which lets the later remap of the same index be skipped
        # (losing that index's coverage of the later group)
        pair.fail(RetryableCommitConflictError, f"both remapped index(es) {sorted(both)}")


@_rewrite_against.register
def _(b: CreateIndex, a: Rewrite, pair: _Pair) -> None:
    """My compaction (which remaps, never defers) vs an index committed meanwhile, as pylance's
    ``check_rewrite_txn``: retryable if the new index covers a fragment I rewrite (its rows
    would keep their old addresses) or stores no bitmap; an index committed together with the
    fragment reuse index must replace exactly one index, else the two are incompatible."""
    new = b.new_indices
    if any(i.name == FRAG_REUSE_INDEX_NAME for i in new):
        if len(new) != 1 or len(b.removed_indices) != 1:
            pair.fail(IncompatibleTransactionError, "a fragment reuse index was committed together with other indices")
        return
    old = {f.id for g in a.groups for f in g.old_fragments}
    for idx in new:
        if idx.fragment_ids is None:
            pair.fail(RetryableCommitConflictError, f"index {idx.name!r} was created without a fragment bitmap")
        hit = sorted(old & (idx.fragment_ids or frozenset()))
        if hit:
            pair.fail(RetryableCommitConflictError, f"index {idx.name!r} was created over fragments {hit} being rewritten")


@_check_mine.register
def _(a: CreateIndex, pair: _Pair) -> set[int]:
    _against_create_index(pair.theirs.operation, a, pair)
    return set()


@singledispatch
def _against_create_index(b: Operation, a: CreateIndex, pair: _Pair) -> None:
    """My new index segments vs what landed meanwhile (pylance's ``check_create_index_txn``,
    stricter where row ids could change under the segments).  By default (Append, Delete,
    ReserveFragments, UpdateConfig): compatible."""


@_against_create_index.register
def _(b: Overwrite | Restore | Unmodelled, a: CreateIndex, pair: _Pair) -> None:
    _committed(b, a, pair)  # the dataset was replaced, or an unknown operation: fails


def _segment_fragments(a: CreateIndex) -> set[int]:
    return set().union(*(i.fragment_ids or () for i in a.new_indices))


@_against_create_index.register
def _(b: Rewrite, a: CreateIndex, pair: _Pair) -> None:
    hit = _segment_fragments(a) & touched_fragments(b)
    remapped = {i.uuid for i in a.removed_indices} & {r.old_id for r in b.rewritten_indices}
    if hit:
        pair.fail(RetryableCommitConflictError, f"fragments {sorted(hit)} my index segments cover were rewritten")
    if remapped:
        pair.fail(RetryableCommitConflictError, f"index segment(s) {sorted(remapped)} I replace were remapped")


@_against_create_index.register
def _(b: Update, a: CreateIndex, pair: _Pair) -> None:
    hit = _segment_fragments(a) & touched_fragments(b)
    if hit:
        pair.fail(RetryableCommitConflictError, f"rows of fragments {sorted(hit)} my index segments cover were updated")


@_against_create_index.register
def _(b: CreateIndex, a: CreateIndex, pair: _Pair) -> None:
    both = ({i.name for i in a.new_indices} & {i.name for i in b.new_indices}
            or {i.uuid for i in a.removed_indices} & {i.uuid for i in b.removed_indices})
    if both:
        pair.fail(RetryableCommitConflictError, f"index {sorted(both)} was changed too")


@_against_create_index.register
def _(b: DataReplacement, a: CreateIndex, pair: _Pair) -> None:
    both = _indexed_fields(a) & _replaced_fields(b)
    if both:
        pair.fail(RetryableCommitConflictError, f"the data of indexed field(s) {sorted(both)} was replaced")


@_check_mine.register
def _(a: DataReplacement, pair: _Pair) -> set[int]:
    """My DataReplacement vs what landed meanwhile, as pylance's ``check_data_replacement_txn``."""
    _against_data_replacement(pair.theirs.operation, a, pair)
    return set()


@singledispatch
def _against_data_replacement(b: Operation, a: DataReplacement, pair: _Pair) -> None:
    """By default (Append, Delete, Update, Merge, Project, UpdateConfig, ReserveFragments): compatible."""


@_against_data_replacement.register
def _(b: Overwrite | Restore | Unmodelled, a: DataReplacement, pair: _Pair) -> None:
    _committed(b, a, pair)


@_against_data_replacement.register
def _(b: CreateIndex, a: DataReplacement, pair: _Pair) -> None:
    both = _indexed_fields(b) & _replaced_fields(a)
    if both:
        pair.fail(RetryableCommitConflictError, f"an index over field(s) {sorted(both)} I replace was created")


@_against_data_replacement.register
def _(b: Rewrite, a: DataReplacement, pair: _Pair) -> None:
    _committed(b, a, pair)  # fragments I replace files of were compacted


@_against_data_replacement.register
def _(b: DataReplacement, a: DataReplacement, pair: _Pair) -> None:
    mine = {(r.fragment_id, f) for r in a.replacements for f in r.new_file.fields}
    both = mine & {(r.fragment_id, f) for r in b.replacements for f in r.new_file.fields}
    if both:
        pair.fail(RetryableCommitConflictError, f"(fragment, field) {sorted(both)} replaced meanwhile")


@_committed.register
def _(b: DataReplacement, a: Operation, pair: _Pair) -> set[int]:
    common = touched_fragments(a) & touched_fragments(b)
    if common:
        pair.fail(RetryableCommitConflictError, f"the data files of fragments {sorted(common)} were replaced")
    return set()
