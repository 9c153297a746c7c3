"""Budgets (per compaction run and per fleet tick), fleets from roots and lance_ops.yaml, the CLI."""

import io
import json
import os

import lance
import pytest

import lance_ops.format as lf
from lance_ops.cli import main
from lance_ops.orchestration.planner import FleetBudget, TableRef, history, maintain, plan, plan_fleet
from lance_ops.orchestration.settings import RootSettings, parse_settings
from planner import tables as T


def _bytes(uri, ids):
    frags = {f.fragment_id: f for f in lance.dataset(uri).get_fragments()}
    return sum(os.path.getsize(os.path.join(uri, "data", df.path)) for i in ids for df in frags[i].data_files())


def _uneven(uri):
    """40 fragments of 100 rows; half the rows of 20..29 deleted.  Bins (target 1000 live rows):
    [0..9] and [10..19] (value 9 each), [20..39] (value 19.5: 20 fragments into 1, 500 deletions)."""
    T.small_fragments(uri, 40)
    lf.dataset(uri).delete("id >= 2000 AND id < 3000 AND id % 2 = 0")


def _rewrites(uri, run_id):
    out = []
    for h in history(uri):
        if h["run_id"] == run_id and h["lance_operation"] == "rewrite":
            txn = lf.dataset(uri).read_transaction(h["version"])
            out.append(([[f.id for f in g.old_fragments] for g in txn.operation.groups], h["metrics"]))
    return out


def test_budget_smaller_than_the_work_converges_most_valuable_bins_first(tmp_path):
    uri = str(tmp_path / "t")
    _uneven(uri)
    rows = lance.dataset(uri).to_table().sort_by("id")
    full = plan(uri, T.POLICY).actions[0]
    assert full.details["bins"] == [list(range(10)), list(range(10, 20)), list(range(20, 40))]
    budget = _bytes(uri, range(20, 40)) + _bytes(uri, range(5))  # the valuable bin, not a second one
    assert plan(uri, T.POLICY, max_bytes=budget).actions[0].details["bins"] == [list(range(20, 40))]
    runs = []
    for i in range(5):
        report = maintain([(TableRef(uri), T.POLICY)], max_bytes=budget, run_id=f"run{i}")
        assert report.bytes_used <= budget
        done = _rewrites(uri, f"run{i}")
        for _, metrics in done:
            assert metrics["num_removed_bytes"] <= budget  # what the commit rewrote, as recorded
        runs.append(done)
        if not report.results:
            break
    assert [[groups for groups, _ in r] for r in runs[:2]] == [[[[*range(20, 40)]]], [[[*range(10)], [*range(10, 20)]]]]
    assert runs[2] == [] and plan(uri, T.POLICY).healthy
    assert lance.dataset(uri).to_table().sort_by("id").equals(rows)


def test_skipped_for_budget_says_why(tmp_path):
    uri = str(tmp_path / "t")
    _uneven(uri)
    report = maintain([(TableRef(uri), T.POLICY)], max_bytes=100)
    assert report.results == ()
    (s,) = report.skipped
    assert s.action.operation == "compact" and s.why.startswith("byte budget: needs ")
    # the skipped decision is kept beside the table: the history shows it (no version was made)
    (row,) = [r for r in history(uri) if r["status"] == "skipped"]
    assert (row["operation"], row["version"], row["why"], row["run_id"]) == \
        ("compact", s.action.version, s.why, report.run_id)
    assert row["who"].startswith("cli:") and row["reasons"] == s.action.explain()
    assert [r["status"] for r in history(uri)].count("committed") == len(lance.dataset(uri).versions())
    out = io.StringIO()  # lance-ops history shows it too
    assert main(["history", uri, "--json"], out=out) == 0
    assert [(r["status"], r["why"]) for r in json.loads(out.getvalue()) if r["status"] != "committed"] == [
        ("skipped", s.why)]
    out = io.StringIO()
    assert main(["history", uri], out=out) == 0 and "skipped" in out.getvalue()
    dry = maintain([(TableRef(uri), T.POLICY)], max_bytes=100, dry_run=True)
    assert len(dry.skipped) == 1 and len([r for r in history(uri) if r["status"] == "skipped"]) == 1


@pytest.mark.parametrize(("limits", "rewritten"), [
    ({"max_source_fragments": 10}, [list(range(10))]),  # [20..39] does not fit; the first that does
    ({"max_source_rows": 2000}, [list(range(20, 40))]),  # the most valuable fits
    ({"max_source_fragments": 30}, [list(range(10)), list(range(20, 40))]),
])
def test_compact_files_source_limits_take_the_most_valuable_bins(tmp_path, limits, rewritten):
    """``bin_order="value"`` (what the planner passes) takes the most valuable bins that fit."""
    uri = str(tmp_path / "t")
    _uneven(uri)
    m = lf.dataset(uri).compact_files(target_rows_per_fragment=T.TARGET, bin_order="value", **limits)
    txn = lf.dataset(uri).read_transaction(m.version)
    assert [[f.id for f in g.old_fragments] for g in txn.operation.groups] == rewritten


@pytest.mark.parametrize(("limits", "rewritten"), [
    ({"max_source_fragments": 10}, [list(range(10))]),
    ({"max_source_rows": 2000}, [list(range(10)), list(range(10, 20))]),
    ({"max_source_fragments": 30}, [list(range(10)), list(range(10, 20))]),  # [20..39] does not fit: stop
])
def test_compact_files_source_limits_default_to_pylances_order(tmp_path, limits, rewritten):
    """Without ``bin_order`` the limits take bins oldest first and stop at the first that does not
    fit, as pylance's ``max_source_fragments``."""
    uri = str(tmp_path / "t")
    _uneven(uri)
    m = lf.dataset(uri).compact_files(target_rows_per_fragment=T.TARGET, **limits)
    txn = lf.dataset(uri).read_transaction(m.version)
    assert [[f.id for f in g.old_fragments] for g in txn.operation.groups] == rewritten


def _fleet(root):
    T.small_fragments(os.path.join(root, "a"))  # compact, priority 18
    T.deleted(os.path.join(root, "b"))  # materialize_deletions, priority 30
    T.healthy(os.path.join(root, "c"))
    T.small_fragments(os.path.join(root, "team", "e"), 12)  # compact, priority 11


def test_plan_fleet_ranks_across_tables_within_the_tick_budget(tmp_path):
    root = str(tmp_path / "root")
    _fleet(root)
    source = RootSettings(uri=root, policy=T.POLICY)
    fleet = plan_fleet(source, FleetBudget(max_runs=2))
    assert sorted(os.path.relpath(p.table.uri, root) for p in fleet.plans) == ["a", "b", "c", "team/e"]
    assert [(os.path.basename(a.table), a.operation) for a in fleet.selected] == [
        ("b", "materialize_deletions"), ("a", "compact")]
    assert [(os.path.basename(s.action.table), s.why) for s in fleet.skipped] == [("e", "run budget: 2 runs chosen")]
    a_bytes = next(a for a in fleet.selected if a.operation == "compact").budget_bytes
    b_bytes = fleet.selected[0].budget_bytes
    # bytes for b and half of a: a's compaction is re-planned to its first bin, e waits
    tight = plan_fleet(source, FleetBudget(max_bytes=b_bytes + a_bytes // 2 + 100))
    assert tight.bytes_selected <= b_bytes + a_bytes // 2 + 100
    partial = next(a for a in tight.selected if a.table.endswith("/a"))
    assert partial.details["bins"] == [list(range(10))]
    assert [os.path.basename(s.action.table) for s in tight.skipped] == ["e"]


def test_settings_roots_and_datasets_make_one_fleet(tmp_path):
    root = str(tmp_path / "root")
    _fleet(root)
    named = str(tmp_path / "named")
    T.deleted(named)
    settings = parse_settings(
        "datasets:\n  named:\n    uri: named\n    policy: {target_rows_per_fragment: 1000}\n"
        "roots:\n  - uri: root\n    policy: {target_rows_per_fragment: 1000, min_small_fragments: 4}\n",
        base_dir=tmp_path,
    )
    fleet = plan_fleet(settings)
    assert {p.table.label: [a.operation for a in p.actions] for p in fleet.plans} == {
        "named": ["materialize_deletions"],
        f"{root}/a": ["compact"], f"{root}/b": ["materialize_deletions"], f"{root}/c": [],
        f"{root}/team/e": ["compact"],
    }


def test_cli_plan_maintain_history(tmp_path):
    root = str(tmp_path / "root")
    _fleet(root)
    cfg = tmp_path / "lance_ops.yaml"
    cfg.write_text("roots:\n  - uri: root\n    policy: {target_rows_per_fragment: 1000, min_small_fragments: 4}\n")
    out = io.StringIO()
    assert main(["plan", "--config", str(cfg), "--json"], out=out) == 0
    plans = json.loads(out.getvalue())["plans"]
    assert sum(len(p["actions"]) for p in plans) == 3
    out = io.StringIO()
    assert main(["plan", "--config", str(cfg)], out=out) == 0
    text = out.getvalue()
    assert "materialize_deletions" in text and "deleted ratio 0.300 >= 0.1" in text and "4 tables, 1 need nothing" in text
    out = io.StringIO()
    assert main(["maintain", "--config", str(cfg), "--dry-run"], out=out) == 0
    assert out.getvalue().count("planned") == 3
    out = io.StringIO()
    assert main(["maintain", "--config", str(cfg), "--json"], out=out) == 0
    report = json.loads(out.getvalue())
    assert [r["status"] for r in report["results"]] == ["ran"] * 3
    out = io.StringIO()
    assert main(["plan", "--config", str(cfg), "--json"], out=out) == 0
    assert all(not p["actions"] for p in json.loads(out.getvalue())["plans"])
    out = io.StringIO()
    assert main(["history", f"{root}/b", "--json", "--limit", "1"], out=out) == 0
    (latest,) = json.loads(out.getvalue())
    assert latest["operation"] == "materialize_deletions" and latest["run_id"] == report["run_id"]
    assert latest["metrics"]["num_deleted_rows_dropped"] == 2400 and latest["who"].startswith("cli:")
    out = io.StringIO()
    assert main(["history", f"{root}/b"], out=out) == 0
    assert "-4 frags (5600 rows), +4 frags (5600 rows" in out.getvalue()
    assert "2400 deleted rows dropped" in out.getvalue()


def test_cli_without_a_table_says_so(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["plan", str(tmp_path / "nothing")], out=io.StringIO())
    assert e.value.code == 2 and "no Lance table at or below" in capsys.readouterr().err


def test_history_reads_other_orchestrators_stamps(tmp_path):
    uri = str(tmp_path / "t")
    lf.write_dataset(T.rows(0, 10), uri)
    ds = lf.dataset(uri)
    ds.delete("id < 2")  # no stamps
    lf.write_dataset(T.rows(10, 10), uri, mode="append",
                     transaction_properties={"airflow/run_id": "manual__1", "airflow/dag_id": "lance_append"})
    lf.write_dataset(T.rows(20, 10), uri, mode="append", transaction_properties={"dagster/run_id": "abc"})
    rows = history(uri)
    assert [(r["version"], r["operation"], r["who"], r["run_id"]) for r in rows] == [
        (4, "append", "dagster", "abc"), (3, "append", "airflow:lance_append", "manual__1"),
        (2, "delete", "", ""), (1, "overwrite", "", "")]  # (a create is an Overwrite, as in pylance)
    assert rows[0]["metrics"]["num_added_rows"] == 10
