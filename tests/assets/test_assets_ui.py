"""The UI: ``dagster dev`` on 127.0.0.1 serving workspace.yaml, GraphQL, a launched run, a screenshot.

Chromium (Debian package) is installed with apt-get when ``/usr/bin/chromium`` is missing.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml
from datagen import simple_table

import lance_ops.format as lf

ROOT = Path(__file__).resolve().parents[2]
DAGSTER = str(Path(sys.executable).parent / "dagster")
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--virtual-time-budget=10000"]
DAGSTER_YAML = """\
telemetry:
  enabled: false
nux:
  enabled: false
run_coordinator:
  module: dagster._core.run_coordinator
  class: DefaultRunCoordinator
concurrency:
  pools:
    default_limit: 1
"""


def ensure_chromium() -> str:
    if not os.path.exists(CHROMIUM):
        subprocess.run("apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium",
                       shell=True, check=True, timeout=900, env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    assert os.path.exists(CHROMIUM)
    return CHROMIUM


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Dev:
    def __init__(self, base: str) -> None:
        self.base = base

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


@pytest.fixture(scope="module")
def dev(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ui")
    home = tmp / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(DAGSTER_YAML)
    uri = str(tmp / "events")
    lf.write_dataset(simple_table(0, 3000), uri, enable_stable_row_ids=True, max_rows_per_file=1000)
    lf.write_dataset(simple_table(3000, 1000), uri, mode="append")
    config = tmp / "lance_ops.yaml"
    config.write_text(yaml.safe_dump({"datasets": {"events": {
        "uri": uri, "change_feed": {"sink_uri": str(tmp / "events_changes")}}}}))
    port = free_port()
    env = {**os.environ, "DAGSTER_HOME": str(home), "LANCE_OPS_CONFIG": str(config),
           "DAGSTER_DISABLE_TELEMETRY": "1"}
    log = open(tmp / "dagster_dev.log", "wb")
    proc = subprocess.Popen([DAGSTER, "dev", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
                            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    d = Dev(f"http://127.0.0.1:{port}")
    try:
        deadline = time.time() + 120
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
        yield {"dev": d, "tmp": tmp, "uri": uri, "home": home}
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        log.close()


def test_graphql_lists_assets_jobs_sensors_schedules(dev):
    d = dev["dev"]
    (entry,) = d.gql("{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus } } } }")[
        "workspaceOrError"]["locationEntries"]
    assert entry == {"name": "lance_ops", "loadStatus": "LOADED"}
    assets = d.gql("{ assetNodes { assetKey { path } groupName isPartitioned } }")["assetNodes"]
    assert {(tuple(a["assetKey"]["path"]), a["groupName"], a["isPartitioned"]) for a in assets} == {
        (("events",), "lance", False), (("events_change_feed",), "lance", True)}
    repo = d.gql("""{ repositoriesOrError { ... on RepositoryConnection { nodes { name
        jobs { name } sensors { name sensorState { status } }
        schedules { name cronSchedule scheduleState { status } } } } } }""")["repositoriesOrError"]["nodes"]
    (node,) = repo
    jobs = {j["name"] for j in node["jobs"]}
    assert {"lance_append", "lance_delete", "lance_upsert", "lance_materialize_deletions", "lance_compact",
            "lance_write_change_feed", "lance_cleanup_old_versions", "lance_observe", "lance_checks",
            "lance_maintain"} <= jobs
    assert {(s["name"], s["sensorState"]["status"]) for s in node["sensors"]} == {
        ("lance_compaction_sensor", "STOPPED"), ("lance_new_versions_sensor", "STOPPED"),
        ("lance_checks_after_maintenance", "STOPPED"), ("lance_automation_sensor", "STOPPED"),
        ("lance_pool_limits", "RUNNING")}
    assert {(s["name"], s["cronSchedule"], s["scheduleState"]["status"]) for s in node["schedules"]} == {
        ("lance_append_schedule", "0 * * * *", "STOPPED"),
        ("lance_nightly_compaction", "0 2 * * *", "RUNNING"),
        ("lance_nightly_cleanup", "0 3 * * *", "RUNNING")}


def test_launch_run_over_graphql_succeeds(dev):
    d = dev["dev"]
    launched = d.gql("""mutation($p: ExecutionParams!) { launchRun(executionParams: $p) { __typename
        ... on LaunchRunSuccess { run { runId status } }
        ... on PythonError { message } ... on RunConfigValidationInvalid { errors { message } } } }""",
                     {"p": {"selector": {"repositoryLocationName": "lance_ops", "repositoryName": "__repository__",
                                         "jobName": "lance_cleanup_old_versions",
                                         "assetSelection": [{"path": ["events"]}]},
                            "runConfigData": {"ops": {"events": {"config": {"cleanup_old_versions": {
                                "older_than_days": 0, "retain_versions": 1, "dry_run": True}}}}}}})
    assert launched["launchRun"]["__typename"] == "LaunchRunSuccess", launched
    run_id = launched["launchRun"]["run"]["runId"]
    deadline = time.time() + 120
    while True:
        status = d.gql("query($id: ID!) { runOrError(runId: $id) { ... on Run { status } } }",
                       {"id": run_id})["runOrError"]["status"]
        if status in ("SUCCESS", "FAILURE", "CANCELED"):
            break
        assert time.time() < deadline, f"run {run_id} still {status}"
        time.sleep(0.5)
    assert status == "SUCCESS"
    obs = d.gql("""{ assetOrError(assetKey: {path: ["events"]}) { ... on Asset {
        assetObservations(limit: 1) { runId tags { key value } metadataEntries { label
          ... on IntMetadataEntry { intValue } } } } } }""")["assetOrError"]["assetObservations"]
    (o,) = obs
    tags = {t["key"]: t["value"] for t in o["tags"]}
    ints = {m["label"]: m.get("intValue") for m in o["metadataEntries"]}
    assert o["runId"] == run_id and tags["dagster/data_version"] == "2"
    assert ints["dagster/row_count"] == 4000 and ints["fragments"] == 4
    assert len(lf.dataset(dev["uri"]).versions()) == 2  # a dry run removes nothing


def test_chromium_renders_the_asset_graph(dev):
    chromium = ensure_chromium()
    url = f"{dev['dev'].base}/asset-groups"
    shots = dev["tmp"] / "screenshots"
    shots.mkdir()
    common = [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={dev['tmp'] / 'chromium-profile'}"]
    dom = subprocess.run([*common, "--dump-dom", url], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    html = dom.stdout
    assert "events_change_feed" in html and ">events<" in html, html[:2000]
    assert "Join the Dagster community" not in html  # nux off
    png = shots / "asset-groups.png"
    shot = subprocess.run([*common, f"--screenshot={png}", "--window-size=1400,900", url],
                          capture_output=True, text=True, timeout=120)
    assert shot.returncode == 0, shot.stderr[-2000:]
    assert png.stat().st_size > 20_000  # a blank page is ~6 KB
    keep = os.environ.get("LANCE_OPS_UI_SCREENSHOT")
    if keep:
        shutil.copyfile(png, keep)
