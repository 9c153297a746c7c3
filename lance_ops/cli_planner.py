"""``lance-ops plan``, ``lance-ops maintain`` and ``lance-ops history``.

    lance-ops plan /data/events                 # one table (or a root: every table below it)
    lance-ops plan --config lance_ops.yaml --json
    lance-ops maintain --config lance_ops.yaml --max-bytes 10000000000 --dry-run
    lance-ops history /data/events --json

Tables, progress and summaries go through the CLI's console (rich when installed).
"""

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from lance_ops.format import COMMIT_DEFAULTS
from lance_ops.orchestration.planner.execute import ActionResult, maintain
from lance_ops.orchestration.planner.fleet import fleet_members
from lance_ops.orchestration.planner.ledger import history
from lance_ops.orchestration.planner.model import Action, FleetBudget, TableRef
from lance_ops.orchestration.planner.table_plan import DEFAULT_POLICY

Command = Callable[[argparse.Namespace, Any], int]


def _kv(text: str) -> tuple[str, str]:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    k, v = text.split("=", 1)
    return k, v


def _source(args: argparse.Namespace) -> Any:
    """What to plan: the URI (a table, or a root searched for tables), else the config's fleet."""
    from lance_ops.orchestration.planner.fleet import discover_tables
    from lance_ops.orchestration.settings import load_settings

    if args.uri:
        so = dict(args.storage_option)
        uris = discover_tables(args.uri, so)
        if not uris:
            print(f"lance-ops: no Lance table at or below {args.uri} (no folder holding _versions/)", file=sys.stderr)
            raise SystemExit(2)
        return [(TableRef(uri=u, storage_options=so, manifest_store=args.manifest_store, name=u), DEFAULT_POLICY)
                for u in uris]
    return load_settings(args.config)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("uri", nargs="?", default=None,
                   help="a table, or a directory / bucket prefix searched for tables (default: the config's fleet)")
    p.add_argument("--config", default=None, help="lance_ops.yaml: its datasets and roots (default: $LANCE_OPS_CONFIG)")
    p.add_argument("--storage-option", action="append", type=_kv, default=[], metavar="KEY=VALUE",
                   help="storage option for URI (repeatable)")
    p.add_argument("--manifest-store", default=COMMIT_DEFAULTS.manifest_store, metavar="PATH",
                   help="external manifest store of URI (SQLite path or sqlite:/// URL)")
    p.add_argument("--json", action="store_true", help="print JSON for machines instead of a table")


def _action_row(a: Action) -> dict[str, Any]:
    from lance_ops.console import human_bytes

    return {"table": a.table, "action": a.operation, "reasons": a.explain(),
            "est. bytes": human_bytes(a.budget_bytes or a.estimate.bytes_removed), "priority": a.priority}


def cmd_plan(args: argparse.Namespace, out: Any) -> int:
    """Print every table's plan: a table of actions, or JSON."""
    from lance_ops.console import console_for, render_table
    from lance_ops.orchestration.planner import plan_fleet

    fleet = plan_fleet(_source(args), FleetBudget(max_bytes=args.max_bytes))
    if args.json:
        out.write(json.dumps({"plans": [p.to_dict() for p in fleet.plans], "errors": list(fleet.errors)}, indent=1))
        out.write("\n")
        return 1 if fleet.errors else 0
    console = console_for(out)
    rows = [_action_row(a) for p in fleet.plans for a in p.actions]
    healthy = sum(1 for p in fleet.plans if p.healthy)
    console.print(render_table(rows, ["table", "action", "reasons", "est. bytes", "priority"],
                               title=f"maintenance plan: {len(fleet.plans)} tables, {healthy} need nothing"))
    for table, err in fleet.errors:
        console.print(f"{table}: not planned: {err}")
    return 1 if fleet.errors else 0


def cmd_maintain(args: argparse.Namespace, out: Any) -> int:
    """Run the plan (in this process, or on ``--spark``); progress per action on stderr, a summary at the end."""
    from lance_ops.console import console_for, human_bytes, render_table

    err = console_for(sys.stderr)
    done = [0]

    def progress(r: ActionResult) -> None:
        done[0] += 1
        tail = f"version {r.version}" if r.version is not None else r.error or r.status
        err.print(f"[{done[0]}] {r.action.table}: {r.action.operation} {r.status} in {r.seconds:.2f}s ({tail})")

    spark = None
    if args.spark and not args.dry_run:
        from lance_ops.jobs import spark_session

        spark = spark_session(master=args.spark, app_name="lance-ops maintain")
    report = maintain(_source(args), max_bytes=args.max_bytes, dry_run=args.dry_run, on_action=progress, spark=spark)
    if args.json:
        out.write(report.to_json(indent=1) + "\n")
    else:
        rows = [{"table": r.action.table, "action": r.action.operation, "status": r.status,
                 "version": "" if r.version is None else r.version, "seconds": round(r.seconds, 2),
                 "why / error": r.error or r.action.explain()} for r in report.results]
        rows += [{"table": s.action.table, "action": s.action.operation, "status": "skipped", "version": "",
                  "seconds": 0.0, "why / error": s.why} for s in report.skipped]
        console_for(out).print(render_table(rows, title=f"maintain {report.run_id}: {human_bytes(report.bytes_used)} "
                                                  f"of the byte budget used"))
        for table, e in report.errors:
            console_for(out).print(f"{table}: not maintained: {e}")
    failed = any(r.status == "failed" for r in report.results) or report.errors
    return 1 if failed else 0


def cmd_history(args: argparse.Namespace, out: Any) -> int:
    """One row per version: version, time, operation, who, run, metrics."""
    from lance_ops.console import console_for, render_table

    ref = TableRef(uri=args.uri, storage_options=dict(args.storage_option), manifest_store=args.manifest_store)
    rows = history(ref, limit=args.limit)
    if args.json:
        out.write(json.dumps(rows, indent=1) + "\n")
        return 0
    flat = [{**{k: v for k, v in r.items() if k not in ("metrics", "lance_operation", "reasons")},
             "metrics": _short_metrics(r["metrics"])} for r in rows]
    console_for(out).print(render_table(flat, title=f"history of {args.uri}"))
    return 0


_SHORT = (("removed", "-"), ("added", "+"))


def _short_metrics(m: dict[str, int]) -> str:
    """``-4 frags (8000 rows), +4 frags (5600 rows, 77.1 KiB), 2400 deleted rows dropped``."""
    from lance_ops.console import human_bytes

    parts, seen = [], set()
    for what, sign in _SHORT:
        if m.get(f"num_{what}_fragments"):
            size = f", {human_bytes(m[f'num_{what}_bytes'])}" if what == "added" else ""
            parts.append(f"{sign}{m[f'num_{what}_fragments']} frags ({m[f'num_{what}_rows']} rows{size})")
        seen |= {f"num_{what}_{k}" for k in ("fragments", "rows", "files", "bytes")}
    if m.get("num_deleted_rows_dropped"):
        parts.append(f"{m['num_deleted_rows_dropped']} deleted rows dropped")
    seen.add("num_deleted_rows_dropped")
    parts += [f"{k.removeprefix('num_')}={v}" for k, v in m.items() if v and k not in seen]
    return ", ".join(parts)


def add_commands(sub: Any) -> None:
    """Register ``plan``, ``maintain`` and ``history`` on the ``lance-ops`` subparsers."""
    p = sub.add_parser("plan", help="what every table needs (compaction, indices, cleanup, ...) and why",
                       description="Plan maintenance from metadata only. Example: lance-ops plan /data/events --json")
    _common(p)
    p.add_argument("--max-bytes", type=int, default=None, help="bound each compaction's bytes read (default: none)")
    p.set_defaults(planner_command=cmd_plan)
    m = sub.add_parser("maintain", help="run the plan (in this process, or on Spark)",
                       description="Run the planned maintenance. Example: lance-ops maintain /data --max-bytes 1e9")
    _common(m)
    m.add_argument("--max-bytes", type=lambda s: int(float(s)), default=None,
                   help="byte budget of the run, summed over the actions' bytes read (default: none)")
    m.add_argument("--dry-run", action="store_true", help="list what would run, change nothing")
    m.add_argument("--spark", default=None, metavar="MASTER",
                   help="run the rewrites and index builds on Spark (local[*], spark://host:7077, ...); "
                        "default: in this process")
    m.set_defaults(planner_command=cmd_maintain)
    h = sub.add_parser("history", help="one row per version: operation, who, run, metrics (as DESCRIBE HISTORY)",
                       description="A table's commit history. Example: lance-ops history /data/events --json")
    h.add_argument("uri")
    h.add_argument("--storage-option", action="append", type=_kv, default=[], metavar="KEY=VALUE")
    h.add_argument("--manifest-store", default=COMMIT_DEFAULTS.manifest_store, metavar="PATH")
    h.add_argument("--limit", type=int, default=None, help="newest N versions only")
    h.add_argument("--json", action="store_true", help="print JSON")
    h.set_defaults(planner_command=cmd_history)


__all__ = ["add_commands", "cmd_history", "cmd_maintain", "cmd_plan", "fleet_members"]
