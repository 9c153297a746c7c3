"""The orchestrator-neutral layer on real datasets (no Spark): strict settings, the registry's
parameters and their defaults, tasks through JSON, errors across processes, a store-backed
dataset read through its commit handler, and one maintenance decision."""

import dataclasses
import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest

import lance_ops.format as lf
from lance_ops.format import errors as fe
from lance_ops.orchestration import (
    OPERATIONS,
    DatasetConfigError,
    OperationResult,
    SettingsError,
    TableRef,
    Task,
    airflow_stamp,
    dagster_stamp,
    error_from_json,
    is_retryable,
    resolve_params,
)
from lance_ops.orchestration.maintain import decide_maintenance, maintain, planned_steps
from lance_ops.orchestration.settings import parse_settings

YAML = """\
datasets:
  events:
    uri: {uri}
    manifest_store: {store}
    policy:
      target_rows_per_fragment: 1000
      min_small_fragments: 3
      deleted_ratio_threshold: 0.2
      upsert_on: [id, kind]
      cleanup_older_than_days: 3
"""


def rows(start: int, n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64()), "kind": ["click"] * n,
                     "amount": pa.array([1.0] * n)})


@pytest.fixture
def settings(tmp_path):
    return parse_settings(YAML.format(uri=tmp_path / "events", store=tmp_path / "manifests.db"), base_dir=tmp_path)


# ------------------------------------------------------------------------------ settings
@pytest.mark.parametrize("text, key, hint", [
    ("sparks:\n  master: local[2]\ndatasets:\n  e:\n    uri: /x\n", "sparks", "did you mean `spark`?"),
    ("datasets:\n  e:\n    uri: /x\n    polcy: {}\n", "datasets.e.polcy", "did you mean `policy`?"),
    ("datasets:\n  e:\n    uri: /x\n    policy:\n      min_small_fragment: 3\n", "datasets.e.policy.min_small_fragment",
     "did you mean `min_small_fragments`?"),
    ("spark:\n  submit:\n    sparksubmit: x\ndatasets:\n  e:\n    uri: /x\n", "spark.submit.sparksubmit",
     "did you mean `spark_submit`?"),
])
def test_unknown_keys_are_rejected_with_the_closest_valid_name(text, key, hint):
    with pytest.raises(SettingsError) as e:
        parse_settings(text, source_path="lance_ops.yaml")
    assert e.value.key == key and hint in str(e.value) and str(e.value).startswith("lance_ops.yaml: unknown key")
    assert isinstance(e.value, ValueError)


def test_free_form_mappings_take_any_key(tmp_path):
    s = parse_settings("spark:\n  conf:\n    spark.anything: '1'\ndatasets:\n  e:\n    uri: /x\n"
                       "    storage_options:\n      token: {env: SA}\n      endpoint: http://h\n"
                       "    source:\n      format: csv\n      path: /in\n      options:\n        header: 'true'\n")
    d = s.dataset("e")
    assert (d.storage_options, d.storage_options_env, d.source.options) == (
        {"endpoint": "http://h"}, {"token": "SA"}, {"header": "true"})


# ------------------------------------------------------------------------------ registry
def test_parameter_defaults_come_from_format_and_the_policy(settings):
    d = settings.dataset("events")
    assert resolve_params("compact") == OPERATIONS["compact"].params(
        target_rows_per_fragment=lf.COMPACTION_DEFAULTS.target_rows_per_fragment,
        max_rows_per_group=lf.COMPACTION_DEFAULTS.max_rows_per_group,
        materialize_deletions_threshold=lf.COMPACTION_DEFAULTS.materialize_deletions_threshold)
    compact = resolve_params("compact", d, {"dry_run": True, "max_rows_per_group": None})
    assert (compact.target_rows_per_fragment, compact.materialize_deletions_threshold, compact.dry_run,
            compact.max_rows_per_group) == (1000, 0.2, True, d.policy.max_rows_per_group)
    assert resolve_params("optimize_indices").num_indices_to_merge == lf.OPTIMIZE_INDICES_DEFAULTS.num_indices_to_merge
    assert resolve_params("upsert", d).on == ("id", "kind")
    assert resolve_params("cleanup_old_versions", d).older_than_days == 3
    with pytest.raises(DatasetConfigError, match=r"compact has no parameter 'target_rows'"):
        resolve_params("compact", d, {"target_rows": 5})
    assert {n for n, s in OPERATIONS.items() if s.idempotent} == {"append", "delete", "upsert", "optimize_indices"}
    for spec in OPERATIONS.values():  # frozen, every field described
        assert spec.params.__dataclass_params__.frozen
        assert all(f.metadata.get("help") for f in dataclasses.fields(spec.params)), spec.name


def test_task_round_trips_through_json(settings):
    d = settings.dataset("events")
    table = TableRef.from_settings(d, storage_options={"endpoint": "http://h"})
    stamp = dagster_stamp("run-1", "lance_upsert", "events", root_run_id="root-0")
    task = Task("upsert", table, resolve_params("upsert", d, {"rows": 7}),
                stamp.commit_properties("upsert", idempotent=True), "events", max_retries=3)
    again = Task.from_json(json.loads(json.dumps(task.to_json())))
    assert again == task and again.params.on == ("id", "kind") and again.table.manifest_store == d.manifest_store
    assert task.transaction_properties == {"dagster/run_id": "run-1", "dagster/job": "lance_upsert",
                                           "lance_ops/operation": "upsert", "txnAppId": "dagster/root-0/events/upsert",
                                           "txnVersion": "0"}
    options = task.commit_options()
    assert (options.manifest_store, options.max_retries) == (d.manifest_store, 3)
    with pytest.raises(TypeError, match="params must be UpsertParams"):
        Task("upsert", table, resolve_params("append", d))


def test_stamps_per_orchestrator():
    a = airflow_stamp("dag", "run", "task", 2).commit_properties("delete", idempotent=True)
    assert a == {"airflow/run_id": "run", "airflow/dag_id": "dag", "lance_ops/operation": "delete",
                 "txnAppId": "airflow/dag/run/task/2/delete", "txnVersion": "0"}
    c = airflow_stamp("dag", "run", "task").commit_properties("compact", idempotent=False)
    assert "txnAppId" not in c and c["lance_ops/operation"] == "compact"


def test_result_has_one_shape():
    r = OperationResult.from_job("compact", {"version": 4, "fragments_removed": 3}).with_reasons(["5 small"])
    assert r.to_dict() == {"version": 4, "fragments_removed": 3, "operation": "compact", "reasons": ["5 small"]}
    assert OperationResult.from_dict(r.to_dict()) == r


# ------------------------------------------------------------------------------ errors
ERRORS = [  # built in the other process from this source
    'fe.SchemaError("/d: the source does not match version 3 (missing columns [\'kind\'])")',
    'fe.SQLUnknownColumnError("no column named \'x\'", "x < 1", 0, column="x")',
    'fe.ManifestStoreRequiredError("/d commits through a store", dataset="/d", recorded={"kind": "sqlite"})',
    'fe.CorruptFileError("/d/_versions/1.manifest", "bad magic")',
    'fe.CommitConflictError("lost the race at version 4")',
    'DatasetConfigError("events", "delete.where", "bad", "write a predicate")',
]


@pytest.mark.parametrize("source", ERRORS, ids=lambda s: s.split("(")[0])
def test_errors_cross_processes_as_the_same_class(source):
    """Serialised in another Python process (as a spark-submit driver does), rebuilt here."""
    code = ("import json; from lance_ops.format import errors as fe; "
            "from lance_ops.orchestration.errors import DatasetConfigError, error_to_json; "
            f"print(json.dumps(error_to_json({source})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    error = eval(source)  # the same error, built here
    back = error_from_json(json.loads(out.stdout))
    assert type(back) is type(error) and str(back) == str(error)
    assert vars(back) == vars(error)
    assert is_retryable(back) == isinstance(error, fe.CommitConflictError)


def test_unknown_error_type_stays_a_lance_ops_error():
    back = error_from_json({"type": "EvilError", "module": "os", "message": "x"})
    assert type(back) is fe.LanceOpsError and str(back) == "EvilError: x"


# ------------------------------------------------------------------------------ TableRef
def test_store_backed_dataset_is_read_through_its_manifest_store(settings, tmp_path):
    d = settings.dataset("events")
    table = TableRef.from_settings(d)
    times = []
    for i in range(4):
        lf.write_dataset(rows(i * 10, 10), d.uri, mode="append" if i else "create", manifest_store=d.manifest_store)
        times.append(datetime.now(UTC))
        time.sleep(0.01)
    assert table.list_versions() == [1, 2, 3, 4] and table.latest_version() == 4
    assert table.open().count_rows() == 40 and table.transaction(2).operation.name == "append"
    assert table.version_at(times[1]) == 2 and table.version_at(times[2]) == 3
    with pytest.raises(ValueError, match="after the latest version"):  # Delta's timestampAsOf rule
        table.version_at(times[3] + timedelta(days=1))
    assert table.versions_between(times[0], times[2]) == (1, [2, 3])
    assert table.versions_between(times[0] - timedelta(days=1), times[0]) == (0, [1])
    import pendulum  # Airflow's data intervals are pendulum DateTimes (Interval // timedelta raises)

    assert table.versions_between(pendulum.instance(times[0]), pendulum.instance(times[2])) == (1, [2, 3])
    with pytest.raises(fe.ManifestStoreRequiredError):  # the bug Airflow had: writing without the store
        lf.write_dataset(rows(99, 1), d.uri, mode="append")
    assert TableRef(str(tmp_path / "none")).latest_version() is None


# ------------------------------------------------------------------------------ maintain
def test_one_decision_for_every_state(settings):
    d = settings.dataset("events")
    table = TableRef.from_settings(d)
    assert decide_maintenance(table, d.policy) == []  # no dataset
    lf.write_dataset(rows(0, 10), d.uri, enable_stable_row_ids=True, manifest_store=d.manifest_store)
    assert decide_maintenance(table, d.policy) == []
    for i in range(1, 3):
        lf.write_dataset(rows(i * 10, 10), d.uri, mode="append", manifest_store=d.manifest_store)
    (a,) = decide_maintenance(table, d.policy)  # the planner's view: its reasons and parameters
    assert (a.operation, a.version, a.reasons) == ("compact", 3, ("3 small fragments (< 1000 rows, after "
                                                                  "deletions) >= 3",))
    assert a.parameters == {"target_rows_per_fragment": 1000, "max_rows_per_group": 1024,
                            "materialize_deletions_threshold": 0.2}


def test_maintain_runs_the_plan_step_by_step_with_the_registry_parameters(settings, tmp_path):
    """Every orchestrator's maintain: the planner's actions as registry tasks, planned again after
    each step; here the runner runs them in process (compaction through format, the orphan sweep
    through the registry's own runner, as Dagster and Airflow do)."""
    d = settings.dataset("events")
    table = TableRef.from_settings(d)
    lf.write_dataset(rows(0, 10), d.uri, enable_stable_row_ids=True, manifest_store=d.manifest_store)
    for i in range(1, 4):
        lf.write_dataset(rows(i * 10, 10), d.uri, mode="append", manifest_store=d.manifest_store)
    stray = tmp_path / "events" / "data" / "stray.lance"
    stray.write_bytes(b"x" * 64)
    old = time.time() - 3 * 3600
    os.utime(stray, (old, old))
    ran = []

    def runner(name, params, reasons):
        ran.append((name, type(params).__name__, reasons[0].split(" ")[1]))
        if name == "compact":
            assert (params.target_rows_per_fragment, params.materialize_deletions_threshold) == (1000, 0.2)
            m = table.open().compact_files(target_rows_per_fragment=params.target_rows_per_fragment)
            return OperationResult(name, m.version)
        task = Task(name, table, params, {"lance_ops/operation": name}, "events")
        task.validate()
        return task.run()

    steps = list(planned_steps(table, d))  # nothing runs between the steps: each is tried once
    assert [s.operation for s in steps] == ["compact", "remove_orphan_files"]
    assert steps[1].params == OPERATIONS["remove_orphan_files"].params(older_than_hours=1.0)
    results = maintain(table, d, runner)
    assert ran == [("compact", "CompactParams", "small"), ("remove_orphan_files", "RemoveOrphanFilesParams", "files")]
    assert results[1].metrics["files_removed"] == 1 and not stray.exists()
    assert decide_maintenance(table, d.policy) == [] and maintain(table, d, runner) == []
    assert table.open().count_rows() == 40 and len(table.open().get_fragments()) == 1


def test_restore_and_orphan_sweep_are_registry_operations(settings):
    d = settings.dataset("events")
    table = TableRef.from_settings(d)
    lf.write_dataset(rows(0, 10), d.uri, enable_stable_row_ids=True, manifest_store=d.manifest_store)
    lf.write_dataset(rows(10, 10), d.uri, mode="append", manifest_store=d.manifest_store)
    stamp = dagster_stamp("run-1", "lance_restore", "events")

    def task(name, **overrides):
        props = stamp.commit_properties(name, idempotent=OPERATIONS[name].idempotent)
        return Task(name, table, resolve_params(name, d, overrides), props, "events")

    for bad in ({}, {"version": 1, "tag": "x"}):
        with pytest.raises(DatasetConfigError, match="exactly one target"):
            task("restore", **bad).validate()
    with pytest.raises(DatasetConfigError, match="ISO 8601"):
        task("restore", timestamp="yesterday").validate()
    t = task("restore", version=1)
    assert Task.from_json(json.loads(json.dumps(t.to_json()))) == t
    r = t.run()
    assert (r.version, r.metrics["restored_version"], r.metrics["previous_version"]) == (3, 1, 2)
    assert r.metrics["undo_tag"].startswith("restore-before-2-") and table.open().count_rows() == 10
    props = table.transaction(3).properties
    assert (props["dagster/run_id"], props["lance_ops/operation"]) == ("run-1", "restore")
    undo = task("restore", tag=r.metrics["undo_tag"], tag_current=False).run()
    assert undo.version == 4 and table.open().count_rows() == 20
    when = task("restore", timestamp=datetime.now(UTC).isoformat()).run()  # the version current now
    assert when.metrics["restored_version"] == 4
    table.open().cleanup_old_versions(timedelta(0), 1, retention_duration_check=False)
    with pytest.raises(fe.VersionRemovedError, match="removed by cleanup"):
        task("restore", version=1).run()
    assert not is_retryable(fe.VersionRemovedError("x"))
    sweep = task("remove_orphan_files", dry_run=True)
    assert sweep.params.older_than_hours == d.policy.orphan_min_age_hours
    assert sweep.run().metrics["files_removed"] == 0
    with pytest.raises(DatasetConfigError, match="older_than_hours"):
        task("remove_orphan_files", older_than_hours=0.1).run()
