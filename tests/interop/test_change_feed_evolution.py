"""The change feed across schema evolution, row by row against an oracle built from pylance reads.

pylance builds a history with every kind of evolution (``add_columns`` SQL and UDF, ``alter_columns``
rename / nullable / cast, ``drop_columns``, ``merge``) interleaved with deletes and updates (by
pylance and by lance_ops, which also appends and updates on the evolved schema).  For every
range the oracle diffs pylance's reads of the two versions by ``_rowid`` and maps begin-version
rows onto the end version's columns by field id (pylance's ``lance_schema``); a cast column
(a new field id under the same name) is followed by name.
"""


import pyarrow as pa
import pyarrow.compute as pc
import pytest
from evolved import CHANGE, Oracle, build_history, normalize, same_feed

import lance_ops.format as lf

# 2.0 and 2.2 (the default) are enough here: these do not depend on 2.1 page encodings
pytestmark = [pytest.mark.interop, pytest.mark.parametrize("file_version", ("2.0", "2.2"), indirect=True)]



@pytest.fixture(params=("pylance", "lance_ops"))
def history(tmp_path, request):
    """The evolution steps made by pylance, or by lance_ops (read back by pylance's oracle)."""
    uri = str(tmp_path / "ds")
    steps = build_history(uri, evolve_with=request.param)
    return uri, steps


def test_change_feed_across_every_evolution_matches_the_oracle(history):
    uri, steps = history
    oracle = Oracle(uri)
    ds = lf.dataset(uri)
    assert ds.version == oracle.latest
    for end in range(1, oracle.latest + 1):
        for begin in range(0, end):
            got = ds.change_feed(begin, end)
            assert got.schema.names == oracle.tables[end][2].names + CHANGE, (begin, end)
            assert got.schema.field("x").type == oracle.tables[end][2].field("x").type
            want = oracle.feed(begin, end)
            assert same_feed(normalize(got.to_pylist()), want), (
                f"({begin}, {end}] across {[steps.get(v) for v in range(begin + 1, end + 1)]}:\n"
                f"got  {normalize(got.to_pylist())[:4]}\nwant {want[:4]}"
            )


def test_each_evolution_step_alone(history):
    """The per-version feed (what the Dagster backfill runs): a rename or drop changes no row, an
    add_columns / merge / cast updates every row, pre-images have the new column null."""
    uri, steps = history
    ds = lf.dataset(uri)
    by_step = {what: v for v, what in steps.items()}
    kinds = lambda t: sorted(set(t.column("_change_type").to_pylist()))  # noqa: E731
    for what in ("rename", "nullable", "drop"):
        assert ds.change_feed(by_step[what] - 1, by_step[what]).num_rows == 0, what
    for what, col in (("add_columns sql", "y"), ("add_columns udf", "z"), ("merge", "m")):
        v = by_step[what]
        t = ds.checkout_version(v).change_feed(v - 1, v)
        assert kinds(t) == ["update_postimage", "update_preimage"], what
        pre = t.filter(pc.equal(t.column("_change_type"), "update_preimage"))
        assert pre.column(col).null_count == pre.num_rows > 0, what
    v = by_step["cast"]
    t = ds.checkout_version(v).change_feed(v - 1, v)
    pre = t.filter(pc.equal(t.column("_change_type"), "update_preimage"))
    assert pre.schema.field("x").type == pa.int64() and pre.column("x").null_count == 0
    # one-version ranges and empty ones
    assert ds.change_feed(by_step["rename"], by_step["rename"]).num_rows == 0
    assert ds.change_feed(by_step["reserve"] - 1, by_step["compaction"]).num_rows == 0


def test_refusal_of_schema_changes_on_request(history):
    uri, steps = history
    ds = lf.dataset(uri)
    by_step = {what: v for v, what in steps.items()}
    v = by_step["rename"]
    with pytest.raises(lf.SchemaChangeError, match=rf"version {v} \(column 's' renamed to 's2'\)") as info:
        ds.change_feed(v - 1, v, on_schema_change="fail")
    assert info.value.version == v
    with pytest.raises(lf.SchemaChangeError, match="column 'y' added"):
        ds.change_feed(1, by_step["add_columns sql"], on_schema_change="fail")
    with pytest.raises(lf.SchemaChangeError, match="column 'x' changed type"):
        ds.change_feed(by_step["cast"] - 1, by_step["cast"], on_schema_change="fail")
    # ranges without a schema change are served as usual
    u = by_step["update"]
    assert ds.change_feed(u - 1, u, on_schema_change="fail").num_rows == 2
    # tags name versions of the change feed too
    ds.tags.create("before_rename", v - 1)
    assert ds.change_feed("before_rename", v).num_rows == 0
