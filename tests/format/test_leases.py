"""Reader leases: acquire, renew, release, expiry; cleanup (both modes) and the orphan sweep keep
what a live lease pins and report it; a killed holder stops pinning once its lease expires."""

import json
import os
import signal
import subprocess
import sys
import time
from datetime import timedelta

import lance
import pytest
from datagen import simple_table

import lance_ops.format as lf
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.table.leases import LEASES_DIR

ZERO = dict(older_than=timedelta(0), retention_duration_check=False)


def files(root: str) -> set[str]:
    return {os.path.relpath(os.path.join(d, n), root) for d, _s, names in os.walk(root) for n in names}


def data_of(uri: str, version: int) -> set[str]:
    return {f"data/{df.path}" for f in lf.dataset(uri, version=version).manifest.fragments for df in f.files}


@pytest.fixture
def three(tmp_path):
    """Versions 1-3, each an overwrite: version 1's files are named by version 1 only."""
    uri = str(tmp_path / "ds")
    lf.write_dataset(simple_table(0, 30), uri, enable_stable_row_ids=True, max_rows_per_file=10)
    lf.write_dataset(simple_table(100, 20), uri, mode="overwrite")
    lf.write_dataset(simple_table(200, 10), uri, mode="overwrite")
    return uri


def test_acquire_renew_release_and_list(three):
    lease = lf.acquire_lease(three, 1, ttl=60, holder="me")
    assert os.path.exists(os.path.join(three, LEASES_DIR, f"{lease.id}.json"))
    assert [(x.id, x.version, x.first_version, x.holder) for x in lf.list_leases(three)] == [(lease.id, 1, 1, "me")]
    renewed = lf.renew_lease(three, lease.id, ttl=120)
    assert renewed.expires_at > lease.expires_at and renewed.acquired_at == lease.acquired_at
    lf.release_lease(three, lease.id)
    assert lf.list_leases(three) == []
    lf.release_lease(three, lease.id)  # releasing twice is fine
    with pytest.raises(lf.LeaseNotFoundError, match=lease.id):
        lf.renew_lease(three, lease.id)


def test_expired_lease_is_not_renewed_nor_listed(three):
    lease = lf.acquire_lease(three, 2, ttl=0.2)
    time.sleep(0.3)
    assert lf.list_leases(three) == [] and [x.id for x in lf.list_leases(three, include_expired=True)] == [lease.id]
    with pytest.raises(lf.LeaseExpiredError, match="expired"):
        lf.renew_lease(three, lease.id)


def test_bad_arguments_and_removed_versions(three):
    with pytest.raises(lf.InvalidArgumentError, match="ttl must be positive"):
        lf.acquire_lease(three, 1, ttl=0)
    with pytest.raises(lf.ArgumentTypeError, match="ttl"):
        lf.acquire_lease(three, 1, ttl="10")
    with pytest.raises(lf.InvalidArgumentError, match="first_version"):
        lf.acquire_lease(three, 1, first_version=2)
    with pytest.raises(lf.VersionRemovedError, match="version 9") as e:
        lf.acquire_lease(three, 9)
    assert e.value.version == 9 and isinstance(e.value, lf.DatasetNotFoundError)
    assert os.listdir(os.path.join(three, LEASES_DIR)) == []  # the failed acquire left nothing


@pytest.mark.parametrize("mode", ["full", "lite"])
def test_cleanup_keeps_a_leased_version_until_release(three, mode):
    before = lf.dataset(three, version=1).to_table()
    v1_files = data_of(three, 1)
    ds = lf.dataset(three, version=1)
    with ds.lease(ttl=60) as held:
        stats = lf.dataset(three).cleanup_old_versions(**ZERO, mode=mode)
        assert stats.protected_by_leases == (held.id,) and stats.leased_versions == (1,)
        assert stats.old_versions == 1  # version 2 went, version 1 is leased
        assert v1_files <= files(three)
        assert ds.to_table().equals(before)
        assert lf.dataset(three, version=1).to_table().equals(before)
    assert lf.list_leases(three) == []
    stats = lf.dataset(three).cleanup_old_versions(**ZERO, mode=mode)
    assert stats.protected_by_leases == () and stats.old_versions == 1
    assert not v1_files & files(three)
    with pytest.raises(lf.DatasetNotFoundError):
        lf.dataset(three, version=1)


def test_a_range_lease_pins_every_version_in_it(three):
    lf.write_dataset(simple_table(300, 10), three, mode="overwrite")  # 4
    lease = lf.acquire_lease(three, 3, first_version=1, ttl=60)
    stats = lf.dataset(three).cleanup_old_versions(**ZERO)
    assert stats.leased_versions == (1, 2, 3) and stats.protected_by_leases == (lease.id,)
    assert [v["version"] for v in lf.dataset(three).versions()] == [1, 2, 3, 4]


class LeaseOnDelete(ObjectStore):
    """Injects the race: a reader leases version 1 (and checks its manifest is there) just
    before cleanup deletes that manifest, after cleanup read the leases."""

    target = ""

    def delete(self, rel: str) -> None:
        if rel == self.target:
            self.lease = lf.acquire_lease(self.uri, 1, ttl=60)
        super().delete(rel)


def test_a_lease_taken_while_cleanup_runs_puts_the_version_back(three):
    from lance_ops.format.ops.cleanup import cleanup_old_versions
    from lance_ops.format.table.manifest import NamingScheme, manifest_path

    before = lf.dataset(three, version=1).to_table()
    store = LeaseOnDelete(three)
    store.target = manifest_path(NamingScheme.V2, 1)
    stats = cleanup_old_versions(store, **ZERO, mode="lite")
    assert stats.manifests_restored == 1 and 1 in stats.leased_versions
    assert stats.old_versions == 1  # version 2 only
    assert lf.dataset(three, version=1).to_table().equals(before)
    lf.release_lease(three, store.lease.id)
    assert lf.dataset(three).cleanup_old_versions(**ZERO).old_versions == 1


_HOLDER = """
import sys, time
import lance_ops.format as lf
held = lf.lease(sys.argv[1], 1, ttl=float(sys.argv[2]))
print(held.id, flush=True)
ds = lf.dataset(sys.argv[1], version=1)
while True:  # a long read, killed in the middle
    ds.to_table()
    time.sleep(0.05)
"""


def test_a_killed_holder_stops_pinning_once_its_lease_expires(three, tmp_path):
    ttl = 1.5
    script = tmp_path / "holder.py"
    script.write_text(_HOLDER)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, str(script), three, str(ttl)], stdout=subprocess.PIPE, env=env, text=True)
    try:
        lease_id = proc.stdout.readline().strip()
        assert lease_id
        time.sleep(ttl)  # the holder renews in the background: still live after one ttl
        stats = lf.dataset(three).cleanup_old_versions(**ZERO)
        assert stats.protected_by_leases == (lease_id,)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    v1_files = data_of(three, 1)
    assert [x.id for x in lf.list_leases(three)] == [lease_id]  # killed, not yet expired
    time.sleep(ttl + 0.2)
    assert lf.list_leases(three) == []
    stats = lf.dataset(three).cleanup_old_versions(**ZERO)
    assert stats.protected_by_leases == () and stats.old_versions == 1
    assert not v1_files & files(three)
    assert lf.list_leases(three, include_expired=True)[0].id == lease_id  # removed only after an hour


def test_a_corrupt_lease_file_stops_cleanup(three):
    os.makedirs(os.path.join(three, LEASES_DIR), exist_ok=True)
    with open(os.path.join(three, LEASES_DIR, "junk.json"), "w") as f:
        json.dump({"id": "junk"}, f)
    before = files(three)
    with pytest.raises(lf.CorruptFileError, match="junk.json"):
        lf.dataset(three).cleanup_old_versions(**ZERO)
    assert files(three) == before


def test_pylance_ignores_leases(three):
    """pylance's cleanup does not know leases: it removes a leased version (README says so)."""
    lease = lf.acquire_lease(three, 1, ttl=60)
    stats = lance.dataset(three).cleanup_old_versions(older_than=timedelta(0))
    assert stats.old_versions == 2
    assert [v["version"] for v in lance.dataset(three).versions()] == [3]
    assert [x.id for x in lf.list_leases(three)] == [lease.id]  # its lease file is left alone
