"""Guarded restore: to a version, a tag or a time; the current version is tagged first (undo);
a target cleanup removed is refused with VersionRemovedError; the commit is stamped."""

import time
from datetime import UTC, datetime, timedelta

import lance
import pytest
from datagen import simple_table

import lance_ops.format as lf

ZERO = dict(older_than=timedelta(0), retention_duration_check=False)


@pytest.fixture
def uri(tmp_path):
    uri = str(tmp_path / "ds")
    lf.write_dataset(simple_table(0, 10), uri, enable_stable_row_ids=True)  # v1
    lf.write_dataset(simple_table(10, 5), uri, mode="append")  # v2
    lf.dataset(uri).tags.create("gold", 2)
    time.sleep(0.05)
    lf.write_dataset(simple_table(100, 3), uri, mode="overwrite")  # v3: the bad backfill
    return uri


def test_restore_a_version_tags_the_current_one_and_can_be_undone(uri):
    v1 = lf.dataset(uri, version=1).to_table()
    bad = lf.dataset(uri).to_table()
    ds = lf.dataset(uri)
    out = ds.restore_to(1, transaction_properties={"run": "r1"})
    assert (out.previous_version, out.restored_version, out.version) == (3, 1, 4) and ds.version == 4
    assert out.undo_tag.startswith("restore-before-3-")
    assert lf.dataset(uri).tags.get_version(out.undo_tag) == 3
    assert lance.dataset(uri).to_table().equals(v1)
    props = lf.dataset(uri).read_transaction(4).properties
    assert props["run"] == "r1" and props["lance_ops.operation"] == "restore"
    assert (props["lance_ops.restore.target"], props["lance_ops.restore.undo_tag"]) == ("1", out.undo_tag)
    assert lf.list_leases(uri) == []  # the restore's own lease is released
    undo = lf.dataset(uri).restore_to(out.undo_tag, tag_current=False)  # undo: back to the backfill
    assert undo.undo_tag is None and lf.dataset(uri).to_table().equals(bad)


def test_restore_a_tag_and_a_time(uri):
    v2 = lf.dataset(uri, version=2).to_table()
    assert lf.dataset(uri).restore_to("gold").restored_version == 2
    assert lf.dataset(uri).to_table().equals(v2)
    t2 = lf.dataset(uri).versions()[1]["timestamp"]  # naive UTC, version 2's commit time
    assert lf.dataset(uri).restore_to(t2.replace(tzinfo=UTC)).restored_version == 2
    assert lf.dataset(uri).restore_to(t2.isoformat()).restored_version == 2


def test_a_target_cleanup_removed_is_refused_by_name(uri):
    lf.dataset(uri).cleanup_old_versions(**ZERO)  # keeps v2 (tagged) and v3
    before = lf.dataset(uri).latest_version
    with pytest.raises(lf.VersionRemovedError, match="version 1 was removed by cleanup.*oldest version kept is 2") as e:
        lf.dataset(uri).restore_to(1)
    assert e.value.version == 1
    t1 = datetime(2000, 1, 1)
    with pytest.raises(lf.VersionRemovedError, match="removed by cleanup"):
        lf.dataset(uri).restore_to(t1)
    with pytest.raises(lf.TagError, match="neither a tag nor"):
        lf.dataset(uri).restore_to("nope")
    assert lf.dataset(uri).latest_version == before  # nothing written
    assert not [t for t in lf.dataset(uri).tags.list() if t.startswith("restore-before-")]
