"""Dagster with a dataset that commits through an external manifest store (``manifest_store`` in
lance_ops.yaml, ``LanceIOManager.manifest_store``): every op commits through it, interleaved with
store-aware appends; the same ops and the IO manager without it refuse with nothing written."""

import os

import lance
import numpy as np
import pyarrow as pa
import pytest
import yaml
from dagster import asset, materialize
from dagster_support import NAME, failures, run

import lance_ops.format as lf
from lance_ops.assets.configs import (
    AppendConfig,
    CleanupConfig,
    CompactConfig,
    DeleteConfig,
    MaterializeDeletionsConfig,
    UpsertConfig,
)
from lance_ops.assets.definitions import build_definitions
from lance_ops.assets.io_manager import LanceIOManager
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.table.manifest import list_versions
from lance_ops.format.txn.manifest_store import base_uri_of
from lance_ops.orchestration.settings import parse_settings

DIRS = ("data", "_deletions", "_versions", "_transactions")


def listing(uri: str) -> dict[str, list[str]]:
    return {d: sorted(os.listdir(os.path.join(uri, d))) if os.path.isdir(os.path.join(uri, d)) else [] for d in DIRS}


def settings(root, manifest_store: str | None):
    body = {"uri": "events", "source": {"format": "generate", "rows": 1000},
            "change_feed": {"sink_uri": "events_changes", "format": "parquet"},
            "policy": {"target_rows_per_fragment": 10_000, "min_small_fragments": 2}}
    if manifest_store:
        body["manifest_store"] = manifest_store  # relative: to the config file's directory
    doc = {"spark": {"master": "local[2]"}, "datasets": {NAME: body}}
    path = root / ("with_store.yaml" if manifest_store else "without_store.yaml")
    path.write_text(yaml.safe_dump(doc))
    return parse_settings(path.read_text(), base_dir=root, source_path=str(path))


def check(uri: str, db: str, ids: np.ndarray) -> int:
    store = ObjectStore(uri)
    latest = lf.SQLiteManifestStore(db).latest(base_uri_of(store))
    assert latest is not None and latest.version == list_versions(store)[1][-1]
    got = lf.dataset(uri, manifest_store=db).to_table(columns=["id"])["id"].to_numpy()
    assert np.array_equal(np.sort(got), np.sort(ids))
    assert lance.dataset(uri).version == lf.dataset(uri).version == latest.version
    return latest.version


def test_dagster_ops_commit_through_the_configured_store(tmp_path, spark, instance):
    s = settings(tmp_path, "manifests.db")
    d = s.datasets[0]
    db = str(tmp_path / "manifests.db")
    assert d.manifest_store == db
    defs = build_definitions(s)
    ids = np.arange(1000)

    def aware_append(start: int) -> None:
        nonlocal ids
        new = np.arange(start, start + 10)
        lf.write_dataset(pa.table({"id": new, "kind": ["s"] * 10, "amount": new * 1.0}), d.uri, mode="append",
                         manifest_store=db)
        ids = np.concatenate([ids, new])
        check(d.uri, db, ids)

    run(defs, instance, "append", AppendConfig(rows=1000, max_rows_per_file=500))
    assert lf.dataset(d.uri).has_stable_row_ids
    check(d.uri, db, ids)
    aware_append(5000)
    run(defs, instance, "append", AppendConfig(rows=1000, max_rows_per_file=500))
    ids = np.concatenate([ids, np.arange(1010, 2010)])  # generated ids start at the next row id
    check(d.uri, db, ids)
    run(defs, instance, "delete", DeleteConfig(where="id % 4 = 0"))
    ids = ids[ids % 4 != 0]
    check(d.uri, db, ids)
    aware_append(7000)
    run(defs, instance, "upsert", UpsertConfig(start_id=100, rows=10, tag="u"))
    ids = np.union1d(ids, np.arange(100, 110))
    check(d.uri, db, ids)
    run(defs, instance, "materialize_deletions", MaterializeDeletionsConfig(threshold=0.1))
    check(d.uri, db, ids)
    aware_append(8000)
    r = run(defs, instance, "compact", CompactConfig())
    check(d.uri, db, ids)
    assert len(lf.dataset(d.uri, manifest_store=db).get_fragments()) == 1, failures(r)
    run(defs, instance, "cleanup_old_versions", CleanupConfig(older_than_days=0, retention_duration_check=False))
    v = check(d.uri, db, ids)
    kept = list_versions(ObjectStore(d.uri))[1]
    leased = {n for x in lf.dataset(d.uri, manifest_store=db).leases() for n in range(x.first_version, x.version + 1)}
    # cleanup kept the latest, which the store points at, and what the jobs' Spark reads still lease
    assert kept[-1] == v and set(kept[:-1]) <= leased, (kept, leased)
    aware_append(9000)

    # the same dataset configured without the store: every op refuses, nothing written
    bare = build_definitions(settings(tmp_path, None))
    for job, cfg in [("append", AppendConfig(rows=10)), ("delete", DeleteConfig(where="id < 5")),
                     ("upsert", UpsertConfig(start_id=0, rows=5)), ("compact", CompactConfig()),
                     ("materialize_deletions", MaterializeDeletionsConfig(threshold=0.0))]:
        before = listing(d.uri)
        result = run(bare, instance, job, cfg, expect_success=False)
        assert not result.success, job
        assert any("ManifestStoreRequiredError" in f for f in failures(result)), (job, failures(result))
        assert listing(d.uri) == before, job
        check(d.uri, db, ids)


def test_io_manager_commits_through_its_store_and_refuses_without(tmp_path, instance):
    db = str(tmp_path / "m.db")
    batch = {"rows": pa.table({"id": pa.array([1, 2, 3], pa.int64()), "v": ["a", "b", "c"]})}

    @asset(metadata={"mode": "append"})
    def log() -> pa.Table:
        return batch["rows"]

    @asset(metadata={"mode": "merge", "merge_on": ["id"]})
    def users() -> pa.Table:
        return batch["rows"]

    @asset
    def snapshot_() -> pa.Table:  # default mode: overwrite
        return batch["rows"]

    io = LanceIOManager(root_uri=str(tmp_path / "lake"), manifest_store=db)
    materialize([log, users, snapshot_], resources={"io_manager": io}, instance=instance)
    lake = str(tmp_path / "lake")
    log_uri, users_uri, snap_uri = (f"{lake}/{n}.lance" for n in ("log", "users", "snapshot_"))
    check(log_uri, db, np.array([1, 2, 3]))
    lf.write_dataset(pa.table({"id": pa.array([9], pa.int64()), "v": ["z"]}), users_uri, mode="append", manifest_store=db)
    batch["rows"] = pa.table({"id": pa.array([2, 4], pa.int64()), "v": ["B", "d"]})
    materialize([log, users, snapshot_], resources={"io_manager": io}, instance=instance)
    check(log_uri, db, np.array([1, 2, 3, 2, 4]))
    check(users_uri, db, np.array([1, 2, 3, 4, 9]))
    check(snap_uri, db, np.array([2, 4]))
    merged = lf.dataset(users_uri, manifest_store=db).to_table().sort_by("id")
    assert merged["v"].to_pylist() == ["a", "B", "c", "d", "z"]

    bare = LanceIOManager(root_uri=lake)
    for a, uri in [(log, log_uri), (users, users_uri), (snapshot_, snap_uri)]:
        before = listing(uri)
        result = materialize([a], resources={"io_manager": bare}, instance=instance, raise_on_error=False)
        assert not result.success
        assert any("ManifestStoreRequiredError" in f for f in failures(result)), a
        assert listing(uri) == before
    with pytest.raises(lf.ManifestStoreRequiredError):
        lf.write_dataset(batch["rows"], log_uri, mode="append")
