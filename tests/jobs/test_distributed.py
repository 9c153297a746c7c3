"""lance_ops.format.ops.change_feed.tasks (no Spark): range scans and the planned change feed."""

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from datagen import simple_table
from helpers import normalize_feed, reference_feed

import lance_ops.format as lf
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.ops.change_feed import tasks as d
from lance_ops.format.table.manifest import list_versions


@pytest.fixture
def history(uri):
    lf.write_dataset(simple_table(0, 100), uri, enable_stable_row_ids=True, max_rows_per_file=40)  # v1
    lf.write_dataset(simple_table(100, 50), uri, mode="append", max_rows_per_file=20)  # v2
    ds = lf.dataset(uri)
    ds.delete(pc.field("id") < 10)  # v3
    ds.update({"val": "'upd'"}, pc.field("id").isin([7, 14, 21, 70, 140]))  # v4
    lf.write_dataset(simple_table(200, 30), uri, mode="append")  # v5
    lf.dataset(uri).compact_files(target_rows_per_fragment=60)  # v6, v7
    ds = lf.dataset(uri)
    ds.delete((pc.field("id") > 120) & (pc.field("id") < 130))  # v8
    ds.update({"score": 1.0}, pc.field("id").isin([15, 25, 105, 200, 210]))  # v9
    return uri


def test_planned_change_feed_equals_reference_for_every_range(history):
    uri = history
    for b in range(0, 10):
        for e in range(max(b, 1), 10):
            plan = d.plan_change_feed(uri, b, e, rows_per_task=7)
            batches = [x for t in plan.tasks for x in d.execute_change_feed_task(t, batch_size=5)]
            got = pa.Table.from_batches(batches, schema=plan.schema)
            assert normalize_feed(got.to_pylist()) == reference_feed(uri, b, e), (b, e)


def test_range_scans_equal_whole_fragment_scans(history):
    uri = history
    ds = lf.dataset(uri)
    store, m = ObjectStore(uri), ds.manifest
    cols = ["id", "_rowid", "val", "_rowaddr", "_row_created_at_version", "_row_last_updated_at_version"]
    for f in m.fragments:
        want = ds.to_table(columns=cols, fragments=[f])
        parts = [b for off, n in d.row_ranges(f, 13)
                 for b in d.scan_fragment_range(store, m, f, cols, offset=off, length=n, batch_size=4)]
        assert pa.Table.from_batches(parts, schema=want.schema).equals(want), f.id
        # a metadata filter selects rows before any data is decoded, exactly
        flt = pc.field("_row_last_updated_at_version") > pa.scalar(7, pa.uint64())
        got = pa.Table.from_batches(list(d.scan_fragment_range(store, m, f, cols, meta_filter=flt)), schema=want.schema)
        assert got.equals(want.filter(pc.field("_row_last_updated_at_version") > 7)), f.id


def test_id_removing_versions_skip_appends_compactions_and_id_keeping_updates(history):
    store = ObjectStore(history)
    scheme = list_versions(store)[0]
    assert d.row_changing_versions(store, scheme, 1, 9) == [3, 4, 8, 9]
    assert d.id_removing_versions(store, scheme, 1, 9) == [3, 8]
