"""The UI as a person sees it: ``dagster dev`` (webserver + daemon) on 127.0.0.1 with a STOCK
dagster.yaml (telemetry and the welcome dialog off, nothing about concurrency or run coordination),
two datasets (one lance_ops made with stable row ids, one pylance made with its defaults), runs
launched over GraphQL, and headless Chromium screenshots with assertions on the rendered text.

Shown with the daemon: the code location sets the pool limits itself (two writing runs on one
dataset never overlap), the change feed's automation condition materialises new versions, a bad
run fails with the typed error on its run page.

Chromium (Debian package) is installed by ``tests/browser.py`` when ``/usr/bin/chromium`` is missing.
"""

import html
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import lance
import pyarrow as pa
import pytest
import yaml
from browser import CHROMIUM, ensure_chromium, headless
from datagen import simple_table

import lance_ops.format as lf

ROOT = Path(__file__).resolve().parents[2]
DAGSTER = str(Path(sys.executable).parent / "dagster")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--virtual-time-budget=10000", "--window-size=1400,3000"]
STOCK_DAGSTER_YAML = "telemetry:\n  enabled: false\nnux:\n  enabled: false\n"
LAUNCH = """mutation($p: ExecutionParams!) { launchRun(executionParams: $p) { __typename
    ... on LaunchRunSuccess { run { runId status } }
    ... on PythonError { message } ... on RunConfigValidationInvalid { errors { message } } } }"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Dev:
    def __init__(self, base: str, tmp: Path) -> None:
        self.base, self.tmp = base, tmp

    def get(self, path: str) -> bytes:
        with urllib.request.urlopen(f"{self.base}{path}", timeout=10) as r:
            return r.read()

    def gql(self, query: str, variables: dict | None = None) -> dict:
        req = urllib.request.Request(f"{self.base}/graphql",
                                     json.dumps({"query": query, "variables": variables or {}}).encode(),
                                     {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            out = json.load(r)
        assert "errors" not in out, out["errors"]
        return out["data"]

    def launch(self, job: str, dataset: str, config: dict | None = None) -> str:
        params = {"selector": {"repositoryLocationName": "lance_ops", "repositoryName": "__repository__",
                               "jobName": job, "assetSelection": [{"path": [dataset]}], "assetCheckSelection": []},
                  "runConfigData": {"ops": {dataset: {"config": config}}} if config else {}}
        out = self.gql(LAUNCH, {"p": params})["launchRun"]
        assert out["__typename"] == "LaunchRunSuccess", out
        return out["run"]["runId"]

    def status(self, run_id: str) -> str:
        return self.gql("query($id: ID!) { runOrError(runId: $id) { ... on Run { status } } }",
                        {"id": run_id})["runOrError"]["status"]

    def wait(self, run_ids: list[str], timeout: float = 600) -> dict[str, str]:
        deadline = time.time() + timeout
        while True:
            states = {r: self.status(r) for r in run_ids}
            if all(s in ("SUCCESS", "FAILURE", "CANCELED") for s in states.values()):
                return states
            assert time.time() < deadline, f"runs still going: {states}"
            time.sleep(1)

    def page(self, path: str, name: str) -> str:
        """Screenshot ``path`` to ``screenshots/<name>.png`` and return the page's rendered text."""
        common = [CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={self.tmp / 'chromium-profile'}"]
        url = f"{self.base}{path}"
        dom = headless([*common, "--dump-dom", url])
        assert dom.returncode == 0, dom.stderr[-2000:]
        shots = self.tmp / "screenshots"
        shots.mkdir(exist_ok=True)
        png = shots / f"{name}.png"
        shot = headless([*common, f"--screenshot={png}", url])
        assert shot.returncode == 0 and png.stat().st_size > 20_000, shot.stderr[-2000:]  # a blank page is ~6 KB
        keep = os.environ.get("LANCE_OPS_UI_SCREENSHOTS")
        if keep:
            os.makedirs(keep, exist_ok=True)
            shutil.copyfile(png, os.path.join(keep, png.name))
        return rendered_text(dom.stdout)


def rendered_text(dom: str) -> str:
    dom = re.sub(r"<script.*?</script>|<style.*?</style>", "", dom, flags=re.S)
    parts = (html.unescape(p).strip() for p in re.split(r"<[^>]+>", dom))
    return " | ".join(p for p in parts if p)


def generated(start: int, n: int) -> pa.Table:
    """Rows shaped like the ``generate`` source (id, kind, amount), so lance_append can extend them."""
    ids = pa.array(range(start, start + n), pa.int64())
    return pa.table({"id": ids, "kind": pa.array(["click", "view", "buy"] * (n // 3) + ["click"] * (n % 3)),
                     "amount": pa.array([float(i % 97) * 1.25 for i in range(start, start + n)])})


def step_window(instance, run_id: str, step: str) -> tuple[float, float]:
    from dagster import DagsterEventType

    logs = instance.all_logs(run_id)
    start = [e.timestamp for e in logs if e.dagster_event and e.dagster_event.event_type == DagsterEventType.STEP_START
             and e.step_key == step]
    end = [e.timestamp for e in logs if e.dagster_event and e.step_key == step and e.dagster_event.event_type in (
        DagsterEventType.STEP_SUCCESS, DagsterEventType.STEP_FAILURE)]
    assert start and end, f"{run_id}: no step {step}"
    return start[0], end[-1]


@pytest.fixture(scope="module")
def dev(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ui")
    home = tmp / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(STOCK_DAGSTER_YAML)
    events, plain = str(tmp / "events"), str(tmp / "plain")
    lf.write_dataset(generated(0, 3000), events, enable_stable_row_ids=True, max_rows_per_file=1000)
    lf.write_dataset(generated(3000, 1000), events, mode="append")
    lance.write_dataset(simple_table(0, 500), plain)  # pylance defaults: no stable row ids
    config = tmp / "lance_ops.yaml"
    config.write_text(yaml.safe_dump({"spark": {"master": "local[1]"}, "datasets": {
        "events": {"uri": events, "change_feed": {"sink_uri": str(tmp / "events_changes")},
                   "source": {"format": "generate", "rows": 500},
                   "policy": {"sensors_enabled": True, "sensor_interval_seconds": 50, "min_small_fragments": 100,
                              "max_versions_since_compaction": 1000, "target_rows_per_fragment": 20000,
                              "max_rows_per_group": 256, "deleted_ratio_threshold": 0.3}},
        "plain": {"uri": plain, "change_feed": {"sink_uri": str(tmp / "plain_changes")}}}}))
    port = free_port()
    env = {**os.environ, "DAGSTER_HOME": str(home), "LANCE_OPS_CONFIG": str(config), "DAGSTER_DISABLE_TELEMETRY": "1"}
    log = open(tmp / "dagster_dev.log", "wb")
    proc = subprocess.Popen([DAGSTER, "dev", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
                            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    d = Dev(f"http://127.0.0.1:{port}", tmp)
    from dagster import DagsterInstance

    try:
        deadline = time.time() + 180
        while True:
            assert proc.poll() is None, (tmp / "dagster_dev.log").read_text()
            try:
                d.get("/server_info")
                status = d.gql("{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus } } } }")
                entries = status["workspaceOrError"]["locationEntries"]
                if entries and all(e["loadStatus"] == "LOADED" for e in entries):
                    break
            except OSError:
                pass
            assert time.time() < deadline, "dagster dev did not come up"
            time.sleep(0.3)
        instance = DagsterInstance.from_config(str(home))
        yield {"dev": d, "tmp": tmp, "events": events, "plain": plain, "home": home, "instance": instance,
               "log": tmp / "dagster_dev.log"}
        instance.dispose()
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        log.close()


def test_graphql_lists_one_set_of_jobs_sensors_schedules(dev):
    d = dev["dev"]
    assets = d.gql("{ assetNodes { assetKey { path } groupName isPartitioned isMaterializable } }")["assetNodes"]
    assert {(tuple(a["assetKey"]["path"]), a["isPartitioned"], a["isMaterializable"]) for a in assets} == {
        (("events",), False, True), (("events_change_feed",), True, True), (("plain",), False, True)}
    (node,) = d.gql("""{ repositoriesOrError { ... on RepositoryConnection { nodes { name
        jobs { name } sensors { name sensorState { status } }
        schedules { name cronSchedule scheduleState { status } } } } } }""")["repositoriesOrError"]["nodes"]
    assert {j["name"] for j in node["jobs"]} - {"__ASSET_JOB"} == {
        "lance_maintain", "lance_append", "lance_delete", "lance_upsert", "lance_compact",
        "lance_materialize_deletions", "lance_optimize_indices", "lance_cleanup_old_versions", "lance_checks",
        "lance_write_change_feed", "lance_remove_orphan_files", "lance_restore", "lance_autopilot",
        "lance_observe"}
    assert {(s["name"], s["sensorState"]["status"]) for s in node["sensors"]} == {
        ("lance_compaction_sensor", "RUNNING"), ("lance_new_versions_sensor", "RUNNING"),
        ("lance_checks_after_maintenance", "RUNNING"), ("lance_automation_sensor", "RUNNING"),
        ("lance_pool_limits", "RUNNING"), ("lance_autopilot_sensor", "STOPPED")}
    assert {(s["name"], s["cronSchedule"], s["scheduleState"]["status"]) for s in node["schedules"]} == {
        ("lance_append_schedule", "0 * * * *", "STOPPED"),
        ("lance_nightly_compaction", "0 2 * * *", "RUNNING"),
        ("lance_nightly_cleanup", "0 3 * * *", "RUNNING")}


def test_pool_limits_hold_with_a_stock_dagster_yaml(dev):
    """Two appends to ``events`` launched together run one after the other (pool lance-events, limit 1,
    set by the code location's lance_pool_limits sensor; nothing in dagster.yaml)."""
    d, instance = dev["dev"], dev["instance"]
    deadline = time.time() + 120
    wanted = {"lance-events": 1, "lance-plain": 1}  # the sensor sets them one after the other
    while True:
        limits = {p.name: p.limit for p in instance.event_log_storage.get_pool_limits()}
        if all(name in limits for name in wanted):
            break
        assert time.time() < deadline, f"the pool limits were not set: {limits}"
        time.sleep(1)
    assert {name: limits[name] for name in wanted} == wanted
    first, second = d.launch("lance_append", "events"), d.launch("lance_append", "events")
    assert d.wait([first, second]) == {first: "SUCCESS", second: "SUCCESS"}
    a, b = sorted([step_window(instance, first, "events"), step_window(instance, second, "events")])
    # each step starts a Spark session (seconds), so launched together they would overlap without the limit
    assert a[1] - a[0] > 2
    assert b[0] >= a[1], f"the steps overlapped: {a} {b}"
    assert lf.dataset(dev["events"]).count_rows() == 4000 + 2 * 500
    dev["appended"] = True


def test_change_feed_materialised_by_its_automation_condition(dev):
    """The appends made versions 3 and 4: the new-versions sensor adds their partitions, the automation
    sensor requests them, a run writes them; no backfill by hand."""
    instance = dev["instance"]
    from dagster import AssetKey

    key = AssetKey(["events_change_feed"])
    deadline = time.time() + 420
    while not {"3", "4"} <= instance.get_materialized_partitions(key):
        assert time.time() < deadline, "the automation did not materialise the new partitions: " + \
            dev["log"].read_text()[-3000:]
        time.sleep(2)
    records = instance.fetch_materializations(key, limit=10).records
    by_part = {r.partition_key: r for r in records}
    run = instance.get_run_by_id(by_part["3"].run_id)
    assert run.tags.get("dagster/sensor_name") == "lance_automation_sensor"
    assert by_part["3"].asset_materialization.metadata["insert"].value == 500


def test_pages_render_what_a_user_needs(dev):
    d = dev["dev"]
    ensure_chromium()
    events = d.page("/assets/events", "asset-events")
    for text in ("Materialize", "Automation details", "lance_compact", "lance_append", "lance_compaction_sensor",
                 "3 schedules", "Row count", "Storage", dev["events"], "committed_at", "lance-events",
                 "events_change_feed"):
        assert text in events, text
    assert "No automations found" not in events and "Join the Dagster community" not in events
    assert not re.search(r"committed_at \| [^|]* \| 1[0-9]{9}\.[0-9]", events)  # a date, not a raw float
    assert "rows_moved" not in events and "dagster_run_id" not in events  # no job metrics as metadata rows
    plain = d.page("/assets/plain", "asset-plain")
    assert "No change feed" in plain and "without stable row ids" in plain
    parts = d.page("/assets/events_change_feed?view=partitions", "change-feed-partitions")
    done = re.search(r"Materialized \((\d+)\)", parts)
    assert "Partitions" in parts and done and int(done.group(1)) >= 2, parts[:2000]
    launchpad = d.page("/locations/lance_ops/jobs/lance_compact/playground", "launchpad-lance_compact")
    flat = launchpad.replace(" | : | ", ": ")
    assert "target_rows_per_fragment: 20000" in flat and "max_rows_per_group: 256" in flat  # events' policy
    assert "target_rows_per_fragment: 1048576" in flat  # plain: the default policy
    assert "lance_ops/operation" in launchpad and "compact" in launchpad
    sensors = d.page("/automation", "automation")
    for name in ("lance_compaction_sensor", "lance_new_versions_sensor", "lance_automation_sensor",
                 "lance_pool_limits", "lance_nightly_compaction", "Automation condition sensor"):
        assert name in sensors, name


def test_a_bad_run_fails_with_the_typed_error_on_its_page(dev):
    d = dev["dev"]
    ensure_chromium()
    before = lf.dataset(dev["events"]).version
    run_id = d.launch("lance_delete", "events")  # no predicate: refused before Spark starts
    assert d.wait([run_id]) == {run_id: "FAILURE"}
    page = d.page(f"/runs/{run_id}", "failed-run")
    assert "Failure" in page and "STEP_FAILURE" in page
    assert "DatasetConfigError: dataset 'events', field `delete.where`: a delete needs a predicate" in page
    assert "Fix: set the predicate" in page and "['id', 'kind', 'amount']" in page
    assert lf.dataset(dev["events"]).version == before
