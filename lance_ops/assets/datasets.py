"""The dataset assets: one materialisable asset per Lance dataset in lance_ops.yaml.

Materialising ``<name>`` runs one operation on it (``operations.py``); the jobs
``lance_<operation>`` select the dataset assets, so the asset page lists the jobs, sensors and
schedules that maintain it.  Each asset's op is in the pool ``lance-<name>``, whose limit is the
policy's ``max_concurrent_writes``.
"""

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from dagster import AssetExecutionContext, AssetsDefinition, MetadataValue, asset

import lance_ops.format as lf
from lance_ops.assets.configs import Operation, dataset_config_class
from lance_ops.assets.metadata import TABLE_NAME_KEY, URI_KEY
from lance_ops.assets.operations import job_name, pool_name, resource_key, run_dataset_operation
from lance_ops.assets.settings import DatasetSettings
from lance_ops.format.errors import DatasetNotFoundError, LanceOpsError

GROUP = "lance"


@dataclass(frozen=True)
class ChangeFeedPlan:
    """Whether the dataset gets a change feed asset, and why not."""

    enabled: bool
    reason: str = ""


def change_feed_plan(d: DatasetSettings, storage_options: dict[str, str] | None) -> ChangeFeedPlan:
    """A change feed asset unless disabled in the settings or the dataset exists without stable row ids.

    Reads the latest manifest (one listing and one small file) when the options can be resolved;
    a dataset that does not exist yet will be created by ``lance_append`` with stable row ids.
    """
    if d.change_feed.enabled is False:
        return ChangeFeedPlan(False, "change_feed.enabled is false in lance_ops.yaml")
    if storage_options is None:
        return ChangeFeedPlan(True)
    try:
        ds = lf.dataset(d.uri, storage_options=storage_options, manifest_store=d.manifest_store)
    except (DatasetNotFoundError, FileNotFoundError):
        return ChangeFeedPlan(True)
    except (LanceOpsError, OSError, ValueError):
        return ChangeFeedPlan(True)  # unreachable now: decided again when a run reads it
    if not ds.has_stable_row_ids:
        return ChangeFeedPlan(False, f"{d.uri} was created without stable row ids (version {ds.version}); "
                                     "the change feed needs them (pylance: enable_stable_row_ids=True)")
    return ChangeFeedPlan(True)


def dataset_description(d: DatasetSettings, cf: ChangeFeedPlan) -> str:
    p = d.policy
    lines = [d.description or f"Lance dataset at `{d.uri}`.", ""]
    lines.append(
        "Maintained by lance_ops: each materialisation is a Lance version (data version = version number). "
        f"Jobs: {', '.join(f'`{job_name(o)}`' for o in Operation)} (select this asset)."
    )
    lines.append(
        f"Policy: compact to {p.target_rows_per_fragment:,} rows per fragment when {p.min_small_fragments} fragments "
        f"are smaller or {p.max_versions_since_compaction} versions passed since the last compaction; materialise "
        f"deletions at a deleted ratio of {p.deleted_ratio_threshold}; compaction `{p.compaction_cron}`, cleanup "
        f"`{p.cleanup_cron}` ({p.timezone}); at most {p.max_concurrent_writes} writing run(s) at a time "
        f"(pool `{pool_name(d.name)}`)."
    )
    if cf.enabled:
        lines.append(f"Change feed: `{d.name}_change_feed` (one partition per version, in `{d.change_feed.sink_uri}`).")
    else:
        lines.append(f"**No change feed**: {cf.reason}.")
    return "\n\n".join(lines)


def build_dataset_asset(d: DatasetSettings, cf: ChangeFeedPlan) -> AssetsDefinition:
    """The asset ``d.name``: its config is ``dataset_config_class(d)`` (the policy as defaults)."""
    rk = resource_key(d.name)
    config_cls = dataset_config_class(d)

    def body(context: AssetExecutionContext, config: Any) -> Iterator[Any]:
        yield from run_dataset_operation(context, d, getattr(context.resources, rk), context.resources.spark, config)

    # Dagster reads the config class from the annotation of ``config``.
    body.__annotations__["config"] = config_cls
    return asset(
        name=d.name,
        group_name=GROUP,
        kinds={"lance", "spark"},
        pool=pool_name(d.name),
        output_required=False,
        required_resource_keys={rk, "spark"},
        description=dataset_description(d, cf),
        metadata={
            URI_KEY: MetadataValue.text(d.uri),
            TABLE_NAME_KEY: MetadataValue.text(d.name),
            "lance_ops/policy": MetadataValue.json(json.loads(d.policy.model_dump_json())),
            "lance_ops/change_feed": MetadataValue.text(
                f"{d.name}_change_feed ({d.change_feed.format} sink {d.change_feed.sink_uri})" if cf.enabled
                else f"none: {cf.reason}"),
        },
    )(body)
