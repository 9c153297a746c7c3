"""Handles as pylance's: a mutation moves the handle it is called on to the version it commits
and returns what pylance returns.  Every sequence runs on pylance and on lance_ops (the same
test body, parametrised by implementation), asserting versions, return values and rows after
each call."""

from dataclasses import dataclass
from typing import Any

import lance
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_ops.format as lf


@dataclass(frozen=True)
class Impl:
    """One library behind the same calls; predicates are given both ways (lance_ops takes
    pyarrow expressions, pylance SQL)."""

    name: str
    lib: Any
    conflict: type[BaseException]  # what a commit that cannot be rebased raises

    def write(self, data: pa.Table, uri: str, **kw: Any) -> Any:
        return self.lib.write_dataset(data, uri, **kw)

    def open(self, uri: str, **kw: Any) -> Any:
        return self.lib.dataset(uri, **kw)

    def where(self, sql: str, expr: pc.Expression) -> Any:
        return sql if self.lib is lance else expr

    def value(self, sql: str, literal: Any) -> Any:
        """An update value: a SQL expression, as both libraries take it."""
        return sql


# pylance's CommitConflictError is an OSError; lance_ops' is a LanceOpsError (a deliberate
# difference, README "Deliberate differences")
IMPLS = [Impl("pylance", lance, OSError), Impl("lance_ops", lf, lf.CommitConflictError)]


@pytest.fixture(params=IMPLS, ids=lambda i: i.name)
def impl(request) -> Impl:
    return request.param


def table(ids: list[int]) -> pa.Table:
    return pa.table({"a": pa.array(ids, pa.int64()), "b": [f"v{i}" for i in ids]})


def rows(ds: Any) -> dict[int, str]:
    t = ds.to_table()
    return dict(zip(t.column("a").to_pylist(), t.column("b").to_pylist(), strict=True))


@pytest.fixture
def ten(impl, uri) -> Any:
    """ids 0..9 in four fragments (3, 3, 3, 1 rows), version 1."""
    return impl.write(table(list(range(10))), uri, max_rows_per_file=3)


def test_delete_moves_the_handle_and_returns_the_count(impl, ten):
    ds = ten
    assert ds.delete(impl.where("a < 2", pc.field("a") < 2)) == {"num_deleted_rows": 2}
    assert (ds.version, ds.latest_version, ds.count_rows()) == (2, 2, 8)
    assert sorted(rows(ds)) == list(range(2, 10))
    # nothing matched: a version is committed all the same
    assert ds.delete(impl.where("a > 100", pc.field("a") > 100)) == {"num_deleted_rows": 0}
    assert (ds.version, ds.count_rows()) == (3, 8)


def test_update_moves_the_handle_and_returns_the_count(impl, ten):
    ds = ten
    assert ds.update({"b": impl.value("'x'", "x")}, where=impl.where("a = 3", pc.field("a") == 3)) == {
        "num_rows_updated": 1
    }
    assert ds.version == 2 and rows(ds)[3] == "x"
    assert ds.update({"b": impl.value("'y'", "y")}, where=impl.where("a = 300", pc.field("a") == 300)) == {
        "num_rows_updated": 0
    }
    assert ds.version == 3 and rows(ds) == {**{i: f"v{i}" for i in range(10)}, 3: "x"}


def test_merge_insert_execute_moves_the_handle(impl, ten):
    ds = ten
    stats = ds.merge_insert("a").when_matched_update_all().when_not_matched_insert_all().execute(
        pa.table({"a": pa.array([5, 50], pa.int64()), "b": ["m", "n"]})
    )
    assert stats == {"num_inserted_rows": 1, "num_updated_rows": 1, "num_deleted_rows": 0}
    assert (ds.version, ds.count_rows()) == (2, 11)
    assert rows(ds)[5] == "m" and rows(ds)[50] == "n"


def test_config_calls_move_the_handle(impl, ten):
    ds = ten
    assert ds.update_config({"k": "v", "j": "w"}) == {"k": "v", "j": "w"}
    assert ds.version == 2
    assert ds.update_config({"k": None}) == {"j": "w"}
    assert ds.delete_config_keys(["j"]) is None
    assert ds.version == 4
    cfg = ds.config()  # a method in both
    assert cfg == {}
    ds.update_config({"k": "v", "j": "w"})
    assert ds.update_config({"z": "1", "k": None}, replace=True) == {"z": "1"}  # the whole config
    assert ds.version == 6


def test_delete_then_compact_files_on_the_same_handle(impl, ten):
    """The issue's example: on a handle left behind, compaction would conflict with the delete."""
    ds = ten
    ds.delete(impl.where("a < 2", pc.field("a") < 2))
    metrics = ds.optimize.compact_files()
    assert (metrics.fragments_removed, metrics.fragments_added) == (4, 1)
    assert metrics.files_removed == 5  # four data files and the deletion file
    assert ds.version == ds.latest_version == 4  # pylance 14 commits two versions for it
    assert len(ds.get_fragments()) == 1 and rows(ds) == {i: f"v{i}" for i in range(2, 10)}
    # nothing left to compact: no commit, the handle stays
    assert ds.optimize.compact_files().fragments_removed == 0
    assert ds.version == 4


def test_index_calls_move_the_handle(impl, ten):
    ds = ten
    assert ds.create_scalar_index("a", "BTREE") is None
    assert ds.version == 2 and [i["name"] for i in ds.list_indices()] == ["a_idx"]
    assert ds.optimize.optimize_indices() is None  # every fragment indexed: nothing to commit
    assert ds.version == 2
    impl.write(table([20, 21]), ds.uri, mode="append")
    assert ds.version == 2  # another handle's write does not move this one
    ds.optimize.optimize_indices(num_indices_to_merge=0)  # its version has nothing unindexed
    assert ds.version == 2 and ds.count_rows() == 10
    fresh = impl.open(ds.uri)
    fresh.optimize.optimize_indices(num_indices_to_merge=0)
    assert fresh.version == 4 and fresh.count_rows() == 12
    assert ds.index_statistics("a_idx")["num_indexed_fragments"] == 4  # ``ds`` still reads version 2


def test_restore_moves_the_handle_it_is_called_on(impl, ten):
    ds = ten
    ds.delete(impl.where("a < 5", pc.field("a") < 5))
    old = ds.checkout_version(1)  # a new handle; ``ds`` stays at version 2
    assert old is not ds and (old.version, ds.version) == (1, 2)
    assert old.restore() is None
    assert (old.version, old.count_rows()) == (3, 10)
    assert (ds.version, ds.count_rows()) == (2, 5)


def test_write_dataset_and_checkout_return_new_handles(impl, ten, uri):
    ds = ten
    appended = impl.write(table([10, 11]), uri, mode="append")
    assert appended is not ds and (appended.version, ds.version) == (2, 1)
    assert (appended.count_rows(), ds.count_rows()) == (12, 10)
    latest = ds.checkout_version(2)
    assert latest is not ds and latest.count_rows() == 12 and ds.version == 1


def test_a_stale_checkout_commits_on_top_of_the_latest(impl, ten):
    """Neither library refuses a mutation of an older checkout: it is checked against what was
    committed since; delete and update plan again on the latest version when they conflict."""
    ds = ten
    ds.delete(impl.where("a = 0", pc.field("a") == 0))  # v2
    ds.update({"b": impl.value("'u'", "u")}, where=impl.where("a = 4", pc.field("a") == 4))  # v3
    stale = ds.checkout_version(1)
    assert stale.delete(impl.where("a = 7", pc.field("a") == 7)) == {"num_deleted_rows": 1}
    assert stale.version == 4 and ds.version == 3
    assert rows(stale) == {**{i: f"v{i}" for i in range(1, 10) if i != 7}, 4: "u"}
    stale = ds.checkout_version(1)  # touches the row v3 rewrote: retried from the latest
    assert stale.update({"b": impl.value("'z'", "z")}, where=impl.where("a >= 4", pc.field("a") >= 4)) == {
        "num_rows_updated": 5  # 4, 5, 6, 8, 9 at version 4
    }
    assert stale.version == 5
    assert rows(stale) == {1: "v1", 2: "v2", 3: "v3", 4: "z", 5: "z", 6: "z", 8: "z", 9: "z"}
    stale_config = ds.checkout_version(2)
    assert stale_config.update_config({"x": "1"}) == {"x": "1"}
    assert stale_config.version == 6 and stale_config.count_rows() == 8


def test_a_stale_compaction_conflicts_and_leaves_the_handle(impl, ten):
    ds = ten
    stale = ds.checkout_version(1)
    ds.update({"b": impl.value("'u'", "u")}, where=impl.where("a = 4", pc.field("a") == 4))  # v2
    with pytest.raises(impl.conflict):
        stale.optimize.compact_files()
    # both libraries committed the fragment-id reservation (v3) before the Rewrite lost
    assert stale.version == 1 and ds.latest_version == 3 and stale.count_rows() == 10


def test_a_failed_mutation_leaves_the_handle(impl, ten):
    ds = ten
    bad = (ValueError, OSError, lf.LanceOpsError)  # each library's kinds: not what this test is about
    with pytest.raises(bad, match="nope"):
        ds.update({"nope": impl.value("1", 1)})
    with pytest.raises(bad, match="nope"):
        ds.delete(impl.where("nope = 1", pc.field("nope") == 1))
    assert ds.version == ds.latest_version == 1 and ds.count_rows() == 10


def test_scanners_and_fragments_keep_the_version_they_came_from(impl, ten):
    ds = ten
    scanner = ds.scanner(columns=["a"])
    fragment = ds.get_fragments()[0]
    ds.delete(impl.where("a < 5", pc.field("a") < 5))
    assert ds.count_rows() == 5
    assert scanner.to_table().num_rows == 10 and fragment.count_rows() == 3
