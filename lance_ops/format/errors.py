"""One exception tree for the format library, named in the spec's words.

Messages say what failed, for which path/version/field, expected what, found what.
Bad arguments raise :class:`InvalidArgumentError` (a ``ValueError``) or
:class:`ArgumentTypeError` (also a ``TypeError``): typed, yet caught where callers catch the
builtin.  A commit's outcome is never left unknown silently: :class:`CommitFailedError` (not
committed, safe to retry) or :class:`CommitStateUnknownError` (may have committed; retry only
with an idempotency key), each with ``retry_safe``.
"""

from typing import Any


class LanceOpsError(Exception):
    """Root of every error lance_ops raises about a dataset or its files."""


class DatasetNotFoundError(LanceOpsError, ValueError):
    """No dataset (no ``_versions/*.manifest``) at the given URI, or no such version.

    Also a ``ValueError``: pylance 14 raises ``ValueError`` for ``lance.dataset("/nope")`` and for
    a missing version, so code catching pylance's error catches this one."""



class DatasetPathNotFoundError(DatasetNotFoundError, OSError):
    """Nothing at all at the URI ``LanceDataset.drop`` was given: pylance raises ``OSError``
    ("Not found: <path>") there, so this is one too (and a :class:`DatasetNotFoundError`)."""

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



class AppendSchemaError(SchemaError, OSError):
    """The data's columns or types do not fit the dataset's schema (unexpected column, missing
    non-nullable one, a type that does not widen).  An ``OSError`` too, as pylance's "Append with
    different schema"."""


class EmptySchemaError(SchemaError, OSError):
    """Data without columns to write: an ``OSError`` too, as pylance's "Cannot write with an
    empty schema"."""

class InvalidArgumentError(LanceOpsError, ValueError):
    """An argument's value is invalid (names the argument and the value received)."""


class InvalidURIError(InvalidArgumentError, UnsupportedFeatureError):
    """A dataset URI lance_ops cannot use: an unsupported scheme (also an
    :class:`UnsupportedFeatureError`), a ``file:`` URI naming another host, or no path at all.
    Names the URI."""


class ArgumentTypeError(InvalidArgumentError, TypeError):
    """An argument has the wrong type (names the argument and the type received)."""


class AmbiguousMergeInsertError(InvalidArgumentError):
    """A merge_insert source has several rows matching the same target row (names the dataset
    and the key); pylance prohibits ambiguous merge inserts too."""


class MissingDependencyError(LanceOpsError, ImportError):
    """An optional part of lance_ops was used without its extra installed.

    Names the missing module and the extra that provides it (``pip install 'lance_ops[spark]'``).
    Also an ``ImportError``, so ``try: import lance_ops.jobs except ImportError`` keeps working.
    """

    def __init__(self, feature: str, *, extra: str, missing: str | None) -> None:
        super().__init__(f"{feature} needs the '{extra}' extra ({missing or 'a dependency'} is not installed): "
                         f"pip install 'lance_ops[{extra}]'", name=missing)
        self.feature = feature
        self.extra = extra
        self.missing = missing


class SchemaChangeError(SchemaError):
    """A read across versions (the change feed) met a schema change it was asked to refuse."""

    def __init__(self, message: str, *, version: int | None = None, changes: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.version = version
        self.changes = changes


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

    @property
    def retry_safe(self) -> bool:
        """Nothing was committed: redoing the work on the latest version is safe."""
        return not isinstance(self, IncompatibleTransactionError)


class RetryableCommitConflictError(CommitConflictError):
    """The caller must redo its work on the new version, then commit again."""


class IncompatibleTransactionError(CommitConflictError):
    """The transaction can never be committed on top of what was committed meanwhile."""


class CommitError(LanceOpsError):
    """Creating the new version failed in the storage layer (timeout, disconnect, 5xx).

    Attributes:
        path: the manifest that was being created.
        version: the version that was being committed.
        retry_safe: True when the version is known not to exist (a retry commits once).
    """

    retry_safe: bool = False

    def __init__(self, message: str, *, path: str = "", version: int | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.version = version


class CommitFailedError(CommitError):
    """The commit did not happen (read back: the version's manifest is not ours); retry is safe."""

    retry_safe = True


class CommitStateUnknownError(CommitError):
    """The commit may or may not have happened (the read-back failed too).

    Retrying may commit twice unless the transaction carries an idempotency key
    (``txnAppId``/``txnVersion``); nothing the commit wrote is removed.
    """

    retry_safe = False


class ManifestStoreRequiredError(CommitError, InvalidArgumentError):
    """A writer not told about the external manifest store tried to write a dataset that
    commits through one (its ``_manifest_store.json`` marker names the store).

    Raised before anything is written; pass ``manifest_store=`` (the store the marker names) to
    the writer.

    Attributes:
        dataset: the dataset URI.
        recorded: the marker's content (``kind`` and ``location`` of the store).
    """

    def __init__(self, message: str, *, dataset: str = "", recorded: "dict[str, Any] | None" = None,
                 path: str = "", version: int | None = None) -> None:
        super().__init__(message, path=path, version=version)
        self.dataset = dataset
        self.recorded = dict(recorded or {})


class SQLParseError(InvalidArgumentError):
    """A SQL predicate or expression that cannot be parsed or translated (pylance raises a
    ``ValueError`` too).  Names the expression and points at the position.

    Attributes:
        expression: the SQL text.
        position: 0-based character offset of the offending token.
        reason: what is wrong, without the position.
    """

    def __init__(self, message: str, expression: str, position: int, *, column: str | None = None) -> None:
        caret = f"\n    {expression}\n    {' ' * position}^"
        # "Invalid user input: " is how pylance's errors for a bad predicate start (code written
        # for pylance matches on it)
        super().__init__(f"Invalid user input: {message} (at position {position} of {expression!r}){caret}")
        self.reason = message
        self.expression = expression
        self.position = position
        self.column = column


class SQLUnknownColumnError(SQLParseError, SchemaError):
    """A SQL expression names a column the dataset does not have (lists the columns)."""


class SQLTypeError(SQLParseError, SchemaError):
    """A SQL expression's operands do not fit (a literal that does not convert to the column's
    type, a string function on a number, a filter that is not boolean)."""


class SchemaEvolutionError(InvalidArgumentError, OSError):
    """An ``alter_columns`` pylance refuses with an ``OSError`` ("Invalid user input: ..."): an
    unknown column, a cast Lance does not allow, a value the cast cannot hold, a cast of an
    indexed column.  Also a ``ValueError``, as every invalid argument here."""


class MergeInsertMatchedError(InvalidArgumentError, OSError):
    """A ``merge_insert`` with ``when_matched_fail()`` found a source row matching a target row
    (pylance raises an ``OSError`` "Merge insert failed: found matching row ..."); nothing is written."""


class DetachedCommitError(UnsupportedFeatureError, OSError):
    """A detached commit the dataset cannot take (V1 manifest paths), as pylance's ``OSError``."""


class MergeInsertPlanError(UnsupportedFeatureError, OSError):
    """``MergeInsertBuilder.explain_plan`` of a merge pylance answers from a scalar index (no plan
    to explain), an ``OSError`` as pylance's."""


class ColumnNotFoundError(SchemaError, KeyError):
    """An index call names a column the dataset does not have (pylance raises a ``KeyError``)."""

    __str__ = Exception.__str__  # the message as written, not KeyError's quoted repr


class UnsupportedIndexTypeError(UnsupportedFeatureError, NotImplementedError):
    """An index type lance_ops does not build (pylance raises ``NotImplementedError`` for unknown ones)."""


class DeletedRowsTakeError(InvalidArgumentError, NotImplementedError):
    """A take (``take_blobs``) of rows that are deleted or do not exist; pylance raises
    ``NotImplementedError`` ("A take operation that includes row addresses must not target deleted rows")."""


class ObjectStoreError(LanceOpsError):
    """A storage call failed (names the path and the operation)."""


class ObjectNotFoundError(ObjectStoreError, FileNotFoundError):
    """The object does not exist.  Also a ``FileNotFoundError``, so callers may catch either."""


class ConditionalPutError(ObjectStoreError):
    """A create-if-absent failed in transport and the read-back could not settle it all.

    ``applied`` is False when the object was read back and is absent (the create did not
    happen; retrying is safe), None when the read-back failed too (unknown).
    """

    def __init__(self, message: str, *, path: str, applied: bool | None) -> None:
        super().__init__(message)
        self.path = path
        self.applied = applied


class ManifestStoreConflict(CommitConflictError):
    """``put_if_not_exists`` found the version already committed: the commit lost the race."""


class ManifestStoreNotFoundError(DatasetNotFoundError):
    """``put_if_exists`` found no entry for the version."""


class ManifestStoreError(LanceOpsError):
    """The manifest store itself failed (locked past the busy timeout, unreadable database, ...)."""


class RefError(LanceOpsError, ValueError):
    """A tag or branch does not exist, already exists, or points at a missing version.

    Also a ``ValueError``, as pylance raises for refs.
    """


class TagError(RefError):
    """A tag does not exist, already exists, or names a missing version."""


class BranchError(RefError):
    """A branch does not exist, already exists, or cannot be deleted."""


class CastError(SchemaError, InvalidArgumentError):
    """Data of one column cannot be cast to the type it must have (names the column and both
    types); a ``ValueError`` too, as pylance's error for a batch that does not match ``schema=``."""


class LevelsError(LanceOpsError, ValueError):
    """Levels that do not describe a valid nested array (the caller adds file and column)."""


class ChunksTooLargeError(LanceOpsError):
    """No chunk fits; ``levels`` is True if the levels are to blame, not the values: more
    levels (null / empty lists) between two visible values than a chunk header counts (65535)
    or than fit 32 KiB with the values."""

    def __init__(self, levels: bool) -> None:
        super().__init__()
        self.levels = levels


class VersionRemovedError(DatasetNotFoundError):
    """A version a reader or a restore asked for was removed by cleanup (or never existed).

    Attributes:
        uri: the dataset (or branch) URI.
        version: the version that is gone.
    """

    def __init__(self, message: str, *, uri: str = "", version: int | None = None) -> None:
        super().__init__(message)
        self.uri = uri
        self.version = version


class LeaseError(LanceOpsError):
    """A reader lease could not be acquired, renewed or read (names the dataset and the lease)."""

    def __init__(self, message: str, *, uri: str = "", lease_id: str = "") -> None:
        super().__init__(message)
        self.uri = uri
        self.lease_id = lease_id


class LeaseNotFoundError(LeaseError):
    """No lease with that id (released, or removed by cleanup long after it expired)."""


class LeaseExpiredError(LeaseError):
    """The lease expired before it was renewed: cleanup may already have removed its version's
    files, so it is not revived; acquire a new lease (and check the version still exists)."""


class IndexNotFoundError(InvalidArgumentError, RuntimeError):
    """No index of that name (pylance's ``drop_index`` raises a ``RuntimeError``, "Lance index not found")."""


# --------------------------------------------------------------------------- across processes
#: the modules whose classes :func:`error_from_dict` rebuilds (looked up by name, in this order;
#: never an arbitrary import path from the payload)
ERROR_MODULES = ("lance_ops.format.errors", "lance_ops.jobs.errors", "lance_ops.orchestration.errors",
                 "lance_ops.airflow.errors")


def _jsonable(value: Any) -> bool:
    import json

    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def error_to_dict(error: BaseException) -> "dict[str, Any]":
    """``{"type", "module", "message", "args", "fields"}`` of ``error``, JSON-able: what crosses a
    process boundary (Spark executor to driver, spark-submit or Pipes driver to the orchestrator)."""
    fields = {k: v for k, v in vars(error).items() if not k.startswith("_") and _jsonable(v)}
    args = list(error.args) if _jsonable(list(error.args)) else [str(error)]
    return {"type": type(error).__name__, "module": type(error).__module__, "message": str(error),
            "args": args, "fields": fields}


def _error_class(name: str, module: str) -> "type[LanceOpsError] | None":
    import importlib

    for mod in ([module] if module in ERROR_MODULES else []) + list(ERROR_MODULES):
        try:
            cls = getattr(importlib.import_module(mod), name, None)
        except ImportError:  # a layer whose extra is not installed (pyspark, dagster, airflow)
            continue
        if isinstance(cls, type) and issubclass(cls, LanceOpsError):
            return cls
    return None


def error_from_dict(info: "dict[str, Any]") -> LanceOpsError:
    """The error :func:`error_to_dict` described, as the same class with the same message, args
    and fields (its constructor is not called); an unknown type becomes a ``LanceOpsError`` naming it."""
    name, message = str(info.get("type", "LanceOpsError")), str(info.get("message", ""))
    cls = _error_class(name, str(info.get("module", "")))
    if cls is None:
        return LanceOpsError(f"{name}: {message}")
    error = cls.__new__(cls)
    BaseException.__init__(error, *(info.get("args") or [message]))
    error.__dict__.update(info.get("fields") or {})
    if str(error) != message:  # a class whose __str__ is not its args: keep the message exact
        BaseException.__init__(error, message)
    return error
