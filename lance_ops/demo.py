"""``make demo``: the whole maintenance pipeline through Dagster, in this process.

On the embedded default (``.lance_ops/demo``: a local dataset, its change feed sink and a
Dagster instance; Spark ``local[*]``), with one SparkSession for every run:

1. create the dataset (stable row ids) from generated rows with the Spark append job;
2. delete rows, then let the compaction sensor decide: it requests a deletion
   materialisation, which runs;
3. append more batches and upsert rows; the sensor now requests a compaction, which runs;
   a second tick requests nothing;
4. the new-versions sensor adds a change-feed partition per version, and one backfill run
   rebuilds the change feed of every version; one more append, and the change feed's automation
   condition requests the new version's partition, which runs;
5. the asset checks run; a summary table is printed.

Exits 0 only if every run succeeded, every check passed and the results match the in-process
oracle (``lance_ops.format``).  ``DAGSTER_HOME=.lance_ops/demo/dagster_home make ui`` shows
the runs afterwards.
"""

import argparse
import shutil
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

DEMO_DIR = Path(".lance_ops") / "demo"
DAGSTER_YAML = """\
telemetry:
  enabled: false
nux:
  enabled: false
"""


class Demo:
    def __init__(self, root: Path, *, master: str | None, out: Any) -> None:
        from dagster import DagsterInstance

        from lance_ops.assets.definitions import build_definitions
        from lance_ops.orchestration.settings import DEFAULT_CONFIG_YAML, parse_settings

        self.root = root
        self.out = out
        text = DEFAULT_CONFIG_YAML.replace(".lance_ops/demo/", "")
        if master:
            text = text.replace("master: local[*]", f"master: {master}")
        self.settings = parse_settings(text, base_dir=root, source_path="<embedded default>")
        self.d = self.settings.datasets[0]
        self.defs = build_definitions(self.settings)
        home = root / "dagster_home"
        home.mkdir(parents=True, exist_ok=True)
        (home / "dagster.yaml").write_text(DAGSTER_YAML)
        self.instance = DagsterInstance.from_config(str(home))
        self.failures: list[str] = []
        self.cursors: dict[str, str] = {}
        self.runs: list[tuple[str, float, bool]] = []
        self.t0 = time.perf_counter()

    # ---------------------------------------------------------------- helpers
    def log(self, msg: str) -> None:
        print(f"[{time.perf_counter() - self.t0:6.1f}s] {msg}", file=self.out, flush=True)

    def expect(self, ok: bool, what: str) -> None:
        if not ok:
            self.failures.append(what)
        self.log(f"  [{'ok' if ok else 'FAILED'}] {what}")

    def run(self, job: str, config: Any = None, **kwargs: Any) -> Any:
        from lance_ops.assets.runs import execute

        name = f"{self.d.name}:{job}"
        t = time.perf_counter()
        result: Any = execute(self.defs, self.d.name, job, config, instance=self.instance,
                              run_config=kwargs.pop("run_config", None), tags=kwargs.pop("tags", None),
                              partition_key=kwargs.pop("partition_key", None))
        secs = time.perf_counter() - t
        self.runs.append((name, secs, result.success))
        versions = [m.event_specific_data.materialization.tags.get("dagster/data_version")
                    for m in result.get_asset_materialization_events()
                    if m.event_specific_data.materialization.asset_key.path == [self.d.name]]
        self.log(f"run {result.dagster_run.job_name} ({name}): {'SUCCESS' if result.success else 'FAILURE'} "
                 f"in {secs:.1f}s" + (f", versions {', '.join(v for v in versions if v)}" if versions else ""))
        if not result.success:
            self.failures.append(f"run {name} failed")
            for ev in result.all_events:
                if ev.event_type_value == "STEP_FAILURE" and ev.event_specific_data.error:
                    print(ev.event_specific_data.error.to_string(), file=sys.stderr)
        return result

    def tick(self, sensor_name: str) -> Any:
        from dagster import build_sensor_context

        sensor = self.defs.get_sensor_def(f"lance_{sensor_name}")
        resources = {k: v for k, v in (self.defs.resources or {}).items() if k.startswith("lance_")}
        ctx = build_sensor_context(instance=self.instance, cursor=self.cursors.get(sensor.name), resources=resources)
        result = sensor(ctx)
        new_cursor = getattr(result, "cursor", None)
        if new_cursor:
            self.cursors[sensor.name] = new_cursor  # the daemon keeps this in the instance
        return result

    def maintenance_tick(self) -> list[Any]:
        result = self.tick("compaction_sensor")
        requests = list(getattr(result, "run_requests", None) or [])
        if not requests:
            reason = getattr(result, "skip_reason", None) or result
            self.log(f"compaction sensor: no request ({getattr(reason, 'skip_message', reason)})")
        for r in requests:
            self.log(f"compaction sensor: requests {r.job_name} (run key {r.run_key}; {(r.tags or {}).get('lance_ops/reason')})")
        return requests

    def automation_step(self, latest: int) -> dict[str, dict[str, int]]:
        """Append once more; the new-versions sensor adds its partition and the change feed's automation
        condition requests it (the automation sensor does this under the daemon)."""
        from dagster import AssetKey, evaluate_automation_conditions

        from lance_ops.assets.configs import AppendConfig

        first = evaluate_automation_conditions(defs=self.defs, instance=self.instance)
        self.run("append", AppendConfig(rows=1_000))
        for req in getattr(self.tick("new_versions_sensor"), "dynamic_partitions_requests", None) or []:
            self.instance.add_dynamic_partitions(req.partitions_def_name, list(req.partition_keys))
        second = evaluate_automation_conditions(defs=self.defs, instance=self.instance, cursor=first.cursor)
        key = AssetKey([f"{self.d.name}_change_feed"])
        wanted = sorted(second.get_requested_partitions(key), key=int)
        self.expect(wanted == [str(latest + 1)], f"automation condition requests the new partition {latest + 1}")
        out: dict[str, dict[str, int]] = {}
        for part in wanted:
            res = self.run("change_feed", partition_key=part)
            for m in res.get_asset_materialization_events():
                meta = m.event_specific_data.materialization.metadata
                out[str(m.partition)] = {k: int(meta[k].value) for k in ("insert", "update_preimage",
                                                                           "update_postimage", "delete")
                                         if meta[k].value}
        return out

    # ------------------------------------------------------------------- steps
    def pipeline(self) -> int:
        """Every step of the demo; 0 if all runs succeeded and every expectation held."""
        d = self.d
        self.log(f"dataset {d.name} at {d.uri}; change feed sink {d.change_feed.sink_uri}")
        self.log(f"Spark {self.settings.spark.master}; Dagster instance {self.root / 'dagster_home'}")
        self.create_and_materialize_deletions()
        frags_before, frags_after, latest = self.compaction_step()
        counts, cf = self.change_feed_step(latest)
        self.checks_step(cf)
        self.oracle_step(counts)
        self.summary(counts, frags_before, frags_after)
        return self.verdict()

    def create_and_materialize_deletions(self) -> None:
        """Steps 1-2: create the dataset, delete a quarter, the sensor's deletion materialisation."""
        import lance_ops.format as lf
        from lance_ops.assets.configs import AppendConfig, DeleteConfig

        d = self.d
        self.run("append", AppendConfig(rows=20_000, max_rows_per_file=10_000))
        ds = lf.dataset(d.uri, manifest_store=d.manifest_store)
        self.expect(ds.has_stable_row_ids and ds.count_rows() == 20_000, "created with stable row ids, 20000 rows")
        self.expect(not self.maintenance_tick(), "below the policy: the compaction sensor requests nothing")

        self.run("delete", DeleteConfig(where="id % 4 = 0"))
        requests = self.maintenance_tick()
        self.expect([r.job_name for r in requests] == ["lance_materialize_deletions"],
                    "25% deleted: the sensor requests one deletion materialisation")
        for r in requests:
            self.run(r.job_name.removeprefix("lance_"), run_config=r.run_config, tags=r.tags)
        ds = lf.dataset(d.uri, manifest_store=d.manifest_store)
        self.expect(all(f.deletion_file is None for f in ds.get_fragments()) and ds.count_rows() == 15_000,
                    "deletions materialised: no deletion file left, 15000 rows")

    def compaction_step(self) -> tuple[int, int, int]:
        """Step 3: appends and an upsert, the sensor's compaction; (fragments before, after, version)."""
        import lance_ops.format as lf
        from lance_ops.assets.configs import AppendConfig, UpsertConfig

        d = self.d
        for _ in range(3):
            self.run("append", AppendConfig(rows=2_000))
        self.run("upsert", UpsertConfig(start_id=25_000, rows=2_000))
        before = lf.dataset(d.uri, manifest_store=d.manifest_store)
        frags_before = len(before.get_fragments())
        ids_before = before.to_table(columns=["_rowid"])["_rowid"].to_numpy()
        requests = self.maintenance_tick()
        self.expect([r.job_name for r in requests] == ["lance_compact"],
                    f"{frags_before} small fragments: the sensor requests one compaction")
        for r in requests:
            self.run("compact", run_config=r.run_config, tags=r.tags)
        after = lf.dataset(d.uri, manifest_store=d.manifest_store)
        frags_after = len(after.get_fragments())
        self.expect(frags_after < frags_before, f"compaction: {frags_before} -> {frags_after} fragments")
        ids_after = after.to_table(columns=["_rowid"])["_rowid"].to_numpy()
        self.expect(sorted(ids_before.tolist()) == sorted(ids_after.tolist()), "compaction kept every _rowid")
        self.expect(not self.maintenance_tick(), "next tick: nothing to do")
        return frags_before, frags_after, after.version

    def change_feed_step(self, latest: int) -> tuple[dict[str, dict[str, int]], Any]:
        """Step 4: a partition per version, one backfill run, then the automation condition's run.

        Returns the change counts per partition and the backfill run's result.
        """
        result = self.tick("new_versions_sensor")
        keys: list[str] = []
        for req in getattr(result, "dynamic_partitions_requests", None) or []:
            keys += list(req.partition_keys)
            self.instance.add_dynamic_partitions(req.partitions_def_name, list(req.partition_keys))
        self.expect(keys == [str(v) for v in range(1, latest + 1)],
                    f"new-versions sensor: one partition per version (1..{latest})")
        cf: Any = self.run("change_feed",
                           tags={"dagster/asset_partition_range_start": "1",
                                 "dagster/asset_partition_range_end": str(latest)})
        mats = cf.get_asset_materialization_events()
        self.expect(len({m.partition for m in mats}) == latest, f"change feed backfill: {latest} partitions, 1 run")
        kinds = ("insert", "update_preimage", "update_postimage", "delete")
        counts: dict[str, dict[str, int]] = {
            str(m.partition): {k: int(m.event_specific_data.materialization.metadata[k].value) for k in kinds
                               if m.event_specific_data.materialization.metadata[k].value}
            for m in mats
        }
        counts.update(self.automation_step(latest))
        return counts, cf

    def checks_step(self, cf: Any) -> None:
        """Step 5: every asset check passes (those of the change feed ran with its backfill too)."""
        checks = self.run("checks")
        evaluations = checks.get_asset_check_evaluations() + cf.get_asset_check_evaluations()
        for c in evaluations:
            md = {k: v.value for k, v in c.metadata.items()}
            self.expect(c.passed, f"check {c.asset_key.to_user_string()}:{c.check_name} {md}")
        self.expect(len(evaluations) == 7, "7 asset check evaluations (5 checks incl. index_coverage, 2 of the change feed twice)")

    def oracle_step(self, counts: dict[str, dict[str, int]]) -> None:
        """The oracle: the in-process change feed of each version, from lance_ops.format."""
        import lance_ops.format as lf

        after = lf.dataset(self.d.uri, manifest_store=self.d.manifest_store)
        mismatches = []
        for v in range(1, after.version + 1):
            table = after.change_feed(v - 1, v)
            want = {k: int(n) for k, n in zip(*_value_counts(table["_change_type"]), strict=True)}
            if counts.get(str(v), {}) != want:
                mismatches.append(f"v{v}: sink {counts.get(str(v))} oracle {want}")
        self.expect(not mismatches, "change feed per version equals the in-process oracle"
                    + (f" ({'; '.join(mismatches)})" if mismatches else ""))

    def summary(self, counts: dict[str, dict[str, int]], frags_before: int, frags_after: int) -> None:
        """Print the versions with their changes, and what Dagster recorded."""
        from dagster import AssetKey

        import lance_ops.format as lf
        from lance_ops.console import console_for, render_table

        d = self.d
        after = lf.dataset(d.uri, manifest_store=d.manifest_store)
        rows = self.version_rows(after, counts)
        print(file=self.out)
        console_for(self.out).print(render_table(rows, title="versions and their changes"))
        totals = {k: sum(r[k] for r in rows) for k in ("insert", "update", "delete")}
        print(f"\nfragments before compaction {frags_before}, after {frags_after}; rows {after.count_rows()}; "
              f"changes: {totals['insert']} inserts, {totals['update']} updates, {totals['delete']} deletes", file=self.out)
        materialized: Any = self.instance.fetch_materializations(AssetKey([d.name]), limit=100).records
        print(f"Dagster recorded {len(materialized)} materialisations of asset '{d.name}' "
              f"(data versions {sorted(int(r.asset_materialization.tags['dagster/data_version']) for r in materialized)}) "
              f"in {len(self.runs)} runs", file=self.out)
        print("runs: " + ", ".join(f"{n.removeprefix(d.name + ':')} {s:.1f}s" for n, s, _ in self.runs), file=self.out)

    def version_rows(self, after: Any, counts: dict[str, dict[str, int]]) -> list[dict[str, Any]]:
        """One summary row per version of ``after``: its operation, rows, fragments and changes."""
        from lance_ops.orchestration import TableRef
        from lance_ops.orchestration.policy import manifest_stats, transaction_of

        table = TableRef.from_settings(self.d)
        rows = []
        for v in range(1, after.version + 1):
            m = after.checkout_version(v).manifest
            st = manifest_stats(m, small_fragment_rows=self.d.policy.target_rows_per_fragment)
            txn = transaction_of(table, v)
            c = counts.get(str(v), {})
            rows.append({
                "version": v, "operation": txn.operation.name if txn else "?", "rows": st["rows"],
                "fragments": st["fragments"], "deleted": st["deleted_rows"],
                "insert": c.get("insert", 0), "update": c.get("update_postimage", 0), "delete": c.get("delete", 0),
            })
        return rows

    def verdict(self) -> int:
        """0 if nothing failed, else 1 with the failures printed."""
        if self.failures:
            print(f"\nDEMO FAILED ({len(self.failures)}):", file=self.out)
            for f in self.failures:
                print(f"  - {f}", file=self.out)
            return 1
        print(f"\ndemo OK in {time.perf_counter() - self.t0:.1f}s: every run succeeded and every check passed",
              file=self.out)
        return 0


def _value_counts(col: Any) -> tuple[list[str], list[int]]:
    import pyarrow.compute as pc

    vc = pc.value_counts(col).to_pylist() if len(col) else []
    return [r["values"] for r in vc], [r["counts"] for r in vc]


def main(argv: Sequence[str] | None = None, *, out: Any = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lance_ops.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=str(DEMO_DIR), help="where the demo writes (wiped first)")
    parser.add_argument("--master", default=None, help="Spark master (default: the embedded local[*])")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore", module="dagster")
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    root = Path(args.root).resolve()
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    import logging

    logging.getLogger("dagster").setLevel(logging.WARNING)
    demo = Demo(root, master=args.master, out=out or sys.stdout)
    try:
        return demo.pipeline()
    finally:
        demo.instance.dispose()


if __name__ == "__main__":
    sys.exit(main())
