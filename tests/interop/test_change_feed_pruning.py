"""The change feed reads only the fragments that changed (chosen from manifest metadata).

pylance builds the history at file format 2.2 with stable row ids: ten fragments, then an update
of rows of one fragment, a delete in another and an append.  A store wrapper records which data
files are read: the fragments nothing happened to are never opened.
"""

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_ops.format as lf
from lance_ops.format.errors import InvalidArgumentError
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.ops.change_feed.batches import change_feed_batches, change_feed_schema
from lance_ops.format.ops.change_feed.tasks import execute_change_feed_task, plan_change_feed
from lance_ops.format.read.scan import plan_scan, scan_fragment_rows
from lance_ops.format.txn.handlers import commit_handler_for

# the format users have (pylance's default); the pruning does not depend on page encodings
pytestmark = [pytest.mark.interop, pytest.mark.parametrize("file_version", ("2.2",), indirect=True)]

ROWS, PER_FRAGMENT = 1000, 100


class DataFileReads(ObjectStore):
    """An ObjectStore that records the data files it reads (paths under ``data/``)."""

    def __init__(self, uri: str) -> None:
        super().__init__(uri)
        self.files: set[str] = set()

    def _note(self, rel: str) -> None:
        if rel.startswith("data/"):
            self.files.add(rel)

    def read(self, rel):
        self._note(rel)
        return super().read(rel)

    def read_range(self, rel, start, length):
        self._note(rel)
        return super().read_range(rel, start, length)

    def read_ranges(self, rel, ranges):
        self._note(rel)
        return super().read_ranges(rel, ranges)


def feed(uri: str, begin: int, end: int) -> tuple[pa.Table, set[str]]:
    store = DataFileReads(uri)
    batches = list(change_feed_batches(store, commit_handler_for(store, None), begin, end))
    schema = change_feed_schema(lance.dataset(uri, version=end).schema)
    return pa.Table.from_batches(batches, schema=schema), store.files


def files_of(ds: lance.LanceDataset, fragment_ids: set[int]) -> set[str]:
    return {f"data/{df.path}" for f in ds.get_fragments() if f.fragment_id in fragment_ids
            for df in f.metadata.files}


@pytest.fixture
def history(tmp_path):
    uri = str(tmp_path / "ds")
    ids = np.arange(ROWS, dtype=np.int64)
    table = pa.table({"id": ids, "s": pa.array([f"v{i}" for i in ids])})
    lance.write_dataset(table, uri, max_rows_per_file=PER_FRAGMENT, enable_stable_row_ids=True)
    ds = lance.dataset(uri)
    ds.update({"s": "'updated'"}, where="id >= 300 AND id < 310")  # v2: rows of fragment 3
    ds = lance.dataset(uri)
    ds.delete("id = 555")  # v3: a row of fragment 5
    extra = pa.table({"id": np.arange(ROWS, ROWS + 50), "s": pa.array([f"n{i}" for i in range(50)])})
    lance.write_dataset(extra, uri, mode="append")  # v4
    return uri


def test_feed_reads_only_the_changed_fragments(history):
    uri = history
    v1, v4 = lance.dataset(uri, version=1), lance.dataset(uri, version=4)
    assert len(v1.get_fragments()) == ROWS // PER_FRAGMENT
    got, read = feed(uri, 1, 4)
    new = {f.fragment_id for f in v4.get_fragments()} - {f.fragment_id for f in v1.get_fragments()}
    # the updated rows' new fragment and the append's (v4), fragment 3 (pre-images), 5 (the delete)
    assert read == files_of(v4, new) | files_of(v1, {3, 5})
    assert len(read) == 4

    kinds = got.group_by("_change_type").aggregate([("id", "count")]).to_pydict()
    assert dict(zip(kinds["_change_type"], kinds["id_count"], strict=True)) == {
        "insert": 50, "update_postimage": 10, "update_preimage": 10, "delete": 1,
    }
    rows = got.sort_by([("_change_type", "ascending"), ("id", "ascending")]).to_pylist()
    deleted = [r for r in rows if r["_change_type"] == "delete"]
    assert [(r["id"], r["s"], r["_commit_version"]) for r in deleted] == [(555, "v555", 3)]
    pre = [(r["id"], r["s"], r["_commit_version"]) for r in rows if r["_change_type"] == "update_preimage"]
    assert pre == [(i, f"v{i}", 2) for i in range(300, 310)]
    post = [(r["id"], r["s"], r["_commit_version"]) for r in rows if r["_change_type"] == "update_postimage"]
    assert post == [(i, "updated", 2) for i in range(300, 310)]
    # the same rows as the feed of the whole table (and pylance's delta for inserts + updates)
    assert got.sort_by("_rowid").equals(lf.dataset(uri).change_feed(1, 4).sort_by("_rowid"))
    delta = lance.dataset(uri).delta(begin_version=1, end_version=4)
    assert delta.get_inserted_rows().read_all().num_rows == 50
    assert sorted(delta.get_updated_rows().read_all()["id"].to_pylist()) == list(range(300, 310))
    # the pre-images and the deleted row carry the row ids they had at version 1
    by_id = dict(zip(v1.to_table(columns=["id"], with_row_id=True)["id"].to_pylist(),
                     v1.to_table(columns=["id"], with_row_id=True)["_rowid"].to_pylist(), strict=True))
    assert all(r["_rowid"] == by_id[r["id"]] for r in rows if r["_change_type"] in ("update_preimage", "delete"))


def test_planned_feed_tasks_cover_only_the_changed_rows(history):
    """What the Spark job runs (``plan_change_feed`` on the driver, ``execute_change_feed_task``
    on executors): tasks only for the fragments holding changes, each carrying just those
    rows, and the same feed as in process."""
    uri = history
    v1, v4 = lance.dataset(uri, version=1), lance.dataset(uri, version=4)
    plan = plan_change_feed(uri, 1, 4)
    new = {f.fragment_id for f in v4.get_fragments()} - {f.fragment_id for f in v1.get_fragments()}
    assert {(t.kind, t.fragment.id) for t in plan.tasks} == {("end", f) for f in new} | {("begin", 3), ("begin", 5)}
    assert sum(t.rows.size for t in plan.tasks) == 50 + 10 + 10 + 1
    got = pa.Table.from_batches([b for t in plan.tasks for b in execute_change_feed_task(t)], schema=plan.schema)
    assert got.sort_by("_rowid").equals(feed(uri, 1, 4)[0].sort_by("_rowid"))


def test_feed_of_an_append_opens_only_the_appended_file(history):
    uri = history
    v3, v4 = lance.dataset(uri, version=3), lance.dataset(uri, version=4)
    got, read = feed(uri, 3, 4)
    new = {f.fragment_id for f in v4.get_fragments()} - {f.fragment_id for f in v3.get_fragments()}
    assert read == files_of(v4, new) and len(read) == 1
    assert got.num_rows == 50 and set(got["_change_type"].to_pylist()) == {"insert"}
    assert got["id"].to_pylist() == list(range(ROWS, ROWS + 50))
    got, read = feed(uri, 3, 3)
    assert got.num_rows == 0 and read == set()


def test_scan_fragment_rows_reads_the_chosen_rows_in_spans(tmp_path):
    """The reader the feed uses: any sorted offsets (cut into spans where gaps exceed a batch)
    give the rows pylance's ``take`` gives for them, metadata columns included."""
    uri = str(tmp_path / "ds")
    ids = np.arange(5000, dtype=np.int64)
    lance.write_dataset(pa.table({"id": ids, "s": pa.array([f"v{i}" for i in ids])}), uri,
                        enable_stable_row_ids=True)
    lance.dataset(uri).delete("id % 7 = 0")
    ds = lf.dataset(uri)
    m = ds._manifest
    (frag,) = m.fragments
    plan = plan_scan(m.schema, ["s", "id", "_rowid", "_row_created_at_version"], None, False, False)
    offsets = np.array([1, 2, 3, 701, 702, 4001, 4997], dtype=np.int64)  # three spans at batch_size=256
    got = pa.Table.from_batches(list(scan_fragment_rows(ds._store, m, frag, plan, offsets, batch_size=256)))
    every = lance.dataset(uri).to_table(columns=["s", "id"], with_row_address=True)
    want = every.filter(pc.is_in(every["_rowaddr"], pa.array(offsets, pa.uint64()))).sort_by("_rowaddr")
    assert got["id"].to_pylist() == offsets.tolist() == want["id"].to_pylist()
    assert got["s"].to_pylist() == want["s"].to_pylist()
    assert got["_rowid"].to_pylist() == offsets.tolist()  # the first write: row id = offset
    assert got["_row_created_at_version"].to_pylist() == [1] * offsets.size
    with pytest.raises(InvalidArgumentError, match="row offsets must be in"):
        list(scan_fragment_rows(ds._store, m, frag, plan, np.array([5000])))
