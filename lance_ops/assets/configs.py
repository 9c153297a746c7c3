"""Launchpad config of the dataset operations; option names and defaults as ``lance_ops.jobs``.

Each dataset asset has its own config class (``dataset_config_class``): one group per operation
(``append``, ``delete``, ``upsert``, ``compact``, ``materialize_deletions``,
``optimize_indices``, ``cleanup_old_versions``) whose defaults are that dataset's source and policy, so the launchpad
of ``lance_compact`` pre-fills the dataset's ``target_rows_per_fragment`` and friends.  The job
picks the operation (run tag ``lance_ops/operation``); only its group is read.

``lance-ops run JOB`` builds its command-line options from the base classes here too.
"""

from enum import Enum
from typing import Any

from dagster import Config
from pydantic import Field, create_model

from lance_ops.assets.settings import DatasetSettings
from lance_ops.format import COMPACTION_DEFAULTS, DEFAULT_MAX_ROWS_PER_FILE, OPTIMIZE_INDICES_DEFAULTS


class Operation(Enum):
    """What a run does to a dataset (the job ``lance_<operation>`` picks it)."""

    maintain = "maintain"  # what the policy asks for now: compact or materialise deletions, optimize indices
    append = "append"
    delete = "delete"
    upsert = "upsert"
    compact = "compact"
    materialize_deletions = "materialize_deletions"
    optimize_indices = "optimize_indices"
    cleanup_old_versions = "cleanup_old_versions"


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
    max_rows_per_file: int = Field(default=DEFAULT_MAX_ROWS_PER_FILE, gt=0, description="rows per data file (new fragment)")


class AppendConfig(SourceOverride):
    """Append rows; the first append creates the dataset (stable row ids on)."""


class DeleteConfig(Config):
    """Delete the rows matching a SQL predicate (pylance's dialect, validated before Spark runs)."""

    where: str = Field(description="SQL predicate as pylance takes it, e.g. \"id < 100\"")


class UpsertConfig(SourceOverride):
    """Update rows matching on the key columns, insert the others."""

    on: list[str] = Field(default_factory=lambda: ["id"], description="key columns")
    tag: str = Field(default="upserted", description="generated sources: value of the 'kind' column")


class MaterializeDeletionsConfig(Config):
    """Rewrite fragments whose deleted fraction is at least ``threshold`` without their deleted rows."""

    threshold: float = Field(default=COMPACTION_DEFAULTS.materialize_deletions_threshold, ge=0, le=1)
    dry_run: bool = Field(default=False, description="plan only: report what would be rewritten, commit nothing")


class CompactConfig(Config):
    """Merge small fragments (and materialise deletions), keeping row ids and row versions."""

    target_rows_per_fragment: int = Field(default=COMPACTION_DEFAULTS.target_rows_per_fragment, gt=0)
    max_rows_per_group: int = Field(default=COMPACTION_DEFAULTS.max_rows_per_group, gt=0)
    materialize_deletions: bool = COMPACTION_DEFAULTS.materialize_deletions
    materialize_deletions_threshold: float = Field(default=COMPACTION_DEFAULTS.materialize_deletions_threshold, ge=0, le=1)
    max_source_fragments: int | None = COMPACTION_DEFAULTS.max_source_fragments
    dry_run: bool = Field(default=False, description="plan only: report what would be rewritten, commit nothing")


class OptimizeIndicesConfig(Config):
    """Index the rows no index segment covers yet (pylance's optimize_indices), on Spark executors."""

    num_indices_to_merge: int = Field(
        default=OPTIMIZE_INDICES_DEFAULTS.num_indices_to_merge, ge=0,
        description="0: add a segment per group of new fragments; N: rebuild the newest N segments with them")
    index_names: list[str] | None = Field(
        default=None, description="only these indices (default: every BTREE, BITMAP, LABEL_LIST, ZONEMAP, "
                                  "IVF_FLAT and IVF_PQ index)")
    rows_per_task: int | None = Field(
        default=OPTIMIZE_INDICES_DEFAULTS.rows_per_task, gt=0,
        description="rows of new fragments per Spark task and segment (None: one per index)")


class CleanupConfig(Config):
    """Remove versions older than ``older_than_days`` beyond the newest ``retain_versions`` (pylance semantics)."""

    older_than_days: float = Field(default=14.0, ge=0)
    retain_versions: int = Field(default=1, ge=1)
    delete_unverified: bool = False
    dry_run: bool = False
    retention_duration_check: bool = Field(
        default=True, description="refuse older_than_days below one hour (Delta's VACUUM check); "
        "turn off only when nothing else reads or writes the dataset")


class ChangeFeedConfig(Config):
    """Write the changes of one dataset in ``(begin, end]`` to a sink (job ``lance_write_change_feed``).

    Name each end by number (``begin_version``, ``end_version``) or by tag (``begin_tag``,
    ``end_tag``), not both; ``branch`` writes the changes of a branch.
    """

    dataset: str = Field(description="the dataset's name in lance_ops.yaml")
    begin_version: int | None = Field(default=None, ge=0,
                                      description="begin version number (0: from the start); or set begin_tag")
    begin_tag: str | None = Field(default=None, description="a tag naming the begin version (instead of begin_version)")
    end_version: int | None = Field(default=None, description="default: the latest version (of the branch)")
    end_tag: str | None = Field(default=None, description="a tag naming the end version (instead of end_version)")
    branch: str | None = Field(
        default=None,
        description="a branch of the dataset (<uri>/tree/<branch>): the numbers are its versions; "
                    "default: main, or the branch the tags point into",
    )
    sink_uri: str | None = Field(
        default=None,
        description="default: {change_feed.sink_uri}_ranges (a branch: {change_feed.sink_uri}_ranges_<branch>; "
                    "parquet: one change_range=B-E directory per range)",
    )
    format: SinkFormat | None = Field(default=None, description="default: the dataset's change_feed.format")


class ObserveConfig(Config):
    """Record the latest version of a dataset as an observation (job ``lance_observe``)."""

    dataset: str = Field(description="the dataset's name in lance_ops.yaml")


#: operation -> its config group (the base class; each dataset gets a subclass with its defaults)
OPERATION_CONFIGS: dict[Operation, type[Config]] = {
    Operation.append: AppendConfig,
    Operation.delete: DeleteConfig,
    Operation.upsert: UpsertConfig,
    Operation.compact: CompactConfig,
    Operation.materialize_deletions: MaterializeDeletionsConfig,
    Operation.optimize_indices: OptimizeIndicesConfig,
    Operation.cleanup_old_versions: CleanupConfig,
}


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


def _group(d: DatasetSettings, base: type[Config], suffix: str, **defaults: Any) -> type[Config]:
    """``base`` with ``defaults`` (field -> value); the class name is unique per dataset."""
    fields: dict[str, Any] = {}
    for name, value in defaults.items():
        info = base.model_fields[name]
        fields[name] = (info.annotation, Field(default=value, description=info.description, **_bounds(info)))
    return create_model(f"{_camel(d.name)}{suffix}Config", __base__=base, __doc__=base.__doc__, **fields)


def _bounds(info: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for m in info.metadata:
        for key in ("gt", "ge", "lt", "le"):
            if getattr(m, key, None) is not None:
                out[key] = getattr(m, key)
    return out


class _OptionalDelete(DeleteConfig):
    where: str | None = Field(  # type: ignore[assignment]
        default=None, description="SQL predicate as pylance takes it, e.g. \"id < 100\" (required by lance_delete)"
    )


def dataset_config_class(d: DatasetSettings) -> type[Config]:
    """The launchpad config of the dataset asset ``d.name``: one group per operation, defaults from
    ``d``'s source and policy (what the sensors and schedules use), and an optional ``operation``."""
    p, src = d.policy, d.source
    source = {"format": src.format, "path": src.path, "rows": src.rows}
    groups: dict[str, type[Config]] = {
        "append": _group(d, AppendConfig, "Append", **source),
        "delete": create_model(f"{_camel(d.name)}DeleteConfig", __base__=_OptionalDelete, __doc__=DeleteConfig.__doc__),
        "upsert": _group(d, UpsertConfig, "Upsert", on=list(p.upsert_on), **source),
        "compact": _group(d, CompactConfig, "Compact", target_rows_per_fragment=p.target_rows_per_fragment,
                          max_rows_per_group=p.max_rows_per_group,
                          materialize_deletions_threshold=p.deleted_ratio_threshold),
        "materialize_deletions": _group(d, MaterializeDeletionsConfig, "MaterializeDeletions",
                                        threshold=p.deleted_ratio_threshold),
        "optimize_indices": _group(d, OptimizeIndicesConfig, "OptimizeIndices"),
        "cleanup_old_versions": _group(d, CleanupConfig, "Cleanup", older_than_days=p.cleanup_older_than_days,
                                       retain_versions=p.cleanup_retain_versions),
    }
    fields: dict[str, Any] = {
        "operation": (Operation | None, Field(
            default=None,
            description="default: the job's operation (lance_compact -> compact); 'maintain' when the asset "
                        "is materialised on its own (what the policy asks for now)")),
    }
    for name, cls in groups.items():
        fields[name] = (cls, Field(default_factory=cls, description=(cls.__doc__ or "").strip().splitlines()[0]))
    return create_model(f"{_camel(d.name)}OperationsConfig", __base__=Config,
                        __doc__=f"Operations on the Lance dataset {d.name}; defaults are its policy.", **fields)
