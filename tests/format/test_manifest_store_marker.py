"""The ``_manifest_store.json`` marker: written once by the first commit through a store; every
conditional-put writer refuses the dataset (at open, at commit start, before the manifest put)."""

import os

import pyarrow as pa
import pytest

import lance_ops.format as lf
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.txn.commit_loop import commit_transaction
from lance_ops.format.txn.handlers import ConditionalPutCommitHandler, try_open_latest
from lance_ops.format.txn.manifest_store import MARKER_FILE, read_marker
from lance_ops.format.txn.operations import Append
from lance_ops.format.txn.transaction import Transaction


def t(start: int, n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64())})


def test_marker_is_written_once_and_names_the_store(uri, tmp_path):
    db = str(tmp_path / "m.db")
    lf.write_dataset(t(0, 5), uri, manifest_store=db)
    path = os.path.join(uri, MARKER_FILE)
    first = open(path, "rb").read()
    assert read_marker(ObjectStore(uri)) == {"kind": "sqlite", "location": db, "format": 1}
    lf.write_dataset(t(5, 5), uri, mode="append", manifest_store=lf.SQLiteManifestStore(db))
    assert open(path, "rb").read() == first
    assert lf.dataset(uri, manifest_store=db).version == 2 and lf.dataset(uri).count_rows() == 10


def test_each_conditional_put_check_refuses_with_nothing_written(uri, tmp_path):
    db = str(tmp_path / "m.db")
    lf.write_dataset(t(0, 5), uri, manifest_store=db)
    store = ObjectStore(uri)
    frags = lf.write_fragments(t(5, 5), uri, manifest_store=db)
    versions_before = sorted(os.listdir(os.path.join(uri, "_versions")))
    txns_before = sorted(os.listdir(os.path.join(uri, "_transactions")))
    with pytest.raises(lf.ManifestStoreRequiredError) as e:
        try_open_latest(store)
    assert e.value.recorded["location"] == db and e.value.dataset == store.uri
    with pytest.raises(lf.ManifestStoreRequiredError):
        commit_transaction(store, Transaction(1, Append(frags)))
    # the put itself, for a writer that got past the earlier checks (marker written meanwhile)
    m = lf.dataset(uri, manifest_store=db).manifest
    with pytest.raises(lf.ManifestStoreRequiredError):
        ConditionalPutCommitHandler(store).put_manifest_if_absent(m.with_changes(version=2), None,
                                                                  lf.dataset(uri)._scheme)
    assert sorted(os.listdir(os.path.join(uri, "_versions"))) == versions_before
    assert sorted(os.listdir(os.path.join(uri, "_transactions"))) == txns_before
    # the store-aware commit of the same fragments works
    assert lf.commit(uri, lf.Append(frags), read_version=1, manifest_store=db).count_rows() == 10


def test_commit_options_derive_properties_and_handler(uri, tmp_path):
    db = str(tmp_path / "m.db")
    opts = lf.CommitOptions(transaction_properties={"a": "1"}, txn_app_id="w", manifest_store=db)
    assert opts.properties({"b": "2"}) == {"a": "1", "b": "2", "txnAppId": "w", "txnVersion": "0"}
    assert opts.handler(ObjectStore(uri)).manifest_store.path == db
    assert opts.replace(max_retries=3, manifest_store=None).manifest_store == db  # None keeps the value
    assert lf.COMMIT_DEFAULTS.max_retries == 20 and lf.COMMIT_DEFAULTS.manifest_store is None
    with pytest.raises(lf.InvalidArgumentError):
        lf.CommitOptions(txn_version=1)
