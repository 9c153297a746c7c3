"""lance_ops.format: an embedded, pure-Python implementation of the Lance table and file format.

The API mirrors pylance where they overlap::

    import lance_ops.format as lf
    ds = lf.write_dataset(table, "/data/events", enable_stable_row_ids=True)
    ds = lf.dataset("/data/events")
    ds.to_table(columns=["id", "_rowid"])
"""

from ._version import __version__ as __version__
from .commit_options import COMMIT_DEFAULTS, CommitOptions
from .dataset import LanceDataset, LanceFragment, Scanner, commit, dataset, resolve_version, write_dataset
from .errors import (
    AmbiguousMergeInsertError,
    ArgumentTypeError,
    CommitConflictError,
    CommitError,
    CommitFailedError,
    CommitStateUnknownError,
    CorruptFileError,
    DatasetAlreadyExistsError,
    DatasetNotFoundError,
    IncompatibleTransactionError,
    InvalidArgumentError,
    InvalidURIError,
    LanceOpsError,
    ManifestStoreRequiredError,
    RetryableCommitConflictError,
    SchemaChangeError,
    SchemaError,
    UnsupportedFeatureError,
)
from .fragment import DataFile, DeletionFile, FragmentMetadata
from .inputs import CastError
from .lance_operation import LanceOperation
from .maintenance.compaction import CompactionOptions
from .manifest_store import ManifestStore, ManifestStoreConflict, SQLiteManifestStore
from .merge_insert import MergeInsertBuilder
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
from .refs import BranchError, RefError, TagError
from .schema import LanceSchema
from .write import write_fragments

__all__ = [
    "AmbiguousMergeInsertError",
    "COMMIT_DEFAULTS",
    "Append",
    "CastError",
    "LanceOperation",
    "CommitOptions",
    "CompactionOptions",
    "ManifestStoreRequiredError",
    "ArgumentTypeError",
    "BranchError",
    "CommitConflictError",
    "CommitError",
    "CommitFailedError",
    "CommitStateUnknownError",
    "CorruptFileError",
    "DataFile",
    "DatasetAlreadyExistsError",
    "DatasetNotFoundError",
    "Delete",
    "DeletionFile",
    "FragmentMetadata",
    "IncompatibleTransactionError",
    "InvalidArgumentError",
    "InvalidURIError",
    "LanceDataset",
    "LanceFragment",
    "LanceOpsError",
    "LanceSchema",
    "ManifestStore",
    "MergeInsertBuilder",
    "ManifestStoreConflict",
    "SQLiteManifestStore",
    "Overwrite",
    "RefError",
    "ReserveFragments",
    "Restore",
    "RetryableCommitConflictError",
    "Rewrite",
    "RewriteGroup",
    "Scanner",
    "SchemaChangeError",
    "SchemaError",
    "TagError",
    "UnsupportedFeatureError",
    "Update",
    "UpdateConfig",
    "commit",
    "dataset",
    "resolve_version",
    "write_dataset",
    "write_fragments",
]
