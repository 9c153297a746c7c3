"""lance_ops.format: an embedded, pure-Python implementation of the Lance table and file format.

The API mirrors pylance where they overlap::

    import lance_ops.format as lf
    ds = lf.write_dataset(table, "/data/events", enable_stable_row_ids=True)
    ds = lf.dataset("/data/events")
    ds.to_table(columns=["id", "_rowid"], filter="id > 10 AND name LIKE 'a%'")
"""

from ._version import __version__ as __version__
from .commit_options import COMMIT_DEFAULTS, CommitOptions
from .dataset import LanceDataset
from .errors import (
    AmbiguousMergeInsertError,
    ArgumentTypeError,
    ColumnNotFoundError,
    CommitConflictError,
    CommitError,
    CommitFailedError,
    CommitStateUnknownError,
    CorruptFileError,
    DatasetAlreadyExistsError,
    DatasetNotFoundError,
    DeletedRowsTakeError,
    DetachedCommitError,
    IncompatibleTransactionError,
    InvalidArgumentError,
    InvalidURIError,
    LanceOpsError,
    ManifestStoreRequiredError,
    MergeInsertMatchedError,
    RetryableCommitConflictError,
    SchemaChangeError,
    SchemaError,
    SchemaEvolutionError,
    SQLParseError,
    SQLTypeError,
    SQLUnknownColumnError,
    UnsupportedFeatureError,
    UnsupportedIndexTypeError,
)
from .evolve import BatchUDF, batch_udf, schema_with_new_columns
from .fragment import DataFile, DeletionFile, FragmentMetadata
from .handle_views import LanceFragment, Scanner
from .index.describe import format_fragment_ids
from .inputs import CastError
from .lance_operation import LanceOperation
from .maintenance.compaction import COMPACTION_DEFAULTS, CompactionMetrics, CompactionOptions
from .maintenance.index_build import (
    OPTIMIZE_INDICES_DEFAULTS,
    IndexBuildPlan,
    IndexTask,
    OptimizeIndicesOptions,
    commit_index_build,
    execute_index_task,
    optimizable_index_names,
    plan_create_index,
    plan_create_scalar_index,
    plan_optimize_indices,
)
from .manifest_store import ManifestStore, ManifestStoreConflict, SQLiteManifestStore
from .merge_insert import MergeInsertBuilder
from .operations import (
    Append,
    CreateIndex,
    Delete,
    Merge,
    Overwrite,
    Project,
    ReserveFragments,
    Restore,
    Rewrite,
    RewriteGroup,
    Update,
    UpdateConfig,
)
from .refs import BranchError, RefError, TagError, Tags
from .results import DeleteResult, UpdateResult
from .scan import CREATED_AT, META_COLUMNS, ROW_ADDR, ROW_ID, UPDATED_AT, resolve_filter
from .schema import LanceSchema
from .sql import sql_expression, sql_filter, transpile_sql
from .top_level import commit, dataset, resolve_version, write_dataset
from .transaction import Transaction
from .vector import vec_to_table
from .versions import stable_version
from .write import DEFAULT_MAX_ROWS_PER_FILE, write_fragments
from .write_commit import COMMIT_MESSAGE_KEY as LANCE_COMMIT_MESSAGE_KEY

__all__ = [
    "AmbiguousMergeInsertError",
    "COMMIT_DEFAULTS",
    "COMPACTION_DEFAULTS",
    "OPTIMIZE_INDICES_DEFAULTS",
    "CREATED_AT",
    "CompactionMetrics",
    "DeleteResult",
    "UpdateResult",
    "DEFAULT_MAX_ROWS_PER_FILE",
    "META_COLUMNS",
    "ROW_ADDR",
    "ROW_ID",
    "Tags",
    "Transaction",
    "UPDATED_AT",
    "format_fragment_ids",
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
    "ColumnNotFoundError",
    "DetachedCommitError",
    "UnsupportedIndexTypeError",
    "CorruptFileError",
    "CreateIndex",
    "DataFile",
    "DatasetAlreadyExistsError",
    "DatasetNotFoundError",
    "DeletedRowsTakeError",
    "Delete",
    "Merge",
    "Project",
    "DeletionFile",
    "FragmentMetadata",
    "IncompatibleTransactionError",
    "InvalidArgumentError",
    "IndexBuildPlan",
    "IndexTask",
    "OptimizeIndicesOptions",
    "InvalidURIError",
    "LanceDataset",
    "LANCE_COMMIT_MESSAGE_KEY",
    "LanceFragment",
    "LanceOpsError",
    "LanceSchema",
    "ManifestStore",
    "MergeInsertBuilder",
    "MergeInsertMatchedError",
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
    "SchemaEvolutionError",
    "SchemaError",
    "SQLParseError",
    "SQLTypeError",
    "SQLUnknownColumnError",
    "TagError",
    "UnsupportedFeatureError",
    "Update",
    "UpdateConfig",
    "commit",
    "commit_index_build",
    "dataset",
    "execute_index_task",
    "plan_create_index",
    "plan_create_scalar_index",
    "optimizable_index_names",
    "plan_optimize_indices",
    "resolve_filter",
    "resolve_version",
    "sql_expression",
    "sql_filter",
    "stable_version",
    "vec_to_table",
    "transpile_sql",
    "schema_with_new_columns",
    "BatchUDF",
    "batch_udf",
    "write_dataset",
    "write_fragments",
]
