"""Launchpad config for the dataset jobs; option names and defaults as ``lance_ops.jobs``.

``lance-ops run JOB`` builds its command-line options from these classes too.
"""

from enum import Enum

from dagster import Config
from pydantic import Field


class SinkFormat(Enum):
    """Change feed sink formats of ``jobs.write_change_feed``."""

    lance = "lance"
    parquet = "parquet"


class SourceOverride(Config):
    """Where rows come from; unset fields fall back to the dataset's ``source`` settings."""

    path: str | None = Field(default=None, description="Spark-readable path (overrides source.path)")
    format: str | None = Field(default=None, description="'generate' or a Spark reader format (parquet, csv, ...)")
    rows: int | None = Field(default=None, description="generated sources: how many rows (default source.rows)")
    start_id: int | None = Field(
        default=None, description="generated sources: first id (default: the dataset's next row id, so ids stay unique)"
    )
    max_rows_per_file: int = Field(default=1_048_576, gt=0, description="rows per data file (new fragment)")


class AppendConfig(SourceOverride):
    """Append rows; the first append creates the dataset (stable row ids on)."""


class DeleteConfig(Config):
    """Delete the rows matching a Spark SQL predicate."""

    where: str = Field(description="Spark SQL predicate, e.g. \"id < 100\"")


class UpsertConfig(SourceOverride):
    """Update rows matching on the key columns, insert the others."""

    on: list[str] = Field(default_factory=lambda: ["id"], description="key columns")
    tag: str = Field(default="upserted", description="generated sources: value of the 'kind' column")


class MaterializeDeletionsConfig(Config):
    """Rewrite fragments whose deleted fraction is at least ``threshold`` without their deleted rows."""

    threshold: float = Field(default=0.1, ge=0, le=1)
    dry_run: bool = Field(default=False, description="plan only: report what would be rewritten, commit nothing")


class CompactConfig(Config):
    """Merge small fragments (and materialise deletions), keeping row ids and row versions."""

    target_rows_per_fragment: int = Field(default=1_048_576, gt=0)
    max_rows_per_group: int = Field(default=1024, gt=0)
    materialize_deletions: bool = True
    materialize_deletions_threshold: float = Field(default=0.1, ge=0, le=1)
    max_source_fragments: int | None = None
    dry_run: bool = Field(default=False, description="plan only: report what would be rewritten, commit nothing")


class ChangeFeedConfig(Config):
    """Write the changes in ``(begin_version, end_version]`` to a sink."""

    begin_version: int = Field(ge=0)
    end_version: int | None = Field(default=None, description="default: the latest version")
    sink_uri: str | None = Field(
        default=None, description="default: {change_feed.sink_uri}_ranges (parquet: one _change_range=B-E directory per range)"
    )
    format: SinkFormat | None = Field(default=None, description="default: the dataset's change_feed.format")


class CleanupConfig(Config):
    """Remove versions older than ``older_than_days`` beyond the newest ``retain_versions`` (pylance semantics)."""

    older_than_days: float = Field(default=14.0, ge=0)
    retain_versions: int = Field(default=1, ge=1)
    delete_unverified: bool = False
    dry_run: bool = False
