"""The change feed asset: one dynamic partition per Lance version.

Partition ``v`` holds the changes in ``(v-1, v]``, written by ``jobs.write_change_feed``,
which replaces that range in the sink (so re-materialising a partition is idempotent).  A backfill over a
version range runs as one run (``BackfillPolicy.single_run()``) and one Spark session.
Versions made by maintenance only (compaction, deletion materialisation) have empty partitions.
"""

from collections.abc import Iterator
from typing import Any

from dagster import (
    AssetExecutionContext,
    AssetObservation,
    AssetsDefinition,
    BackfillPolicy,
    DynamicPartitionsDefinition,
    MaterializeResult,
    asset,
)

from lance_ops import jobs as lance_jobs

from .ops import resource_key
from .resources import LanceDatasetResource
from .settings import DatasetSettings


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


def build_change_feed_asset(d: DatasetSettings, versions: DynamicPartitionsDefinition) -> AssetsDefinition:
    rk = resource_key(d.name)

    @asset(
        name=change_feed_asset_name(d.name),
        deps=[d.name],
        partitions_def=versions,
        backfill_policy=BackfillPolicy.single_run(),
        required_resource_keys={rk, "spark"},
        group_name="lance",
        kinds={"spark", "lance"},
        description=f"Changes of {d.name} per version (Delta CDF columns), in {d.change_feed.sink_uri}.",
    )
    def change_feed(context: AssetExecutionContext) -> Iterator[Any]:
        res: LanceDatasetResource = getattr(context.resources, rk)
        spark = context.resources.spark.get_session()
        keys = sorted(context.partition_keys, key=int)
        counts: dict[str, dict[str, int]] = {}
        for key in keys:
            v = int(key)
            if v < 1:
                raise ValueError(f"{d.name}: partition {key!r} is not a Lance version")
            so = res.resolved_storage_options()
            result = lance_jobs.write_change_feed(
                spark, res.uri, v - 1, v, d.change_feed.sink_uri, format=d.change_feed.format,
                storage_options=so, sink_storage_options=so,
            )
            by_type = partition_change_counts(d, v, so) or {}
            if sum(by_type.values()) != result.rows_written:
                raise RuntimeError(f"{d.name} v{v}: the sink holds {sum(by_type.values())} changes, "
                                   f"the job wrote {result.rows_written}")
            counts[key] = by_type
            yield AssetObservation(
                asset_key=context.asset_key, partition=key,
                metadata={"version": v, "rows": sum(by_type.values()), **by_type, "path": partition_path(d, v)},
            )
            context.log.info(f"{d.name} v{v}: {sum(by_type.values())} changes {by_type}")
        yield MaterializeResult(
            metadata={
                "versions": f"{keys[0]}..{keys[-1]}" if keys else "",
                "partitions": len(keys),
                "changes": sum(sum(c.values()) for c in counts.values()),
                "changes_by_version": counts,
                "sink_uri": d.change_feed.sink_uri,
            }
        )

    return change_feed
