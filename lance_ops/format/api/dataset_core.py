"""The state every dataset handle holds and the plumbing its mutations share: the checked-out
manifest, its properties, and committing an operation then moving the handle (pylance's handles
move in place)."""

import itertools
import time
from collections.abc import Callable, Mapping
from datetime import timedelta
from types import MappingProxyType
from typing import Any

import pyarrow as pa

from lance_ops.format.arrow_ext import with_extensions
from lance_ops.format.errors import (
    RetryableCommitConflictError,
    UnsupportedFeatureError,
)
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.schema import LanceSchema
from lance_ops.format.table.manifest import Manifest, NamingScheme, is_detached_version
from lance_ops.format.table.refs import find_root
from lance_ops.format.table.validate import validate_manifest
from lance_ops.format.txn.commit_loop import commit_transaction
from lance_ops.format.txn.handlers import (
    CommitHandler,
    checkout_manifest,
)
from lance_ops.format.txn.transaction import Transaction


class DatasetCore:
    """A handle's store, commit handler and manifest, and how a mutation commits."""

    _store: ObjectStore
    _storage_options: dict[str, Any]
    _handler: CommitHandler
    _manifest: Manifest
    _scheme: NamingScheme
    #: pylance's ``default_scan_options`` of ``dataset(...)``: scan keywords every scan starts from
    _default_scan: Mapping[str, Any] = MappingProxyType({})

    # ----------------------------------------------------------- properties
    @property
    def uri(self) -> str:
        return self._store.uri

    @property
    def version(self) -> int:
        return self._manifest.version

    @property
    def branch(self) -> str | None:
        """The branch this handle is on (None = main); its files live under ``<root>/tree/<branch>``."""
        return self._manifest.branch

    @property
    def root_uri(self) -> str:
        """URI of the root dataset (where tags, branch refs and main live); ``uri`` for main."""
        return find_root(self._store, self.branch).uri

    @property
    def latest_version(self) -> int:
        return self._handler.latest_version()

    @property
    def manifest(self) -> Manifest:
        return self._manifest

    @property
    def lance_schema(self) -> LanceSchema:
        return self._manifest.schema

    @property
    def schema(self) -> pa.Schema:
        """The dataset's columns (those of ``default_scan_options``' ``columns``, with ``_rowid`` /
        ``_rowaddr`` when it asks for them, as pylance's)."""
        arrow = with_extensions(self._manifest.schema.to_arrow())
        d = self._default_scan
        if not d:
            return arrow
        cols = d.get("columns")
        fields = [arrow.field(c) for c in cols if c in arrow.names] if cols is not None else list(arrow)
        extra = [n for k, n in (("with_row_id", "_rowid"), ("with_row_address", "_rowaddr")) if d.get(k)]
        return pa.schema([*fields, *(pa.field(n, pa.uint64()) for n in extra)], arrow.metadata)

    @property
    def has_stable_row_ids(self) -> bool:
        return self._manifest.uses_stable_row_ids

    @property
    def data_storage_version(self) -> str:
        return self._manifest.data_storage_version

    @property
    def max_field_id(self) -> int:
        return self._manifest.schema.max_field_id()

    def validate(self) -> None:
        """Check this version's integrity, as pylance's ``validate`` (:func:`.validate_manifest`).

        Raises:
            CorruptFileError: a repeated fragment id, a field stored twice in a fragment, more
                deleted rows than rows.
        """
        validate_manifest(self._manifest)

    # ------------------------------------------------------------ mutations
    def _advance(self, manifest: Manifest | None) -> None:
        """Move this handle to ``manifest``, the version a mutation just committed (pylance's
        handles move in place); None (nothing was committed) leaves it where it is.

        Every mutating method calls it once after its commit: ``self._advance(manifest)``.
        """
        if manifest is None:
            return
        self._manifest = manifest
        self._scheme = self._handler.cached_scheme() or self._scheme

    def _check_mutable(self) -> None:
        """Refuse to commit from a detached version (outside the lineage); a checkout of an older
        version of the lineage commits on top of the latest, through the conflict checks, as
        pylance's does."""
        if is_detached_version(self.version):
            raise UnsupportedFeatureError(
                f"{self.uri}: version {self.version} is detached (outside the lineage); lance_ops commits on "
                "top of the latest version only: open the latest version to change the dataset"
            )

    def _commit(self, operation: Any, properties: Mapping[str, str] | None = None) -> Manifest:
        """Commit ``operation`` read at this handle's version and move the handle to the result."""
        self._check_mutable()
        manifest = self._commit_on(self._manifest, operation, properties)
        self._advance(manifest)
        return manifest

    def _retrying(
        self, attempt: Callable[[Manifest], Manifest], conflict_retries: int, retry_timeout: timedelta
    ) -> None:
        """Run ``attempt`` (plan on a manifest, then commit on top of it) and move the handle to
        the version it commits; a retryable conflict plans again on the latest version, up to
        ``conflict_retries`` times within ``retry_timeout`` (pylance's ``delete`` / ``update``)."""
        self._check_mutable()
        self._handler.check_writable()
        deadline = time.monotonic() + retry_timeout.total_seconds()
        manifest = self._manifest
        for retry in itertools.count():
            try:
                self._advance(attempt(manifest))
                return
            except RetryableCommitConflictError:
                if retry >= conflict_retries or time.monotonic() > deadline:
                    raise
            manifest, _ = checkout_manifest(self._store, None, self._handler)

    def _commit_on(
        self, manifest: Manifest, operation: Any, properties: Mapping[str, str] | None
    ) -> Manifest:
        txn = Transaction(manifest.version, operation, properties=dict(properties or {}))
        return commit_transaction(self._store, txn, handler=self._handler, known=manifest)

