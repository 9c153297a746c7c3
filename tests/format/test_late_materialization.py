"""Late materialisation (issue 35): a filtered scan that takes its late columns after the filter
returns exactly what a full decode returns, for every column kind pylance writes at 2.0, 2.1 and
2.2, with filters passing no row, some rows and every row, and with deleted rows; pylance's
``late_materialization`` option is taken with its meaning (bool, column list, heuristic)."""

import lance
import numpy as np
import pyarrow as pa
import pytest
from datagen import kinds_table

import lance_ops.format as lf
from lance_ops.format.errors import ArgumentTypeError, SchemaError
from lance_ops.format.file import parts

pytestmark = pytest.mark.interop
N = 1200

FILTERS = {
    "none": "id < 0",
    "one": "id = 37",
    "some": "id % 3 = 1",
    "sparse": "id % 401 = 7",
    "all": "id >= 0",
    "narrow_and": "id > 5 AND f64 < 20.0 AND id != 1000",
}


def values(t: pa.Table) -> pa.Table:
    """Dictionary columns as their values (the item order is the writer's choice)."""
    cols = [c.cast(c.type.value_type) if pa.types.is_dictionary(c.type) else c for c in t.columns]
    return pa.Table.from_arrays(cols, names=t.column_names)


@pytest.fixture(scope="module", params=["2.0", "2.1", "2.2"])
def kinds_uri(request, tmp_path_factory) -> str:
    version = request.param
    uri = str(tmp_path_factory.mktemp(f"late{version}") / "ds")
    t = kinds_table(version, range(N))
    # files of 600 rows: pages of several mini-block chunks for the narrow kinds, so a sparse filter's rows are
    # decoded from their chunks alone
    lance.write_dataset(t, uri, schema=t.schema, data_storage_version=version, max_rows_per_file=600)
    lance.dataset(uri).delete("id % 7 = 3 OR id = 40")  # deletion files, one of them in the "one" row's file
    return uri


@pytest.mark.parametrize("which", sorted(FILTERS))
def test_every_kind_same_as_full_decode(kinds_uri, which, monkeypatch):
    ds = lf.dataset(kinds_uri)
    names = ds.schema.names
    full = ds.to_table(filter=FILTERS[which], late_materialization=False, with_row_id=True)
    live = [i for i in range(N) if not (i % 7 == 3 or i == 40)]
    expected_rows = {"none": 0, "one": 1, "all": len(live), "sparse": sum(1 for i in live if i % 401 == 7)}.get(which)
    if expected_rows is not None:
        assert full.num_rows == expected_rows
    assert full.num_rows > 0 or which == "none"
    others = [n for n in names if n not in ("id", "f64")]
    for late in (True, None, others[::2], ["s", "lst"]):
        got = ds.to_table(filter=FILTERS[which], late_materialization=late, with_row_id=True)
        assert got.schema.equals(full.schema, check_metadata=True)
        assert got.equals(full), f"late_materialization={late!r}, filter {FILTERS[which]!r}"
    # every mini-block page taken from its chunks alone, however many of them the rows need
    monkeypatch.setattr(parts, "TAKE_CHUNK_SHARE", 1.0)
    assert ds.to_table(filter=FILTERS[which], late_materialization=True, with_row_id=True).equals(full)
    # and what pylance's own late materialisation reads from the same files
    theirs = lance.dataset(kinds_uri).to_table(filter=FILTERS[which], late_materialization=True, with_row_id=True)
    assert values(full).equals(values(theirs))


def test_projection_order_and_batches(kinds_uri):
    ds = lf.dataset(kinds_uri)
    cols = ["s", "_rowaddr", "lst", "id", "st"]
    full = ds.to_table(columns=cols, filter="id % 2 = 0", late_materialization=False)
    batches = list(ds.to_batches(columns=cols, filter="id % 2 = 0", late_materialization=True, batch_size=5))
    assert all(b.num_rows <= 5 for b in batches)
    assert pa.Table.from_batches(batches, schema=full.schema).equals(full)
    assert ds.scanner(columns=cols, filter="id % 2 = 0", late_materialization=["lst"]).to_table().equals(full)


@pytest.mark.parametrize("version", ["2.0", "2.2"])
def test_big_pages_sparse_and_dense(tmp_path, version):
    """Rows taken across pages and 2.2 page parts (pylance's 1M-row pages cut in 256K-row parts),
    with a deletion vector, for filters passing a few rows, a quarter of them and all."""
    n = 400_000
    rng = np.random.default_rng(7)
    x = rng.random(n)
    t = pa.table({
        "id": np.arange(n, dtype=np.int64),
        "x": x,
        "s": pa.array([f"row-{i}" for i in range(n)]),
        "l": pa.ListArray.from_arrays(np.arange(0, 2 * n + 1, 2, dtype=np.int32), np.arange(2 * n, dtype=np.int32)),
        "v": pa.FixedSizeListArray.from_arrays(pa.array(np.repeat(x, 4).astype(np.float32)), 4),
    })
    uri = str(tmp_path / "ds")
    lance.write_dataset(t, uri, data_storage_version=version, max_rows_per_file=300_000)
    lance.dataset(uri).delete("id % 11 = 5")
    ds = lf.dataset(uri)
    for flt, rows in (("x < 0.0005", None), ("x < 0.25", None), ("id >= 0", n - len(range(5, n, 11)))):
        full = ds.to_table(filter=flt, late_materialization=False)
        if rows is not None:
            assert full.num_rows == rows
        for late in (True, None):
            assert ds.to_table(filter=flt, late_materialization=late).equals(full), (flt, late)
        theirs = lance.dataset(uri).to_table(filter=flt)
        assert full.equals(theirs)


def test_option_checked(tmp_path):
    uri = str(tmp_path / "ds")
    lf.write_dataset(pa.table({"id": [1, 2, 3], "s": ["a", "b", "c"]}), uri)
    ds = lf.dataset(uri)
    with pytest.raises(ArgumentTypeError, match="late_materialization"):
        ds.to_table(filter="id > 1", late_materialization="s")
    with pytest.raises(SchemaError, match="'nope'"):
        ds.to_table(filter="id > 1", late_materialization=["nope"])
    assert ds.to_table(filter="id > 1", late_materialization=["s"]).to_pydict() == {"id": [2, 3], "s": ["b", "c"]}
