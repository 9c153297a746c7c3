"""Idempotent writes (Delta's ``txnAppId``/``txnVersion``): a retried write commits at most once."""

import os
import threading

import lance
import pyarrow.compute as pc
import pytest
from datagen import simple_table

import lance_ops.format as lf
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.txn.commit_loop import commit_transaction
from lance_ops.format.txn.idempotency import (
    TXN_APP_ID,
    TXN_VERSION,
    committed_by,
    find_committed,
    idempotency_key,
)
from lance_ops.format.txn.transaction import Transaction


def key(app: str, n: int) -> dict[str, str]:
    return {TXN_APP_ID: app, TXN_VERSION: str(n)}


def data_files(uri: str) -> set[str]:
    return set(os.listdir(os.path.join(uri, "data")))


def test_a_retried_append_commits_once(uri):
    lf.write_dataset(simple_table(0, 10), uri)
    first = lf.write_dataset(simple_table(10, 5), uri, mode="append", transaction_properties=key("job-7", 1))
    files = data_files(uri)
    again = lf.write_dataset(simple_table(10, 5), uri, mode="append", transaction_properties=key("job-7", 1))
    assert first.version == again.version == 2 and lf.dataset(uri).version == 2
    assert lf.dataset(uri).count_rows() == 15
    assert data_files(uri) == files  # the retry's files were removed, not orphaned
    # an older sequence number of the same writer is skipped too; a newer one commits
    assert lf.write_dataset(simple_table(10, 5), uri, mode="append", transaction_properties=key("job-7", 0)).version == 2
    third = lf.write_dataset(simple_table(15, 5), uri, mode="append", transaction_properties=key("job-7", 2))
    assert third.version == 3 and lf.dataset(uri).count_rows() == 20
    # another writer id is independent
    assert lf.write_dataset(simple_table(20, 1), uri, mode="append", transaction_properties=key("job-8", 1)).version == 4
    assert lance.dataset(uri).count_rows() == 21


def test_other_commits_in_between_do_not_hide_the_first_attempt(uri):
    lf.write_dataset(simple_table(0, 10), uri)
    lf.write_dataset(simple_table(10, 5), uri, mode="append", transaction_properties=key("a", 1))  # v2
    for i in range(5):  # other writers commit meanwhile
        lf.dataset(uri).delete(pc.field("id") == i)
    retry = lf.write_dataset(simple_table(10, 5), uri, mode="append", transaction_properties=key("a", 1))
    assert retry.version == 2 and lf.dataset(uri).version == 7
    assert lf.dataset(uri).count_rows() == 10
    # only ``idempotency_lookback`` versions are searched (recent history, as the brief says)
    txn = Transaction(7, lf.Append(lf.write_fragments(simple_table(10, 5), uri)), properties=key("a", 1))
    out = commit_transaction(ObjectStore(uri), txn, idempotency_lookback=3)
    assert out.version == 8 and committed_by(out, txn)


def test_idempotent_create_delete_update_and_commit(uri):
    a = lf.write_dataset(simple_table(0, 10), uri, transaction_properties=key("w", 1))
    b = lf.write_dataset(simple_table(0, 10), uri, transaction_properties=key("w", 1))  # not "already exists"
    assert a.version == b.version == 1
    d = lf.dataset(uri)
    d.delete(pc.field("id") < 3, transaction_properties=key("w", 2))
    assert d.version == 2
    # a stale handle retrying the same delete after its first attempt committed: no new version
    stale = lf.dataset(uri, version=1)
    stale.delete(pc.field("id") < 3, transaction_properties=key("w", 2))
    assert stale.version == 2  # moved to the earlier commit
    u = lf.dataset(uri)
    u.update({"val": "'x'"}, where=pc.field("id") == 5, transaction_properties=key("w", 3))
    again = lf.dataset(uri)
    again.update({"val": "'x'"}, where=pc.field("id") == 5, transaction_properties=key("w", 3))
    assert again.version == u.version == 3
    frags = lf.write_fragments(simple_table(50, 2), uri)
    c1 = lf.commit(uri, lf.Append(frags), read_version=3, transaction_properties=key("w", 4))
    c2 = lf.commit(uri, lf.Append(frags), read_version=3, transaction_properties=key("w", 4))
    assert c1.version == c2.version == 4 and lf.dataset(uri).count_rows() == 9


def test_racing_attempts_of_one_write_commit_once(uri):
    """Two attempts of the same write (a speculative retry) race: both return, one version."""
    lf.write_dataset(simple_table(0, 10), uri)
    results, errors = [], []
    barrier = threading.Barrier(4)

    def attempt(i: int) -> None:
        frags = lf.write_fragments(simple_table(100, 3), uri)
        barrier.wait(timeout=10)
        try:
            results.append(lf.commit(uri, lf.Append(frags), read_version=1, transaction_properties=key("spark-app", 9)))
        except Exception as e:  # noqa: BLE001 - asserted below
            errors.append(e)

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors
    assert {r.version for r in results} == {2} and lf.dataset(uri).version == 2
    assert lf.dataset(uri).count_rows() == 13


def test_pylance_commits_with_the_same_key_are_recognised(uri):
    lance.write_dataset(simple_table(0, 10), uri)
    lance.write_dataset(simple_table(10, 5), uri, mode="append", transaction_properties=key("their-job", 3))
    again = lf.write_dataset(simple_table(10, 5), uri, mode="append", transaction_properties=key("their-job", 3))
    assert again.version == 2 and lance.dataset(uri).count_rows() == 15


@pytest.mark.parametrize(
    "props",
    [{TXN_APP_ID: "a"}, {TXN_VERSION: "1"}, {TXN_APP_ID: "", TXN_VERSION: "1"},
     {TXN_APP_ID: "a", TXN_VERSION: "-1"}, {TXN_APP_ID: "a", TXN_VERSION: "x"}],
)
def test_malformed_keys_are_refused_before_anything_is_written(uri, props):
    lf.write_dataset(simple_table(0, 10), uri)
    before = (data_files(uri), sorted(os.listdir(os.path.join(uri, "_transactions"))))
    with pytest.raises(lf.InvalidArgumentError, match=TXN_VERSION):
        lf.dataset(uri).delete(pc.field("id") == 1, transaction_properties=props)
    assert (data_files(uri), sorted(os.listdir(os.path.join(uri, "_transactions")))) == before
    assert lf.dataset(uri).version == 1


def test_key_helpers():
    assert idempotency_key({}) is None and idempotency_key({"x": "y"}) is None
    assert idempotency_key(key("a", 5)) == ("a", 5)
    txns = {3: Transaction(2, lf.Restore(1), properties=key("a", 4)), 5: Transaction(4, lf.Restore(1), properties=key("a", 6)),
            4: Transaction(3, lf.Restore(1), properties={TXN_APP_ID: "a", TXN_VERSION: "junk"})}
    assert find_committed(("a", 6), [3, 4, 5], txns.__getitem__) == 5
    assert find_committed(("a", 5), [3, 4, 5], txns.__getitem__) == 5  # superseded by a newer one
    assert find_committed(("a", 7), [3, 4, 5], txns.__getitem__) is None
    assert find_committed(("a", 4), [3, 4], txns.__getitem__) == 3
    assert find_committed(("b", 0), [3, 4, 5], txns.__getitem__) is None
