"""The delete's predicate-columns-only match (ops/delete_match.py) finds exactly the rows the
general ``_rowaddr`` scan finds: old deletions, nulls, renamed and added columns, SQL text."""

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_ops.format as lf
from lance_ops.format.ops.delete_match import matching_offsets, predicate_columns
from lance_ops.format.ops.delete_update import _matching_addresses
from lance_ops.format.read.scan import resolve_filter


def _both(ds, predicate):
    m = ds._manifest
    pred = resolve_filter(m.schema, predicate, "delete predicate")
    names = predicate_columns(m, pred)
    assert names is not None
    fast = [(f, o.tolist()) for f, o in matching_offsets(ds._store, m, pred, names)]
    slow = [(f, o.tolist()) for f, o in _matching_addresses(ds._store, m, pred)]
    return fast, slow


@pytest.fixture
def evolved(tmp_path):
    """Four fragments of 1000 rows, some rows deleted, nulls in ``x``, ``x`` renamed to ``v``,
    a column ``y`` added after the first fragments (stored only in the later ones)."""
    path = str(tmp_path / "ds")
    rng = np.random.default_rng(7)
    for i in range(2):
        x = rng.random(1000)
        xs = pa.array(x, mask=rng.random(1000) < 0.1)
        lf.write_dataset(pa.table({"id": np.arange(1000) + 1000 * i, "x": xs}), path,
                         mode="append" if i else "create")
    ds = lf.dataset(path)
    ds.delete("id % 7 = 0")
    ds.alter_columns({"path": "x", "name": "v"})
    ds.add_columns({"y": "id * 2"})
    for i in range(2, 4):
        lf.write_dataset(pa.table({"id": np.arange(1000) + 1000 * i, "v": rng.random(1000),
                                   "y": np.arange(1000) * 2}), path, mode="append")
    return lf.dataset(path)


@pytest.mark.parametrize("predicate", [
    pc.field("v") < 0.3,
    "v < 0.3 OR id > 3500",
    "v IS NULL",
    "y > 100 AND v > 0.5",
    pc.field("id") < 0,
    "id >= 0",
])
def test_fast_match_equals_rowaddr_scan(evolved, predicate):
    fast, slow = _both(evolved, predicate)
    assert fast == slow
    assert all(o == sorted(set(o)) for _, o in fast)


def test_delete_counts_and_survivors(evolved):
    before = evolved.to_table()
    hit = pc.fill_null(pc.less(before.column("v"), 0.3), False)
    expect = before.filter(pc.invert(hit)).column("id").to_pylist()
    res = evolved.delete("v < 0.3")
    assert res["num_deleted_rows"] == before.num_rows - len(expect)
    assert lf.dataset(evolved.uri).to_table().column("id").to_pylist() == expect


def test_metadata_predicates_take_the_general_path(evolved):
    m = evolved._manifest
    assert predicate_columns(m, resolve_filter(m.schema, "_rowid < 5", "p")) is None
    assert predicate_columns(m, resolve_filter(m.schema, pc.scalar(True), "p")) is None
