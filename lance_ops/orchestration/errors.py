"""Errors of the orchestration layer, and the one transport of lance_ops errors across processes.

``DatasetConfigError``: a run configured in a way that cannot work (names the dataset, the field
and the fix); ``SettingsError``: a ``lance_ops.yaml`` lance_ops cannot use.  Both are raised
before anything is written.

An exception crosses a process boundary (a spark-submit driver to an Airflow worker, a Pipes
driver to a Dagster run) as :func:`error_to_json` (type, module, message, fields) and comes back
as the same class with :func:`error_from_json`, looked up in the layers' ``errors`` modules
(:data:`lance_ops.format.errors.ERROR_MODULES`; never by an arbitrary import path).  :func:`is_retryable` says
whether running the same task again can succeed: a wrong schema, predicate, argument or
configuration cannot, so orchestrators fail such a task without retries.
"""

from typing import Any

from lance_ops.format import errors as format_errors
from lance_ops.format.errors import LanceOpsError, error_from_dict, error_to_dict


class DatasetConfigError(LanceOpsError, ValueError):
    """A run was configured in a way that cannot work for this dataset; nothing was committed.

    Attributes:
        dataset: the dataset's name in lance_ops.yaml (or its URI).
        field: the config field (launchpad path, e.g. ``delete.where``) or settings key at fault.
        problem: what is wrong.
        fix: what to change.
    """

    def __init__(self, dataset: str, field: str, problem: str, fix: str) -> None:
        super().__init__(f"dataset {dataset!r}, field `{field}`: {problem}. Fix: {fix}")
        self.dataset = dataset
        self.field = field
        self.problem = problem
        self.fix = fix


class SettingsError(LanceOpsError, ValueError):
    """A ``lance_ops.yaml`` that lance_ops cannot use: unknown key (with the closest valid name),
    wrong type or value.  ``path`` is the file, ``key`` the dotted key at fault."""

    def __init__(self, message: str, *, path: str = "", key: str = "") -> None:
        super().__init__(message)
        self.path = path
        self.key = key


#: errors that running the same task again cannot fix (configuration, schema, arguments, data)
NON_RETRYABLE: tuple[type[BaseException], ...] = (
    format_errors.SchemaError,
    format_errors.InvalidArgumentError,
    format_errors.UnsupportedFeatureError,
    format_errors.DatasetNotFoundError,
    format_errors.CorruptFileError,
    format_errors.MissingDependencyError,
    format_errors.IncompatibleTransactionError,
    DatasetConfigError,
    SettingsError,
)


def is_retryable(error: BaseException) -> bool:
    """True unless ``error`` is one a retry cannot fix (:data:`NON_RETRYABLE`, or a ``ValueError``
    such as ``lance_ops.jobs.InvalidOptionError``)."""
    if isinstance(error, NON_RETRYABLE):
        return False
    return not (isinstance(error, LanceOpsError) and isinstance(error, ValueError))


def error_to_json(error: BaseException) -> dict[str, Any]:
    """``{"type", "module", "message", "args", "fields", "retryable"}`` of ``error`` (JSON-able;
    :func:`lance_ops.format.errors.error_to_dict` plus whether a retry can succeed)."""
    return {**error_to_dict(error), "retryable": is_retryable(error)}


def error_from_json(info: dict[str, Any]) -> LanceOpsError:
    """The error :func:`error_to_json` described, as the same class with the same message and
    fields; an unknown type becomes a ``LanceOpsError`` naming it."""
    return error_from_dict(info)
