"""lance_ops.format: an embedded, pure-Python implementation of the Lance table and file format.

The API mirrors pylance where they overlap::

    import lance_ops.format as lf
    ds = lf.write_dataset(table, "/data/events", enable_stable_row_ids=True)
    ds = lf.dataset("/data/events")
    ds.to_table(columns=["id", "_rowid"], filter="id > 10 AND name LIKE 'a%'")
"""

from ._version import __version__ as __version__
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
    RetryableCommitConflictError,
    SchemaChangeError,
    SchemaError,
    SQLParseError,
    SQLTypeError,
    SQLUnknownColumnError,
    UnsupportedFeatureError,
)
from .fragment import DataFile, DeletionFile, FragmentMetadata
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
from .scan import resolve_filter
from .schema import LanceSchema
from .sql import sql_expression, sql_filter, transpile_sql
from .write import write_fragments

__all__ = [
    "AmbiguousMergeInsertError",
    "Append",
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
    "SQLParseError",
    "SQLTypeError",
    "SQLUnknownColumnError",
    "TagError",
    "UnsupportedFeatureError",
    "Update",
    "UpdateConfig",
    "commit",
    "dataset",
    "resolve_filter",
    "resolve_version",
    "sql_expression",
    "sql_filter",
    "transpile_sql",
    "write_dataset",
    "write_fragments",
]
