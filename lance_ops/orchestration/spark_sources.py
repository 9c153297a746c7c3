"""The source of an append or upsert on Spark: generated rows or a Spark-readable path, checked
against the dataset's schema before any data file is written."""

from typing import TYPE_CHECKING, Any

from lance_ops.format.errors import DatasetNotFoundError, SchemaError

if TYPE_CHECKING:
    from lance_ops.orchestration.tasks import Task


def _latest_manifest(task: "Task") -> Any:
    try:
        return task.table.open().manifest
    except (DatasetNotFoundError, FileNotFoundError):
        return None


def source_frame(spark: Any, task: "Task") -> tuple[Any, str | None, dict[str, str]]:
    """``(source, format, options)`` of an append or upsert.

    ``format: generate`` makes a DataFrame of ``id``, ``kind``, ``amount`` whose ids start at
    the dataset's next row id unless ``start_id`` is given (appends never repeat an id); any
    other format is a path read by Spark.
    """
    p = task.params
    fmt = p.format or "generate"
    if fmt == "generate":
        start = p.start_id
        if start is None:
            m = _latest_manifest(task)
            start = m.next_row_id if m is not None else 0
        tag = getattr(p, "tag", None)
        kind = f"'{tag}'" if tag else "element_at(array('click', 'view', 'buy'), cast(id % 3 AS int) + 1)"
        df = spark.range(int(start), int(start) + int(p.rows or 0), numPartitions=2).selectExpr(
            "id", f"{kind} AS kind", "cast(id % 97 AS double) * 1.25 AS amount"
        )
        return df, None, {}
    if not p.path:
        raise SchemaError(f"{task.table.uri}: source format {fmt!r} needs a path")
    return p.path, fmt, dict(p.options or {})


def check_source_schema(spark: Any, task: "Task", source: Any, fmt: str | None, options: dict[str, str]) -> None:
    """Raise SchemaError when the source's columns or types differ from the dataset's.

    Reads only the source's schema (Spark infers it from file footers), before any data file
    is written, so a wrong source never reaches a commit.
    """
    m = _latest_manifest(task)
    if m is None:
        return
    from pyspark.sql import DataFrame

    from lance_ops.jobs import spark_schema

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
            f"{task.table.uri}: the source {source if isinstance(source, str) else 'DataFrame'} does not match "
            f"version {m.version} ({'; '.join(parts)}); the dataset's columns are "
            f"{[f'{n} {t.simpleString()}' for n, t in want.items()]}"
        )
