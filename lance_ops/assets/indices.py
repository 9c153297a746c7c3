"""Index coverage in Dagster: asset metadata per version and the ``index_coverage`` asset check.

lance_ops keeps the coverage pylance's indices have through compaction, deletion
materialisation and updates, but it does not train indices: rows appended since an index was
built (or rewritten where pylance itself drops coverage, e.g. zone maps after a compaction) stay
unindexed until pylance's ``optimize_indices`` runs.  The check warns when an index covers less
than ``policy.min_index_coverage`` of the live rows.
"""

from typing import Any

from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetChecksDefinition,
    AssetCheckSeverity,
    AssetKey,
    MetadataValue,
    asset_check,
)

import lance_ops.format as lf
from lance_ops.format import format_fragment_ids

from .resources import LanceDatasetResource
from .settings import DatasetSettings

REMEDY = "run pylance's optimize_indices (ds.optimize.optimize_indices()) to index the missing rows"


def index_rows(ds: lf.LanceDataset) -> list[dict[str, Any]]:
    """One entry per index of ``ds`` (system indices included, as pylance lists them)."""
    return [
        {
            "name": d.name,
            "type": d.index_type,
            "fields": list(d.field_names),
            "indexed_rows": d.num_rows_indexed,
            "unindexed_rows": d.num_rows_unindexed,
            "coverage": round(d.coverage, 6),
            "fragments": format_fragment_ids(d.fragment_ids),
        }
        for d in ds.describe_indices()
    ]


def index_metadata(ds: lf.LanceDataset) -> dict[str, Any]:
    """Asset metadata: every index's coverage of this version (empty when it has none)."""
    rows = index_rows(ds)
    if not rows:
        return {"indices": MetadataValue.int(0)}
    table = "\n".join(
        ["| index | type | fields | indexed rows | unindexed rows | coverage |", "|---|---|---|---|---|---|"]
        + [
            f"| {r['name']} | {r['type']} | {', '.join(r['fields'])} | {r['indexed_rows']} | "
            f"{r['unindexed_rows']} | {r['coverage']:.1%} |"
            for r in rows
        ]
    )
    return {
        "indices": MetadataValue.int(len(rows)),
        "index_coverage": MetadataValue.md(table),
        "min_index_coverage": MetadataValue.float(min(r["coverage"] for r in rows)),
    }


def build_index_checks(d: DatasetSettings, rk: str) -> list[AssetChecksDefinition]:
    """The ``index_coverage`` check of dataset ``d`` (``rk``: its LanceDatasetResource key)."""
    threshold = d.policy.min_index_coverage

    @asset_check(
        asset=AssetKey([d.name]),
        name="index_coverage",
        required_resource_keys={rk},
        description=(
            f"Every index covers at least {threshold:.0%} of the live rows (policy.min_index_coverage). "
            f"lance_ops keeps coverage through maintenance but does not train indices: {REMEDY}."
        ),
    )
    def index_coverage(context: AssetCheckExecutionContext) -> AssetCheckResult:
        res: LanceDatasetResource = getattr(context.resources, rk)
        ds = res.open()
        rows = [r for r in index_rows(ds) if not r["name"].startswith("__")]
        low = [r for r in rows if r["coverage"] < threshold]
        return AssetCheckResult(
            passed=not low,
            severity=AssetCheckSeverity.WARN,
            description=(
                f"{len(low)} of {len(rows)} indices cover less than {threshold:.0%} of the rows: {REMEDY}"
                if low else f"{len(rows)} indices, each covering at least {threshold:.0%} of the rows"
            ),
            metadata={
                "version": ds.version,
                "threshold": threshold,
                "indices": rows,
                "below_threshold": [r["name"] for r in low],
                "remedy": REMEDY,
            },
        )

    return [index_coverage]
