"""Typed errors of the Dagster layer: a bad run configuration names the dataset, the field and the fix."""

from lance_ops.format.errors import LanceOpsError


class DatasetConfigError(LanceOpsError, ValueError):
    """A run was configured in a way that cannot work for this dataset; nothing was committed.

    Attributes:
        dataset: the dataset's name in lance_ops.yaml.
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
