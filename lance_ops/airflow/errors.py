"""The provider's typed error: bad configuration fails the task before anything is committed."""

from airflow.sdk.exceptions import AirflowFailException

from lance_ops.orchestration.errors import DatasetConfigError


class LanceConfigError(DatasetConfigError, AirflowFailException):
    """A task configured in a way that cannot work (unknown dataset, bad predicate or version range,
    missing connection); raised before any file is written.  Names the dataset, the field and the fix.

    It is an ``AirflowFailException`` (the task fails without retries: a retry cannot fix it) and the lance_ops
    ``DatasetConfigError`` the Dagster layer raises for the same mistakes.
    """
