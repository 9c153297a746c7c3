"""Big 2.1/2.2 pages read in row ranges (``file/parts.py``): exact on pylance-written files,
reading only the bytes of the rows asked for, and holding only a part's decoded rows at once.

``PART_ROWS`` is lowered so small files have many parts whose edges fall inside chunks
(pylance's chunks hold 256-4096 values; parts here hold 1,000 or 1,500 rows), and ``PART_BYTES``
so fixed-width columns are cut at those rows too."""

import tracemalloc

import numpy as np
import pyarrow as pa
import pytest

from lance_ops.format.file import DataFileReader, parts
from lance_ops.format.file.prefetch import PagePrefetcher
from lance_ops.format.io.object_store import ObjectStore

lance_file = pytest.importorskip("lance.file")

N = 12_000


@pytest.fixture(autouse=True)
def _fixed_width_parts_by_rows(monkeypatch):
    monkeypatch.setattr(parts, "PART_BYTES", 0)


def _table(n: int) -> pa.Table:
    rng = np.random.default_rng(7)
    m = rng.random(n) < 0.2
    words = "lance parts range decode chunk page alpha beta".split()
    return pa.table({
        "id": pa.array(np.arange(n, dtype=np.int64) * 3 + 11),  # inline bit-packed
        "x": pa.array(rng.standard_normal(n)),
        "xn": pa.array(rng.integers(0, 1 << 40, n), mask=m),  # def levels
        "b": pa.array(rng.random(n) < 0.5, mask=m),
        "s": pa.array([f"row-{i} {words[i % 8]}" for i in range(n)]),  # FSST
        "sn": pa.array([None if mm else words[i % 8] * (i % 5) for i, mm in enumerate(m)], pa.large_string()),
        "d": pa.array([words[i % 3] for i in range(n)]),  # page dictionary
    })


def _full_zip_table(n: int) -> pa.Table:
    rng = np.random.default_rng(8)
    m = rng.random(n) < 0.2
    return pa.table({
        "v": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 64).astype(np.float32)), 64),
        "big": pa.array([None if mm else "y" * (1000 + i % 2000) for i, mm in enumerate(m)]),  # + rep. index
    })


def _write(path, table: pa.Table):
    with lance_file.LanceFileWriter(str(path), table.schema, version="2.2") as w:
        w.write_batch(table)
    return path, table


@pytest.fixture(scope="module")
def pylance_file(tmp_path_factory):
    return _write(tmp_path_factory.mktemp("parts") / "f.lance", _table(N))


@pytest.fixture(scope="module")
def full_zip_file(tmp_path_factory):
    return _write(tmp_path_factory.mktemp("parts") / "z.lance", _full_zip_table(3500))


def _reader(path) -> DataFileReader:
    return DataFileReader(ObjectStore(str(path.parent)), path.name)


@pytest.mark.interop
@pytest.mark.parametrize("part_rows", [1000, 1500])
def test_row_ranges_are_exact(pylance_file, monkeypatch, part_rows):
    path, table = pylance_file
    monkeypatch.setattr(parts, "PART_ROWS", part_rows)
    r = _reader(path)
    _, cols = r._columns(None)
    kinds = {c.field.name: {p.part.kind for p in c.pages if p.part is not None} for c in cols}
    assert all(k == {"mini_block"} for k in kinds.values()), kinds
    assert all(len(c.pages) >= N // part_rows for c in cols)
    assert r._column_pages(cols[-1].column)[0].encoding.mini_block_layout.HasField("dictionary")
    assert r.read_table().equals(table)
    # ranges starting and ending inside chunks and inside parts, across several parts
    for offset, length in [(0, 1), (999, 2), (1023, 1026), (1500, 3001), (4097, 5555), (N - 7, 7), (7777, 1)]:
        got = r.read_table(offset=offset, length=length).combine_chunks()
        assert got.equals(table.slice(offset, length).combine_chunks()), (offset, length)
    # batches that do not line up with parts, with the prefetcher
    with PagePrefetcher(budget_bytes=1 << 20) as pf:
        batches = list(r.read(offset=333, length=N - 400, batch_size=777, prefetch=pf))
    assert pa.Table.from_batches(batches).equals(table.slice(333, N - 400).combine_chunks())


@pytest.mark.interop
def test_full_zip_row_ranges_are_exact(full_zip_file, monkeypatch):
    path, table = full_zip_file
    monkeypatch.setattr(parts, "PART_ROWS", 1000)
    r = _reader(path)
    _, cols = r._columns(None)
    assert [{p.part.kind for p in c.pages} for c in cols] == [{"full_zip"}, {"full_zip_var"}]
    assert r.read_table().equals(table)
    for offset, length in [(0, 1), (999, 2), (1400, 1601), (3499, 1)]:
        got = r.read_table(offset=offset, length=length).combine_chunks()
        assert got.equals(table.slice(offset, length).combine_chunks()), (offset, length)


@pytest.mark.interop
@pytest.mark.parametrize("which", ["pylance_file", "full_zip_file"])
def test_a_range_reads_only_its_parts_bytes(which, request, monkeypatch):
    path, table = request.getfixturevalue(which)
    monkeypatch.setattr(parts, "PART_ROWS", 1000)
    r = _reader(path)
    read: list[int] = []
    orig = r.read_buffers
    monkeypatch.setattr(r, "read_buffers", lambda ranges: read.extend(s for _, s in ranges) or orig(ranges))
    stored = sum(size for c in r._columns(None)[1] for p in r._column_pages(c.column) for _, size in p.ranges)
    got = r.read_table(offset=2100, length=50)
    assert got.equals(table.slice(2100, 50))
    # about one part of 1,000 rows per column (its whole chunks, chunk tables, index slices, dictionary)
    assert 0 < sum(read) < stored * 2.5 * 1000 / table.num_rows, (sum(read), stored)


@pytest.mark.interop
def test_decoded_memory_is_bounded_by_the_part(tmp_path, monkeypatch):
    n = 400_000
    table = pa.table({"id": pa.array(np.arange(n, dtype=np.int64) * 7), "s": pa.array([f"r{i}" for i in range(n)])})
    path = tmp_path / "m.lance"
    with lance_file.LanceFileWriter(str(path), table.schema, version="2.2") as w:
        w.write_batch(table)

    def peak_of_read(part_rows: int) -> int:
        monkeypatch.setattr(parts, "PART_ROWS", part_rows)
        r = _reader(path)
        assert len(r._column_pages(0)) == 1  # one page per column: pylance's whole file
        tracemalloc.start()
        rows = 0
        for b in r.read(batch_size=8192):  # inline (no prefetch threads): deterministic
            rows += b.num_rows
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert rows == n
        return peak

    whole, ranged = peak_of_read(10 * n), peak_of_read(16384)
    decoded = table.nbytes  # 7.5 MB
    # whole pages: each column's page decoded at once (with FSST's output slack: ~60 MB traced);
    # parts of 16K rows: ~3 MB (a part per column, its temporaries and the reader's tables)
    assert whole > decoded, (whole, decoded)
    assert ranged < decoded / 2 and ranged < whole / 8, (ranged, whole, decoded)


@pytest.mark.interop
def test_narrow_fixed_width_pages_are_not_cut_by_default(pylance_file, monkeypatch):
    """Parts of fixed-width columns hold up to PART_BYTES decoded: a page of 8-byte values is cut
    only beyond PART_BYTES / 8 rows (x 1.5), strings at PART_ROWS."""
    path, table = pylance_file
    monkeypatch.setattr(parts, "PART_ROWS", 1000)
    monkeypatch.setattr(parts, "PART_BYTES", 8 * 4000)
    assert parts.part_rows(pa.int64()) == 4000 and parts.part_rows(pa.int32()) == 8000
    assert parts.part_rows(pa.string()) == 1000 and parts.part_rows(pa.bool_()) == 1000
    assert parts.part_rows(pa.list_(pa.float32(), 64)) == 1000  # 256 bytes a row: PART_ROWS
    r = _reader(path)
    _, cols = r._columns(None)
    rows = {c.field.name: {p.length for p in c.pages} for c in cols}
    assert rows["id"] == {4000} and rows["x"] == {4000}  # 12,000 rows: three parts
    assert rows["s"] == {1000}
    assert r.read_table().equals(table)
