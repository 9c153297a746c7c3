"""Launchpad config of the dataset operations; option names and defaults as ``lance_ops.jobs``.

Each dataset asset has its own config class (``dataset_config_class``): one group per operation
(``append``, ``delete``, ``upsert``, ``compact``, ``materialize_deletions``,
``optimize_indices``, ``cleanup_old_versions``, ``remove_orphan_files``, ``restore``) whose defaults are that dataset's source and policy, so the launchpad
of ``lance_compact`` pre-fills the dataset's ``target_rows_per_fragment`` and friends.  The job
picks the operation (run tag ``lance_ops/operation``); only its group is read.

Every group is derived from the operation registry's parameter class
(:mod:`lance_ops.orchestration.operations`): same fields, help texts, bounds and defaults.
``lance-ops run JOB`` builds its command-line options from the base classes here too.
"""

import dataclasses
import types
import typing
from collections.abc import Mapping
from enum import Enum
from typing import Any

from dagster import Config
from pydantic import Field, create_model

from lance_ops.orchestration import OPERATIONS
from lance_ops.orchestration.operations import policy_defaults
from lance_ops.orchestration.settings import DatasetSettings

#: What a run does to a dataset (the job ``lance_<operation>`` picks it): the registry's operations
#: with a launchpad group, and ``maintain`` (what the policy asks for now).
Operation = Enum("Operation", [(n, n) for n in OPERATIONS if n != "write_change_feed"])  # type: ignore[misc]


class SinkFormat(Enum):
    """Change feed sink formats of ``jobs.write_change_feed``."""

    lance = "lance"
    parquet = "parquet"


def _dagster_type(annotation: Any) -> Any:
    """A parameter annotation as Dagster config takes it (tuples as lists, mappings as dicts)."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        inner = [_dagster_type(a) for a in args]
        out = inner[0]
        for a in inner[1:]:
            out = out | a
        return out
    if origin is tuple:
        return list[args[0]]  # type: ignore[valid-type]
    if origin is Mapping or origin is dict:
        return dict[str, str]
    return annotation


def _bounds(meta: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in (meta.get("bounds") or {}).items() if v is not None}


def _field_default(f: dataclasses.Field) -> Any:
    if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return f.default_factory()  # type: ignore[misc]
    return list(f.default) if isinstance(f.default, tuple) else f.default


def config_class(params: type, name: str, defaults: Mapping[str, Any] | None = None,
                 optional: tuple[str, ...] = ()) -> type[Config]:
    """The launchpad Config of a registry parameter class: same fields, help texts and bounds;
    ``defaults`` (a dataset's policy) replace the class's; ``optional`` fields may be left unset."""
    fields: dict[str, Any] = {}
    for f in dataclasses.fields(params):
        ann = _dagster_type(f.type)
        default = (defaults or {}).get(f.name, _field_default(f))
        if isinstance(default, tuple):
            default = list(default)
        if f.name in optional:
            ann, default = ann | None, None
        kw: dict[str, Any] = {"description": f.metadata.get("help") or None, **_bounds(f.metadata)}
        if isinstance(default, dict):
            kw["default_factory"] = lambda v=default: dict(v)
        elif not f.metadata.get("required") or f.name in optional:
            kw["default"] = default
        fields[f.name] = (ann, Field(**kw))
    return create_model(name, __base__=Config, __doc__=params.__doc__, **fields)


#: operation -> its base config group (each dataset gets one with its defaults: ``dataset_config_class``)
OPERATION_CONFIGS: dict[Any, type[Config]] = {
    op: config_class(OPERATIONS[op.value].params, OPERATIONS[op.value].params.__name__.replace("Params", "Config"))
    for op in Operation if op.value != "maintain"
}
AppendConfig = OPERATION_CONFIGS[Operation.append]
DeleteConfig = OPERATION_CONFIGS[Operation.delete]
UpsertConfig = OPERATION_CONFIGS[Operation.upsert]
CompactConfig = OPERATION_CONFIGS[Operation.compact]
MaterializeDeletionsConfig = OPERATION_CONFIGS[Operation.materialize_deletions]
OptimizeIndicesConfig = OPERATION_CONFIGS[Operation.optimize_indices]
CleanupConfig = OPERATION_CONFIGS[Operation.cleanup_old_versions]
RemoveOrphanFilesConfig = OPERATION_CONFIGS[Operation.remove_orphan_files]
RestoreConfig = OPERATION_CONFIGS[Operation.restore]
_OptionalDelete = config_class(OPERATIONS["delete"].params, "OptionalDeleteConfig", optional=("where",))


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


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


def dataset_config_class(d: DatasetSettings) -> type[Config]:
    """The launchpad config of the dataset asset ``d.name``: one group per operation, defaults from
    ``d``'s source and policy (what the sensors and schedules use), and an optional ``operation``."""
    groups: dict[str, type[Config]] = {}
    for op, base in OPERATION_CONFIGS.items():
        spec = OPERATIONS[op.value]
        optional = ("where",) if op.value == "delete" else ()
        cls = config_class(spec.params, f"{_camel(d.name)}{base.__name__}", policy_defaults(op.value, d), optional)
        groups[op.value] = cls
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
