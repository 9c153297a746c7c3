"""A dataset operation as data, run on a SparkSession: what the orchestrators hand to Spark.

A *task* is a JSON-able dict (operation, dataset uri, storage options, parameters, the
transaction properties that stamp the commit with the orchestrator's run).  ``run_task`` runs it
on a SparkSession through ``lance_ops.jobs`` and returns the job's result as a dict.  Dagster's
``SparkResource`` and Airflow's operators call it in process; a spark-submit driver calls it on
the cluster (``lance_ops/assets/spark_pipes_main.py``, ``python -m lance_ops.jobs task``), so it
imports only ``lance_ops.jobs`` and ``lance_ops.format``.
"""

import os
from collections.abc import Mapping
from typing import Any

import lance_ops.format as lf
from lance_ops import jobs as lance_jobs
from lance_ops.format.errors import DatasetNotFoundError, SchemaError

SPARK_OPERATIONS = ("append", "delete", "upsert", "compact", "materialize_deletions", "optimize_indices",
                    "write_change_feed")


def resolve_storage_options(task: Mapping[str, Any]) -> dict[str, str]:
    """Literal options plus the ones read from environment variables (secrets never travel in the task)."""
    opts = {str(k): str(v) for k, v in (task.get("storage_options") or {}).items()}
    for key, var in (task.get("storage_options_env") or {}).items():
        value = os.environ.get(var)
        if value is None:
            raise RuntimeError(f"{task['uri']}: storage option {key!r} comes from ${var}, which is not set")
        opts[key] = value
    return opts


def _latest_manifest(uri: str, so: Mapping[str, str], manifest_store: str | None = None) -> Any:
    try:
        return lf.dataset(uri, storage_options=so, manifest_store=manifest_store).manifest
    except (DatasetNotFoundError, FileNotFoundError):
        return None


def source_frame(spark: Any, task: Mapping[str, Any], so: Mapping[str, str]) -> tuple[Any, str | None, dict[str, str]]:
    """``(source, format, options)`` of an append or upsert.

    ``format: generate`` makes a DataFrame of ``id``, ``kind``, ``amount`` whose ids start at
    the dataset's next row id unless ``start_id`` is given (appends never repeat an id); any
    other format is a path read by Spark.
    """
    p = task["params"]
    fmt = p.get("format") or "generate"
    if fmt == "generate":
        rows = int(p.get("rows") or 0)
        start = p.get("start_id")
        if start is None:
            m = _latest_manifest(task["uri"], so, task.get("manifest_store"))
            start = m.next_row_id if m is not None else 0
        tag = p.get("tag")
        kind = f"'{tag}'" if tag else "element_at(array('click', 'view', 'buy'), cast(id % 3 AS int) + 1)"
        df = spark.range(int(start), int(start) + rows, numPartitions=2).selectExpr(
            "id", f"{kind} AS kind", "cast(id % 97 AS double) * 1.25 AS amount"
        )
        return df, None, {}
    path = p.get("path")
    if not path:
        raise SchemaError(f"{task['uri']}: source format {fmt!r} needs a path")
    return path, fmt, dict(p.get("options") or {})


def check_source_schema(spark: Any, task: Mapping[str, Any], source: Any, fmt: str | None,
                        options: Mapping[str, str], so: Mapping[str, str]) -> None:
    """Raise SchemaError when the source's columns or types differ from the dataset's.

    Reads only the source's schema (Spark infers it from file footers), before any data file
    is written, so a wrong source never reaches a commit.
    """
    m = _latest_manifest(task["uri"], so, task.get("manifest_store"))
    if m is None:
        return
    from pyspark.sql import DataFrame

    from lance_ops.jobs._types import spark_schema

    df = source if isinstance(source, DataFrame) else spark.read.format(fmt).options(**options).load(source)
    want = {f.name: f.dataType for f in spark_schema(m.schema.to_arrow()).fields}
    got = {f.name: f.dataType for f in df.schema.fields}
    missing, extra = sorted(set(want) - set(got)), sorted(set(got) - set(want))
    wrong = sorted(f"{n} ({got[n].simpleString()}, dataset has {want[n].simpleString()})"
                   for n in set(want) & set(got) if got[n] != want[n])
    if missing or extra or wrong:
        parts = []
        if missing:
            parts.append(f"missing columns {missing}")
        if extra:
            parts.append(f"columns not in the dataset {extra}")
        if wrong:
            parts.append(f"columns of another type {wrong}")
        raise SchemaError(
            f"{task['uri']}: the source {source if isinstance(source, str) else 'DataFrame'} does not match "
            f"version {m.version} ({'; '.join(parts)}); the dataset's columns are "
            f"{[f'{n} {t.simpleString()}' for n, t in want.items()]}"
        )


def run_task(spark: Any, task: Mapping[str, Any]) -> dict[str, Any]:
    """Run one Spark operation of ``task`` and return the job's result (``to_dict()``) plus ``operation``."""
    op = task["operation"]
    uri = task["uri"]
    p = dict(task.get("params") or {})
    so = resolve_storage_options(task)
    props = dict(task.get("transaction_properties") or {})
    ms = task.get("manifest_store")  # every job opens and commits through the dataset's store
    if op == "append":
        source, fmt, options = source_frame(spark, task, so)
        check_source_schema(spark, task, source, fmt, options, so)
        result: Any = lance_jobs.append(
            spark, uri, source, format=fmt, options=options, max_rows_per_file=int(p["max_rows_per_file"]),
            enable_stable_row_ids=True, storage_options=so, transaction_properties=props, manifest_store=ms,
        )
    elif op == "upsert":
        source, fmt, options = source_frame(spark, task, so)
        check_source_schema(spark, task, source, fmt, options, so)
        result = lance_jobs.upsert(
            spark, uri, source, list(p["on"]), format=fmt, options=options,
            max_rows_per_file=int(p["max_rows_per_file"]), storage_options=so, transaction_properties=props, manifest_store=ms,
        )
    elif op == "delete":
        result = lance_jobs.delete(spark, uri, str(p["where"]), storage_options=so, transaction_properties=props,
                                  manifest_store=ms)
    elif op == "compact":
        result = lance_jobs.compact(
            spark, uri, target_rows_per_fragment=int(p["target_rows_per_fragment"]),
            max_rows_per_group=int(p["max_rows_per_group"]), materialize_deletions=bool(p["materialize_deletions"]),
            materialize_deletions_threshold=float(p["materialize_deletions_threshold"]),
            max_source_fragments=p.get("max_source_fragments"), dry_run=bool(p.get("dry_run")),
            storage_options=so, transaction_properties=props, manifest_store=ms,
        )
    elif op == "materialize_deletions":
        result = lance_jobs.materialize_deletions(
            spark, uri, float(p["threshold"]), dry_run=bool(p.get("dry_run")), storage_options=so,
            transaction_properties=props, manifest_store=ms,
        )
    elif op == "optimize_indices":
        result = lance_jobs.optimize_indices(
            spark, uri, num_indices_to_merge=int(p["num_indices_to_merge"]), index_names=p.get("index_names") or None,
            rows_per_task=p.get("rows_per_task"), storage_options=so, transaction_properties=props, manifest_store=ms,
        )
    elif op == "write_change_feed":
        # ``ranges``: several (begin, end] ranges in one application (a change feed backfill run)
        ranges = p.get("ranges") or [[p["begin_version"], p["end_version"]]]
        parts = [
            lance_jobs.write_change_feed(spark, uri, int(b), int(e), str(p["sink_uri"]), format=p["format"],
                                         storage_options=so, sink_storage_options=so,
                                         manifest_store=ms).to_dict()
            for b, e in ranges
        ]
        return {"operation": op, "ranges": parts, "rows_written": sum(int(r["rows_written"]) for r in parts),
                "version": None}
    else:
        raise ValueError(f"not a Spark operation: {op!r} (one of {SPARK_OPERATIONS})")
    out = {k: (list(v) if isinstance(v, tuple) else v) for k, v in result.to_dict().items()}
    out["operation"] = op
    return out
