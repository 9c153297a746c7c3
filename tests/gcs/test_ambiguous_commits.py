"""Commits on gs:// whose answer goes wrong: exactly one commit, and a correct return value or a
typed error that says whether a retry is safe.

Faults are injected by the emulator (tests/_gcs_emulator.py) on the manifest create only (the
one upload with ``ifGenerationMatch=0``): every answer lost, an answer after the client's
deadline, a reset before the request applies, persistent 503, a non-retriable 5xx, and a lost
answer whose read-back fails too.  ``commit_timeout`` bounds each create (retries included) so
the cases take seconds, not gcsfs's ~30 s retry budget.
"""

import os

import pyarrow as pa
import pytest

import lance_ops.format as lf
from lance_ops.format.errors import ObjectStoreError
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.table.manifest import list_versions
from lance_ops.format.txn.idempotency import TXN_APP_ID, TXN_VERSION

CREATE = r"ifGenerationMatch=0"  # only manifest creates are conditional
V2_NAME = f"{2**64 - 1 - 2:020d}.manifest"


def table(start: int, n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64())})


@pytest.fixture
def ds(gcs_emulator, gcs_bucket):
    """A one-version dataset on gs:// and its storage options (commit deadline 2 s)."""
    uri = f"{gcs_bucket}/ds"
    so = {**gcs_emulator.storage_options, "commit_timeout": 2}
    lf.write_dataset(table(0, 3), uri, storage_options=so)
    return uri, so


def state(uri: str, so) -> tuple[list[int], list[str], list[str]]:
    store = ObjectStore(uri, so)
    return list_versions(store)[1], sorted(store.list_dir("_transactions")), sorted(store.list_dir("data"))


def append(uri: str, so, props=None) -> lf.LanceDataset:
    return lf.write_dataset(table(10, 2), uri, mode="append", storage_options=so, transaction_properties=props)


def check_committed_once(uri: str, so, ds: lf.LanceDataset) -> None:
    assert ds.version == 2 and ds.count_rows() == 5
    versions, txns, data = state(uri, so)
    assert versions == [1, 2]
    latest = lf.dataset(uri, storage_options=so)
    assert latest.version == 2 and sorted(latest.to_table()["id"].to_pylist()) == [0, 1, 2, 10, 11]
    # nothing is left over: the version's .txn and data files, and version 1's
    assert txns == sorted({lf.dataset(uri, version=v, storage_options=so).manifest.transaction_file for v in (1, 2)})
    assert data == sorted(df.path for f in latest.manifest.fragments for df in f.files)


@pytest.mark.parametrize(
    "fault",
    ["every-answer-lost", "answer-after-deadline", "answer-lost-once"],
)
def test_a_create_that_landed_returns_its_version(gcs_emulator, ds, fault):
    uri, so = ds
    if fault == "every-answer-lost":
        gcs_emulator.drop_responses("POST", CREATE, count=50)  # each retry's answer too
    elif fault == "answer-after-deadline":
        gcs_emulator.delay_responses("POST", CREATE, seconds=3, count=1)
    else:
        so = {k: v for k, v in so.items() if k != "commit_timeout"}  # gcsfs retries: 412, ours
        gcs_emulator.drop_responses("POST", CREATE, count=1)
    creates = sum(1 for m, p in gcs_emulator.requests if m == "POST" and "ifGenerationMatch=0" in p)
    out = append(uri, so)
    check_committed_once(uri, so, out)
    assert sum(1 for m, p in gcs_emulator.requests if m == "POST" and "ifGenerationMatch=0" in p) > creates


@pytest.mark.parametrize("fault", ["reset-before-applied", "persistent-503", "non-retriable-507"])
def test_a_create_that_did_not_land_is_a_safe_to_retry_error(gcs_emulator, ds, fault):
    uri, so = ds
    status = {"reset-before-applied": 0, "persistent-503": 503, "non-retriable-507": 507}[fault]
    before = state(uri, so)
    gcs_emulator.fail_requests("POST", CREATE, status=status, count=1000)
    with pytest.raises(lf.CommitFailedError) as info:
        append(uri, so)
    err = info.value
    assert err.retry_safe and err.version == 2 and err.path.endswith(V2_NAME)
    assert "retrying is safe" in str(err) and isinstance(err, lf.LanceOpsError)
    assert state(uri, so) == before  # nothing committed, and the attempt's .txn and data files are gone
    gcs_emulator.clear_faults()
    check_committed_once(uri, so, append(uri, so))  # the retry commits exactly once


def test_an_unknown_outcome_is_a_typed_error_and_a_keyed_retry_commits_once(gcs_emulator, ds):
    uri, so = ds
    key = {TXN_APP_ID: "dagster-run-42", TXN_VERSION: "0"}
    gcs_emulator.drop_responses("POST", CREATE, count=50)  # the create lands, no answer arrives
    gcs_emulator.fail_requests("GET", V2_NAME, status=507, count=1000)  # and the read-back fails
    with pytest.raises(lf.CommitStateUnknownError) as info:
        append(uri, so, key)
    err = info.value
    assert not err.retry_safe and err.version == 2 and err.path.endswith(V2_NAME)
    assert "txnAppId" in str(err) and "may or may not" in str(err)
    gcs_emulator.clear_faults()
    # it did land, and nothing it needs was removed
    assert state(uri, so)[0] == [1, 2]
    # the retry a scheduler makes after the unknown outcome: at most once
    check_committed_once(uri, so, append(uri, so, key))


def test_storage_failures_outside_commits_are_typed(gcs_emulator, ds):
    uri, so = ds
    gcs_emulator.fail_requests("GET", r"/o\?.*prefix=.*_versions", status=507, count=1000)
    with pytest.raises(ObjectStoreError) as info:
        lf.dataset(uri, storage_options=so)
    assert "_versions" in str(info.value) and "507" in str(info.value)
    gcs_emulator.clear_faults()
    gcs_emulator.fail_requests("GET", "alt=media", status=507, count=1000)
    with pytest.raises(ObjectStoreError, match="507"):
        lf.dataset(uri, storage_options=so).to_table()
    gcs_emulator.clear_faults()
    assert lf.dataset(uri, storage_options=so).count_rows() == 3


def test_commit_timeout_is_not_passed_to_gcsfs(gcs_emulator, gcs_bucket):
    store = ObjectStore(f"{gcs_bucket}/x", {**gcs_emulator.storage_options, "commit_timeout": "1.5"})
    assert store.commit_timeout == 1.5 and store.put_if_absent("a", b"1") and not store.put_if_absent("a", b"2")
    assert store.read("a") == b"1" and os.path.basename(store.full_path("a")) == "a"
