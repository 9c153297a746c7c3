"""The change feed asset: one dynamic partition per Lance version.

Partition ``v`` holds the changes in ``(v-1, v]``, written by ``jobs.write_change_feed``,
which replaces that range in the sink (re-materialising a partition is idempotent).  The
``lance_new_versions`` sensor adds a partition per new version; the asset's automation
condition then materialises the new partitions (the automation sensor, with the daemon), so
nobody has to backfill by hand.  A range of partitions runs as one run
(``BackfillPolicy.single_run()``) and one Spark application, and each partition gets its own
materialisation with its own counts.  Versions made by maintenance only (compaction, deletion
materialisation) have empty partitions.

Only datasets with stable row ids have this asset (``datasets.change_feed_plan``).
"""

from typing import Any

from dagster import (
    AssetExecutionContext,
    AssetsDefinition,
    AutomationCondition,
    BackfillPolicy,
    DynamicPartitionsDefinition,
    MaterializeResult,
    MetadataValue,
    asset,
)

from lance_ops import jobs as lance_jobs
from lance_ops.assets.datasets import GROUP
from lance_ops.assets.errors import DatasetConfigError
from lance_ops.assets.metadata import ROW_COUNT_KEY, URI_KEY
from lance_ops.assets.operations import run_spark
from lance_ops.assets.resources import LanceDatasetResource
from lance_ops.assets.settings import DatasetSettings

CHANGE_TYPES = ("insert", "update_preimage", "update_postimage", "delete")

#: Materialise a version partition once, when it appears (not the ones present when the condition
#: was first evaluated: backfill those); never while a run of it is in progress.
NEW_VERSION_PARTITIONS = (
    AutomationCondition.missing().newly_true().since_last_handled() & ~AutomationCondition.in_progress()
).with_label("new version partitions")


def partitions_def_name(name: str) -> str:
    return f"{name}_versions"


def change_feed_asset_name(name: str) -> str:
    return f"{name}_change_feed"


def partition_path(d: DatasetSettings, version: int | str) -> str:
    """Where partition ``version`` lives: its own directory (parquet) or the sink dataset (lance)."""
    v = int(version)
    if d.change_feed.format == "parquet":
        return lance_jobs.range_location(d.change_feed.sink_uri, v - 1, v)
    return d.change_feed.sink_uri


def partition_change_counts(d: DatasetSettings, version: int | str,
                            storage_options: dict[str, str]) -> dict[str, int] | None:
    """Rows per ``_change_type`` in the sink for one version; None when it was never written.

    Reads only the ``_change_type`` column: parquet footers and pages through pyarrow over
    fsspec (local or ``gs://``), or the lance sink filtered on ``_commit_version``.
    """
    import fsspec
    import pyarrow.compute as pc
    import pyarrow.dataset as pads
    from pyarrow.fs import FSSpecHandler, PyFileSystem

    import lance_ops.format as lf

    v = int(version)
    path = partition_path(d, v)
    opts = storage_options if "://" in path else {}
    if d.change_feed.format == "lance":
        try:
            sink = lf.dataset(path, storage_options=opts)
        except lf.DatasetNotFoundError:
            return None
        col = sink.to_table(columns=["_change_type"], filter=pc.field("_commit_version") == v)["_change_type"]
    else:
        fs, root = fsspec.core.url_to_fs(path, **opts)
        if not fs.exists(root):
            return None
        files = [f for f in fs.find(root) if f.endswith(".parquet")]
        if not files:
            return {}
        table = pads.dataset(files, format="parquet", filesystem=PyFileSystem(FSSpecHandler(fs))).to_table(
            columns=["_change_type"]
        )
        col = table["_change_type"]
    return {str(r["values"]): int(r["counts"]) for r in pc.value_counts(col).to_pylist()}


def partition_metadata(d: DatasetSettings, version: int, counts: dict[str, int]) -> dict[str, Any]:
    """Per-partition metadata: the sink location, the row count and one count per change type (always all four)."""
    return {
        URI_KEY: MetadataValue.text(partition_path(d, version)),
        ROW_COUNT_KEY: MetadataValue.int(sum(counts.values())),
        "lance/version": MetadataValue.int(version),
        **{kind: MetadataValue.int(counts.get(kind, 0)) for kind in CHANGE_TYPES},
    }


def build_change_feed_asset(d: DatasetSettings, versions: DynamicPartitionsDefinition, rk: str) -> AssetsDefinition:
    @asset(
        name=change_feed_asset_name(d.name),
        deps=[d.name],
        partitions_def=versions,
        backfill_policy=BackfillPolicy.single_run(),
        automation_condition=NEW_VERSION_PARTITIONS,
        required_resource_keys={rk, "spark"},
        group_name=GROUP,
        kinds={"spark", "lance", d.change_feed.format},
        description=f"Changes of {d.name} per Lance version (Delta CDF columns: _change_type, _commit_version, "
                    f"_commit_timestamp), in `{d.change_feed.sink_uri}` ({d.change_feed.format}). New versions are "
                    "materialised automatically (automation condition); a range runs as one run.",
        metadata={URI_KEY: MetadataValue.text(d.change_feed.sink_uri)},
    )
    def change_feed(context: AssetExecutionContext) -> MaterializeResult:
        res: LanceDatasetResource = getattr(context.resources, rk)
        spark = context.resources.spark
        keys = sorted(context.partition_keys, key=int)
        bad = [k for k in keys if int(k) < 1]
        if bad:
            raise DatasetConfigError(d.name, "partition", f"partitions {bad} are not Lance versions (they start at 1)",
                                     "materialise partitions 1 and up")
        if res.exists() and not res.open().has_stable_row_ids:
            raise DatasetConfigError(
                d.name, "change_feed", f"{res.uri} has no stable row ids, so it has no change feed",
                "recreate the dataset with enable_stable_row_ids=True, or set change_feed.enabled: false",
            )
        so = res.resolved_storage_options()
        params = {"ranges": [[int(k) - 1, int(k)] for k in keys], "sink_uri": d.change_feed.sink_uri,
                  "format": d.change_feed.format}
        result = run_spark(context, d, res, spark, "write_change_feed", params)
        written = {int(r["end_version"]): int(r["rows_written"]) for r in result["ranges"]}
        for key in keys:
            v = int(key)
            by_type = partition_change_counts(d, v, so) or {}
            if sum(by_type.values()) != written[v]:
                raise RuntimeError(f"{d.name} v{v}: the sink holds {sum(by_type.values())} changes, "
                                   f"the job wrote {written[v]}")
            context.log.info(f"{d.name} v{v}: {sum(by_type.values())} changes {by_type}")
            # partition-scoped: a range run gives each partition its own counts, not the run's totals
            context.add_asset_metadata(partition_metadata(d, v, by_type), partition_key=key)
        return MaterializeResult()

    return change_feed
