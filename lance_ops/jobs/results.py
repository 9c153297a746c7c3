"""Typed results of the jobs (with the metrics a scheduler records)."""

from dataclasses import asdict, dataclass
from typing import Any


class _Result:
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)  # type: ignore[call-overload]
        rate = getattr(self, "rows_per_second", None)
        if rate is not None:
            out["rows_per_second"] = rate
        return out


def _rate(rows: int, seconds: float) -> float:
    return rows / seconds if seconds > 0 else 0.0


@dataclass(frozen=True)
class AppendResult(_Result):
    uri: str
    version: int | None  # None: nothing was written (empty input)
    rows_written: int
    fragments_added: int
    seconds: float

    @property
    def rows_per_second(self) -> float:
        return _rate(self.rows_written, self.seconds)


@dataclass(frozen=True)
class DeleteJobResult(_Result):
    uri: str
    read_version: int
    version: int | None  # None: no row matched, nothing committed
    num_deleted_rows: int
    fragments_updated: int
    fragments_removed: int
    seconds: float


@dataclass(frozen=True)
class UpsertResult(_Result):
    uri: str
    read_version: int
    version: int | None
    num_updated_rows: int
    num_inserted_rows: int
    fragments_added: int
    fragments_updated: int
    fragments_removed: int
    seconds: float

    @property
    def rows_per_second(self) -> float:
        return _rate(self.num_updated_rows + self.num_inserted_rows, self.seconds)


@dataclass(frozen=True)
class CompactResult(_Result):
    """Compaction or deletion materialisation.

    ``failed_tasks`` names every task that failed (its fragments and the error); the tasks
    that finished were committed regardless (partial progress).
    """

    uri: str
    read_version: int
    version: int | None  # None: nothing committed (nothing to do, dry run, or every task failed)
    tasks_planned: int
    tasks_succeeded: int
    fragments_removed: int
    fragments_added: int
    files_removed: int
    files_added: int
    rows_rewritten: int
    failed_tasks: tuple[str, ...]
    dry_run: bool
    seconds: float
    indices_remapped: tuple[str, ...] = ()  # indices rewritten for the new row addresses
    index_coverage_dropped: tuple[str, ...] = ()  # index coverage the rewrite dropped, and why
    fragments_skipped: tuple[str, ...] = ()  # fragments kept out of the plan (indices), and why

    @property
    def rows_per_second(self) -> float:
        return _rate(self.rows_rewritten, self.seconds)


@dataclass(frozen=True)
class IndexBuildResult(_Result):
    """``optimize_indices`` or ``create_scalar_index`` on Spark.

    An index is committed whole or not at all: ``failed_tasks`` names every failed task (its
    index, fragments and error); the indices whose tasks all finished were committed.
    """

    uri: str
    read_version: int
    version: int | None  # None: nothing committed (nothing to index, or every index had a failed task)
    tasks_planned: int
    tasks_succeeded: int
    indices: tuple[str, ...]  # the indices the commit added segments to
    segments_added: int
    segments_removed: int  # segments merged into the new ones (num_indices_to_merge) or replaced
    rows_indexed: int  # live rows of the fragments the new segments cover
    failed_tasks: tuple[str, ...]
    seconds: float

    @property
    def rows_per_second(self) -> float:
        return _rate(self.rows_indexed, self.seconds)


@dataclass(frozen=True)
class ChangeFeedWriteResult(_Result):
    uri: str
    sink_uri: str
    begin_version: int
    end_version: int
    format: str
    rows_written: int
    location: str  # the directory (parquet) or the sink dataset (lance) written
    sink_version: int | None  # lance sink: the version committed
    seconds: float

    @property
    def rows_per_second(self) -> float:
        return _rate(self.rows_written, self.seconds)


@dataclass(frozen=True)
class CleanupResult(_Result):
    """Routine cleanup (``mode``: lite or full) or the orphan sweep (``mode="orphans"``)."""

    uri: str
    mode: str
    dry_run: bool
    old_versions: int
    files_removed: int  # data, deletion, .txn, index and temp files (or would be, with dry_run)
    bytes_removed: int
    failed_deletes: int
    protected_by_tags: tuple[str, ...]
    protected_by_branches: tuple[str, ...]
    protected_by_leases: tuple[str, ...]  # lease ids that kept a version
    leased_versions: tuple[int, ...]
    removed_paths: tuple[str, ...]
    seconds: float


@dataclass(frozen=True)
class RestoreResult(_Result):
    """A guarded restore: ``version`` has the data of ``restored_version``; undo by restoring ``undo_tag``."""

    uri: str
    previous_version: int
    restored_version: int
    version: int
    undo_tag: str | None
    seconds: float
