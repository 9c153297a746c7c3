"""lance_ops.format: an embedded, pure-Python implementation of the Lance table and file format.

The API mirrors pylance where they overlap::

    import lance_ops.format as lf
    ds = lf.write_dataset(table, "/data/events", enable_stable_row_ids=True)
    ds = lf.dataset("/data/events")
    ds.to_table(columns=["id", "_rowid"], filter="id > 10 AND name LIKE 'a%'")
"""

from lance_ops.format._version import __version__ as __version__
from lance_ops.format.api.blob_column import BlobColumn
from lance_ops.format.api.compaction import Compaction
from lance_ops.format.api.debug import format_fragment, manifest_needs_migration
from lance_ops.format.api.file_io import LanceFileReader, LanceFileWriter, ReaderResults
from lance_ops.format.api.fts_queries import (
    BooleanQuery,
    BoostQuery,
    FullTextOperator,
    FullTextQuery,
    FullTextQueryType,
    MatchQuery,
    MultiMatchQuery,
    Occur,
    PhraseQuery,
)
from lance_ops.format.api.functions import (
    acquire_lease,
    commit,
    dataset,
    lease,
    list_leases,
    release_lease,
    renew_lease,
    resolve_version,
    write_dataset,
)
from lance_ops.format.api.lance_dataset import LanceDataset
from lance_ops.format.api.progress import (
    FileSystemFragmentWriteProgress,
    FragmentWriteProgress,
    NoopFragmentWriteProgress,
)
from lance_ops.format.api.results import DeleteResult, UpdateResult
from lance_ops.format.api.sharded import ShardedBatchIterator
from lance_ops.format.api.views import LanceFragment, Scanner
from lance_ops.format.errors import (
    AmbiguousMergeInsertError,
    AppendSchemaError,
    ArgumentTypeError,
    BranchError,
    CastError,
    ColumnNotFoundError,
    CommitConflictError,
    CommitError,
    CommitFailedError,
    CommitStateUnknownError,
    CorruptFileError,
    DatasetAlreadyExistsError,
    DatasetNotFoundError,
    DatasetPathNotFoundError,
    DeletedRowsTakeError,
    DetachedCommitError,
    EmptySchemaError,
    IncompatibleTransactionError,
    IndexNotFoundError,
    InvalidArgumentError,
    InvalidURIError,
    LanceOpsError,
    LeaseError,
    LeaseExpiredError,
    LeaseNotFoundError,
    ManifestStoreConflict,
    ManifestStoreRequiredError,
    MergeInsertMatchedError,
    RefError,
    RetryableCommitConflictError,
    SchemaChangeError,
    SchemaError,
    SchemaEvolutionError,
    SQLParseError,
    SQLTypeError,
    SQLUnknownColumnError,
    TagError,
    UnsupportedFeatureError,
    UnsupportedIndexTypeError,
    VersionRemovedError,
)
from lance_ops.format.index.describe import format_fragment_ids
from lance_ops.format.ops.auto_cleanup import AutoCleanupConfig
from lance_ops.format.ops.compaction.rewrite import (
    COMPACTION_DEFAULTS,
    CompactionMetrics,
    CompactionOptions,
    RewriteResult,
)
from lance_ops.format.ops.index_build import (
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
from lance_ops.format.ops.merge_insert import MergeInsertBuilder
from lance_ops.format.ops.restore import RestoreResult
from lance_ops.format.ops.schema_evolution import BatchUDF, batch_udf, schema_with_new_columns
from lance_ops.format.ops.write import DEFAULT_MAX_ROWS_PER_FILE, write_fragments
from lance_ops.format.ops.write_and_commit import COMMIT_MESSAGE_KEY as LANCE_COMMIT_MESSAGE_KEY
from lance_ops.format.read.scan import CREATED_AT, META_COLUMNS, ROW_ADDR, ROW_ID, UPDATED_AT, resolve_filter
from lance_ops.format.schema import LanceSchema
from lance_ops.format.schema_json import json_to_schema, schema_to_json
from lance_ops.format.sql import sql_expression, sql_filter, transpile_sql
from lance_ops.format.table.file_versions import stable_version
from lance_ops.format.table.fragment import DataFile, DeletionFile, FragmentMetadata
from lance_ops.format.table.leases import DEFAULT_LEASE_TTL, Lease, LeaseHandle
from lance_ops.format.table.refs import Tags
from lance_ops.format.txn.index_entry import Index
from lance_ops.format.txn.lance_operation import LanceOperation
from lance_ops.format.txn.manifest_store import ManifestStore, SQLiteManifestStore
from lance_ops.format.txn.operations import (
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
from lance_ops.format.txn.options import COMMIT_DEFAULTS, CommitOptions
from lance_ops.format.txn.transaction import Transaction
from lance_ops.format.vector import IndexFileVersion, validate_vector_index, vec_to_table

__all__ = [
    "BooleanQuery", "BoostQuery", "FullTextOperator", "FullTextQuery", "FullTextQueryType", "MatchQuery",
    "MultiMatchQuery", "Occur", "PhraseQuery", "Index",
    "BlobColumn",
    "manifest_needs_migration",
    "ShardedBatchIterator",
    "LanceFileReader",
    "LanceFileWriter",
    "ReaderResults",
    "AutoCleanupConfig",
    "format_fragment",
    "json_to_schema",
    "schema_to_json",
    "FileSystemFragmentWriteProgress",
    "FragmentWriteProgress",
    "NoopFragmentWriteProgress",
    "IndexFileVersion",
    "validate_vector_index",
    "IndexNotFoundError",
    "ColumnNotFoundError",
    "DetachedCommitError",
    "UnsupportedIndexTypeError",
    "DeletedRowsTakeError",
    "LANCE_COMMIT_MESSAGE_KEY",
    "MergeInsertMatchedError",
    "SchemaEvolutionError",
    "stable_version",
    "vec_to_table",
    "BatchUDF",
    "batch_udf",
    "AmbiguousMergeInsertError",
    "COMMIT_DEFAULTS",
    "COMPACTION_DEFAULTS",
    "OPTIMIZE_INDICES_DEFAULTS",
    "CREATED_AT",
    "Compaction",
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
    "AppendSchemaError",
    "ArgumentTypeError",
    "BranchError",
    "CommitConflictError",
    "CommitError",
    "CommitFailedError",
    "CommitStateUnknownError",
    "CorruptFileError",
    "CreateIndex",
    "DataFile",
    "DatasetAlreadyExistsError",
    "DatasetNotFoundError",
    "DatasetPathNotFoundError",
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
    "EmptySchemaError",
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
    "transpile_sql",
    "schema_with_new_columns",
    "write_dataset",
    "write_fragments",
    "DEFAULT_LEASE_TTL",
    "Lease",
    "LeaseHandle",
    "LeaseError",
    "LeaseExpiredError",
    "LeaseNotFoundError",
    "VersionRemovedError",
    "acquire_lease",
    "lease",
    "list_leases",
    "release_lease",
    "renew_lease",
    "RestoreResult",
    "RewriteResult",
]
