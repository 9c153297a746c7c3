"""The datasets lance_ops maintains, declared in one YAML file (``lance_ops.yaml``).

The file is found through ``LANCE_OPS_CONFIG``; without it an embedded default is used (one
local dataset under ``.lance_ops/demo`` and Spark ``local[*]``), which is what ``make demo``
and a bare ``dagster dev -w workspace.yaml`` run on.  See ``lance_ops.yaml.example``.

Secrets never live in the file: a storage option written as ``{env: NAME}`` is read from the
environment variable ``NAME`` when a dataset is opened, and only the variable's name is kept
in Dagster config, logs and metadata.
"""

import difflib
import os
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from lance_ops.format import COMMIT_DEFAULTS, COMPACTION_DEFAULTS
from lance_ops.orchestration.errors import DatasetConfigError, SettingsError

CONFIG_ENV = "LANCE_OPS_CONFIG"

DEFAULT_SPARK_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
}

DEFAULT_CONFIG_YAML = """\
spark:
  master: local[*]
datasets:
  events:
    uri: .lance_ops/demo/events
    description: Demo event log (generated data), maintained by lance_ops.
    source:
      format: generate
      rows: 20000
    change_feed:
      sink_uri: .lance_ops/demo/events_changes
      format: parquet
    policy:
      target_rows_per_fragment: 50000
      min_small_fragments: 4
      deleted_ratio_threshold: 0.1
      max_versions_since_compaction: 20
"""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SparkSubmitSettings(_Strict):
    """Run the Spark operations as ``spark-submit`` applications through Dagster Pipes.

    The run worker then starts no JVM: it launches ``spark_submit`` (client deploy mode) with
    ``master`` and ``conf``; the driver runs ``lance_ops/assets/spark_pipes_main.py`` and reports
    logs, the job's result and the versions it committed back to Dagster through dagster-pipes.
    """

    spark_submit: str = "spark-submit"   # path of the spark-submit script
    master: str = "local[*]"             # spark://host:7077, local[2], ...
    conf: dict[str, str] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)  # extra environment for spark-submit
    python: str | None = None            # PYSPARK_PYTHON for driver and executors (default: this interpreter)


class SparkSettings(_Strict):
    """Where Spark jobs run: in the run worker (``local[*]`` or ``spark://host:7077``), or, with
    ``submit``, as spark-submit applications launched through Dagster Pipes."""

    master: str = "local[*]"
    conf: dict[str, str] = Field(default_factory=dict)
    submit: SparkSubmitSettings | None = None

    def merged_conf(self) -> dict[str, str]:
        return {**DEFAULT_SPARK_CONF, **self.conf}


class SourceSettings(_Strict):
    """What an append reads: a Spark-readable path, or generated rows (demo and tests)."""

    format: str = "generate"  # "generate", or a Spark reader format: parquet, csv, json, lance, ...
    path: str | None = None
    options: dict[str, str] = Field(default_factory=dict)
    rows: int = Field(default=10_000, ge=0)  # rows per generated batch

    @model_validator(mode="after")
    def _path_for_files(self) -> "SourceSettings":
        if self.format != "generate" and not self.path:
            raise ValueError(f"source.format {self.format!r} needs source.path")
        return self


class ChangeFeedSettings(_Strict):
    """Where the change feed asset writes: partition ``v`` is the range ``(v-1, v]``.

    ``parquet``: ``{sink_uri}/change_range={v-1}-{v}/``, one Hive-style directory per version
    (pyarrow, pandas and Spark read the sink from its root); ``lance``: one Lance dataset
    holding every version's changes (replaced per version).

    ``enabled``: None (default) = a change feed asset unless the dataset exists without stable
    row ids (the change feed needs them); False = none.
    """

    sink_uri: str
    format: Literal["parquet", "lance"] = "parquet"
    enabled: bool | None = None


class PolicySettings(_Strict):
    """Maintenance policy: when the sensor compacts, and the cron schedules.

    A fragment is *small* when it has fewer live rows than ``target_rows_per_fragment`` (as
    compaction plans it).  The compaction sensor requests a compaction when at least
    ``min_small_fragments`` fragments are small or ``max_versions_since_compaction`` versions
    were committed since the last compaction, and a deletion materialisation when only the
    deleted-row ratio reaches ``deleted_ratio_threshold``.
    """

    target_rows_per_fragment: int = Field(default=COMPACTION_DEFAULTS.target_rows_per_fragment, gt=0)
    max_rows_per_group: int = Field(default=COMPACTION_DEFAULTS.max_rows_per_group, gt=0)
    min_small_fragments: int = Field(default=8, ge=2)
    deleted_ratio_threshold: float = Field(default=COMPACTION_DEFAULTS.materialize_deletions_threshold, ge=0, le=1)
    max_versions_since_compaction: int = Field(default=50, ge=1)
    sensor_interval_seconds: int = Field(default=300, ge=5)
    sensors_enabled: bool = False
    append_cron: str = "0 * * * *"
    append_schedule_enabled: bool = False
    compaction_cron: str = "0 2 * * *"
    cleanup_cron: str = "0 3 * * *"
    maintenance_schedules_enabled: bool = True
    cleanup_older_than_days: float = Field(default=14.0, ge=0)
    cleanup_retain_versions: int = Field(default=1, ge=1)
    timezone: str = "UTC"
    # Runs that write the dataset at the same time (the Dagster pool ``lance-<name>``; the code
    # location sets the pool's limit on the instance, no dagster.yaml setting needed).
    max_concurrent_writes: int = Field(default=1, ge=1)
    # Freshness checks, evaluated by the automation sensor on ``freshness_cron``:
    max_hours_between_appends: float | None = Field(default=None, gt=0)  # None: no append freshness check
    change_feed_max_lag_versions: int = Field(default=10, ge=0)
    freshness_cron: str = "*/15 * * * *"
    upsert_on: tuple[str, ...] = ("id",)  # default key columns of an upsert
    min_index_coverage: float = Field(default=0.9, ge=0, le=1)  # index_coverage check: warn below this share
    # The maintenance planner (lance_ops.orchestration.planner; docs/ARCHITECTURE.md "The planner"):
    min_unindexed_rows: int = Field(default=10_000, ge=1)  # optimize_indices at this many unindexed rows
    num_indices_to_merge: int = Field(default=1, ge=0)  # catch-up as pylance's optimize_indices default
    max_index_segments: int = Field(default=8, ge=1)  # more segments than this: merge them into one
    cleanup_min_versions: int = Field(default=10, ge=1)  # propose cleanup when it removes this many versions
    cleanup_retention_duration_check: bool = True  # False only when nothing else reads or writes the dataset
    orphan_min_files: int = Field(default=1, ge=1)  # propose an orphan sweep at this many unreferenced files
    orphan_min_age_hours: float = Field(default=1.0, ge=0)  # younger unreferenced files may be a commit in flight
    # per-run compaction budget (pylance's compact_files names); None: no limit
    max_source_fragments: int | None = Field(default=None, ge=1)
    max_source_rows: int | None = Field(default=None, ge=1)
    max_source_bytes: int | None = Field(default=None, ge=1)


class DatasetSettings(_Strict):
    """One Lance dataset: where it lives, how to reach it, what to append, how to maintain it."""

    name: str
    uri: str
    description: str = ""
    storage_options: dict[str, str] = Field(default_factory=dict)
    storage_options_env: dict[str, str] = Field(default_factory=dict)  # option -> env var name
    # the external manifest store every write of the dataset commits through (SQLite path or
    # sqlite:/// URL), for object stores without conditional put; relative paths are to the file
    manifest_store: str | None = COMMIT_DEFAULTS.manifest_store
    source: SourceSettings = Field(default_factory=SourceSettings)
    change_feed: ChangeFeedSettings
    policy: PolicySettings = Field(default_factory=PolicySettings)

    @field_validator("name")
    @classmethod
    def _identifier(cls, v: str) -> str:
        if not v.isidentifier():
            raise ValueError(f"dataset name {v!r} must be a Python identifier (it names assets and jobs)")
        return v


class RootSettings(_Strict):
    """A directory or bucket prefix whose Lance tables (every folder holding ``_versions/``) the
    planner maintains, each with this policy and these storage options."""

    uri: str
    storage_options: dict[str, str] = Field(default_factory=dict)
    storage_options_env: dict[str, str] = Field(default_factory=dict)  # option -> env var name
    max_depth: int = Field(default=3, ge=1)  # folder levels below uri searched for tables
    policy: PolicySettings = Field(default_factory=PolicySettings)


class OpenLineageTransportSettings(_Strict):
    """Where OpenLineage events go: ``console`` (the ``openlineage.client`` logger), ``file`` (one
    JSON event per line appended to ``log_file_path``) or ``http`` (Marquez, DataHub, ... at
    ``url`` + ``endpoint``; the API key read from the environment variable ``api_key_env``)."""

    type: Literal["console", "file", "http"] = "console"
    log_file_path: str | None = None
    url: str | None = None
    endpoint: str = "api/v1/lineage"
    api_key_env: str | None = None
    timeout: float = Field(default=5.0, gt=0)

    @model_validator(mode="after")
    def _needs(self) -> "OpenLineageTransportSettings":
        if self.type == "file" and not self.log_file_path:
            raise ValueError("openlineage.transport type 'file' needs log_file_path")
        if self.type == "http" and not self.url:
            raise ValueError("openlineage.transport type 'http' needs url")
        return self


class OpenLineageSettings(_Strict):
    """OpenLineage run events of every operation Dagster and the CLI run (``enabled: true`` turns
    them on; Airflow's come from its OpenLineage provider).  ``namespace``: the jobs' namespace."""

    enabled: bool = False
    namespace: str = "lance_ops"
    transport: OpenLineageTransportSettings = Field(default_factory=OpenLineageTransportSettings)


class Settings(_Strict):
    spark: SparkSettings = Field(default_factory=SparkSettings)
    datasets: tuple[DatasetSettings, ...]
    openlineage: OpenLineageSettings = Field(default_factory=OpenLineageSettings)
    roots: tuple[RootSettings, ...] = ()
    source_path: str = "<embedded default>"

    def dataset(self, name: str) -> DatasetSettings:
        """The dataset called ``name``; an unknown name raises DatasetConfigError naming the known ones."""
        for d in self.datasets:
            if d.name == name:
                return d
        raise DatasetConfigError(
            name, "dataset", f"no dataset {name!r} in {self.source_path}",
            f"use one of {[d.name for d in self.datasets]} or add it under `datasets:` in lance_ops.yaml",
        )


def _absolute(uri: str, base: Path) -> str:
    """Local relative paths resolve against ``base``; URLs are kept as written."""
    if "://" in uri:
        return uri
    return str((base / uri).resolve()) if not os.path.isabs(uri) else uri


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The settings model an annotation holds (``X`` or ``X | None``), else None."""
    union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
    for candidate in (annotation, *(typing.get_args(annotation) if union else ())):
        if isinstance(candidate, type) and issubclass(candidate, _Strict):
            return candidate
    return None


def check_keys(raw: Mapping[str, Any], model: type[BaseModel], where: str, source_path: str,
               *, allowed: tuple[str, ...] = ()) -> None:
    """Raise :class:`SettingsError` for the first key of ``raw`` that ``model`` does not have,
    naming the closest valid key (``difflib``); nested settings are checked the same way."""
    valid = sorted({*model.model_fields, *allowed} - {"name", "source_path"})
    for key, value in raw.items():
        dotted = f"{where}.{key}" if where else str(key)
        if key not in valid:
            close = difflib.get_close_matches(str(key), valid, n=1, cutoff=0.6)
            hint = f"did you mean `{close[0]}`? " if close else ""
            scope = f"under `{where}`" if where else "at the top level"
            raise SettingsError(f"{source_path}: unknown key `{dotted}`; {hint}valid keys {scope}: {', '.join(valid)}",
                                path=source_path, key=dotted)
        field = model.model_fields.get(key)
        nested = _model_of(field.annotation) if field is not None else None
        if nested is not None and isinstance(value, Mapping):
            check_keys(value, nested, dotted, source_path)


def parse_settings(text: str, *, base_dir: Path | None = None, source_path: str = "<string>") -> Settings:
    """Parse the YAML text of a ``lance_ops.yaml``.

    Relative local paths resolve against ``base_dir`` (default: the current directory).
    A storage option given as ``{env: NAME}`` becomes an entry of ``storage_options_env``.
    """
    raw: Any = yaml.safe_load(text) or {}
    if isinstance(raw, dict):
        check_keys(raw, Settings, "", source_path)
    if not isinstance(raw, dict) or not (isinstance(raw.get("datasets"), dict) and raw["datasets"]
                                         or isinstance(raw.get("roots"), list) and raw["roots"]):
        raise SettingsError(f"{source_path}: expected a mapping with a non-empty 'datasets' mapping or 'roots' list",
                            path=source_path, key="datasets")
    base = (base_dir or Path.cwd()).resolve()
    datasets = []
    for name, body in (raw.get("datasets") or {}).items():
        if not isinstance(body, dict):
            raise SettingsError(f"{source_path}: dataset {name!r} must be a mapping", path=source_path,
                                key=f"datasets.{name}")
        check_keys(body, DatasetSettings, f"datasets.{name}", source_path)
        body = dict(body)
        literal: dict[str, str] = {}
        from_env: dict[str, str] = dict(body.pop("storage_options_env", None) or {})
        for key, value in (body.pop("storage_options", None) or {}).items():
            if isinstance(value, dict) and set(value) == {"env"}:
                from_env[str(key)] = str(value["env"])
            else:
                literal[str(key)] = str(value)
        body["uri"] = _absolute(str(body.get("uri", "")), base) if body.get("uri") else ""
        if not body["uri"]:
            raise SettingsError(f"{source_path}: dataset {name!r} has no uri", path=source_path,
                                key=f"datasets.{name}.uri")
        if body.get("manifest_store") and "://" not in str(body["manifest_store"]):
            body["manifest_store"] = _absolute(str(body["manifest_store"]), base)
        cf = dict(body.get("change_feed") or {"sink_uri": f"{body['uri'].rstrip('/')}_changes"})
        cf["sink_uri"] = _absolute(str(cf["sink_uri"]), base)
        body["change_feed"] = cf
        src = dict(body.get("source") or {})
        if src.get("path"):
            src["path"] = _absolute(str(src["path"]), base)
        body["source"] = src
        datasets.append(DatasetSettings(name=name, storage_options=literal, storage_options_env=from_env, **body))
    return Settings(spark=SparkSettings(**(raw.get("spark") or {})), datasets=tuple(datasets),
                    roots=tuple(_root(body, base, source_path) for body in raw.get("roots") or ()),
                    openlineage=_openlineage(raw.get("openlineage") or {}, base), source_path=source_path)


def _openlineage(body: dict[str, Any], base: Path) -> OpenLineageSettings:
    """The ``openlineage:`` section; a relative ``log_file_path`` resolves against the file's directory."""
    transport = dict(body.get("transport") or {})
    if transport.get("log_file_path"):
        transport["log_file_path"] = _absolute(str(transport["log_file_path"]), base)
    return OpenLineageSettings(**{**body, "transport": transport})


def _split_storage_options(options: dict[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    """Literal options, and ``{env: NAME}`` ones as option -> variable name."""
    literal: dict[str, str] = {}
    from_env: dict[str, str] = {}
    for key, value in (options or {}).items():
        if isinstance(value, dict) and set(value) == {"env"}:
            from_env[str(key)] = str(value["env"])
        else:
            literal[str(key)] = str(value)
    return literal, from_env


def _root(body: Any, base: Path, source_path: str) -> RootSettings:
    """One ``roots:`` entry: a URI string, or a mapping with ``uri`` and optional settings."""
    body = {"uri": body} if isinstance(body, str) else dict(body or {})
    check_keys(body, RootSettings, "roots", source_path)
    if not body.get("uri"):
        raise SettingsError(f"{source_path}: every entry of 'roots' needs a uri", path=source_path, key="roots")
    literal, from_env = _split_storage_options(body.pop("storage_options", None) or {})
    from_env.update(body.pop("storage_options_env", None) or {})
    body["uri"] = _absolute(str(body["uri"]), base)
    return RootSettings(storage_options=literal, storage_options_env=from_env, **body)


def load_settings(path: str | os.PathLike[str] | None = None) -> Settings:
    """Read ``path``, else the file named by ``LANCE_OPS_CONFIG``, else the embedded default."""
    chosen = path if path is not None else os.environ.get(CONFIG_ENV)
    if not chosen:
        return parse_settings(DEFAULT_CONFIG_YAML, source_path="<embedded default>")
    p = Path(chosen)
    return parse_settings(p.read_text(), base_dir=p.parent, source_path=str(p))
