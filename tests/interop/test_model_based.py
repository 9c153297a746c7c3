"""Seeded model-based tests (Hypothesis stateful testing): random sequences of appends, deletes,
updates, merge_inserts, restores, compactions and cleanups.

``TwinMachine`` applies each step to a lance_ops dataset, to a pylance dataset and to a plain
Python model (the expected rows, and with stable row ids the expected ``_rowid``,
``_row_created_at_version`` and ``_row_last_updated_at_version`` of every row), then compares
rows, ``_rowid``, both version columns, version numbers, version lists, return values and a few
filtered ``count_rows`` between the two libraries, and rows against the model.

``SharedMachine`` works on ONE dataset; each step is done by lance_ops or by pylance (a drawn
choice) and after every step both libraries read the dataset: each must read the other's
writes identically, and as the model says.

Without stable row ids ``_rowid`` is a row address (fragment id << 32 | offset), which the model
does not predict (it is compared between the libraries only), and pylance 14 reads both version
columns as 1 for every row (no version sequences are written), which the model expects.

One exclusion, explained at ``TwinMachine.matched_order``: without stable row ids the twin
machine hands merge_insert its matched rows in target order (pylance's row order there depends on
its join plan).

Seeded (``derandomize=True``) and bounded so the module stays within about 90 s on two busy
cores; a difference found here gets a focused regression test next to the relevant tests.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

import lance
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import lance_ops.format as lf

pytestmark = pytest.mark.interop

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.int64()), ("s", pa.string())])
META = ["_row_created_at_version", "_row_last_updated_at_version"]
COLUMNS = ["id", "v", "s", *META]
MAX_ROWS_PER_FILE = 3  # small fragments, so deletes, updates and compaction cross fragments


@pytest.fixture(autouse=True)
def file_version() -> None:
    """Overrides the package's 2.0/2.1/2.2 parametrisation: each machine names its own format."""
    return None


# ------------------------------------------------------------------ the model
@dataclass(frozen=True)
class Row:
    """One expected row; ``rowid``/``created``/``updated`` are modelled with stable row ids only."""

    v: int | None
    s: str | None
    created: int = 0
    updated: int = 0
    rowid: int = 0


@dataclass
class Model:
    """The rows a dataset holds at its version, and what each earlier version held."""

    stable: bool
    rows: dict[int, Row]
    version: int = 1
    next_row_id: int = 0
    history: dict[int, dict[int, Row]] | None = None  # restorable versions (cleanup forgets)

    def commit(self, rows: dict[int, Row], next_row_id: int | None = None) -> None:
        """A new version holding ``rows``."""
        self.version += 1
        self.rows = rows
        if next_row_id is not None:
            self.next_row_id = next_row_id
        self.snapshot()

    def snapshot(self) -> None:
        if self.history is None:
            self.history = {}
        self.history[self.version] = dict(self.rows)

    def insert(self, rows: dict[int, Row], new: list[tuple[int, int | None, str | None]]) -> int:
        """Adds ``new`` (id, v, s) in order to ``rows`` as of the next version; returns the next
        row id after them (stable row ids are handed out in write order)."""
        nxt = self.next_row_id
        for i, v, s in new:
            rows[i] = Row(v, s, self.version + 1, self.version + 1, nxt)
            nxt += 1
        return nxt

    def table(self) -> dict[str, list]:
        ids = sorted(self.rows)
        out = {"id": ids, "v": [self.rows[i].v for i in ids], "s": [self.rows[i].s for i in ids]}
        if self.stable:
            out |= {
                "_row_created_at_version": [self.rows[i].created for i in ids],
                "_row_last_updated_at_version": [self.rows[i].updated for i in ids],
                "_rowid": [self.rows[i].rowid for i in ids],
            }
        else:  # no version sequences without stable row ids: pylance 14 reads 1 for every row
            out |= {"_row_created_at_version": [1] * len(ids), "_row_last_updated_at_version": [1] * len(ids)}
        return out


# ------------------------------------------------------------------ SQL with its Python meaning
Truth = bool | None  # SQL's three-valued logic: None is UNKNOWN


@dataclass(frozen=True)
class Pred:
    """A SQL predicate and what it means for one row (``id``, ``Row``)."""

    sql: str
    holds: Callable[[int, Row], Truth]


def _cmp(a: Any, op: str, b: Any) -> Truth:
    if a is None or b is None:
        return None
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "=": a == b, "<>": a != b}[op]


def _and(a: Truth, b: Truth) -> Truth:
    if a is False or b is False:
        return False
    return None if a is None or b is None else True


def _or(a: Truth, b: Truth) -> Truth:
    if a is True or b is True:
        return True
    return None if a is None or b is None else False


def _not(a: Truth) -> Truth:
    return None if a is None else not a


OPS = ["<", "<=", ">", ">=", "=", "<>"]
LETTERS = ["a", "b", "c"]


def _leaf_preds() -> st.SearchStrategy[Pred]:
    ids, vals = st.integers(0, 60), st.integers(0, 100)
    return st.one_of(
        st.builds(lambda op, k: Pred(f"id {op} {k}", lambda i, r: _cmp(i, op, k)), st.sampled_from(OPS), ids),
        st.builds(lambda op, k: Pred(f"v {op} {k}", lambda i, r: _cmp(r.v, op, k)), st.sampled_from(OPS), vals),
        st.builds(lambda m, k: Pred(f"id % {m} = {k % m}", lambda i, r: i % m == k % m),
                  st.integers(2, 4), st.integers(0, 3)),
        st.just(Pred("v IS NULL", lambda i, r: r.v is None)),
        st.just(Pred("s IS NOT NULL", lambda i, r: r.s is not None)),
        st.builds(lambda lo, n: Pred(f"v BETWEEN {lo} AND {lo + n}",
                                     lambda i, r: _and(_cmp(r.v, ">=", lo), _cmp(r.v, "<=", lo + n))),
                  vals, st.integers(0, 40)),
        st.builds(lambda ks: Pred(f"id IN ({', '.join(map(str, ks))})", lambda i, r: i in ks),
                  st.lists(ids, min_size=1, max_size=4, unique=True)),
        st.builds(lambda c: Pred(f"s LIKE '{c}%'", lambda i, r: None if r.s is None else r.s.startswith(c)),
                  st.sampled_from(LETTERS)),
    )


def _combine(a: Pred, b: Pred, how: str) -> Pred:
    if how == "AND":
        return Pred(f"({a.sql}) AND ({b.sql})", lambda i, r: _and(a.holds(i, r), b.holds(i, r)))
    if how == "OR":
        return Pred(f"({a.sql}) OR ({b.sql})", lambda i, r: _or(a.holds(i, r), b.holds(i, r)))
    return Pred(f"NOT ({a.sql})", lambda i, r: _not(a.holds(i, r)))


PREDS = st.one_of(
    _leaf_preds(),
    st.builds(_combine, _leaf_preds(), _leaf_preds(), st.sampled_from(["AND", "OR", "NOT"])),
)

# fixed filtered counts checked after every step
COUNT_PREDS = [
    Pred("v IS NULL", lambda i, r: r.v is None),
    Pred("v > 50 OR s = 'b'", lambda i, r: _or(_cmp(r.v, ">", 50), _cmp(r.s, "=", "b"))),
    Pred("id % 2 = 0 AND s IS NOT NULL", lambda i, r: i % 2 == 0 and r.s is not None),
]


@dataclass(frozen=True)
class Assign:
    """An update value: a SQL expression for one column and its Python meaning."""

    column: str
    sql: str
    value: Callable[[int, Row], Any]


def _add(a: int | None, k: int) -> int | None:
    return None if a is None else a + k


ASSIGNS = st.one_of(
    st.builds(lambda k: Assign("v", f"v + {k}", lambda i, r: _add(r.v, k)), st.integers(-5, 5)),
    st.builds(lambda k: Assign("v", str(k), lambda i, r: k), st.integers(0, 100)),
    st.just(Assign("v", "id * 2", lambda i, r: i * 2)),
    st.just(Assign("v", "NULL", lambda i, r: None)),
    st.builds(lambda c: Assign("s", f"'{c}'", lambda i, r: c), st.sampled_from(LETTERS)),
    st.just(Assign("s", "s || 'x'", lambda i, r: None if r.s is None else r.s + "x")),
    st.just(Assign("s", "NULL", lambda i, r: None)),
)

VALUES = st.one_of(st.none(), st.integers(0, 100))
STRINGS = st.one_of(st.none(), st.sampled_from(LETTERS).flatmap(lambda c: st.sampled_from([c, c + "x", c + "y"])))


def _source(new: list[tuple[int, int | None, str | None]]) -> pa.Table:
    return pa.table({"id": [r[0] for r in new], "v": [r[1] for r in new], "s": [r[2] for r in new]}, schema=SCHEMA)


def _matches(rows: dict[int, Row], pred: Pred) -> list[int]:
    return [i for i, r in rows.items() if pred.holds(i, r) is True]


# ------------------------------------------------------------------ reading and comparing
def _read(ds: Any) -> dict[str, list]:
    """Rows (sorted by id), their ``_rowid`` and both version columns, as pylance 14 takes them."""
    return ds.to_table(columns=COLUMNS, with_row_id=True).sort_by("id").to_pydict()


def _assert_same(ours: dict[str, list], theirs: dict[str, list], model: Model, where: str) -> None:
    assert ours == theirs, f"{where}: lance_ops and pylance read differently\nlance_ops: {ours}\npylance:   {theirs}"
    expected = model.table()
    got = {k: ours[k] for k in expected}
    assert got == expected, f"{where}: the model says otherwise\nread:  {got}\nmodel: {expected}"


def _assert_counts(ours: Any, theirs: Any, model: Model) -> None:
    for pred in COUNT_PREDS:
        expected = len(_matches(model.rows, pred))
        assert (ours.count_rows(pred.sql), theirs.count_rows(pred.sql)) == (expected, expected), pred.sql


def _versions(ds: Any) -> list[int]:
    return [v["version"] for v in ds.versions()]


def _cleanup(lib: Any, ds: Any) -> None:
    """Removes every version but the latest. lance_ops refuses ``older_than`` below an hour unless
    ``retention_duration_check=False`` (README "Deliberate differences"); pylance has no guard."""
    if lib is lf:
        ds.cleanup_old_versions(older_than=timedelta(0), retention_duration_check=False)
    else:
        ds.cleanup_old_versions(older_than=timedelta(0))


SETTINGS = settings(
    max_examples=7,
    stateful_step_count=20,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


# ------------------------------------------------------------------ the steps, shared by both machines
class _Steps(RuleBasedStateMachine):
    """The model side of every step (what each step draws and what it should do); the rules
    that run the steps on datasets are :class:`_Machine`'s."""

    file_version = "2.2"
    stable = True

    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="lance_model_")
        self.model = Model(self.stable, {})
        self.next_id = 0

    def teardown(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def _new_rows(self, data: st.DataObject, lo: int, hi: int) -> list[tuple[int, int | None, str | None]]:
        n = data.draw(st.integers(lo, hi), label="new rows")
        vals = data.draw(st.lists(st.tuples(VALUES, STRINGS), min_size=n, max_size=n), label="values")
        ids = list(range(self.next_id, self.next_id + n))
        self.next_id += n
        return [(i, v, s) for i, (v, s) in zip(ids, vals, strict=True)]

    def model_create(self, new: list[tuple[int, int | None, str | None]]) -> None:
        self.model.version = 0
        rows: dict[int, Row] = {}
        nxt = self.model.insert(rows, new)
        self.model.commit(rows, nxt)

    def model_append(self, new: list[tuple[int, int | None, str | None]]) -> None:
        rows = dict(self.model.rows)
        self.model.commit(rows, self.model.insert(rows, new))

    def model_delete(self, pred: Pred) -> int:
        gone = set(_matches(self.model.rows, pred))
        self.model.commit({i: r for i, r in self.model.rows.items() if i not in gone})
        return len(gone)

    def model_update(self, assigns: list[Assign], pred: Pred | None) -> int:
        hit = list(self.model.rows) if pred is None else _matches(self.model.rows, pred)
        rows, version = dict(self.model.rows), self.model.version + 1
        for i in hit:
            r = rows[i]
            new = {a.column: a.value(i, r) for a in assigns}  # all values see the old row
            rows[i] = replace(r, **new, updated=version)
        self.model.commit(rows)
        return len(hit)

    def model_merge(self, source: list[tuple[int, int | None, str | None]]) -> dict[str, int]:
        rows, version = dict(self.model.rows), self.model.version + 1
        matched = [(i, v, s) for i, v, s in source if i in rows]
        for i, v, s in matched:
            rows[i] = replace(rows[i], v=v, s=s, updated=version)
        fresh = [r for r in source if r[0] not in self.model.rows]
        self.model.commit(rows, self.model.insert(rows, fresh))
        return {"num_inserted_rows": len(fresh), "num_updated_rows": len(matched), "num_deleted_rows": 0}

    def model_restore(self, version: int) -> None:
        """The rows of ``version``; ``next_row_id`` does not go back (no row id is handed out twice)."""
        assert self.model.history is not None
        self.model.commit(dict(self.model.history[version]))

    def merge_source(self, data: st.DataObject) -> list[tuple[int, int | None, str | None]]:
        existing = sorted(self.model.rows)
        old_ids = data.draw(st.lists(st.sampled_from(existing), max_size=4, unique=True), label="matched") \
            if existing else []
        old = [(i, *data.draw(st.tuples(VALUES, STRINGS), label="values")) for i in old_ids]
        source = data.draw(st.permutations(old + self._new_rows(data, 0, 3)), label="source order")
        return self.matched_order(source)

    def matched_order(self, source: list[tuple[int, int | None, str | None]]) -> list[tuple[int, int | None, str | None]]:
        """The source as the merge_insert gets it (a machine may reorder its matched rows)."""
        return source

    def restorable(self) -> list[int]:
        assert self.model.history is not None
        return sorted(v for v in self.model.history if v < self.model.version)


# ------------------------------------------------------------------ the rules, shared by both machines
class _Machine(_Steps):
    """Every rule runs on ``targets`` (library, handle) and then tells the model; subclasses say
    which handles a step runs on and how the datasets are compared."""

    def targets(self, data: st.DataObject) -> list[tuple[Any, Any]]:
        raise NotImplementedError

    def moved(self, lib: Any, handle: Any) -> None:
        """``handle`` is where ``lib``'s dataset is now (mutations move handles in place)."""

    def latest(self) -> int:
        raise NotImplementedError

    @rule(data=st.data())
    def append(self, data: st.DataObject) -> None:
        new = self._new_rows(data, 1, 6)
        for lib, ds in self.targets(data):
            self.moved(lib, lib.write_dataset(_source(new), ds.uri, mode="append", max_rows_per_file=MAX_ROWS_PER_FILE))
        self.model_append(new)

    @rule(data=st.data(), pred=PREDS)
    def delete(self, data: st.DataObject, pred: Pred) -> None:
        got = [dict(ds.delete(pred.sql)) for _, ds in self.targets(data)]
        expected = {"num_deleted_rows": self.model_delete(pred)}
        assert got == [expected] * len(got), pred.sql

    @rule(data=st.data(), assigns=st.lists(ASSIGNS, min_size=1, max_size=2, unique_by=lambda a: a.column),
          pred=st.one_of(st.none(), PREDS))
    def update(self, data: st.DataObject, assigns: list[Assign], pred: Pred | None) -> None:
        values = {a.column: a.sql for a in assigns}
        where = None if pred is None else pred.sql
        got = [dict(ds.update(values, where=where)) for _, ds in self.targets(data)]
        expected = {"num_rows_updated": self.model_update(assigns, pred)}
        assert got == [expected] * len(got), (values, where)

    @rule(data=st.data())
    def merge_insert(self, data: st.DataObject) -> None:
        source = _source(self.merge_source(data))
        expected = self.model_merge([tuple(r.values()) for r in source.to_pylist()])
        got = [dict(ds.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(source))
               for _, ds in self.targets(data)]
        assert got == [expected] * len(got), source.to_pydict()

    @precondition(lambda self: self.restorable())
    @rule(data=st.data())
    def restore(self, data: st.DataObject) -> None:
        version = data.draw(st.sampled_from(self.restorable()), label="restore to")
        for lib, ds in self.targets(data):
            old = ds.checkout_version(version)
            old.restore()
            self.moved(lib, old)
        self.model_restore(version)

    @rule(data=st.data(), rows=st.sampled_from([2, 4, 8]),
          threshold=st.one_of(st.none(), st.sampled_from([0.1, 0.5])))
    def compact(self, data: st.DataObject, rows: int, threshold: float | None) -> None:
        kw: dict[str, Any] = {"target_rows_per_fragment": rows}
        if threshold is not None:
            kw["materialize_deletions_threshold"] = threshold
        got = [ds.optimize.compact_files(**kw) for _, ds in self.targets(data)]
        counts = {(m.fragments_removed, m.fragments_added) for m in got}
        assert len(counts) == 1, (kw, got)
        # compaction changes no row; whether it commits (two versions: ReserveFragments, Rewrite)
        # is the plan's business, checked between the libraries by the version numbers
        for _ in range(self.model.version, self.latest()):
            self.model.commit(dict(self.model.rows))

    @rule(data=st.data())
    def cleanup(self, data: st.DataObject) -> None:
        for lib, ds in self.targets(data):
            _cleanup(lib, ds)
        self.model.history = None
        self.model.snapshot()

    def check(self, ours: Any, theirs: Any) -> None:
        where = f"version {self.model.version}"
        assert (ours.version, theirs.version) == (self.model.version, self.model.version), where
        assert _versions(ours) == _versions(theirs), where
        a, b = _read(ours), _read(theirs)
        _assert_same(a, b, self.model, where)
        _assert_counts(ours, theirs, self.model)


# ------------------------------------------------------------------ machine 1: two datasets and a model
class TwinMachine(_Machine):
    """The same steps on a lance_ops dataset and on a pylance dataset, both against the model."""

    @initialize(data=st.data())
    def create(self, data: st.DataObject) -> None:
        new = self._new_rows(data, 1, 8)
        kw = dict(max_rows_per_file=MAX_ROWS_PER_FILE, enable_stable_row_ids=self.stable,
                  data_storage_version=self.file_version)
        self.ours = lf.write_dataset(_source(new), f"{self.dir}/ours.lance", **kw)
        self.theirs = lance.write_dataset(_source(new), f"{self.dir}/theirs.lance", **kw)
        self.model_create(new)

    def targets(self, data: st.DataObject) -> list[tuple[Any, Any]]:
        return [(lf, self.ours), (lance, self.theirs)]

    def moved(self, lib: Any, handle: Any) -> None:
        if lib is lf:
            self.ours = handle
        else:
            self.theirs = handle

    def latest(self) -> int:
        assert self.ours.version == self.theirs.version, "compaction committed in one library only"
        return self.theirs.version

    def matched_order(self, source: list[tuple[int, int | None, str | None]]) -> list[tuple[int, int | None, str | None]]:
        """Excluded without stable row ids: the order of a merge_insert's matched rows in the
        fragment it writes. pylance 14 writes them in source order for some inputs and in target
        (row address) order for others (its join plan decides; e.g. 10 target rows in fragments
        of 3, matched ids [2, 1, 0] -> target order, [3, 2, 1, 0] -> source order); lance_ops
        writes target order. Without stable row ids ``_rowid`` is the row address, so the two
        datasets would drift apart; the matched rows come in target order here, where both
        orders agree. (Stable row ids keep ``_rowid`` whatever the order; SharedMachine has one
        dataset.)"""
        if self.stable:
            return source
        t = self.theirs.to_table(columns=["id"], with_row_address=True)
        where = dict(zip(t.column("id").to_pylist(), t.column("_rowaddr").to_pylist(), strict=True))
        matched = sorted((r for r in source if r[0] in where), key=lambda r: where[r[0]])
        return matched + [r for r in source if r[0] not in where]

    @invariant()
    def agree(self) -> None:
        self.check(self.ours, self.theirs)


# ------------------------------------------------------------------ machine 2: one dataset, both libraries
class SharedMachine(_Machine):
    """One dataset; each step is done by lance_ops or by pylance (a drawn choice) on a handle
    opened for it; after every step both libraries read it and must agree with each other and
    with the model."""

    @initialize(data=st.data())
    def create(self, data: st.DataObject) -> None:
        new = self._new_rows(data, 1, 8)
        self.uri = f"{self.dir}/shared.lance"
        lib = data.draw(st.sampled_from(LIBS), label="writer")
        lib.write_dataset(_source(new), self.uri, max_rows_per_file=MAX_ROWS_PER_FILE,
                          enable_stable_row_ids=self.stable, data_storage_version=self.file_version)
        self.model_create(new)

    def targets(self, data: st.DataObject) -> list[tuple[Any, Any]]:
        lib = data.draw(st.sampled_from(LIBS), label="writer")
        return [(lib, lib.dataset(self.uri))]

    def latest(self) -> int:
        return lance.dataset(self.uri).version

    @invariant()
    def agree(self) -> None:
        self.check(lf.dataset(self.uri), lance.dataset(self.uri))


LIBS = (lf, lance)


def _machine(base: type[_Machine], file_version: str, stable: bool) -> type[_Machine]:
    return type(f"{base.__name__}_{file_version}_{'stable' if stable else 'addresses'}", (base,),
                {"file_version": file_version, "stable": stable})


@pytest.mark.parametrize("machine", [
    _machine(TwinMachine, "2.2", True),
    _machine(TwinMachine, "2.0", False),
], ids=["2.2-stable_ids", "2.0-row_addresses"])
def test_lance_ops_and_pylance_follow_the_model(machine: type[_Machine]) -> None:
    """The same random steps on both libraries' datasets, compared after every step."""
    run_state_machine_as_test(machine, settings=SETTINGS)


@pytest.mark.parametrize("machine", [
    _machine(SharedMachine, "2.2", True),
    _machine(SharedMachine, "2.1", False),
], ids=["2.2-stable_ids", "2.1-row_addresses"])
def test_each_library_reads_the_others_writes(machine: type[_Machine]) -> None:
    """One dataset, each step by a drawn library, both reading it after every step."""
    run_state_machine_as_test(machine, settings=SETTINGS)
