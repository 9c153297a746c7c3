"""The dataset handle: open, time travel, scan, write (pylance-shaped API)."""

import os
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_ops.format.api.arguments import pop_ignored
from lance_ops.format.api.dataset_indices import IndexMethods
from lance_ops.format.api.dataset_metadata import MetadataMethods
from lance_ops.format.api.dataset_schema import SchemaEvolutionMethods
from lance_ops.format.api.full_text import full_text_table
from lance_ops.format.api.nearest import nearest_table
from lance_ops.format.api.results import DeleteResult, UpdateResult
from lance_ops.format.api.scan_options import ScanOptions
from lance_ops.format.api.system_columns import include_deleted_rows, split_row_offset
from lance_ops.format.api.views import LanceFragment, LanceStats, Scanner, _Optimize
from lance_ops.format.arrow_ext import with_extensions
from lance_ops.format.errors import (
    ArgumentTypeError,
    DatasetNotFoundError,
    DatasetPathNotFoundError,
    InvalidArgumentError,
    TagError,
    VersionRemovedError,
)
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.ops.change_feed.batches import change_feed_batches, change_feed_schema
from lance_ops.format.ops.cleanup import CleanupMode, CleanupStats, cleanup_old_versions, remove_orphan_files
from lance_ops.format.ops.compaction.rewrite import COMPACTION_DEFAULTS, CompactionMetrics, compact_files
from lance_ops.format.ops.delete_update import plan_delete, plan_update
from lance_ops.format.ops.merge_insert import MergeInsertBuilder
from lance_ops.format.ops.restore import RestoreResult, guarded_restore
from lance_ops.format.ops.row_id_migration import migrate_to_stable_row_ids
from lance_ops.format.ops.write import (
    DEFAULT_MAX_ROWS_PER_FILE,
    WriteMode,
    rechunked,
)
from lance_ops.format.ops.write_and_commit import write_and_commit
from lance_ops.format.read.blob_payloads import BlobFile, take_blobs
from lance_ops.format.read.projection import plan_projection
from lance_ops.format.read.scan import (
    META_COLUMNS,
    ROW_ADDR,
    ScanPlan,
    default_batch_size,
    exact_batches,
    plan_scan,
    scan,
)
from lance_ops.format.read.take import take_offsets, take_row_ids
from lance_ops.format.table.fragment import FragmentMetadata
from lance_ops.format.table.leases import DEFAULT_LEASE_TTL, Lease, LeaseHandle, acquire_lease, list_leases
from lance_ops.format.table.manifest import Manifest, NamingScheme
from lance_ops.format.table.refs import (
    Branches,
    Tags,
    VersionRef,
    branch_store,
    create_branch,
    find_root,
    normalize_branch,
    resolve_reference,
)
from lance_ops.format.txn.commit_loop import commit_transaction
from lance_ops.format.txn.handlers import (
    CommitHandler,
    ConditionalPutCommitHandler,
    checkout_manifest,
    commit_handler_for,
    with_commit_lock,
)
from lance_ops.format.txn.idempotency import idempotency_key
from lance_ops.format.txn.manifest_store import ManifestStore
from lance_ops.format.txn.operations import Delete, Restore, Update
from lance_ops.format.txn.transaction import Transaction, read_transaction_file


class LanceDataset(IndexMethods, MetadataMethods, SchemaEvolutionMethods):
    """A Lance dataset checked out at one version."""

    def __init__(
        self,
        uri: str,
        *,
        version: VersionRef = None,
        branch: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
        manifest_store: "ManifestStore | str | None" = None,
        default_scan_options: Mapping[str, Any] | None = None,
        commit_lock: Callable[[int], Any] | None = None,
    ):
        if default_scan_options:
            ScanOptions(**{k: v for k, v in default_scan_options.items() if k not in ("columns", "filter")})
            self._default_scan = MappingProxyType(dict(default_scan_options))
        self._store = ObjectStore(uri, storage_options)
        self._storage_options = dict(storage_options or {})
        self._handler = with_commit_lock(commit_handler_for(self._store, manifest_store), commit_lock)
        if branch is None and (version is None or (isinstance(version, int) and not isinstance(version, bool))):
            # the common case: a version of the dataset (or branch) at ``uri``; no ref is read
            self._manifest, self._scheme = checkout_manifest(self._store, version, self._handler)
            return
        latest, _ = checkout_manifest(self._store, None, self._handler)
        root = find_root(self._store, latest.branch)
        if branch is not None:
            if isinstance(version, tuple | list):
                raise InvalidArgumentError(f"pass either branch={branch!r} or a (branch, version) tuple, not both")
            if isinstance(version, str) and not version.isdigit():  # a tag: it must point into ``branch``
                tag_branch, _ = resolve_reference(root, version)
                if tag_branch != normalize_branch(branch):
                    raise TagError(f"{uri}: tag {version!r} points into branch {tag_branch or 'main'}, not {branch!r}")
            else:
                version = (branch, int(version) if version is not None else None)
        target_branch, target = resolve_reference(root, version, current_branch=latest.branch)
        if target_branch != latest.branch:
            self._store = branch_store(root, target_branch)
            self._handler = with_commit_lock(commit_handler_for(self._store, manifest_store), commit_lock)
        self._manifest, self._scheme = checkout_manifest(self._store, target, self._handler)

    @staticmethod
    def drop(base_uri: Any, storage_options: Mapping[str, str] | None = None,
             ignore_not_found: bool | None = None) -> None:
        """Delete the dataset at ``base_uri`` with every file under it (pylance's).

        Raises:
            DatasetPathNotFoundError: (an ``OSError``) nothing is there, unless ``ignore_not_found``.
            DatasetNotFoundError: (a ``ValueError``) the path holds no manifest: not a dataset root.
        """
        store = ObjectStore(os.fspath(base_uri), dict(storage_options or {}))
        if not store.exists(""):
            if ignore_not_found:
                return
            raise DatasetPathNotFoundError(f"Not found: {store.root}")
        if not any(name.endswith(".manifest") for name in store.list_dir("_versions")):
            raise DatasetNotFoundError(
                f"Invalid user input: Refusing to drop {store.root!r}: no Lance manifest under '_versions', "
                "so this is not a dataset root"
            )
        store.remove_root()

    @classmethod
    def _from_manifest(
        cls, store: ObjectStore, manifest: Manifest, handler: CommitHandler | None = None
    ) -> "LanceDataset":
        self = cls.__new__(cls)
        self._store = store
        self._storage_options = dict(store.storage_options)
        self._handler = handler or ConditionalPutCommitHandler(store)
        self._scheme = self._handler.cached_scheme() or self._handler.list_versions()[0] or NamingScheme.V2
        self._manifest = manifest
        return self

    # ------------------------------------------------------------- versions
    def versions(self) -> list[dict[str, Any]]:
        """Every version: ``{"version", "timestamp", "metadata"}`` (summary stats as pylance)."""
        out = []
        for v in self._handler.list_versions()[1]:
            m = self._handler.read_manifest(v).manifest
            out.append(
                {
                    "version": v,
                    "timestamp": datetime(1970, 1, 1) + timedelta(microseconds=m.timestamp_ns // 1000),
                    "metadata": _summary(m),
                }
            )
        return out

    def checkout_version(self, version: VersionRef) -> "LanceDataset":
        """Another version: an ``int`` of this branch, a tag name, or ``(branch, version)``
        (``("main", 3)``, ``("dev", None)`` = latest of ``dev``), as pylance."""
        return LanceDataset(
            self.uri,
            version=version,
            storage_options=self._storage_options,
            manifest_store=self._handler.manifest_store,
        )

    def checkout_latest(self) -> "LanceDataset":
        return LanceDataset(
            self.uri, storage_options=self._storage_options, manifest_store=self._handler.manifest_store
        )

    # ---------------------------------------------------------------- reads
    def _pinned(self) -> "LanceDataset":
        """A copy of this handle that a later mutation of this one does not move (fragments and
        scanners read the version they were made from, as pylance's)."""
        out = object.__new__(LanceDataset)
        out.__dict__.update(self.__dict__)
        return out

    def get_fragments(self) -> list[LanceFragment]:
        pinned = self._pinned()
        return [LanceFragment(pinned, f) for f in self._manifest.fragments]

    def get_fragment(self, fragment_id: int) -> LanceFragment | None:
        f = self._manifest.fragment(fragment_id)
        return LanceFragment(self._pinned(), f) if f is not None else None

    def __len__(self) -> int:
        """Live rows of this version (pylance's ``len(ds)``)."""
        return self.count_rows()

    def count_rows(self, filter: pc.Expression | str | None = None) -> int:
        if filter is None:
            return sum(f.num_rows for f in self._manifest.fragments)
        return sum(b.num_rows for b in self.to_batches(columns=[], filter=filter))

    def to_batches(
        self, columns: Sequence[str] | None = None, filter: pc.Expression | str | None = None, **options: Any
    ) -> Iterator[pa.RecordBatch]:
        """Stream RecordBatches; ``columns`` may name ``_rowid``, ``_rowaddr`` and the version
        columns; ``options`` are pylance's scan keywords (:class:`.scan_options.ScanOptions`)."""
        columns, filter, options = self._scan_defaults(columns, filter, options)
        opts = ScanOptions(**options)
        if opts.nearest is not None or opts.full_text_query is not None:
            search = nearest_table if opts.nearest is not None else full_text_table
            return iter(search(self._without_scan_defaults(), columns, filter, opts).to_batches(opts.batch_size or default_batch_size()))
        plan, finish, batches = self._scan_with(columns, filter, opts)
        if filter is not None and opts.batch_size and opts.late_materialization not in (None, False):
            batches = rechunked(batches, opts.batch_size)  # pylance's late materialization refills its batches
        return map(with_extensions, batches if finish is None else map(finish, batches))

    def to_table(
        self, columns: Sequence[str] | None = None, filter: pc.Expression | str | None = None, **options: Any
    ) -> pa.Table:
        """The scan of :meth:`to_batches` as one Table (the schema is kept when no row matches)."""
        columns, filter, options = self._scan_defaults(columns, filter, options)
        opts = ScanOptions(**options)
        if opts.nearest is not None:
            return nearest_table(self._without_scan_defaults(), columns, filter, opts)
        if opts.full_text_query is not None:
            return full_text_table(self._without_scan_defaults(), columns, filter, opts)
        plan, finish, batches = self._scan_with(columns, filter, opts)
        if finish is not None:  # nested paths / expressions: the schema is the projection's
            empty = finish(pa.RecordBatch.from_pylist([], schema=plan.out_schema))
            return with_extensions(pa.Table.from_batches([finish(b) for b in batches], schema=empty.schema))
        return with_extensions(pa.Table.from_batches(list(batches), schema=plan.out_schema))

    def _without_scan_defaults(self) -> "LanceDataset":
        """This handle (a pinned copy) without ``default_scan_options``: what ``take``,
        ``_take_rows`` and a search read through, as pylance's (its defaults apply to scans)."""
        if not self._default_scan:
            return self
        out = self._pinned()
        out._default_scan = MappingProxyType({})
        return out

    def _scan_defaults(self, columns: Any, filter: Any, options: Mapping[str, Any]) -> tuple[Any, Any, dict[str, Any]]:
        """A scan's arguments over ``default_scan_options`` (what the call gives wins)."""
        d = self._default_scan
        if not d:
            return columns, filter, dict(options)
        if columns is None:
            columns = d.get("columns", [f.name for f in self._manifest.schema.top_level()])
        filter = d.get("filter") if filter is None else filter
        return columns, filter, {**{k: v for k, v in d.items() if k not in ("columns", "filter")}, **options}

    def _scan_with(
        self, columns: Sequence[str] | None, filter: pc.Expression | str | None, opts: ScanOptions
    ) -> tuple[ScanPlan, Callable[[pa.RecordBatch], pa.RecordBatch] | None, Iterator[pa.RecordBatch]]:
        """The plan of a scan, the projection's finishing step (None: none) and its batches."""
        manifest, with_addr, steps = self._manifest, opts.with_row_address, []
        if opts.include_deleted_rows:
            manifest, mark = include_deleted_rows(self._store, manifest, columns, opts.with_row_id)
            with_addr, steps = True, [mark]
            if not opts.with_row_address and not (isinstance(columns, list | tuple) and ROW_ADDR in columns):
                steps.append(lambda b: b.drop_columns([ROW_ADDR]))
        columns, add_offsets = split_row_offset(self._store, self._manifest, columns)
        columns, finish = plan_projection(self._manifest.schema.to_arrow(), columns, META_COLUMNS)
        steps += [s for s in (add_offsets, finish) if s is not None]
        plan = plan_scan(manifest.schema, columns, filter, opts.with_row_id, with_addr, opts.late_materialization)
        batches = self._scan(plan, opts.fragments, opts.limit, opts.offset, opts.batch_size, manifest,
                             use_scalar_index=opts.use_scalar_index is not False)
        if opts.strict_batch_size:
            batches = exact_batches(batches, opts.batch_size or default_batch_size())
        return plan, _chain(steps), batches

    def _scan(
        self,
        plan: ScanPlan,
        fragments: Sequence[FragmentMetadata] | None,
        limit: int | None,
        offset: int | None,
        batch_size: int | None,
        manifest: Manifest | None = None,
        *,
        use_scalar_index: bool = True,
    ) -> Iterator[pa.RecordBatch]:
        if fragments is not None:  # pylance also takes LanceFragments, and any iterable of them
            fragments = [f.metadata if isinstance(f, LanceFragment) else f for f in fragments]
        return scan(
            self._store,
            manifest or self._manifest,
            plan,
            fragments=fragments,
            limit=limit,
            offset=offset,
            batch_size=batch_size or default_batch_size(),
            use_scalar_index=use_scalar_index,
        )

    def delete(
        self,
        predicate: pc.Expression | str,
        *,
        conflict_retries: int = 10,
        retry_timeout: timedelta = timedelta(seconds=30),
        transaction_properties: Mapping[str, str] | None = None,
    ) -> DeleteResult:
        """Delete the rows matching ``predicate`` and move the handle to the new version (one is
        committed also when nothing matched, as pylance's).  A retryable conflict deletes again
        from the latest version (``conflict_retries``, ``retry_timeout`` as pylance's).

        Returns:
            ``{"num_deleted_rows": n}``, as pylance's ``DeleteResult``.
        """
        idempotency_key(dict(transaction_properties or {}))  # refused before anything is written
        deleted = 0

        def attempt(manifest: Manifest) -> Manifest:
            nonlocal deleted
            updated, removed, deleted = plan_delete(self._store, manifest, predicate)
            return self._commit_on(manifest, Delete(updated, removed, str(predicate)), transaction_properties)

        self._retrying(attempt, conflict_retries, retry_timeout)
        return DeleteResult(num_deleted_rows=deleted)

    def update(
        self,
        updates: Mapping[str, Any],
        where: pc.Expression | str | None = None,
        *,
        max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
        conflict_retries: int = 10,
        retry_timeout: timedelta = timedelta(seconds=30),
        transaction_properties: Mapping[str, str] | None = None,
    ) -> UpdateResult:
        """Set columns to SQL expressions (``{"b": "b + 1"}``, as pylance), Expressions or scalars
        on the rows matching ``where`` (SQL or an Expression; all rows if None) and move the
        handle to the new version (committed also when nothing matched, as pylance).  A retryable
        conflict updates again from the latest version, as pylance's.

        With stable row ids the rows keep ``_rowid`` and ``_row_created_at_version``; their
        ``_row_last_updated_at_version`` becomes the new version.

        Returns:
            ``{"num_rows_updated": n}``, as pylance's ``UpdateResult``.
        """
        idempotency_key(dict(transaction_properties or {}))  # refused before anything is written
        updated_rows = 0

        def attempt(manifest: Manifest) -> Manifest:
            nonlocal updated_rows
            removed, updated, new, updated_rows = plan_update(
                self._store, manifest, updates, where, max_rows_per_file=max_rows_per_file
            )
            field_ids = [manifest.schema.field(n).id for n in updates]
            op = Update(removed, updated, new, fields_for_preserving_frag_bitmap=field_ids)
            return self._commit_on(manifest, op, transaction_properties)

        self._retrying(attempt, conflict_retries, retry_timeout)
        return UpdateResult(num_rows_updated=updated_rows)

    def merge_insert(
        self,
        on: str | Sequence[str],
        *,
        target_filter: pc.Expression | str | None = None,
        max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
    ) -> MergeInsertBuilder:
        """A merge_insert builder on the key column(s) ``on``, as pylance's
        (``.when_matched_update_all().when_not_matched_insert_all().execute(data)``); ``execute``
        moves this handle to the version it commits.

        lance_ops-specific: ``target_filter`` restricts the target rows that can match (or be
        deleted as not matched by source) to those it selects; ``max_rows_per_file`` caps the
        new data files.
        """
        self._check_mutable()
        return MergeInsertBuilder(self._store, self._manifest, self._handler, on, target_filter=target_filter,
                                  max_rows_per_file=max_rows_per_file, on_commit=self._advance)

    def restore(self, version: int | None = None) -> None:
        """Make ``version`` (default: the checked-out one, as pylance's ``restore()``) the latest,
        as a new version, and move the handle to it."""
        target = self.version if version is None else version
        self._handler.read_manifest(target)  # must exist
        txn = Transaction(self.latest_version, Restore(target))
        self._advance(commit_transaction(self._store, txn, handler=self._handler))

    def restore_to(
        self,
        target: "int | str | datetime",
        *,
        tag_current: bool = True,
        transaction_properties: Mapping[str, str] | None = None,
    ) -> RestoreResult:
        """Guarded restore (:mod:`.ops.restore`): make ``target`` -- a version, a tag of this
        branch, or a time (a ``datetime`` or ISO string: the version current then) -- the latest,
        after tagging the current latest ``restore-before-<version>-<time>`` (undo: restore to
        that tag).  The handle moves to the new version.

        Raises:
            VersionRemovedError: cleanup removed the target (nothing is written).
            TagError: no such tag (or one of another branch).
        """
        self._check_mutable()
        version = self._restore_target(target)
        root = find_root(self._store, self.branch)

        def commit(v: int, props: Mapping[str, str]) -> int:
            txn = Transaction(self.latest_version, Restore(v), properties=dict(props))
            manifest = commit_transaction(self._store, txn, handler=self._handler)
            self._advance(manifest)
            return manifest.version

        return guarded_restore(self._store, root, self.branch, version, self.latest_version, commit, asked=target,
                               tag_current=tag_current, transaction_properties=transaction_properties)

    def _restore_target(self, target: "int | str | datetime") -> int:
        if isinstance(target, datetime):
            return self._version_at(target)
        if isinstance(target, str) and not target.isdigit():
            try:
                return self._version_number(target)
            except TagError:
                try:
                    when = datetime.fromisoformat(target)
                except ValueError:
                    raise TagError(f"{self.uri}: {target!r} is neither a tag nor an ISO 8601 time") from None
                return self._version_at(when)
        if isinstance(target, bool) or not isinstance(target, int | str):
            raise ArgumentTypeError(f"restore target must be a version, a tag or a time, got {type(target).__name__}")
        return int(target)

    def _version_at(self, when: datetime) -> int:
        """The version current at ``when`` (UTC when naive); VersionRemovedError when cleanup
        removed it (a gap in the versions left makes the answer unknowable)."""
        if when.tzinfo is not None:
            when = when.astimezone(UTC).replace(tzinfo=None)
        listed = [(v["version"], v["timestamp"]) for v in self.versions()]
        older = [v for v, t in listed if t <= when]
        later = [v for v, t in listed if t > when]
        if not older or (later and later[0] != older[-1] + 1):
            raise VersionRemovedError(
                f"{self.uri}: the version current at {when.isoformat()} (UTC) was removed by cleanup (versions "
                f"left: {listed[0][0]}..{listed[-1][0]})", uri=self.uri, version=older[-1] + 1 if older else None)
        return older[-1]

    # ---------------------------------------------------------- maintenance
    @property
    def optimize(self) -> "_Optimize":
        """pylance's ``ds.optimize`` namespace: ``ds.optimize.compact_files(...)``."""
        return _Optimize(self)

    def compact_files(self, **options: Any) -> CompactionMetrics:
        """In-process compaction (options as pylance ``compact_files``); the handle moves to the
        version it commits (it stays where it is when nothing was compacted or on ``dry_run``).

        Returns:
            CompactionMetrics (``version``: the committed version, None if none).
        """
        pop_ignored(options, ("num_threads",))
        if not options.get("dry_run"):
            self._check_mutable()
            self._handler.check_writable()  # before any task writes a file
        metrics = compact_files(self._manifest, self.uri, storage_options=self._storage_options,
                                manifest_store=self._handler.manifest_store, **options)
        if metrics.version is not None and not metrics.dry_run:
            self._advance(self._handler.read_manifest(metrics.version).manifest)
        return metrics

    def migrate_to_stable_row_ids(self, *, transaction_properties: Mapping[str, str] | None = None) -> None:
        """Switch this dataset (the latest version) from row addresses to stable row ids in
        place: one commit, no data file rewritten, indices carried (files holding row ids
        rewritten; docs/FORMAT.md §19).  Indices lance_ops cannot rewrite are refused; a
        dataset already stable is left alone.  The handle moves to the new version."""
        self._check_mutable()
        self._handler.check_writable()
        self._advance(migrate_to_stable_row_ids(self._store, self._manifest, self._handler,
                                                transaction_properties=dict(transaction_properties or {})))

    def materialize_deletions(
        self, threshold: float = COMPACTION_DEFAULTS.materialize_deletions_threshold, **options: Any
    ) -> CompactionMetrics:
        """Rewrite fragments whose deleted fraction is at least ``threshold``, dropping deleted rows."""
        return self.compact_files(only_deletions=True, materialize_deletions_threshold=threshold, **options)

    def _version_number(self, ref: VersionRef) -> int:
        """A version of this branch named by a number or a tag."""
        branch, v = resolve_reference(find_root(self._store, self.branch), ref, current_branch=self.branch,
                                      current_version=self.version)
        if branch != self.branch:
            raise InvalidArgumentError(
                f"{self.uri}: {ref!r} is version {v} of branch {branch or 'main'}, not of this handle's branch "
                f"{self.branch or 'main'}; check out that branch first"
            )
        return v

    def change_feed(
        self, begin_version: VersionRef, end_version: VersionRef = None, *, on_schema_change: str = "evolve",
        change_types: Collection[str] | None = None,
    ) -> pa.Table:
        """Changes in ``(begin_version, end_version]`` (default: this version), Delta CDF columns.

        Versions may be numbers or tag names (of this branch).  The output has the end version's
        columns plus ``_rowid``, ``_change_type``, ``_commit_version``, ``_commit_timestamp``;
        across schema changes earlier rows are mapped onto them by field id (added columns
        null, renamed ones under the end name, dropped ones absent, casts applied), or with
        ``on_schema_change="fail"`` a :class:`SchemaChangeError` is raised.  ``change_types``
        keeps only those kinds of rows (None: all); without ``update_preimage`` and ``delete``
        nothing of the begin version is read.
        """
        begin_version = self._version_number(begin_version)
        end = self.version if end_version is None else self._version_number(end_version)
        if not 0 <= begin_version <= end:
            raise InvalidArgumentError(f"need 0 <= begin_version <= end_version, got ({begin_version}, {end}]")
        schema = change_feed_schema(self.checkout_version(end).schema)
        batches = change_feed_batches(
            self._store, self._handler, begin_version, end, on_schema_change=on_schema_change,  # type: ignore[arg-type]
            change_types=change_types,
        )
        return pa.Table.from_batches(list(batches), schema=schema)

    # ------------------------------------------------------- tags, cleanup
    @property
    def tags(self) -> Tags:
        """Tags of the dataset (stored at the root, pointing into any branch); an ``int``
        reference means a version of this handle's branch, as in pylance."""
        return Tags(find_root(self._store, self.branch), self.branch, self.version)

    @property
    def branches(self) -> Branches:
        """Branches of the dataset: ``list()``, ``list_ordered()``, ``delete(name)``."""
        return Branches(find_root(self._store, self.branch))

    def create_branch(self, branch: str, reference: VersionRef = None) -> "LanceDataset":
        """Create ``branch`` from ``reference`` (default: this version), as pylance: a shallow
        clone under ``<root>/tree/<branch>`` that keeps using the source's files.

        Returns:
            the new branch, checked out at its first version (the source's version number).
        """
        root = find_root(self._store, self.branch)
        src_branch, src_version = resolve_reference(
            root, reference, current_branch=self.branch, current_version=self.version
        )
        src_store = branch_store(root, src_branch)
        source, _ = checkout_manifest(src_store, src_version, commit_handler_for(src_store, self._handler.manifest_store))
        store = create_branch(root, branch, source, normalize_branch(src_branch))
        return LanceDataset(store.uri, storage_options=self._storage_options, manifest_store=self._handler.manifest_store)

    def create_tag(self, name: str, version: VersionRef) -> None:
        self.tags.create(name, version)

    def delete_tag(self, name: str) -> None:
        self.tags.delete(name)

    def cleanup_old_versions(
        self,
        older_than: timedelta | None = None,
        retain_versions: int = 1,
        *,
        dry_run: bool = False,
        delete_unverified: bool = False,
        retention_duration_check: bool = True,
        mode: CleanupMode = "full",
    ) -> CleanupStats:
        """Remove old versions and the files only they use (see :mod:`lance_ops.format.ops.cleanup`).

        ``older_than`` (default 14 days) below one hour is refused unless
        ``retention_duration_check=False`` (Delta's VACUUM check); a negative one always is.
        Versions a live lease pins are kept (``stats.protected_by_leases``).  ``mode="lite"``
        derives the files from metadata without listing ``data/`` (routine cleanup).
        """
        self._handler.latest_version()  # finalises a staged external commit before anything is judged unused
        return cleanup_old_versions(
            self._store,
            older_than=timedelta(days=14) if older_than is None else older_than,
            retain_versions=retain_versions,
            dry_run=dry_run,
            delete_unverified=delete_unverified,
            retention_duration_check=retention_duration_check,
            mode=mode,
        )

    def remove_orphan_files(
        self, older_than: timedelta | None = None, *, dry_run: bool = False, retention_duration_check: bool = True
    ) -> CleanupStats:
        """The thorough sweep: remove files no version, branch, tag or detached version names,
        older than ``older_than`` (default 7 days); ``dry_run`` reports files and bytes."""
        self._handler.latest_version()
        return remove_orphan_files(self._store, older_than=timedelta(days=7) if older_than is None else older_than,
                                   dry_run=dry_run, retention_duration_check=retention_duration_check)

    def leases(self, *, include_expired: bool = False) -> "list[Lease]":
        """The live leases of this dataset (branch), oldest first; expired ones too if asked."""
        return list_leases(self._store, include_expired=include_expired)

    def lease(
        self, ttl: timedelta | float = DEFAULT_LEASE_TTL, *, holder: str | None = None, auto_renew: bool = True
    ) -> LeaseHandle:
        """Pin this handle's version against cleanup: ``with ds.lease(ttl=timedelta(minutes=5)):``.

        The lease is renewed in the background every third of ``ttl`` while held and released
        on exit; a killed holder's lease expires ``ttl`` after its last renewal.

        Raises:
            VersionRemovedError: this version was removed by cleanup meanwhile.
        """
        lease = acquire_lease(self._store, self.version, ttl=ttl, holder=holder)
        return LeaseHandle(self._store, lease, ttl, auto_renew=auto_renew)

    def take_blobs(
        self,
        blob_column: str,
        ids: Sequence[int] | pa.Array | None = None,
        addresses: Sequence[int] | pa.Array | None = None,
        indices: Sequence[int] | pa.Array | None = None,
    ) -> list[BlobFile | None]:
        """Payloads of a blob column as file-like objects, as pylance's ``take_blobs``: rows by
        ``ids`` (``_rowid``), ``addresses`` (``_rowaddr``) or ``indices``; None for a null blob."""
        return take_blobs(self._store, self._manifest, blob_column, ids=ids, addresses=addresses, indices=indices)

    # ------------------------------------------------ pylance surface (issue 24)
    def insert(self, data: Any, *, mode: WriteMode = "append", **kwargs: Any) -> None:
        """Write ``data`` into this dataset (``write_dataset(data, self, mode=mode, **kwargs)``), as
        pylance's ``insert``; the handle moves to the new version."""
        kwargs.setdefault("storage_options", self._storage_options)
        kwargs.setdefault("manifest_store", self._handler.manifest_store)
        self._advance(write_and_commit(data, self.uri, mode=mode, **kwargs)[1])

    def get_transactions(self, recent_transactions: int = 10) -> list[Transaction | None]:
        """The transactions of the newest ``recent_transactions`` versions up to this one,
        newest first (None for a version whose manifest names no transaction), as pylance's."""
        first = max(1, self.version - recent_transactions + 1)
        return [self.read_transaction(v) for v in range(self.version, first - 1, -1)]

    def take(self, indices: Any, columns: Sequence[str] | None = None) -> pa.Table:
        """Rows at positions ``indices`` among this version's live rows, in the order asked."""
        return take_offsets(self._without_scan_defaults(), indices, columns)

    def sample(self, num_rows: int, columns: Sequence[str] | None = None, randomize_order: bool = True,
               **kwargs: Any) -> pa.Table:
        """``num_rows`` live rows drawn at random without repeats (pylance's ``sample``); in scan
        order with ``randomize_order=False``.

        Raises:
            InvalidArgumentError: more rows asked than the version holds.
        """
        total = self.count_rows()
        if num_rows > total:
            raise InvalidArgumentError(f"sample: {num_rows} rows asked of a dataset of {total} rows")
        picks = np.random.default_rng().choice(total, size=num_rows, replace=False)
        return take_offsets(self._without_scan_defaults(), picks if randomize_order else np.sort(picks), columns)

    def _take_rows(self, row_ids: Any, columns: Sequence[str] | None = None) -> pa.Table:
        """Rows by row id (stable row ids) or row address, in the order asked (pylance's
        unstable ``_take_rows``; deleted rows are left out)."""
        return take_row_ids(self._without_scan_defaults(), row_ids, columns)

    def read_transaction(self, version: int) -> Transaction | None:
        """The transaction that created ``version`` of this branch (None when its manifest names
        no transaction file), as pylance's ``read_transaction``.

        Raises:
            DatasetNotFoundError: no such version.
        """
        manifest = self._handler.read_manifest(version).manifest
        if not manifest.transaction_file:
            return None
        return read_transaction_file(self._store, manifest.transaction_file)

    @property
    def stats(self) -> "LanceStats":
        """pylance's ``ds.stats``: ``dataset_stats()`` and ``index_stats(name)``."""
        return LanceStats(self)

    def scanner(self, columns: Sequence[str] | None = None, filter: pc.Expression | str | None = None, **kw: Any) -> "Scanner":
        return Scanner(self._pinned(), columns, filter, kw)

    def __repr__(self) -> str:
        return f"LanceDataset(uri={self.uri!r}, version={self.version})"


def _chain(
    steps: Sequence[Callable[[pa.RecordBatch], pa.RecordBatch]],
) -> Callable[[pa.RecordBatch], pa.RecordBatch] | None:
    """The steps applied in order to each batch (None: none)."""
    if not steps:
        return None

    def run(batch: pa.RecordBatch) -> pa.RecordBatch:
        for step in steps:
            batch = step(batch)
        return batch

    return run


def _summary(m: Manifest) -> dict[str, str]:
    files = sum(len(f.files) for f in m.fragments)
    deleted = sum(f.num_deleted_rows for f in m.fragments)
    physical = sum(f.physical_rows for f in m.fragments)
    return {
        "total_data_file_rows": str(physical),
        "total_data_files": str(files),
        "total_deletion_file_rows": str(deleted),
        "total_deletion_files": str(sum(1 for f in m.fragments if f.deletion_file is not None)),
        "total_files_size": str(sum(df.file_size_bytes for f in m.fragments for df in f.files)),
        "total_fragments": str(len(m.fragments)),
        "total_rows": str(physical - deleted),
    }
