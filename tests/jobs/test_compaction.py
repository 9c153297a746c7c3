"""compact / materialize_deletions: same rows, ids and versions; fewer fragments; partial progress."""

from collections import Counter

import lance
import pyarrow.compute as pc
import pytest
from datagen import simple_table
from helpers import data_files, deletion_files, referenced_files, snapshot

import lance_ops.format as lf
from lance_ops import jobs


def multiset(uri: str) -> Counter:
    """(_rowid, row content, created, last updated) of every live row, as pylance reads them."""
    return Counter(tuple(sorted(r.items())) for r in snapshot(uri).to_pylist())


@pytest.fixture
def fragmented(uri):
    """10 fragments of 20 rows (v1, v2), a delete (v3) and an update (v4): ids and versions vary."""
    lf.write_dataset(simple_table(0, 100), uri, enable_stable_row_ids=True, max_rows_per_file=20)
    ds = lf.write_dataset(simple_table(100, 100), uri, mode="append", max_rows_per_file=20)
    ds.delete(pc.field("id").isin(list(range(0, 200, 3))))
    ds.update({"val": "'updated'"}, pc.field("id").isin([1, 50, 101, 199]))
    return uri


def test_compaction_keeps_rows_ids_and_versions(spark, fragmented):
    uri = fragmented
    before, n_before = multiset(uri), len(lance.dataset(uri).get_fragments())
    assert deletion_files(uri) > 0
    # pylance's plan (docs/FORMAT.md §16): 11 fragments of 12-14 live rows and one of 4 -> bins of
    # 38, 39 and 56 rows (a bin reaches the target; the last one takes what is left)
    r = jobs.compact(spark, uri, target_rows_per_fragment=30)
    assert r.failed_tasks == () and r.tasks_succeeded == r.tasks_planned == 3
    assert r.version == 6  # ReserveFragments (5) then Rewrite (6), as pylance
    ds = lance.dataset(uri)
    assert len(ds.get_fragments()) < n_before
    assert r.fragments_removed == n_before and r.rows_rewritten == ds.count_rows()
    assert multiset(uri) == before
    assert deletion_files(uri) == 0
    assert [f.count_rows() for f in ds.get_fragments()] == [38, 39, 56]  # as pylance's compaction
    # nothing left to do
    again = jobs.compact(spark, uri, target_rows_per_fragment=30)
    assert (again.tasks_planned, again.version) == (0, None)
    assert data_files(uri) == referenced_files(uri)


def test_table_config_overrides_defaults_and_dry_run(spark, fragmented):
    uri = fragmented
    lf.dataset(uri).update_config({"lance.compaction.target_rows_per_fragment": "20"})
    dry = jobs.compact(spark, uri, dry_run=True)
    assert dry.dry_run and dry.version is None and dry.tasks_planned >= 3
    assert lance.dataset(uri).version == 5  # nothing committed
    r = jobs.compact(spark, uri)  # the table config (20), not the default 1_048_576
    assert r.tasks_planned == dry.tasks_planned == 5
    assert all(f.count_rows() < 40 for f in lance.dataset(uri).get_fragments())  # a file < 2 x target


def test_partial_progress_commits_finished_groups(spark, fragmented):
    uri = fragmented
    before = multiset(uri)
    frags_before = {f.fragment_id for f in lance.dataset(uri).get_fragments()}
    r = jobs.compact(spark, uri, target_rows_per_fragment=25, inject_task_failures={1})
    assert r.tasks_planned >= 3 and r.tasks_succeeded == r.tasks_planned - 1
    assert len(r.failed_tasks) == 1 and r.failed_tasks[0].startswith("task 1 (fragments [")
    assert "injected failure" in r.failed_tasks[0]
    failed_ids = {int(x) for x in r.failed_tasks[0].split("[", 1)[1].split("]", 1)[0].split(",")}
    ds = lance.dataset(uri)
    after_ids = {f.fragment_id for f in ds.get_fragments()}
    assert failed_ids <= after_ids  # the failed group's fragments are still there, untouched
    assert (frags_before - failed_ids).isdisjoint(after_ids)  # every other group was rewritten
    assert multiset(uri) == before
    assert data_files(uri) == referenced_files(uri)  # the failed task left no files


def test_materialize_deletions_only_rewrites_heavy_fragments(spark, uri):
    lf.write_dataset(simple_table(0, 100), uri, enable_stable_row_ids=True, max_rows_per_file=25)
    # fragment 0 loses 10/25 rows (40 %), fragment 1 loses 1/25 (4 %), 2 and 3 none
    lf.dataset(uri).delete(pc.field("id").isin(list(range(0, 10)) + [30]))
    before = multiset(uri)
    r = jobs.materialize_deletions(spark, uri, threshold=0.1)
    assert (r.tasks_planned, r.fragments_removed, r.fragments_added, r.version) == (1, 1, 1, 4)
    ds = lance.dataset(uri)
    frags = {f.fragment_id: f for f in ds.get_fragments()}
    assert set(frags) == {1, 2, 3, 4}
    assert frags[4].metadata.deletion_file is None and frags[4].count_rows() == 15
    assert frags[1].metadata.deletion_file is not None  # below the threshold: left alone
    assert multiset(uri) == before


def test_compaction_lands_over_a_concurrent_append(spark, fragmented):
    uri = fragmented
    planned_on = lance.dataset(uri).version
    lf.write_dataset(simple_table(1000, 30), uri, mode="append")  # committed after "planning"
    expected = multiset(uri)
    r = jobs.compact(spark, uri, target_rows_per_fragment=200, read_version=planned_on)
    assert r.read_version == planned_on and r.version == planned_on + 3
    assert multiset(uri) == expected
    t = snapshot(uri)
    assert t.filter(pc.field("id") >= 1000).num_rows == 30
