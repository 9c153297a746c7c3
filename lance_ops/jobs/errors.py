"""The errors of the Spark layer, under :class:`lance_ops.format.errors.LanceOpsError`."""

from lance_ops.format.errors import LanceOpsError


class InvalidOptionError(LanceOpsError, ValueError):
    """A data source or job option lance_ops does not know, or a value it cannot use; names the
    option (and lists the known ones when the name is unknown)."""


class InjectedTaskFailure(LanceOpsError, RuntimeError):
    """Raised on an executor by a task listed in ``inject_task_failures`` (fault tests)."""


class JobAbortedError(LanceOpsError, RuntimeError):
    """A task of a Spark write found the job aborted (another task failed) and stopped before it
    wrote another file; names the dataset and the write id."""
