"""Errors of the orchestration layer, and the one transport of lance_ops errors across processes.

``DatasetConfigError``: a run configured in a way that cannot work (names the dataset, the field
and the fix); ``SettingsError``: a ``lance_ops.yaml`` lance_ops cannot use.  Both are raised
before anything is written.

An exception crosses a process boundary (a spark-submit driver to an Airflow worker, a Pipes
driver to a Dagster run) as :func:`error_to_json` (type, module, message, fields) and comes back
as the same class with :func:`error_from_json`, looked up in :mod:`lance_ops.format.errors`, this
module or ``lance_ops.jobs`` (never by an arbitrary import path).  :func:`is_retryable` says
whether running the same task again can succeed: a wrong schema, predicate, argument or
configuration cannot, so orchestrators fail such a task without retries.
"""

import importlib
import json
from typing import Any

from lance_ops.format import errors as format_errors
from lance_ops.format.errors import LanceOpsError


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

_MODULES = ("lance_ops.format.errors", "lance_ops.orchestration.errors", "lance_ops.jobs")


def is_retryable(error: BaseException) -> bool:
    """True unless ``error`` is one a retry cannot fix (:data:`NON_RETRYABLE`, or a ``ValueError``
    such as ``lance_ops.jobs.InvalidOptionError``)."""
    if isinstance(error, NON_RETRYABLE):
        return False
    return not (isinstance(error, LanceOpsError) and isinstance(error, ValueError))


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def error_to_json(error: BaseException) -> dict[str, Any]:
    """``{"type", "module", "message", "args", "fields", "retryable"}`` of ``error`` (JSON-able)."""
    fields = {k: v for k, v in vars(error).items() if not k.startswith("_") and _jsonable(v)}
    args = [a for a in error.args] if _jsonable(list(error.args)) else [str(error)]
    return {"type": type(error).__name__, "module": type(error).__module__, "message": str(error),
            "args": args, "fields": fields, "retryable": is_retryable(error)}


def _error_class(name: str, module: str) -> type[LanceOpsError] | None:
    candidates = [module, *_MODULES] if module in _MODULES else list(_MODULES)
    for mod in candidates:
        try:
            cls = getattr(importlib.import_module(mod), name, None)
        except ImportError:  # lance_ops.jobs without pyspark
            continue
        if isinstance(cls, type) and issubclass(cls, LanceOpsError):
            return cls
    return None


def error_from_json(info: dict[str, Any]) -> LanceOpsError:
    """The error :func:`error_to_json` described, as the same class with the same message and
    fields; an unknown type becomes a ``LanceOpsError`` naming it."""
    name, message = str(info.get("type", "LanceOpsError")), str(info.get("message", ""))
    cls = _error_class(name, str(info.get("module", "")))
    if cls is None:
        return LanceOpsError(f"{name}: {message}")
    error = cls.__new__(cls)
    BaseException.__init__(error, *(info.get("args") or [message]))
    error.__dict__.update(info.get("fields") or {})
    if str(error) != message:  # a class whose __str__ is not its args (keeps the message exact)
        BaseException.__init__(error, message)
    return error
