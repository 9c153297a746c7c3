"""``lance-ops``: inspect a dataset, or run a maintenance job as the launchpad would.

    lance-ops inspect URI [--version N] [--storage-option KEY=VALUE ...]
    lance-ops run JOB [--dataset NAME] [--config lance_ops.yaml] [job options]
    lance-ops run compact --target-rows-per-fragment 100000 --dry-run

``inspect`` needs only the base install (``pip install lance_ops``); ``run`` needs the ``dagster``
extra, and says so when it is missing.  Dagster, Spark and rich are imported only where used (rich
draws bars and tables when installed, with the extras; without it the output is plain text).

``run`` executes the Dagster job ``lance_<JOB>`` on the dataset's asset in this process (the
instance in ``$DAGSTER_HOME`` when set, else a throwaway one); its options are the fields of the
job's launchpad Config (defaults: the dataset's policy).  Progress goes to stderr, results to stdout.
"""

import argparse
import contextlib
import enum
import os
import sys
import threading
import time
import types
import typing
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

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
    "observe": None,
    "checks": None,
}
ALIASES = {"change_feed": "write_change_feed", "cleanup": "cleanup_old_versions"}


# ------------------------------------------------------------------- terminal output
def _rich() -> types.ModuleType | None:
    """The ``rich`` package when it is installed (it comes with the extras), else None."""
    try:
        import rich.box
        import rich.console
        import rich.progress
        import rich.table
        import rich.text
    except ImportError:
        return None
    return rich


class PlainConsole:
    """What the CLI needs of a rich Console, as plain text (no rich installed)."""

    is_terminal = False

    def __init__(self, stream: Any) -> None:
        self.file = stream

    def print(self, obj: Any = "") -> None:
        self.file.write(f"{obj}\n")
        self.file.flush()


def console_for(stream: Any) -> Any:
    """A rich Console on ``stream``: colours and live bars on a terminal; plain text otherwise
    (wide enough that tables are never wrapped, so the output can be parsed and diffed).  Without
    rich, a :class:`PlainConsole`."""
    rich = _rich()
    if rich is None:
        return PlainConsole(stream)
    tty = hasattr(stream, "isatty") and stream.isatty()
    return rich.console.Console(file=stream, force_terminal=tty, width=None if tty else 250, highlight=False,
                                emoji=False, markup=False, no_color=not tty, soft_wrap=not tty)


@contextlib.contextmanager
def progress(label: str, total: int | None = None, *, stream: Any = None) -> Iterator[Callable[[int], None]]:
    """A progress bar on ``stream`` (stderr): determinate with ``total``, else a spinner with the
    elapsed time.  Off a terminal it degrades to plain lines, at most one a second plus the last.
    Yields ``advance(n)``; the bar finishes when the block ends."""
    console = console_for(stream or sys.stderr)
    if console.is_terminal:
        rp = _rich().progress  # type: ignore[union-attr]  # a terminal console is a rich one
        columns: list[Any] = [rp.SpinnerColumn(), rp.TextColumn("{task.description}")]
        if total is not None:
            columns += [rp.BarColumn(), rp.MofNCompleteColumn()]
        columns.append(rp.TimeElapsedColumn())
        with rp.Progress(*columns, console=console, transient=False) as bar:
            task = bar.add_task(label, total=total)
            yield lambda n=1: bar.advance(task, n)
            bar.update(task, completed=total if total is not None else 0)
        return
    t0 = time.perf_counter()
    state = {"done": 0, "last": t0}

    def line() -> str:
        done = f" {state['done']}/{total}" if total is not None else ""
        return f"{label}{done} {time.perf_counter() - t0:.1f}s"

    def advance(n: int = 1) -> None:
        state["done"] += n
        now = time.perf_counter()
        if now - state["last"] >= 1.0:
            state["last"] = now
            console.print(line())

    yield advance
    if total is not None:
        state["done"] = total
    console.print(line() + " done")

MANIFEST_STORE_HELP = ("external manifest store the dataset commits through (SQLite path or sqlite:/// URL), "
                       "for object stores without conditional put")


def track(items: Sequence[Any], label: str) -> Iterator[Any]:
    """Iterate ``items`` with a progress bar on stderr."""
    with progress(label, len(items)) as advance:
        for item in items:
            yield item
            advance(1)


def render_table(rows: list[dict[str, Any]], columns: Sequence[str] | None = None, *, title: str | None = None) -> Any:
    """A rich Table of ``rows`` (numbers right-aligned), or a "(none)" line; plain text without rich."""
    rich = _rich()
    if rich is None:
        return plain_table(rows, columns, title=title)
    if not rows:
        return rich.text.Text("(none)")
    cols = list(columns or rows[0].keys())
    table = rich.table.Table(box=rich.box.SIMPLE_HEAD, title=title, title_justify="left", show_edge=False,
                             pad_edge=False)
    for c in cols:
        numeric = all(_is_num(r.get(c)) for r in rows)
        table.add_column(c, justify="right" if numeric else "left", no_wrap=True)
    for r in rows:
        table.add_row(*(_cell(r.get(c, "")) for c in cols))
    return table


def plain_table(rows: list[dict[str, Any]], columns: Sequence[str] | None = None, *,
                title: str | None = None) -> str:
    """``rows`` as aligned plain text: title, header, a rule, one line per row (as rich lays it out)."""
    if not rows:
        return "(none)"
    cols = list(columns or rows[0].keys())
    cells = [[_cell(r.get(c, "")) for c in cols] for r in rows]
    widths = [max(len(c), *(len(line[i]) for line in cells)) for i, c in enumerate(cols)]
    right = [all(_is_num(r.get(c)) for r in rows) for c in cols]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.rjust(w) if rj else v.ljust(w) for v, w, rj in zip(values, widths, right, strict=True))

    out = ([title] if title else []) + [line(cols), "  ".join("-" * w for w in widths)]
    return "\n".join(out + [line(c) for c in cells])


def _is_num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.1f} {unit}" if unit != "B" else f"{int(size)} B"
        size /= 1024
    return str(n)


# ----------------------------------------------------------------------------- inspect
def inspect_dataset(uri: str, *, storage_options: dict[str, str], version: int | None,  # a branch: its own uri
                    small_fragment_rows: int, out: Any, manifest_store: str | None = None) -> int:
    import lance_ops.format as lf
    from lance_ops.assets.stats import manifest_stats, transaction_of
    from lance_ops.format.distributed import ObjectStore, commit_handler_for, read_manifest

    store = ObjectStore(uri, storage_options)
    # through the external manifest store when there is one: its latest may not be finalized yet
    scheme, versions = commit_handler_for(store, manifest_store).list_versions()
    if not versions:
        console_for(sys.stderr).print(f"no Lance dataset at {uri}")
        return 2
    assert scheme is not None
    rows = []
    for v in track(versions, f"reading {len(versions)} manifests"):
        m = read_manifest(store, v, scheme).manifest
        txn = transaction_of(store, v)
        st = manifest_stats(m, small_fragment_rows=small_fragment_rows)
        rows.append({
            "version": v,
            "timestamp": datetime.fromtimestamp(m.timestamp_ns / 1e9, tz=UTC).strftime("%Y-%m-%d %H:%M:%S"),
            "operation": txn.operation.name if txn else "?",
            "rows": st["rows"],
            "fragments": st["fragments"],
            "small": st["small_fragments"],
            "deleted": st["deleted_rows"],
            "bytes": _human_bytes(st["bytes"]),
            "run_id": (txn.properties.get("dagster/run_id", "") if txn else "")[:8],
        })
    ds = lf.dataset(uri, version=version, storage_options=storage_options, manifest_store=manifest_store)
    m = ds.manifest
    st = manifest_stats(m, small_fragment_rows=small_fragment_rows)
    console = console_for(out)
    console.print(f"dataset   {uri}")
    console.print(f"version   {ds.version} (latest {versions[-1]}, {len(versions)} versions present)")
    console.print(f"format    file {m.data_storage_version}, stable row ids {'on' if ds.has_stable_row_ids else 'off'}")
    console.print(f"schema    {', '.join(f'{f.name}: {f.type}' for f in ds.schema)}")
    console.print(f"stats     {st['rows']} rows, {st['fragments']} fragments ({st['small_fragments']} smaller than "
                  f"{small_fragment_rows} rows), {st['deleted_rows']} deleted rows (ratio {st['deleted_ratio']:.4f}), "
                  f"{_human_bytes(st['bytes'])}")
    console.print()
    console.print(render_table(rows, title="versions"))
    console.print()
    frags = [{
        "id": f.id,
        "physical_rows": f.physical_rows,
        "deleted": f.num_deleted_rows,
        "live_rows": f.num_rows,
        "files": len(f.files),
        "bytes": _human_bytes(sum(df.file_size_bytes for df in f.files)),
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
        helptext = field.description or ""
        required = field.is_required()
        default = None if required else field.get_default(call_default_factory=True)
        default_text = "" if default is None else f" (default: {default})"
        kwargs: dict[str, Any] = {"dest": name, "default": None, "help": helptext + default_text}
        if typ is bool:
            kwargs["action"] = argparse.BooleanOptionalAction
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
            log_level: str = "WARNING", *, manifest_store: str | None = None) -> int:
    import warnings

    from dagster import DagsterInstance

    from lance_ops.assets import configs
    from lance_ops.assets.definitions import build_definitions
    from lance_ops.assets.runs import execute
    from lance_ops.assets.settings import load_settings

    warnings.filterwarnings("ignore", module="dagster")
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

    def work() -> None:
        try:
            result["r"] = execute(defs, d.name, job, cfg, instance=instance, log_level=log_level)
        except Exception as e:  # shown below; the bar thread must end either way
            result["error"] = e

    err, console = console_for(sys.stderr), console_for(out)
    err.print(f"running {job_name} on {d.uri}")
    thread = threading.Thread(target=work, daemon=True)
    with progress(job_name) as tick:
        thread.start()
        while thread.is_alive():
            tick(0)
            thread.join(0.25)
    if "error" in result:
        err.print(f"error: {result['error']}")
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
                err.print(ev.event_specific_data.error.to_string() if ev.event_specific_data.error else ev.message)
    return 0 if r.success and all(c.passed for c in checks) else 1


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


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, list[str]]]:
    """The ``lance-ops`` parser, and the Config fields of each job.  Without the ``dagster`` extra
    ``run`` still parses, and :func:`main` names the extra to install."""
    from lance_ops.format import COMMIT_DEFAULTS, COMPACTION_DEFAULTS

    parser = argparse.ArgumentParser(prog="lance-ops", description="Maintain Lance datasets (lance_ops).")
    sub = parser.add_subparsers(dest="command", required=True)
    p_inspect = sub.add_parser("inspect", help="versions, fragments and stats of a dataset")
    p_inspect.add_argument("uri")
    p_inspect.add_argument("--version", default=None, help="fragments of this version or tag (default latest)")
    p_inspect.add_argument("--branch", default=None, help="a branch of the dataset (<uri>/tree/<branch>)")
    p_inspect.add_argument("--storage-option", action="append", type=_kv, default=[], metavar="KEY=VALUE")
    p_inspect.add_argument("--small-fragment-rows", type=int, default=COMPACTION_DEFAULTS.target_rows_per_fragment,
                           help="a fragment with fewer live rows is 'small' (default: the compaction target, "
                           f"{COMPACTION_DEFAULTS.target_rows_per_fragment})")
    p_inspect.add_argument("--manifest-store", default=COMMIT_DEFAULTS.manifest_store, metavar="PATH",
                           help=MANIFEST_STORE_HELP)
    try:  # plan, maintain, history: the planner reads lance_ops.yaml (pydantic, pyyaml: the dagster extra)
        from lance_ops.orchestration.planner.cli import add_commands as add_planner_commands
    except ImportError as e:
        if _missing_module(e) is None:
            raise
        for name in ("plan", "maintain", "history"):
            stub = sub.add_parser(name, help=f"{name} (needs the dagster extra)")
            stub.add_argument("planner_args", nargs=argparse.REMAINDER)
            stub.set_defaults(missing=MissingDependencyError(f"lance-ops {name}", extra="dagster",
                                                             missing=_missing_module(e)))
    else:
        add_planner_commands(sub)
    p_run = sub.add_parser("run", help="run a dataset job in this process (same options as the launchpad)")
    fields: dict[str, list[str]] = {}
    try:
        from lance_ops.assets import configs
    except ImportError as e:
        if _missing_module(e) is None:
            raise
        p_run.add_argument("job_args", nargs=argparse.REMAINDER)
        p_run.set_defaults(missing=MissingDependencyError("lance-ops run", extra="dagster", missing=_missing_module(e)))
        return parser, fields
    jobs = p_run.add_subparsers(dest="job", required=True)
    for job, cls_name in JOB_CONFIGS.items():
        cls = getattr(configs, cls_name) if cls_name else None
        doc = (cls.__doc__ or "").strip().splitlines()[0] if cls else f"{job} the dataset"
        jp = jobs.add_parser(job, help=doc, description=doc,
                             aliases=[a for a, t in ALIASES.items() if t == job])
        jp.add_argument("--dataset", default=None, help="dataset name in the config (default: the first)")
        jp.add_argument("--config", default=None, help="lance_ops.yaml (default: $LANCE_OPS_CONFIG, else the demo)")
        jp.add_argument("--manifest-store", default=COMMIT_DEFAULTS.manifest_store, metavar="PATH",
                        help=MANIFEST_STORE_HELP + " (default: the dataset's manifest_store in the config)")
        jp.add_argument("--log-level", default="WARNING", choices=["DEBUG", "INFO", "WARNING", "ERROR"],
                        help="Dagster console log level (default: WARNING)")
        fields[job] = add_config_options(jp, cls) if cls else []
    return parser, fields


def main(argv: Sequence[str] | None = None, *, out: Any = None,
         runner: Callable[..., int] | None = None) -> int:
    out = out or sys.stdout
    parser, fields = build_parser()
    args = parser.parse_args(argv)
    if args.command == "inspect":
        uri, version = args.uri, args.version
        if version is not None and version.isdigit():
            version = int(version)
        if args.branch is not None or isinstance(version, str):  # a branch, or a tag (maybe of a branch)
            import lance_ops.format as lf

            uri, version = lf.resolve_version(uri, version, branch=args.branch,
                                              storage_options=dict(args.storage_option))
        return inspect_dataset(uri, storage_options=dict(args.storage_option), version=version,
                               small_fragment_rows=args.small_fragment_rows, out=out,
                               manifest_store=args.manifest_store)
    if getattr(args, "planner_command", None) is not None:
        return args.planner_command(args, out)
    if getattr(args, "missing", None) is not None:
        print(f"lance-ops: {args.missing}", file=sys.stderr)
        return 2
    job = ALIASES.get(args.job, args.job)
    options = {name: getattr(args, name) for name in fields[job]}
    extra = {"manifest_store": args.manifest_store} if args.manifest_store else {}
    return (runner or run_job)(job, args.dataset, args.config, options, out, args.log_level, **extra)


if __name__ == "__main__":
    sys.exit(main())
