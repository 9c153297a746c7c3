"""``Scanner.explain_plan`` / ``analyze_plan`` of plain scans in pylance's shape (issue 34).

The same scans run on ``lance`` (pylance 14) and ``lance_ops.format``: both print a
``ProjectionExec`` over a ``LanceRead`` when a filter-only column is dropped, and only the
``LanceRead`` otherwise, with the columns read, ``row_id`` and the limit as ``range_after``.
``analyze_plan``'s counts are what each library measured: rows out, rows of the fragments
opened, bytes/iops/requests (their values differ by reader, so only their presence and sign are
compared; rows must agree).
"""

import re
from datetime import datetime, timedelta

import lance
import pyarrow as pa
import pytest

import lance_ops.format as lf
from lance_ops.format.io.io_stats import counting

pytestmark = pytest.mark.interop

IMPLS = {"pylance": lance, "lance_ops": lf}


def _ops(plan: str) -> list[tuple[int, str]]:
    """(depth, operator) per line, below pylance's AnalyzeExec/TracedExec wrappers."""
    out = []
    for line in plan.splitlines():
        name = line.strip().split(":")[0].split(" ")[0].rstrip(",")
        if name and name not in ("AnalyzeExec", "TracedExec"):
            out.append(((len(line) - len(line.lstrip())) // 2, name))
    base = out[0][0]
    return [(d - base, n) for d, n in out]


def _metric(plan: str, op: str, key: str) -> int:
    line = next(x for x in plan.splitlines() if x.strip().startswith(op + ":"))
    m = re.search(rf"{key}=(\d+(?:\.\d+)?)( K| M)?", line)  # pylance prints 3000 as "3.00 K"
    return round(float(m.group(1)) * {None: 1, " K": 1e3, " M": 1e6}[m.group(2)])


@pytest.fixture
def datasets(tmp_path):
    t = pa.table({"a": range(100), "b": range(100)})
    return {name: impl.write_dataset(t, str(tmp_path / name), max_rows_per_file=60) for name, impl in IMPLS.items()}


CASES = [
    ({"columns": [], "filter": "a < 50", "with_row_id": True},
     [(0, "ProjectionExec"), (1, "LanceRead")], "projection=[a]", 50),
    ({}, [(0, "LanceRead")], "projection=[a, b]", 100),
    ({"columns": ["b"], "filter": "a >= 90", "limit": 5},
     [(0, "ProjectionExec"), (1, "LanceRead")], "range_after=Some(0..5)", 5),
]


@pytest.mark.parametrize(("kw", "shape", "text", "rows"), CASES)
def test_plan_shape_and_metrics(datasets, kw, shape, text, rows):
    for name, ds in datasets.items():
        explain, analyze = ds.scanner(**kw).explain_plan(True), ds.scanner(**kw).analyze_plan()
        assert _ops(explain) == shape and _ops(analyze) == shape, (name, explain, analyze)
        assert text in explain, (name, explain)
        assert "num_fragments=2" in explain and "range_before=None" in explain, name
        assert _metric(analyze, "LanceRead", "output_rows") == rows, (name, analyze)
        for key in ("bytes_read", "iops", "requests"):
            assert _metric(analyze, "LanceRead", key) > 0, (name, key, analyze)
    lo = datasets["lance_ops"]
    plan = lo.scanner(**kw).analyze_plan()
    with counting() as stats:
        lo.scanner(**kw).to_table()
    # a repeat of the scan reads as much again: the printed counts are the scan's own
    assert _metric(plan, "LanceRead", "bytes_read") == stats.bytes_read > 0
    assert _metric(plan, "LanceRead", "rows_scanned") == stats.rows_scanned


def test_rows_scanned_is_the_fragments_read(datasets):
    """A filter over every fragment scans all 100 rows (as pylance's ``rows_scanned``);
    a limit met inside the first fragment opens only that one (60 rows)."""
    lo, pl = datasets["lance_ops"], datasets["pylance"]
    for ds in (lo, pl):
        assert _metric(ds.scanner(columns=[], filter="a < 50", with_row_id=True).analyze_plan(),
                       "LanceRead", "rows_scanned") == 100
    plan = lo.scanner(limit=3).analyze_plan()
    assert _metric(plan, "LanceRead", "rows_scanned") == 60 and _metric(plan, "LanceRead", "output_rows") == 3
    assert "fragments_scanned=1," in plan


def test_zone_map_query_shown_where_it_prunes(tmp_path):
    """A ZONEMAP index the filter prunes by shows as pylance's ``ScalarIndexQuery`` under the
    ``LanceRead``; lance_ops' analyze counts the fragments it ruled out."""
    tbl = pa.table({"values": range(8193), "b": range(8193)})
    for name, impl in IMPLS.items():
        ds = impl.write_dataset(tbl, str(tmp_path / name), max_rows_per_file=3000)
        ds.create_scalar_index("values", index_type="ZONEMAP")
        plan = ds.scanner(filter="values BETWEEN 1000 AND 1500", columns=["b"]).explain_plan()
        ops = _ops(plan)  # pylance reads only ``b`` (no ProjectionExec); lance_ops refilters ``values``
        read = next(i for i, (_, op) in enumerate(ops) if op == "LanceRead")
        assert ops[read + 1:] == [(ops[read][0] + 1, "ScalarIndexQuery")], (name, plan)
        assert (name == "pylance") == (ops[0][1] == "LanceRead"), (name, plan)
        assert "query=[values >= 1000 && values <= 1500]@values_idx(ZoneMap)" in plan, (name, plan)
        assert "ScalarIndexQuery" not in ds.scanner(filter="b > 5").explain_plan(), name
        assert "ScalarIndexQuery" not in ds.scanner(filter="b < 5 or values > 3").explain_plan(), name
        analyze = ds.scanner(filter="values BETWEEN 1000 AND 1500").analyze_plan()
        assert _metric(analyze, "LanceRead", "output_rows") == 501, (name, analyze)
        assert _metric(analyze, "LanceRead", "fragments_scanned") == 1, (name, analyze)
        assert _metric(analyze, "LanceRead", "rows_scanned") == 3000, (name, analyze)
        if name == "lance_ops":
            assert _metric(analyze, "ScalarIndexQuery", "fragments_pruned") == 2, analyze


BTREE_FILTERS = ["val BETWEEN 10 AND 20", "val >= 5000 AND val <= 0", "s = '7777'", "val > 5 or s = '9'",
                 "val < 4000 and s > '5'", "val = 7000 and s = '7001'", "val IN (3, 9000)", "s IS NULL"]


def test_btree_prunes_fragments_exactly(tmp_path):
    """A BTREE index prunes fragments in lance_ops (a ``ScalarIndexQuery`` under the LanceRead,
    as pylance prints it), and the rows stay exact after deletes and updates that leave the
    index behind (updated rows move to fragments the index does not cover)."""
    t = pa.table({"val": range(10000), "s": [None if i % 997 == 0 else str(i) for i in range(10000)]})
    dss = {}
    for name, impl in IMPLS.items():
        ds = impl.write_dataset(t, str(tmp_path / name), max_rows_per_file=3000)
        ds.create_scalar_index("val", index_type="BTREE")
        ds.create_scalar_index("s", index_type="BTREE")
        dss[name] = ds
    for name, ds in dss.items():
        plan = ds.scanner(filter="val BETWEEN 10 AND 20", columns=["s"]).explain_plan()
        assert "ScalarIndexQuery: query=[val >= 10 && val <= 20]@val_idx(BTree)" in plan, (name, plan)
        ops = _ops(plan)
        read = next(i for i, (_, op) in enumerate(ops) if op == "LanceRead")
        assert ops[read + 1] == (ops[read][0] + 1, "ScalarIndexQuery"), (name, plan)
        assert "ScalarIndexQuery" not in ds.scanner(filter="val = 10", use_scalar_index=False).explain_plan()
    lo = dss["lance_ops"]
    analyze = lo.scanner(filter="val = 7000").analyze_plan()
    assert _metric(analyze, "LanceRead", "fragments_scanned") == 1 and _metric(analyze, "LanceRead", "rows_scanned") == 3000
    assert _metric(analyze, "ScalarIndexQuery", "fragments_pruned") == 3 and _metric(analyze, "LanceRead", "output_rows") == 1
    for ds in dss.values():
        ds.delete("val = 20 or val = 7777")
        ds.update({"val": "val + 100000"}, where="val = 15 or val = 9000")
    for f in BTREE_FILTERS + ["val > 100000", "val = 9000"]:
        got = [dss[n].to_table(filter=f).sort_by("val") for n in IMPLS]
        assert got[0] == got[1], f
        assert got[1] == dss["lance_ops"].to_table(filter=f, use_scalar_index=False).sort_by("val"), f


@pytest.mark.parametrize("kind", ["BTREE", "ZONEMAP"])
def test_index_pruning_with_nulls(tmp_path, kind):
    """A BTREE page starting with nulls has a null ``min``: it may still hold any value
    (pylance's ``test_null_handling``); both libraries answer every filter alike."""
    t = pa.table({"x": [1, 2, None, 3]})
    for name, impl in IMPLS.items():
        ds = impl.write_dataset(t, str(tmp_path / name))
        ds.create_scalar_index("x", index_type=kind)
    pl, lo = lance.dataset(str(tmp_path / "pylance")), lf.dataset(str(tmp_path / "lance_ops"))
    for f, n in [("x IS NULL", 1), ("x IS NOT NULL", 3), ("x > 0", 3), ("x < 5", 3), ("x IN (1, 2)", 2),
                 ("x IN (1, 2, NULL)", 2), ("x = 3", 1), ("x > 3", 0)]:
        assert pl.to_table(filter=f).num_rows == lo.to_table(filter=f).num_rows == n, f


@pytest.mark.parametrize("kind", ["BTREE", "ZONEMAP"])
def test_temporal_literals_prune(tmp_path, kind):
    """``TIMESTAMP '...'`` / ``DATE '...'`` literals are judged against the index (pylance's
    ``test_temporal_index``); an aware timestamp column is not pruned by a naive literal."""
    base = datetime(2026, 1, 1, 12, 0, 0)
    t = pa.table({"ts": [base - timedelta(days=i) for i in range(100)],
                  "tz": pa.array([base - timedelta(days=i) for i in range(100)], pa.timestamp("us", "UTC")),
                  "d": [(base - timedelta(days=i)).date() for i in range(100)]})
    for name, impl in IMPLS.items():
        ds = impl.write_dataset(t, str(tmp_path / name), max_rows_per_file=30)
        for c in ("ts", "tz", "d"):
            ds.create_scalar_index(c, index_type=kind)
    half = base - timedelta(days=50, hours=1)
    filters = [f"ts > timestamp '{half}'", f"d > date '{half.date()}'", f"d = date '{half.date()}'",
               f"ts BETWEEN timestamp '{half}' AND timestamp '{base - timedelta(days=10)}'",
               f"tz > timestamp '{half}'"]
    pl, lo = lance.dataset(str(tmp_path / "pylance")), lf.dataset(str(tmp_path / "lance_ops"))
    for f in filters:
        assert pl.to_table(filter=f) == lo.to_table(filter=f), f
        assert lo.to_table(filter=f) == lo.to_table(filter=f, use_scalar_index=False), f
    label = {"BTREE": "BTree", "ZONEMAP": "ZoneMap"}[kind]
    for impl_ds in (pl, lo):
        plan = impl_ds.scanner(filter=filters[0], scan_in_order=True).explain_plan(True)
        assert re.search(rf"^.*ScalarIndexQuery: query=\[ts > .*\]@ts_idx\({label}\).*$", plan, re.MULTILINE), plan
    analyze = lo.scanner(filter=filters[0]).analyze_plan()
    assert _metric(analyze, "LanceRead", "fragments_scanned") == 2, analyze  # rows 0..49 of 30-row files
