"""One exception tree for the format library, named in the spec's words.

Messages say what failed, for which path/version/field, expected what, found what.
Bad arguments stay ``ValueError``/``TypeError``.
"""

from typing import Any


class LanceOpsError(Exception):
    """Root of every error lance_ops raises about a dataset or its files."""


class DatasetNotFoundError(LanceOpsError):
    """No dataset (no ``_versions/*.manifest``) at the given URI, or no such version."""


class InvalidURIError(LanceOpsError, ValueError):
    """A dataset URI lance_ops cannot use: an unsupported scheme, a ``file:`` URI naming another
    host, or no path at all.  Names the URI."""


class DatasetAlreadyExistsError(LanceOpsError):
    """``mode="create"`` was asked for where a dataset already exists."""


class CorruptFileError(LanceOpsError):
    """A file of the dataset could not be decoded; names the file and what was wrong."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


class UnsupportedFeatureError(LanceOpsError):
    """The dataset uses a feature flag, file version or encoding lance_ops cannot handle."""


class SchemaError(LanceOpsError):
    """Data does not match the dataset schema (missing column, wrong type, ...)."""


class CommitConflictError(LanceOpsError):
    """A commit lost a race against another transaction it cannot be rebased over."""

    def __init__(
        self,
        message: str,
        *,
        read_version: int | None = None,
        conflicting_version: int | None = None,
        operation: Any = None,
        other_operation: Any = None,
    ) -> None:
        super().__init__(message)
        self.read_version = read_version
        self.conflicting_version = conflicting_version
        self.operation = operation
        self.other_operation = other_operation


class RetryableCommitConflictError(CommitConflictError):
    """The caller must redo its work on the new version, then commit again."""


class IncompatibleTransactionError(CommitConflictError):
    """The transaction can never be committed on top of what was committed meanwhile."""
