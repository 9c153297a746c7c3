"""Options of one commit as one typed object, defined once (one definition, passed through the layers).

The Spark jobs, the Dagster config classes and the CLI take their commit fields and defaults
from :class:`CommitOptions` instead of redeclaring them; ``format`` turns it into what the
commit loop needs (the transaction properties and the :class:`.commit_handler.CommitHandler`).
"""

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from lance_ops.format.errors import InvalidArgumentError
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.txn.commit_loop import DEFAULT_MAX_RETRIES
from lance_ops.format.txn.handlers import CommitHandler, commit_handler_for
from lance_ops.format.txn.idempotency import idempotency_key, with_idempotency
from lance_ops.format.txn.manifest_store import ManifestStore


@dataclass(frozen=True)
class CommitOptions:
    """How a writer commits (delta-rs ``CommitProperties`` plus the commit handler).

    Attributes:
        transaction_properties: stored in the transaction (e.g. the Dagster run id).
        txn_app_id: idempotent writes: a stable id of the writer (Delta's ``txnAppId``).
        txn_version: idempotent writes: the write's number within ``txn_app_id`` (``txnVersion``);
            0 when ``txn_app_id`` is given alone.
        max_retries: lost races retried before a ``CommitConflictError``.
        manifest_store: the external manifest store the dataset commits through: a
            :class:`ManifestStore`, a SQLite path or a ``sqlite:///`` URL; None: conditional put.
    """

    transaction_properties: Mapping[str, str] | None = None
    txn_app_id: str | None = None
    txn_version: int | None = None
    max_retries: int = DEFAULT_MAX_RETRIES
    manifest_store: "ManifestStore | str | os.PathLike[str] | None" = None

    def __post_init__(self) -> None:
        if isinstance(self.max_retries, bool) or not isinstance(self.max_retries, int) or self.max_retries < 0:
            raise InvalidArgumentError(f"max_retries must be a non-negative integer, got {self.max_retries!r}")
        if self.txn_version is not None and self.txn_app_id is None:
            raise InvalidArgumentError(f"txn_version={self.txn_version!r} needs txn_app_id")
        idempotency_key(self.properties())  # validates txnAppId/txnVersion given as properties too

    def properties(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """The transaction properties: ours, ``extra`` over them, then ``txnAppId``/``txnVersion``."""
        merged = {**dict(self.transaction_properties or {}), **dict(extra or {})}
        return with_idempotency(merged, self.txn_app_id, self.txn_version)

    def handler(self, store: ObjectStore) -> CommitHandler:
        """The commit handler for the dataset at ``store`` (external manifest store or conditional put)."""
        return commit_handler_for(store, self.manifest_store)

    def replace(self, **changes: Any) -> "CommitOptions":
        """A copy with ``changes`` (None values are ignored, so callers pass keywords through)."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values.update({k: v for k, v in changes.items() if v is not None})
        return CommitOptions(**values)


#: the defaults, for layers above that declare the same fields (Dagster config, argparse)
COMMIT_DEFAULTS = CommitOptions()
