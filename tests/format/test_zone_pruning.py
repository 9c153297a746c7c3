"""ZONEMAP pruning of the fragments a SQL filter opens (docs/FORMAT.md §18): never a wrong answer,
fewer fragments where the zones exclude them."""

import numpy as np
import pyarrow as pa
import pytest

import lance_ops.format as lf
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.read.scan import resolve_filter
from lance_ops.format.read.zone_pruning import prune_fragments

PER = 100


@pytest.fixture(scope="module")
def zoned(tmp_path_factory):
    """10 fragments, each holding one range of ``i`` / ``f`` / ``s`` (nulls and NaN in some),
    ZONEMAP on the three, a few rows deleted."""
    uri = str(tmp_path_factory.mktemp("zones") / "ds")
    n = 10 * PER
    i = np.arange(n)
    f = (i * 0.5).astype(np.float64)
    f[150] = np.nan
    f_arr = pa.array(f, mask=(i % 97 == 3))
    s = pa.array([f"k{x // PER:02d}-{x % PER:03d}" for x in i], mask=(i >= 900) & (i < 910))
    lf.write_dataset(pa.table({"i": pa.array(i, pa.int64()), "f": f_arr, "s": s}), uri, max_rows_per_file=PER)
    ds = lf.dataset(uri)
    for c in ("i", "f", "s"):
        ds.create_scalar_index(c, "ZONEMAP")
    ds.delete("i % 50 = 1")
    return uri


CASES = [  # filter, fragments that may hold matches
    ("i < 150", 2),
    ("i >= 950", 1),
    ("i = 420", 1),
    ("420 = i", 1),
    ("i > 1000", 0),
    ("i BETWEEN 250 AND 350", 2),
    ("i IN (5, 905)", 2),
    ("i < 50 OR i > 949", 2),
    ("i < 50 AND s = 'k00-007'", 1),
    ("i != 5", 10),  # not prunable
    ("NOT (i < 500)", 10),
    ("f > 400.0", 3),  # fragments 8, 9, and 1, which holds a NaN: no upper bound there
    ("f < 10.0", 1),
    ("f IS NULL", 10),
    ("s IS NULL", 1),
    ("s >= 'k05' AND s < 'k06'", 1),
    ("i < 'x'", 10),  # another type: SQL refuses it before the scan; pruning never guesses
    ("i + 1 < 10", 10),
    ("lower(s) = 'k00-001'", 10),
]


@pytest.mark.parametrize("q, expected", CASES)
def test_pruning_is_exact_and_narrows(zoned, q, expected):
    ds = lf.dataset(zoned)
    m = ds._manifest
    kept = prune_fragments(ObjectStore(zoned), m, q, m.fragments)
    assert len(kept) == expected
    if q == "i < 'x'":
        return
    # the same filter as an Expression: no SQL text, no pruning, every fragment read
    truth = ds.to_table(columns=["i", "f", "s"], filter=resolve_filter(m.schema, q))
    got = ds.to_table(columns=["i", "f", "s"], filter=q).sort_by("i")
    truth = truth.sort_by("i")
    assert got.select(["i", "s"]).equals(truth.select(["i", "s"]))
    f_got = got["f"].to_numpy(zero_copy_only=False)
    np.testing.assert_array_equal(f_got, truth["f"].to_numpy(zero_copy_only=False))  # NaN equals NaN here
