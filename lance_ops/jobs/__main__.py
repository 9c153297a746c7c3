"""``python -m lance_ops.jobs <job> ...``: run one job and print its result as JSON.

Examples::

    python -m lance_ops.jobs append /data/events --source /in/day.parquet --format parquet
    python -m lance_ops.jobs delete /data/events --where "id < 100"
    python -m lance_ops.jobs upsert /data/events --source /in/fix.parquet --format parquet --on id
    python -m lance_ops.jobs compact /data/events --target-rows-per-fragment 500000
    python -m lance_ops.jobs materialize-deletions /data/events --threshold 0.2
    python -m lance_ops.jobs change-feed /data/events --begin 3 --end 7 --sink /cdf --sink-format parquet

Exit status: 0 on success, 1 if a compaction task failed (the others were committed), 2 on
bad arguments.
"""

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any


def _json_dict(raw: str | None) -> dict[str, Any]:
    if not raw:
        return {}
    value = json.loads(raw)
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {raw!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m lance_ops.jobs", description="lance_ops Spark jobs")
    p.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark conf")
    p.add_argument("--storage-options", type=_json_dict, default={}, help="JSON object for the dataset's storage")
    p.add_argument("--branch", default=None, help="run on this branch of the dataset (<uri>/tree/<branch>)")
    sub = p.add_subparsers(dest="job", required=True)

    a = sub.add_parser("append", help="append a source (path + format) to a dataset")
    a.add_argument("uri")
    a.add_argument("--source", required=True)
    a.add_argument("--format", required=True, help="parquet, json, csv, lance, ...")
    a.add_argument("--option", action="append", default=[], metavar="KEY=VALUE", help="source reader option")
    a.add_argument("--max-rows-per-file", type=int, default=1_048_576)
    a.add_argument("--enable-stable-row-ids", action="store_true")
    a.add_argument("--data-storage-version", default=None,
                   help="file format of a dataset this append creates: 2.0, 2.1, 2.2 or stable (default)")

    d = sub.add_parser("delete", help="delete rows matching a Spark SQL predicate")
    d.add_argument("uri")
    d.add_argument("--where", required=True)

    u = sub.add_parser("upsert", help="merge a source into a dataset by key")
    u.add_argument("uri")
    u.add_argument("--source", required=True)
    u.add_argument("--format", required=True)
    u.add_argument("--option", action="append", default=[], metavar="KEY=VALUE")
    u.add_argument("--on", action="append", required=True, help="key column (repeat for several)")

    c = sub.add_parser("compact", help="compact small fragments")
    c.add_argument("uri")
    c.add_argument("--target-rows-per-fragment", type=int)
    c.add_argument("--max-rows-per-group", type=int)
    c.add_argument("--no-materialize-deletions", action="store_true")
    c.add_argument("--materialize-deletions-threshold", type=float)
    c.add_argument("--max-source-fragments", type=int)
    c.add_argument("--dry-run", action="store_true")

    m = sub.add_parser("materialize-deletions", help="rewrite fragments with many deleted rows")
    m.add_argument("uri")
    m.add_argument("--threshold", type=float, default=0.1)
    m.add_argument("--dry-run", action="store_true")

    f = sub.add_parser("change-feed", help="write the change feed of (begin, end] to a sink")
    f.add_argument("uri")
    f.add_argument("--begin", required=True, help="version number or tag")
    f.add_argument("--end", required=True, help="version number or tag")
    f.add_argument("--sink", required=True)
    f.add_argument("--sink-format", choices=["lance", "parquet"], default="lance")
    return p


def _pairs(items: Sequence[str], what: str) -> dict[str, str]:
    out = {}
    for item in items:
        if "=" not in item:
            raise SystemExit(f"{what} must be KEY=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        out[k] = v
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from pyspark.sql import SparkSession

    from . import (
        append,
        compact,
        delete,
        materialize_deletions,
        spark_session,
        upsert,
        write_change_feed,
    )

    # Inside a process that already has a session (tests, notebooks) reuse it and leave it running.
    owned = SparkSession.getActiveSession() is None
    spark = spark_session(args.master, _pairs(args.conf, "--conf"), app_name=f"lance_ops {args.job}")
    so = args.storage_options
    if args.branch is not None:
        from lance_ops.format import resolve_version

        args.uri = resolve_version(args.uri, branch=args.branch, storage_options=so)[0]
    try:
        if args.job == "append":
            result: Any = append(
                spark, args.uri, args.source, format=args.format, options=_pairs(args.option, "--option"),
                max_rows_per_file=args.max_rows_per_file, enable_stable_row_ids=args.enable_stable_row_ids,
                data_storage_version=args.data_storage_version, storage_options=so,
            )
        elif args.job == "delete":
            result = delete(spark, args.uri, args.where, storage_options=so)
        elif args.job == "upsert":
            result = upsert(spark, args.uri, args.source, args.on, format=args.format,
                            options=_pairs(args.option, "--option"), storage_options=so)
        elif args.job == "compact":
            result = compact(
                spark, args.uri, target_rows_per_fragment=args.target_rows_per_fragment,
                max_rows_per_group=args.max_rows_per_group,
                materialize_deletions=False if args.no_materialize_deletions else None,
                materialize_deletions_threshold=args.materialize_deletions_threshold,
                max_source_fragments=args.max_source_fragments, dry_run=args.dry_run, storage_options=so,
            )
        elif args.job == "materialize-deletions":
            result = materialize_deletions(spark, args.uri, args.threshold, dry_run=args.dry_run, storage_options=so)
        else:
            result = write_change_feed(spark, args.uri, args.begin, args.end, args.sink, format=args.sink_format,
                                       storage_options=so)
    finally:
        if owned:
            spark.stop()
    print(json.dumps(result.to_dict(), default=str, indent=2))
    return 1 if getattr(result, "failed_tasks", ()) else 0


if __name__ == "__main__":
    sys.exit(main())
