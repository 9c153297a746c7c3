"""``lance-ops``: inspect a dataset, or run a maintenance job as the launchpad would.

    lance-ops --version
    lance-ops inspect URI [--version N] [--storage-option KEY=VALUE ...]
    lance-ops run JOB [--dataset NAME] [--config lance_ops.yaml] [job options]
    lance-ops run compact --target-rows-per-fragment 100000 --dry-run
    lance-ops run maintain            # what the planner finds the dataset needs now
    lance-ops run restore --version 12       # guarded: the current version is tagged first

Each command is one ``add_<command>`` function registering its parser and its handler
(``COMMANDS``), so more commands plug in without touching the others.  An error is one line naming
the dataset and the fix (``--debug`` prints the traceback).

``inspect`` needs only the base install (``pip install lance_ops``); ``run`` needs the ``dagster``
extra, and says so when it is missing.  Dagster, Spark and rich are imported only where used (rich
draws bars and tables when installed, with the extras; without it the output is plain text).

``run`` executes the Dagster job ``lance_<JOB>`` on the dataset's asset in this process (the
instance in ``$DAGSTER_HOME`` when set, else a throwaway one); its options are the fields of the
job's launchpad Config (defaults: the dataset's policy).  Progress goes to stderr, results to stdout.
"""

import argparse
import enum
import os
import re
import sys
import threading
import time
import types
import typing
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from lance_ops.console import console_for, human_bytes, progress, render_table, track
from lance_ops.format.errors import MissingDependencyError

JOB_CONFIGS = {
    "append": "AppendConfig",
    "delete": "DeleteConfig",
    "upsert": "UpsertConfig",
    "materialize_deletions": "MaterializeDeletionsConfig",
    "compact": "CompactConfig",
    "optimize_indices": "OptimizeIndicesConfig",
    "write_change_feed": "ChangeFeedConfig",
    "cleanup_old_versions": "CleanupConfig",
    "remove_orphan_files": "RemoveOrphanFilesConfig",
    "restore": "RestoreConfig",
    "maintain": None,
    "observe": None,
    "checks": None,
}
ALIASES = {"change_feed": "write_change_feed", "cleanup": "cleanup_old_versions"}
MANIFEST_STORE_HELP = ("external manifest store the dataset commits through (SQLite path or sqlite:/// URL), "
                       "for object stores without conditional put")


# ----------------------------------------------------------------------------- inspect
def inspect_dataset(uri: str, *, storage_options: dict[str, str], version: int | None,  # a branch: its own uri
                    small_fragment_rows: int, out: Any, manifest_store: str | None = None) -> int:
    from lance_ops.orchestration.policy import manifest_stats
    from lance_ops.orchestration.table import TableRef

    table = TableRef(uri, storage_options, {}, manifest_store)
    # through the external manifest store when there is one: its latest may not be finalized yet
    versions = table.list_versions()
    if not versions:
        console_for(sys.stderr).print(f"lance-ops: error: no Lance dataset at {uri}. Fix: check the URI "
                                      "(and --storage-option / --manifest-store)")
        return 2
    handler = table.handler()
    rows = []
    for v in track(versions, f"reading {len(versions)} manifests"):
        m = handler.read_manifest(v).manifest
        txn = table.transaction(v)
        st = manifest_stats(m, small_fragment_rows=small_fragment_rows)
        rows.append({
            "version": v,
            "timestamp": datetime.fromtimestamp(m.timestamp_ns / 1e9, tz=UTC).strftime("%Y-%m-%d %H:%M:%S"),
            "operation": txn.operation.name if txn else "?",
            "rows": st["rows"],
            "fragments": st["fragments"],
            "small": st["small_fragments"],
            "deleted": st["deleted_rows"],
            "bytes": human_bytes(st["bytes"]),
            "run_id": (txn.properties.get("dagster/run_id", "") if txn else "")[:8],
        })
    ds = table.open(version)
    m = ds.manifest
    st = manifest_stats(m, small_fragment_rows=small_fragment_rows)
    console = console_for(out)
    console.print(f"dataset   {uri}")
    console.print(f"version   {ds.version} (latest {versions[-1]}, {len(versions)} versions present)")
    console.print(f"format    file {m.data_storage_version}, stable row ids {'on' if ds.has_stable_row_ids else 'off'}")
    console.print(f"schema    {', '.join(f'{f.name}: {f.type}' for f in ds.schema)}")
    console.print(f"stats     {st['rows']} rows, {st['fragments']} fragments ({st['small_fragments']} smaller than "
                  f"{small_fragment_rows} rows), {st['deleted_rows']} deleted rows (ratio {st['deleted_ratio']:.4f}), "
                  f"{human_bytes(st['bytes'])}")
    console.print()
    console.print(render_table(rows, title="versions"))
    console.print()
    frags = [{
        "id": f.id,
        "physical_rows": f.physical_rows,
        "deleted": f.num_deleted_rows,
        "live_rows": f.num_rows,
        "files": len(f.files),
        "bytes": human_bytes(sum(df.file_size_bytes for df in f.files)),
        "deletion_file": f"{f.deletion_file.id}.{f.deletion_file.extension}" if f.deletion_file else "",
    } for f in m.fragments]
    console.print(render_table(frags, title=f"fragments of version {ds.version}"))
    console.print()
    console.print(render_table(index_rows(ds), title=f"indices of version {ds.version}"))
    console.print()
    leases = [{"id": x.id, "versions": f"{x.first_version}..{x.version}", "holder": x.holder,
               "expires_in_s": round(x.expires_at - time.time(), 1)} for x in ds.leases()]
    console.print(render_table(leases, title="reader leases (live)"))
    return 0


def index_rows(ds: Any) -> list[dict[str, Any]]:
    """One row per index: kind, columns, coverage (pylance's optimize_indices adds what is missing)."""
    from lance_ops.format import format_fragment_ids

    return [{
        "name": d.name,
        "type": d.index_type,
        "fields": ", ".join(d.field_names),
        "segments": len(d.segments),
        "indexed_rows": d.num_rows_indexed,
        "unindexed_rows": d.num_rows_unindexed,
        "coverage": f"{d.coverage:.1%}",
        "fragments": format_fragment_ids(d.fragment_ids),
    } for d in ds.describe_indices()]


# --------------------------------------------------------------------------------- run
def _unwrap_optional(annotation: Any) -> tuple[Any, bool]:
    args = typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return rest[0], True
    return annotation, False


def add_config_options(parser: argparse.ArgumentParser, config_cls: Any) -> list[str]:
    """One option per Config field (``--target-rows-per-fragment``); returns the field names."""
    names = []
    for name, field in config_cls.model_fields.items():
        if name == "dataset":
            continue  # --dataset names it
        typ, _ = _unwrap_optional(field.annotation)
        flag = "--" + name.replace("_", "-")
        helptext = field.description or name.replace("_", " ")
        required = field.is_required()
        default = None if required else field.get_default(call_default_factory=True)
        # a default the dataset's settings replace is named as such, not shown as the class's value
        default_text = "" if default in (None, {}) or "default:" in helptext else f" (default: {default})"
        kwargs: dict[str, Any] = {"dest": name, "default": None,
                                  "help": helptext + default_text + (" (required)" if required else "")}
        if typ is bool:
            kwargs["action"] = argparse.BooleanOptionalAction
        elif typing.get_origin(typ) is dict:
            kwargs.update(action="append", type=_kv, metavar="KEY=VALUE")
        elif typing.get_origin(typ) is list:
            kwargs["nargs"] = "+"
        elif isinstance(typ, type) and issubclass(typ, enum.Enum):
            kwargs["choices"] = [e.value for e in typ]
        elif typ in (int, float, str):
            kwargs["type"] = typ
        if required:
            kwargs["required"] = True
        parser.add_argument(flag, **kwargs)
        names.append(name)
    return names


def run_job(job: str, dataset: str | None, config_path: str | None, options: dict[str, Any], out: Any,
            log_level: str = "WARNING", *, manifest_store: str | None = None, debug: bool = False) -> int:
    import warnings

    from dagster import DagsterInstance

    from lance_ops.assets import configs
    from lance_ops.assets.definitions import build_definitions
    from lance_ops.assets.runs import execute
    from lance_ops.orchestration.settings import load_settings

    warnings.filterwarnings("ignore", module=r"dagster(\..*)?")
    warnings.filterwarnings("ignore", message=r".* is currently in beta")  # backfill_policy, known and accepted
    settings = load_settings(config_path)
    d = settings.dataset(dataset) if dataset else settings.datasets[0]
    if manifest_store:  # --manifest-store overrides the dataset's manifest_store in the config
        d = d.model_copy(update={"manifest_store": manifest_store})
        settings = settings.model_copy(update={"datasets": [d if x.name == d.name else x for x in settings.datasets]})
    defs = build_definitions(settings)
    job_name = f"lance_{job}"
    cfg = None
    cls_name = JOB_CONFIGS[job]
    values = {k: v for k, v in options.items() if v is not None}
    if cls_name:
        cls = getattr(configs, cls_name)
        cfg = cls(**values, **({"dataset": d.name} if "dataset" in cls.model_fields else {}))
    instance = DagsterInstance.get() if os.environ.get("DAGSTER_HOME") else DagsterInstance.ephemeral()
    result: dict[str, Any] = {}

    err, console = console_for(sys.stderr), console_for(out)
    err.print(f"running {job_name} on {d.uri}")
    done = threading.Event()
    with progress(job_name) as tick:
        # the run stays on the calling thread, where the Spark session was made (a write from a
        # helper thread did not find the lance data source next to a session of the caller's)
        ticker = threading.Thread(target=lambda: [tick(0) for _ in iter(lambda: done.wait(0.25), True)],
                                  daemon=True)
        ticker.start()
        try:
            result["r"] = execute(defs, d.name, job, cfg, instance=instance, log_level=log_level)
        except Exception as e:  # shown below
            result["error"] = e
        finally:
            done.set()
            ticker.join()
    if "error" in result:
        if debug:
            raise result["error"]
        err.print(error_line(result["error"], argparse.Namespace(dataset=d.name)))
        return 1
    r = result["r"]
    console.print(f"run {r.run_id}: {'SUCCESS' if r.success else 'FAILURE'}")
    mats = [e.event_specific_data.materialization for e in r.get_asset_materialization_events()]
    obs = [e.event_specific_data.asset_observation for e in r.all_events if e.event_type_value == "ASSET_OBSERVATION"]
    keys = {"version": "lance/version", "rows": "dagster/row_count", "fragments": "fragments",
            "small_fragments": "small_fragments", "deleted_rows": "deleted_rows", "last_operation": "last_operation"}
    table = [{"event": "materialization", "asset": m.asset_key.to_user_string(),
              **{k: m.metadata[src].value for k, src in keys.items() if src in m.metadata}} for m in mats]
    table += [{"event": "observation", "asset": o.asset_key.to_user_string(),
               **{k: o.metadata[src].value for k, src in keys.items() if src in o.metadata}} for o in obs]
    if table:
        console.print(render_table(table, ["event", "asset", *keys]))
        console.print()
    for event in [*mats, *obs]:
        if "lance_ops/job" in event.metadata:
            md = event.metadata["lance_ops/job"].value
            console.print("metrics: " + ", ".join(f"{k}={v}" for k, v in md.items()))
    for ev in r.all_events:
        if ev.event_type_value == "STEP_OUTPUT" and ev.event_specific_data.metadata:
            md = {k: v.value for k, v in ev.event_specific_data.metadata.items() if k != "lance_ops/job"}
            if md:
                console.print("metrics: " + ", ".join(f"{k}={v}" for k, v in md.items()))
    checks = r.get_asset_check_evaluations()
    for c in checks:
        console.print(f"check {c.asset_key.to_user_string()}:{c.check_name}: {'passed' if c.passed else 'FAILED'}")
    if not r.success:
        for ev in r.all_events:
            if ev.event_type_value == "STEP_FAILURE":
                err.print(_failure_line(d.name, ev, debug))
    return 0 if r.success and all(c.passed for c in checks) else 1


def _failure_line(dataset: str, event: Any, debug: bool) -> str:
    """A failed step as one line (the innermost lance_ops error: type, message with its fix), or
    Dagster's whole error with ``debug``."""
    error = event.event_specific_data.error
    if error is None:
        return str(event.message)
    if debug:
        return str(error.to_string())
    chain = [error]
    while chain[-1].cause is not None:
        chain.append(chain[-1].cause)
    typed = next((e for e in chain if "Fix:" in e.message), chain[-1])
    message = re.sub(r"^[\w.]+(Error|Exception): ", "", " ".join(typed.message.split())) or typed.cls_name
    cause = chain[-1].cls_name if chain[-1] is not typed else typed.cls_name
    where = "" if dataset in message else f" ({dataset})"
    return f"lance-ops: error{where}: {cause}: {message} (--debug for the traceback)"


# -------------------------------------------------------------------------------- main
def _kv(text: str) -> tuple[str, str]:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    k, v = text.split("=", 1)
    return k, v


def _missing_module(e: ImportError) -> str | None:
    """The third-party module whose absence raised ``e`` (None when lance_ops itself is at fault)."""
    top = (e.name or "").split(".")[0]
    return None if top in ("", "lance_ops") else top


EXAMPLES = {
    "inspect": """examples:
  lance-ops inspect /data/events
  lance-ops inspect gs://bucket/events --storage-option token=/secrets/sa.json --version 12
  lance-ops inspect /data/events --manifest-store /var/lance/manifests.db""",
    "run": """examples:
  lance-ops run append --config lance_ops.yaml --dataset events --path /landing/day.parquet --format parquet
  lance-ops run delete --where "id < 100"
  lance-ops run compact --dry-run
  lance-ops run maintain --dataset events""",
}
JOB_EXAMPLES = {
    "append": "lance-ops run append --dataset events --path /landing/day.parquet --format parquet",
    "delete": 'lance-ops run delete --dataset events --where "id < 100"',
    "upsert": "lance-ops run upsert --dataset events --path /landing/fix.parquet --format parquet --on id",
    "compact": "lance-ops run compact --dataset events --target-rows-per-fragment 500000 --dry-run",
    "materialize_deletions": "lance-ops run materialize_deletions --dataset events --threshold 0.2",
    "optimize_indices": "lance-ops run optimize_indices --dataset events --num-indices-to-merge 0",
    "write_change_feed": "lance-ops run change_feed --dataset events --begin-version 3 --end-version 7",
    "cleanup_old_versions": "lance-ops run cleanup --dataset events --older-than-days 30 --dry-run",
    "remove_orphan_files": "lance-ops run remove_orphan_files --dataset events --older-than-hours 24 --dry-run",
    "restore": "lance-ops run restore --dataset events --version 12   (or --timestamp 2026-01-31T08:00:00, --tag NAME)",
    "maintain": "lance-ops run maintain --dataset events",
    "observe": "lance-ops run observe --dataset events",
    "checks": "lance-ops run checks --dataset events",
}
JOB_HELP = {
    "maintain": "what the maintenance planner finds the dataset needs now (its policy): compaction or deletion "
                "materialisation, optimize_indices, cleanup, the orphan sweep (lance-ops plan shows it)",
    "observe": "record the latest version as an observation",
    "checks": "run the dataset's asset checks",
}

#: command -> (add its parser, handle its parsed arguments); ``add_<command>`` registers both
COMMANDS: dict[str, Callable[[argparse.Namespace, Any], int]] = {}
_JOB_FIELDS: dict[str, list[str]] = {}


def _formatter(prog: str) -> argparse.HelpFormatter:
    return argparse.RawDescriptionHelpFormatter(prog, max_help_position=40)


def add_inspect(sub: Any) -> None:
    """``lance-ops inspect URI``."""
    from lance_ops.format import COMMIT_DEFAULTS, COMPACTION_DEFAULTS

    p = sub.add_parser("inspect", help="versions, fragments, indices and stats of a dataset",
                       description="Versions, fragments, indices and stats of a Lance dataset (manifests only).",
                       epilog=EXAMPLES["inspect"], formatter_class=_formatter)
    p.add_argument("uri", help="the dataset (local path, file://, gs://bucket/path)")
    p.add_argument("--version", default=None, help="fragments of this version number or tag (default: the latest)")
    p.add_argument("--branch", default=None, help="a branch of the dataset (<uri>/tree/<branch>)")
    p.add_argument("--storage-option", action="append", type=_kv, default=[], metavar="KEY=VALUE",
                   help="a storage option (repeat for several), e.g. token=/secrets/sa.json")
    p.add_argument("--small-fragment-rows", type=int, default=COMPACTION_DEFAULTS.target_rows_per_fragment,
                   help="a fragment with fewer live rows is 'small' (default: the compaction target, "
                   f"{COMPACTION_DEFAULTS.target_rows_per_fragment})")
    p.add_argument("--manifest-store", default=COMMIT_DEFAULTS.manifest_store, metavar="PATH",
                   help=MANIFEST_STORE_HELP)
    COMMANDS["inspect"] = _inspect


def _inspect(args: argparse.Namespace, out: Any) -> int:
    uri, version = args.uri, args.version
    if version is not None and version.isdigit():
        version = int(version)
    if args.branch is not None or isinstance(version, str):  # a branch, or a tag (maybe of a branch)
        import lance_ops.format as lf

        uri, version = lf.resolve_version(uri, version, branch=args.branch, storage_options=dict(args.storage_option))
    return inspect_dataset(uri, storage_options=dict(args.storage_option), version=version,
                           small_fragment_rows=args.small_fragment_rows, out=out, manifest_store=args.manifest_store)


def add_planner(sub: Any) -> None:
    """``lance-ops plan``, ``maintain`` and ``history`` (:mod:`lance_ops.cli_planner`);
    the planner reads lance_ops.yaml (pydantic, pyyaml: the orchestration extra)."""
    try:
        from lance_ops.cli_planner import add_commands
    except ImportError as e:
        if _missing_module(e) is None:
            raise
        for name in ("plan", "maintain", "history"):
            stub = sub.add_parser(name, help=f"{name} (needs the orchestration extra)")
            stub.add_argument("planner_args", nargs=argparse.REMAINDER)
            stub.set_defaults(missing=MissingDependencyError(f"lance-ops {name}", extra="orchestration",
                                                             missing=_missing_module(e)))
            COMMANDS[name] = _missing_extra
        return
    add_commands(sub)
    for name in ("plan", "maintain", "history"):
        COMMANDS[name] = lambda args, out: args.planner_command(args, out)


def _missing_extra(args: argparse.Namespace, out: Any) -> int:
    print(f"lance-ops: {args.missing}", file=sys.stderr)
    return 2


def add_run(sub: Any) -> None:
    """``lance-ops run JOB``: one sub-parser per job, its options from the job's config class.
    Without the ``dagster`` extra ``run`` still parses, and says which extra to install."""
    from lance_ops.format import COMMIT_DEFAULTS

    p_run = sub.add_parser("run", help="run a dataset job in this process (same options as the launchpad)",
                           description="Run a dataset job in this process, as Dagster's launchpad would. Unset "
                           "options come from the dataset's settings in lance_ops.yaml.",
                           epilog=EXAMPLES["run"], formatter_class=_formatter)
    COMMANDS["run"] = _run
    try:
        from lance_ops.assets import configs
    except ImportError as e:
        if _missing_module(e) is None:
            raise
        p_run.add_argument("job_args", nargs=argparse.REMAINDER)
        p_run.set_defaults(missing=MissingDependencyError("lance-ops run", extra="dagster", missing=_missing_module(e)))
        return
    jobs = p_run.add_subparsers(dest="job", required=True, metavar="JOB")
    for job, cls_name in JOB_CONFIGS.items():
        cls = getattr(configs, cls_name) if cls_name else None
        doc = (cls.__doc__ or "").strip().splitlines()[0] if cls else JOB_HELP[job]
        jp = jobs.add_parser(job, help=doc, description=doc, epilog=f"example:\n  {JOB_EXAMPLES[job]}",
                             formatter_class=_formatter, aliases=[a for a, t in ALIASES.items() if t == job])
        jp.add_argument("--dataset", default=None, help="dataset name in the config (default: the first)")
        jp.add_argument("--config", default=None, help="lance_ops.yaml (default: $LANCE_OPS_CONFIG, else the demo)")
        jp.add_argument("--manifest-store", default=COMMIT_DEFAULTS.manifest_store, metavar="PATH",
                        help=MANIFEST_STORE_HELP + " (default: the dataset's manifest_store in the config)")
        jp.add_argument("--log-level", default="CRITICAL", choices=["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"],
                        help="Dagster console log level (default: CRITICAL: a failure is shown as one line; "
                             "ERROR shows Dagster's own report)")
        _JOB_FIELDS[job] = add_config_options(jp, cls) if cls else []


def _run(args: argparse.Namespace, out: Any, runner: Callable[..., int] | None = None) -> int:
    if getattr(args, "missing", None) is not None:
        print(f"lance-ops: {args.missing}", file=sys.stderr)
        return 2
    job = ALIASES.get(args.job, args.job)
    options = {name: getattr(args, name) for name in _JOB_FIELDS[job]}
    options = {k: dict(v) if isinstance(v, list) and v and isinstance(v[0], tuple) else v for k, v in options.items()}
    extra = {"manifest_store": args.manifest_store} if args.manifest_store else {}
    extra["debug"] = bool(getattr(args, "debug", False))
    level = "ERROR" if extra["debug"] and args.log_level == "CRITICAL" else args.log_level
    return (runner or run_job)(job, args.dataset, args.config, options, out, level, **extra)


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, list[str]]]:
    """The ``lance-ops`` parser, and the Config fields of each job."""
    import lance_ops

    parser = argparse.ArgumentParser(prog="lance-ops", description="Maintain Lance datasets (lance_ops).",
                                     epilog=EXAMPLES["inspect"] + "\n" + EXAMPLES["run"].split("\n", 1)[1],
                                     formatter_class=_formatter)
    parser.add_argument("--version", action="version", version=f"lance-ops {lance_ops.__version__}")
    parser.add_argument("--debug", action="store_true", help="print the traceback of an error")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in (add_inspect, add_planner, add_run):
        add(sub)
    return parser, _JOB_FIELDS


def error_line(e: BaseException, args: argparse.Namespace | None) -> str:
    """One line: what failed, on which dataset, and the fix."""
    from lance_ops.format.errors import DatasetNotFoundError, LanceOpsError

    where = getattr(args, "uri", None) or getattr(args, "dataset", None) or ""
    text = f"{type(e).__name__}: {e}".replace("\n", " ")
    if isinstance(e, DatasetNotFoundError):
        text += ". Fix: check the URI and the version or tag (lance-ops inspect URI lists the versions)"
    elif isinstance(e, LanceOpsError) and "Fix:" not in text:
        text += ". Fix: see the message; --debug prints the traceback"
    return f"lance-ops: error{f' ({where})' if where and where not in text else ''}: {text}"


def main(argv: Sequence[str] | None = None, *, out: Any = None,
         runner: Callable[..., int] | None = None) -> int:
    out = out or sys.stdout
    parser, _fields = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "run":
            return _run(args, out, runner)
        if getattr(args, "missing", None) is not None:
            print(f"lance-ops: {args.missing}", file=sys.stderr)
            return 2
        return COMMANDS[args.command](args, out)
    except (Exception, KeyboardInterrupt) as e:
        from lance_ops.format.errors import LanceOpsError

        if args.debug or not isinstance(e, LanceOpsError | OSError | ValueError):
            raise
        print(error_line(e, args), file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
