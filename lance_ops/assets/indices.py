"""Index coverage in Dagster: asset metadata per version and the ``index_coverage`` asset check.

lance_ops keeps the coverage indices have through compaction, deletion materialisation and
updates; rows appended since an index was built (or rewritten where pylance itself drops
coverage, e.g. zone maps after a compaction) stay unindexed until the ``lance_optimize_indices``
job (pylance's ``optimize_indices`` on Spark) indexes them.  ``lance_maintain`` and the compaction
sensor run it when an index covers less than ``policy.min_index_coverage`` of the live rows; the
check warns then.  Every version's metadata holds each index's coverage
(``index_coverage/<name>``, plotted over time).
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
from lance_ops.assets.resources import LanceDatasetResource
from lance_ops.assets.settings import DatasetSettings
from lance_ops.format import format_fragment_ids

REMEDY = "run the lance_optimize_indices job (lance-ops run optimize_indices) to index the missing rows"
#: indices lance_ops does not extend (NGRAM, HNSW, a full-text index with positions, ...)
OTHER_REMEDY = "pylance's ds.optimize.optimize_indices() indexes the rows of {names}"

COVERAGE_KEY = "index_coverage/{name}"


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
        **{COVERAGE_KEY.format(name=r["name"]): MetadataValue.float(float(r["coverage"])) for r in rows},
    }


def remedy(ds: lf.LanceDataset, low: list[str]) -> str:
    """What indexes the rows of the indices ``low``: the job, and pylance for kinds lance_ops does not extend."""
    others = sorted(set(low) - set(lf.optimizable_index_names(ds.manifest)))
    if not others:
        return REMEDY
    text = OTHER_REMEDY.format(names=", ".join(others))
    return text if len(others) == len(low) else f"{REMEDY}; {text}"


def build_index_checks(d: DatasetSettings, rk: str) -> list[AssetChecksDefinition]:
    """The ``index_coverage`` check of dataset ``d`` (``rk``: its LanceDatasetResource key)."""
    threshold = d.policy.min_index_coverage

    @asset_check(
        asset=AssetKey([d.name]),
        name="index_coverage",
        required_resource_keys={rk},
        description=(
            f"Every index covers at least {threshold:.0%} of the live rows (policy.min_index_coverage). "
            f"lance_ops keeps coverage through maintenance and lance_maintain indexes new rows below it; "
            f"otherwise {REMEDY}."
        ),
    )
    def index_coverage(context: AssetCheckExecutionContext) -> AssetCheckResult:
        res: LanceDatasetResource = getattr(context.resources, rk)
        ds = res.open()
        rows = [r for r in index_rows(ds) if not r["name"].startswith("__")]
        low = [r for r in rows if r["coverage"] < threshold]
        fix = remedy(ds, [r["name"] for r in low]) if low else REMEDY
        return AssetCheckResult(
            passed=not low,
            severity=AssetCheckSeverity.WARN,
            description=(
                f"{len(low)} of {len(rows)} indices cover less than {threshold:.0%} of the rows: {fix}"
                if low else f"{len(rows)} indices, each covering at least {threshold:.0%} of the rows"
            ),
            metadata={
                "version": ds.version,
                "threshold": threshold,
                "indices": rows,
                "below_threshold": [r["name"] for r in low],
                "remedy": fix,
            },
        )

    return [index_coverage]
