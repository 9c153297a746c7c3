"""lance_ops.format: an embedded, pure-Python implementation of the Lance table and file format.

The API mirrors pylance where they overlap::

    import lance_ops.format as lf
    ds = lf.write_dataset(table, "/data/events", enable_stable_row_ids=True)
    ds = lf.dataset("/data/events")
    ds.to_table(columns=["id", "_rowid"])
"""

from .commit import commit
from .dataset import LanceDataset, LanceFragment, Scanner, dataset, write_dataset
from .errors import (
    CommitConflictError,
    CorruptFileError,
    DatasetAlreadyExistsError,
    DatasetNotFoundError,
    IncompatibleTransactionError,
    InvalidURIError,
    LanceOpsError,
    RetryableCommitConflictError,
    SchemaError,
    UnsupportedFeatureError,
)
from .fragment import DataFile, DeletionFile, FragmentMetadata
from .manifest_store import ManifestStore, ManifestStoreConflict, SQLiteManifestStore
from .operations import (
    Append,
    Delete,
    Overwrite,
    ReserveFragments,
    Restore,
    Rewrite,
    RewriteGroup,
    Update,
    UpdateConfig,
)
from .schema import LanceSchema
from .write import write_fragments

__version__ = "0.1.0"

__all__ = [
    "Append",
    "CommitConflictError",
    "CorruptFileError",
    "DataFile",
    "DatasetAlreadyExistsError",
    "DatasetNotFoundError",
    "Delete",
    "DeletionFile",
    "FragmentMetadata",
    "IncompatibleTransactionError",
    "InvalidURIError",
    "LanceDataset",
    "LanceFragment",
    "LanceOpsError",
    "LanceSchema",
    "ManifestStore",
    "ManifestStoreConflict",
    "SQLiteManifestStore",
    "Overwrite",
    "ReserveFragments",
    "Restore",
    "RetryableCommitConflictError",
    "Rewrite",
    "RewriteGroup",
    "Scanner",
    "SchemaError",
    "UnsupportedFeatureError",
    "Update",
    "UpdateConfig",
    "commit",
    "dataset",
    "write_dataset",
    "write_fragments",
]
