"""``lance-ops maintain --spark MASTER``: the planner's rewrites run as the registry's Spark jobs."""

import io
import json
import os

import lance
from planner import tables as T

from lance_ops.cli import main
from lance_ops.orchestration.planner import plan
from lance_ops.orchestration.planner.ledger import OPERATION, RUN_ID


def test_cli_maintain_runs_the_plan_on_spark(spark, tmp_path):
    root = str(tmp_path / "root")
    T.small_fragments(os.path.join(root, "a"))
    T.deleted(os.path.join(root, "b"))
    before = {t: lance.dataset(os.path.join(root, t)).to_table().sort_by("id") for t in ("a", "b")}
    out = io.StringIO()
    assert main(["maintain", root, "--spark", spark.sparkContext.master, "--json"], out=out) == 0
    report = json.loads(out.getvalue())
    ran = {(os.path.basename(r["action"]["table"]), r["action"]["operation"]): r for r in report["results"]}
    assert {k: r["status"] for k, r in ran.items()} == {("a", "compact"): "ran", ("b", "materialize_deletions"): "ran"}
    for r in ran.values():  # the Spark job's result: tasks planned and run on executors
        assert r["metrics"]["tasks_planned"] >= 1 and r["metrics"]["tasks_succeeded"] == r["metrics"]["tasks_planned"]
        assert r["version"] is not None
    for t in ("a", "b"):
        uri = os.path.join(root, t)
        assert plan(uri).healthy  # the policy the CLI used for a URI: the default
        ds = lance.dataset(uri)
        assert ds.to_table().sort_by("id").equals(before[t])
        props = ds.get_transactions(1)[0].transaction_properties or {}
        assert (props[RUN_ID], props[OPERATION]) == (report["run_id"], ran[(t, props[OPERATION])]["action"]["operation"])
