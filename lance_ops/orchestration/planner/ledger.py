"""The ledger: what ran, read from the table itself.

Every commit ``maintain`` makes carries commit stamps in its transaction properties
(:func:`stamps`): run id, orchestrator, user, operation, the plan's reasons and priority.  The
history (:func:`history`, ``lance-ops history``) is one row per version, as Delta's ``DESCRIBE
HISTORY``: version, time, operation, who, run, and metrics derived from the transaction's
operation (fragments and rows added / removed, segments), so it survives a lost orchestrator
database.  Commits stamped by the Dagster assets (``dagster/run_id``) and the Airflow operators
(``airflow/run_id``, ``airflow/dag_id``) are read too.

Decisions that commit nothing -- actions skipped for a budget -- are kept beside the table as well:
one small JSON file per run and table under ``_lance_ops/decisions/`` (:func:`record_skipped`,
written with the table's object store; no Lance reader, cleanup or sweep touches that folder), and
the history lists them as rows with ``status`` ``skipped`` and the reason in ``why``.
"""

import getpass
import json
import time
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime
from functools import singledispatch
from typing import Any

import lance_ops.format as lf
from lance_ops.format.distributed import ObjectStore
from lance_ops.orchestration.planner.model import Action, FleetPlan, Skipped, TableRef
from lance_ops.orchestration.stamps import REASONS_PROPERTY

RUN_ID = "lance_ops/run_id"
ORCHESTRATOR = "lance_ops/orchestrator"
USER = "lance_ops/user"
OPERATION = "lance_ops/operation"
REASONS = REASONS_PROPERTY
PRIORITY = "lance_ops/priority"
DAGSTER_RUN_ID = "dagster/run_id"
AIRFLOW_RUN_ID = "airflow/run_id"  # the stamps of the orchestration layer's Airflow operators
#: where skipped decisions are kept, relative to the table's root
DECISIONS_DIR = "_lance_ops/decisions"


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def stamps(action: Action, *, run_id: str, orchestrator: str) -> dict[str, str]:
    """The transaction properties of a commit made for ``action``."""
    return {RUN_ID: run_id, ORCHESTRATOR: orchestrator, USER: _user(), OPERATION: action.operation,
            REASONS: action.explain()[:1000], PRIORITY: str(action.priority)}


@singledispatch
def operation_metrics(op: Any) -> dict[str, int]:
    """Metrics of one committed operation, from the transaction alone."""
    return {}


def _frag_metrics(prefix: str, frags: Any) -> dict[str, int]:
    frags = list(frags)
    return {f"num_{prefix}_fragments": len(frags), f"num_{prefix}_rows": sum(f.num_rows for f in frags),
            f"num_{prefix}_files": sum(len(f.files) for f in frags),
            f"num_{prefix}_bytes": sum(df.file_size_bytes or 0 for f in frags for df in f.files)}


@operation_metrics.register
def _(op: lf.Append) -> dict[str, int]:
    return _frag_metrics("added", op.fragments)


@operation_metrics.register
def _(op: lf.Overwrite) -> dict[str, int]:
    return _frag_metrics("added", op.fragments)


@operation_metrics.register
def _(op: lf.Rewrite) -> dict[str, int]:
    old = [f for g in op.groups for f in g.old_fragments]
    new = [f for g in op.groups for f in g.new_fragments]
    return {**_frag_metrics("removed", old), **_frag_metrics("added", new),
            "num_deleted_rows_dropped": sum(f.num_deleted_rows for f in old),
            "num_indices_remapped": len(op.rewritten_indices)}


@operation_metrics.register
def _(op: lf.CreateIndex) -> dict[str, int]:
    return {"num_segments_added": len(op.new_indices), "num_segments_removed": len(op.removed_indices)}


@operation_metrics.register
def _(op: lf.Delete) -> dict[str, int]:
    return {"num_updated_fragments": len(op.updated_fragments), "num_removed_fragments": len(op.deleted_fragment_ids)}


@operation_metrics.register
def _(op: lf.Update) -> dict[str, int]:
    return {"num_removed_fragments": len(op.removed_fragment_ids), "num_updated_fragments": len(op.updated_fragments),
            **_frag_metrics("added", op.new_fragments)}


def _who(props: dict[str, str]) -> tuple[str, str]:
    if RUN_ID in props:
        return f"{props.get(ORCHESTRATOR, '?')}:{props.get(USER, '?')}", props[RUN_ID]
    if DAGSTER_RUN_ID in props:
        return "dagster", props[DAGSTER_RUN_ID]
    if AIRFLOW_RUN_ID in props:
        return f"airflow:{props.get('airflow/dag_id', '?')}", props[AIRFLOW_RUN_ID]
    return "", ""


def _store(ref: TableRef) -> ObjectStore:
    return ObjectStore(ref.uri, ref.resolved_storage_options())


def record_skipped(ref: TableRef, skipped: Iterable[Skipped], *, run_id: str, orchestrator: str) -> str | None:
    """Keep ``skipped`` (one table's actions a run or tick left out, and why) beside the table;
    the file's path relative to the table, or None when nothing was skipped."""
    entries = [{"action": s.action.to_dict(), "why": s.why} for s in skipped]
    if not entries:
        return None
    now = time.time()
    rel = f"{DECISIONS_DIR}/{int(now * 1e6):020d}-{uuid.uuid4().hex[:8]}.json"
    doc = {"run_id": run_id, "orchestrator": orchestrator, "user": _user(),
           "timestamp": datetime.fromtimestamp(now, UTC).isoformat(timespec="seconds"), "skipped": entries}
    _store(ref).put(rel, json.dumps(doc).encode())
    return rel


def record_fleet_skipped(fleet: FleetPlan, skipped: Iterable[Skipped] | None = None, *, run_id: str,
                         orchestrator: str) -> list[tuple[str, str]]:
    """:func:`record_skipped` for every table of a fleet tick (``skipped``: default the tick's);
    the tables whose ledger could not be written, and why (a record never stops a tick)."""
    refs = {p.table.label: p.table for p in fleet.plans}
    by_table: dict[str, list[Skipped]] = {}
    for s in fleet.skipped if skipped is None else skipped:
        by_table.setdefault(s.action.table, []).append(s)
    errors = []
    for table, items in by_table.items():
        try:
            record_skipped(refs[table], items, run_id=run_id, orchestrator=orchestrator)
        except (OSError, KeyError, RuntimeError, lf.LanceOpsError) as e:
            errors.append((table, f"{type(e).__name__}: {e}"))
    return errors


def skipped_decisions(ref: TableRef) -> list[dict[str, Any]]:
    """The skipped decisions kept beside the table, as history rows (oldest first)."""
    store = _store(ref)
    rows = []
    for name in sorted(store.list_dir(DECISIONS_DIR)):
        try:
            doc = json.loads(store.read(f"{DECISIONS_DIR}/{name}"))
        except (OSError, ValueError, lf.LanceOpsError):  # removed meanwhile, or not ours
            continue
        for e in doc.get("skipped", ()):
            a = Action.from_dict(e["action"])
            rows.append({"version": a.version, "timestamp": doc["timestamp"], "operation": a.operation,
                         "lance_operation": "", "who": f"{doc['orchestrator']}:{doc['user']}",
                         "run_id": doc["run_id"], "reasons": a.explain(), "metrics": {}, "status": "skipped",
                         "why": e["why"]})
    return rows


def history(table: TableRef | str, *, limit: int | None = None) -> list[dict[str, Any]]:
    """One row per readable version, newest first: version, timestamp (UTC ISO), operation,
    who, run_id, reasons, metrics, ``status`` ``committed``; and one row per decision kept beside
    the table (``status`` ``skipped``, ``why``), placed by its time."""
    ref = table if isinstance(table, TableRef) else TableRef(uri=str(table))
    ds = lf.dataset(ref.uri, storage_options=dict(ref.storage_options), manifest_store=ref.manifest_store)
    rows = []
    for entry in reversed(ds.versions()):
        v = entry["version"]
        if limit is not None and len(rows) >= limit:
            break
        try:
            txn = ds.read_transaction(v)
        except (lf.LanceOpsError, FileNotFoundError):  # a transaction file removed meanwhile
            txn = None
        props = dict(txn.properties) if txn is not None else {}
        who, run = _who(props)
        name = txn.operation.name if txn is not None else "unknown"
        ts: datetime = entry["timestamp"]
        rows.append({
            "version": v,
            "timestamp": ts.replace(tzinfo=UTC).isoformat(timespec="seconds"),
            "operation": props.get(OPERATION, name) if name != "reserve_fragments" else name,
            "lance_operation": name,
            "who": who,
            "run_id": run,
            "reasons": props.get(REASONS, ""),
            "metrics": operation_metrics(txn.operation) if txn is not None else {},
            "status": "committed",
        })
    merged = sorted(rows + skipped_decisions(ref), key=lambda r: (r["timestamp"], r["status"] == "committed",
                                                                   r["version"]), reverse=True)
    return merged[:limit] if limit is not None else merged
