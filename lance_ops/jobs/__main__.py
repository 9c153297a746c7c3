"""``python -m lance_ops.jobs <job> ...`` or ``spark-submit .../lance_ops/jobs/__main__.py <job> ...``:
run one job and print its result as JSON.

Examples::

    python -m lance_ops.jobs append /data/events --source /in/day.parquet --format parquet
    python -m lance_ops.jobs delete /data/events --where "id < 100"
    python -m lance_ops.jobs upsert /data/events --source /in/fix.parquet --format parquet --on id
    python -m lance_ops.jobs compact /data/events --target-rows-per-fragment 500000
    python -m lance_ops.jobs materialize-deletions /data/events --threshold 0.2
    python -m lance_ops.jobs optimize-indices /data/events --num-indices-to-merge 0
    python -m lance_ops.jobs create-scalar-index /data/events --column id --index-type BTREE
    python -m lance_ops.jobs change-feed /data/events --begin 3 --end 7 --sink /cdf --sink-format parquet

On a cluster (lance_ops installed on every node)::

    spark-submit --master spark://host:7077 --conf spark.executor.memory=2g \\
        $(python -c 'import lance_ops.jobs.__main__ as m; print(m.__file__)') compact /data/events

spark-submit's ``--master`` and ``--conf`` are honoured (the job never overrides them).  Without
lance_ops on the nodes, ``python -m lance_ops.jobs package DIR`` writes ``DIR/lance_ops.zip`` and
``DIR/lance_ops_submit.py`` for ``spark-submit --py-files DIR/lance_ops.zip DIR/lance_ops_submit.py``
(the nodes still need lance_ops' dependencies: pyarrow, numpy, protobuf, pyroaring, fsspec, gcsfs).

``optimize_indices`` and ``create_scalar_index`` (pylance's spelling) are accepted too.

Exit status: 0 on success, 1 if a compaction or index task failed (the others were committed), 2 on
bad arguments (also a URI, an option or data lance_ops refuses: the message names it; nothing
was written).
"""

import os
import sys

if __package__ in (None, ""):
    # Run as a script (spark-submit .../lance_ops/jobs/__main__.py): its directory is sys.path[0],
    # where modules named like ours (source, session, ...) would shadow others.  lance_ops itself
    # must come from an installation or from --py-files.
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]

import argparse  # noqa: E402
import json  # noqa: E402
import zipfile  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from typing import Any  # noqa: E402

SUBMIT_SCRIPT = '''"""spark-submit entry point of lance_ops (written by `python -m lance_ops.jobs package`)."""
import sys

from lance_ops.jobs.__main__ import main

sys.exit(main())
'''


def _json_dict(raw: str | None) -> dict[str, Any]:
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {raw!r}: {e}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {raw!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    from lance_ops.format import (
        COMMIT_DEFAULTS,
        COMPACTION_DEFAULTS,
        DEFAULT_MAX_ROWS_PER_FILE,
        OPTIMIZE_INDICES_DEFAULTS,
    )

    p = argparse.ArgumentParser(prog="python -m lance_ops.jobs", description="lance_ops Spark jobs")
    p.add_argument("--master", default=None,
                   help="Spark master (default: spark-submit's --master, else local[*])")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark conf")
    p.add_argument("--storage-options", type=_json_dict, default={}, help="JSON object for the dataset's storage")
    p.add_argument("--branch", default=None, help="run on this branch of the dataset (<uri>/tree/<branch>)")
    p.add_argument("--manifest-store", default=COMMIT_DEFAULTS.manifest_store, metavar="PATH",
                   help="external manifest store the dataset commits through (SQLite path or sqlite:/// URL)")
    p.add_argument("--max-retries", type=int, default=COMMIT_DEFAULTS.max_retries,
                   help="lost commit races retried before giving up")
    p.add_argument("--transaction-properties", type=_json_dict, default={},
                   help="JSON object stored in the commit's transaction properties")
    sub = p.add_subparsers(dest="job", required=True)

    a = sub.add_parser("append", help="append a source (path + format) to a dataset")
    a.add_argument("uri")
    a.add_argument("--source", required=True)
    a.add_argument("--format", required=True, help="parquet, json, csv, lance, ...")
    a.add_argument("--option", action="append", default=[], metavar="KEY=VALUE", help="source reader option")
    a.add_argument("--max-rows-per-file", type=int, default=DEFAULT_MAX_ROWS_PER_FILE)
    a.add_argument("--enable-stable-row-ids", action="store_true")
    a.add_argument("--data-storage-version", default=None,
                   help="file format of a dataset this append creates: 2.0, 2.1, 2.2 or stable (default)")

    d = sub.add_parser("delete", help="delete rows matching a SQL predicate (pylance's dialect)")
    d.add_argument("uri")
    d.add_argument("--where", required=True)

    u = sub.add_parser("upsert", help="merge a source into a dataset by key")
    u.add_argument("uri")
    u.add_argument("--source", required=True)
    u.add_argument("--format", required=True)
    u.add_argument("--option", action="append", default=[], metavar="KEY=VALUE")
    u.add_argument("--on", action="append", required=True, help="key column (repeat for several)")
    u.add_argument("--max-rows-per-file", type=int, default=DEFAULT_MAX_ROWS_PER_FILE)

    c = sub.add_parser("compact", help="compact small fragments")
    c.add_argument("uri")
    c.add_argument("--target-rows-per-fragment", type=int)
    c.add_argument("--max-rows-per-group", type=int)
    c.add_argument("--no-materialize-deletions", action="store_true")
    c.add_argument("--materialize-deletions-threshold", type=float)
    c.add_argument("--max-source-fragments", type=int)
    c.add_argument("--data-storage-version", help="file version of the rewritten fragments (2.0, 2.1, 2.2, stable)")
    c.add_argument("--cluster-by", action="append", help="cluster the rewritten rows by this column (repeat)")
    c.add_argument("--strategy", choices=("sort", "zorder"), help="clustering order (default sort)")
    c.add_argument("--read-version", type=int, help="plan against this version (default: the latest)")
    c.add_argument("--dry-run", action="store_true")

    m = sub.add_parser("materialize-deletions", help="rewrite fragments with many deleted rows")
    m.add_argument("uri")
    m.add_argument("--threshold", type=float, default=COMPACTION_DEFAULTS.materialize_deletions_threshold)
    m.add_argument("--read-version", type=int, help="plan against this version (default: the latest)")
    m.add_argument("--dry-run", action="store_true")

    o = sub.add_parser("optimize-indices", aliases=["optimize_indices"],
                       help="index the fragments no segment covers (pylance's optimize_indices)")
    o.add_argument("uri")
    o.add_argument("--num-indices-to-merge", type=int, default=OPTIMIZE_INDICES_DEFAULTS.num_indices_to_merge,
                   help="0: add segments; N: rebuild the newest N segments with the new fragments")
    o.add_argument("--index-name", action="append", default=None, dest="index_names",
                   help="only this index (repeat for several; default: every index lance_ops extends)")
    _rows_per_task(o, OPTIMIZE_INDICES_DEFAULTS.rows_per_task)

    i = sub.add_parser("create-scalar-index", aliases=["create_scalar_index"],
                       help="build a BTREE, BITMAP, LABEL_LIST, ZONEMAP, NGRAM or INVERTED index on executors")
    i.add_argument("uri")
    i.add_argument("--column", required=True)
    i.add_argument("--index-type", default="BTREE", help="BTREE, BITMAP, LABEL_LIST, ZONEMAP, NGRAM or INVERTED")
    i.add_argument("--name", default=None, help="default: <column>_idx")
    i.add_argument("--no-replace", action="store_true", help="refuse when an index of that name exists")
    _rows_per_task(i, OPTIMIZE_INDICES_DEFAULTS.rows_per_task)

    f = sub.add_parser("change-feed", help="write the change feed of (begin, end] to a sink")
    f.add_argument("uri")
    f.add_argument("--begin", required=True, help="version number or tag")
    f.add_argument("--end", required=True, help="version number or tag")
    f.add_argument("--sink", required=True)
    f.add_argument("--sink-format", choices=["lance", "parquet"], default="lance")
    f.add_argument("--sink-storage-options", type=_json_dict, default={}, help="JSON object for the sink's storage")
    f.add_argument("--max-rows-per-file", type=int, default=DEFAULT_MAX_ROWS_PER_FILE)

    k = sub.add_parser("package", help="write lance_ops.zip and lance_ops_submit.py for spark-submit --py-files")
    k.add_argument("dir", help="directory to write them to (created)")
    return p


def _rows_per_task(p: argparse.ArgumentParser, default: int | None) -> None:
    p.add_argument("--rows-per-task", type=int, default=default,
                   help=f"rows of fragments per Spark task and segment (0: one task per index; default {default})")


def _pairs(items: Sequence[str], what: str) -> dict[str, str]:
    out = {}
    for item in items:
        if "=" not in item:
            raise SystemExit(f"{what} must be KEY=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        out[k] = v
    return out


def package(out_dir: str) -> dict[str, str]:
    """Write ``lance_ops.zip`` (this lance_ops package, sources only) and the entry script."""
    import lance_ops

    root = os.path.dirname(os.path.abspath(lance_ops.__file__))
    os.makedirs(out_dir, exist_ok=True)
    out_dir = os.path.abspath(out_dir)
    zpath = os.path.join(out_dir, "lance_ops.zip")
    with zipfile.ZipFile(zpath, "w", zipfile.ZIP_DEFLATED) as z:
        for d, dirs, files in os.walk(root):
            dirs[:] = sorted(x for x in dirs if x != "__pycache__")
            for name in sorted(files):
                if name.endswith((".py", ".pyi", ".typed")):
                    full = os.path.join(d, name)
                    z.write(full, os.path.join("lance_ops", os.path.relpath(full, root)))
    script = os.path.join(out_dir, "lance_ops_submit.py")
    with open(script, "w") as fh:
        fh.write(SUBMIT_SCRIPT)
    return {"py_files": zpath, "entry_point": script,
            "command": f"spark-submit --master <url> --py-files {zpath} {script} <job> ..."}


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.job = args.job.replace("_", "-")  # the aliases
    if args.job == "package":
        print(json.dumps(package(args.dir), indent=2))
        return 0
    from pyspark.sql import SparkSession

    from lance_ops.format.errors import (
        InvalidArgumentError,
        InvalidURIError,
        SchemaError,
        UnsupportedFeatureError,
    )
    from lance_ops.jobs import InvalidOptionError, spark_session

    # Inside a process that already has a session (tests, notebooks) reuse it and leave it running.
    owned = SparkSession.getActiveSession() is None
    spark = spark_session(args.master, _pairs(args.conf, "--conf"), app_name=f"lance_ops {args.job}")
    try:
        result = _run(args, spark)
    except (InvalidURIError, InvalidOptionError, InvalidArgumentError, SchemaError, UnsupportedFeatureError) as e:
        print(f"lance_ops.jobs {args.job}: error: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    finally:
        if owned:
            spark.stop()
    print(json.dumps(result.to_dict(), default=str, indent=2))
    return 1 if getattr(result, "failed_tasks", ()) else 0


def _run(args: argparse.Namespace, spark: Any) -> Any:
    """Run the job ``args`` name on ``spark``; its result."""
    from lance_ops.format import CommitOptions
    from lance_ops.jobs import (
        append,
        compact,
        create_scalar_index,
        delete,
        materialize_deletions,
        optimize_indices,
        upsert,
        write_change_feed,
    )

    so = args.storage_options
    tp = args.transaction_properties or None
    ms = args.manifest_store
    commit = CommitOptions(max_retries=args.max_retries, manifest_store=ms)
    if args.branch is not None:
        from lance_ops.format import resolve_version

        args.uri = resolve_version(args.uri, branch=args.branch, storage_options=so)[0]
    if args.job == "append":
        return append(
            spark, args.uri, args.source, format=args.format, options=_pairs(args.option, "--option"),
            max_rows_per_file=args.max_rows_per_file, enable_stable_row_ids=args.enable_stable_row_ids,
            data_storage_version=args.data_storage_version, storage_options=so, transaction_properties=tp,
            commit=commit,
        )
    if args.job == "delete":
        return delete(spark, args.uri, args.where, storage_options=so, transaction_properties=tp, commit=commit)
    if args.job == "upsert":
        return upsert(spark, args.uri, args.source, args.on, format=args.format,
                      options=_pairs(args.option, "--option"), max_rows_per_file=args.max_rows_per_file,
                      storage_options=so, transaction_properties=tp, commit=commit)
    if args.job == "compact":
        return compact(
            spark, args.uri, target_rows_per_fragment=args.target_rows_per_fragment,
            max_rows_per_group=args.max_rows_per_group,
            materialize_deletions=False if args.no_materialize_deletions else None,
            materialize_deletions_threshold=args.materialize_deletions_threshold,
            max_source_fragments=args.max_source_fragments, data_storage_version=args.data_storage_version,
            cluster_by=args.cluster_by, strategy=args.strategy, dry_run=args.dry_run, storage_options=so,
            read_version=args.read_version, transaction_properties=tp, commit=commit,
        )
    if args.job == "materialize-deletions":
        return materialize_deletions(spark, args.uri, args.threshold, dry_run=args.dry_run, storage_options=so,
                                     read_version=args.read_version, transaction_properties=tp, commit=commit)
    if args.job in ("optimize-indices", "create-scalar-index"):
        rows = args.rows_per_task or None
        if args.job == "optimize-indices":
            return optimize_indices(spark, args.uri, num_indices_to_merge=args.num_indices_to_merge,
                                    index_names=args.index_names, rows_per_task=rows, storage_options=so,
                                    transaction_properties=tp, commit=commit)
        return create_scalar_index(spark, args.uri, args.column, args.index_type, args.name,
                                   replace=not args.no_replace, rows_per_task=rows, storage_options=so,
                                   transaction_properties=tp, commit=commit)
    if tp:
        raise SystemExit("change-feed takes no --transaction-properties (its commit records the range)")
    return write_change_feed(spark, args.uri, args.begin, args.end, args.sink, format=args.sink_format,
                             storage_options=so, sink_storage_options=args.sink_storage_options,
                             max_rows_per_file=args.max_rows_per_file, manifest_store=ms, sink_manifest_store=ms)


if __name__ == "__main__":
    sys.exit(main())
