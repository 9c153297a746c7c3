"""The compiled (numba) kernels of 2.1/2.2 decoding decode exactly what the NumPy paths decode,
and refuse the same corrupt bytes (``LANCE_OPS_NO_JIT=1`` selects the NumPy paths)."""

import glob
import os

import numpy as np
import pyarrow as pa
import pytest

import lance_ops.format as lf
from lance_ops.format.file.v21 import bitpacking, fsst, kernels

lance = pytest.importorskip("lance")

pytestmark = pytest.mark.skipif(kernels.get() is None, reason="numba is not installed")


@pytest.fixture
def numpy_only(monkeypatch):
    """A context switch: ``with numpy_only(): ...`` decodes with the NumPy paths."""
    import contextlib

    @contextlib.contextmanager
    def switch():
        monkeypatch.setenv("LANCE_OPS_NO_JIT", "1")
        try:
            assert kernels.get() is None
            yield
        finally:
            monkeypatch.delenv("LANCE_OPS_NO_JIT")

    return switch


@pytest.mark.parametrize("t_bits", [8, 16, 32, 64])
def test_unpack_blocks_matches_numpy_at_every_width(t_bits, numpy_only):
    rng = np.random.default_rng(t_bits)
    dt = np.dtype(f"<u{t_bits // 8}")
    for width in range(t_bits + 1):
        for nblocks in (1, 5):  # the NumPy path has a separate few-blocks gather
            top = (1 << width) - 1
            vals = (rng.integers(0, 2**62, nblocks * 1024, dtype=np.uint64) % (top + 1 if width < 64 else 2**63)).astype(dt)
            if width:
                vals[0] = dt.type(top)  # the widest value appears
            packed = bitpacking.pack_blocks(vals, width, t_bits)
            got = bitpacking.unpack_blocks(packed, width, t_bits) if width else np.zeros(len(vals), dt)
            with numpy_only():
                ref = bitpacking.unpack_blocks(packed, width, t_bits) if width else np.zeros(len(vals), dt)
            assert np.array_equal(got, ref) and np.array_equal(got, vals), (t_bits, width, nblocks)


@pytest.mark.parametrize("t_bits", [8, 16, 32, 64])
def test_pack_blocks_kernel_matches_numpy_at_every_width(t_bits, numpy_only):
    """The compiled packer writes the NumPy packer's bytes, keeping only the low ``width`` bits."""
    rng = np.random.default_rng(100 + t_bits)
    dt = np.dtype(f"<u{t_bits // 8}")
    vals = rng.integers(0, 2**63, 3 * 1024, dtype=np.uint64).astype(dt)  # wider than any width below T
    for width in range(t_bits + 1):
        got = bitpacking.pack_blocks(vals, width, t_bits)
        with numpy_only():
            ref = bitpacking.pack_blocks(vals, width, t_bits)
        assert got.dtype == ref.dtype == np.uint8 and np.array_equal(got, ref), (t_bits, width)


def _symbol_table(symbols: list[bytes]) -> bytes:
    head = (0x46535354 << 32) | (1 << 24) | len(symbols)
    body = b"".join(s.ljust(8, b"\0") for s in symbols) + bytes(len(s) for s in symbols)
    return head.to_bytes(8, "little") + body


def _fsst_case(seed: int):
    rng = np.random.default_rng(seed)
    n_sym = int(rng.integers(1, 255))
    symbols = [bytes(rng.integers(0, 256, int(rng.integers(1, 9))).astype(np.uint8)) for _ in range(n_sym)]
    strings = []
    for _ in range(300):
        codes = bytearray()
        for _ in range(int(rng.integers(0, 12))):
            if rng.random() < 0.2:
                codes += bytes([255, int(rng.integers(0, 256))])  # an escaped literal (255 too)
            else:
                codes.append(int(rng.integers(0, n_sym)))
        strings.append(bytes(codes))
    offsets = np.zeros(len(strings) + 1, np.int64)
    np.cumsum([len(s) for s in strings], out=offsets[1:])
    data = np.frombuffer(b"".join(strings), np.uint8)
    expected = [b"".join(bytes([c[i + 1]]) if c[i] == 255 else symbols[c[i]] for i in _code_starts(c)) for c in strings]
    return _symbol_table(symbols), offsets, data, expected


def _code_starts(codes: bytes):
    i = 0
    while i < len(codes):
        yield i
        i += 2 if codes[i] == 255 else 1


@pytest.mark.parametrize("seed", range(6))
def test_fsst_kernel_matches_numpy(seed, numpy_only):
    table, offsets, data, expected = _fsst_case(seed)
    got_o, got_d = fsst.decompress(table, offsets, data)
    with numpy_only():
        ref_o, ref_d = fsst.decompress(table, offsets, data)
    assert np.array_equal(got_o, ref_o) and np.array_equal(got_d, ref_d)
    assert [bytes(got_d[got_o[i] : got_o[i + 1]]) for i in range(len(expected))] == expected
    # offsets not starting at 0 (a slice of a page)
    got_o2, got_d2 = fsst.decompress(table, offsets[5:], data)
    assert np.array_equal(got_o2, got_o[5:] - got_o[5]) and bytes(got_d2) == bytes(got_d[got_o[5] :])


def test_fsst_kernel_refuses_what_numpy_refuses(numpy_only):
    table = _symbol_table([b"ab", b"c"])
    for data, offsets in (
        (b"\x00\x05", [0, 2]),  # code 5: no such symbol
        (b"\x00\xff", [0, 2]),  # escape as the last byte
        (b"\x00\x01", [0, 3]),  # offsets past the data
    ):
        arr = np.frombuffer(data, np.uint8)
        with pytest.raises((ValueError, IndexError)):
            fsst.decompress(table, np.array(offsets), arr)
        with numpy_only(), pytest.raises((ValueError, IndexError)):
            fsst.decompress(table, np.array(offsets), arr)


def _pylance_table(n: int) -> pa.Table:
    rng = np.random.default_rng(3)
    words = np.array(["alpha", "béta", "γάμμα", "\x00nul", "row-", "€uro", "x" * 40])
    s = [f"{words[i % len(words)]}-{i}" + ("\xff" if i % 97 == 0 else "") for i in range(n)]
    m = rng.random(n) < 0.1
    return pa.table({
        "id": pa.array(np.arange(n, dtype=np.int64) * 3),
        "wide": pa.array(rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64)),
        "x": pa.array(((np.arange(n) * 7919) % 1000) / 1000.0),
        "f32": pa.array(rng.random(n).astype(np.float32), mask=m),
        "small": pa.array(rng.integers(0, 300, n).astype(np.int16), mask=m),
        "s": pa.array(s),
        "sn": pa.array(s, mask=m),
        "bin": pa.array([bytes(rng.integers(0, 256, int(k)).astype(np.uint8)) for k in rng.integers(0, 30, n)],
                        type=pa.binary()),
    })


@pytest.fixture(scope="module")
def pylance_22(tmp_path_factory):
    uri = str(tmp_path_factory.mktemp("k") / "ds")
    table = _pylance_table(20_000)
    lance.write_dataset(table, uri, data_storage_version="2.2", max_rows_per_group=4096)
    return uri, table


def test_jit_and_numpy_read_pylance_22_identically(pylance_22, numpy_only):
    uri, table = pylance_22
    got = lf.dataset(uri).to_table()
    with numpy_only():
        ref = lf.dataset(uri).to_table()
    assert got.equals(table)
    assert ref.equals(table)
    assert lf.dataset(uri).to_table(columns=["s", "id"], offset=5000, limit=7000).equals(
        table.select(["s", "id"]).slice(5000, 7000))


def test_jit_and_numpy_refuse_the_same_corrupted_pages(pylance_22, tmp_path, numpy_only):
    """Random byte flips in the data pages: with and without the kernels, a read returns the
    same table or raises a named LanceOpsError (never a crash or a bare numpy error)."""
    import shutil

    src, _ = pylance_22
    uri = str(tmp_path / "ds")
    shutil.copytree(src, uri)
    (path,) = glob.glob(os.path.join(uri, "data", "*.lance"))
    original = open(path, "rb").read()
    rng = np.random.default_rng(11)
    outcomes = {"same": 0, "both_refused": 0}
    for _ in range(40):
        data = bytearray(original)
        for _ in range(int(rng.integers(1, 6))):
            data[int(rng.integers(0, len(data) // 2))] = int(rng.integers(0, 256))  # pages, not metadata
        with open(path, "wb") as f:
            f.write(data)
        results = []
        for mode in ("jit", "numpy"):
            try:
                if mode == "numpy":
                    with numpy_only():
                        results.append(lf.dataset(uri).to_table())
                else:
                    results.append(lf.dataset(uri).to_table())
            except lf.LanceOpsError as e:
                assert uri in str(e)
                results.append(None)
        jit_result, numpy_result = results
        if jit_result is None or numpy_result is None:
            assert jit_result is None and numpy_result is None, "one path read what the other refused"
            outcomes["both_refused"] += 1
        else:
            assert jit_result.equals(numpy_result)
            outcomes["same"] += 1
    assert outcomes["both_refused"] > 0


@pytest.mark.parametrize("pick", ["none_but_one", "every_7th", "random_3pct", "all"])
def test_scattered_rows_decompress_only_their_strings(pylance_22, numpy_only, monkeypatch, pick):
    """``scan_fragment_rows`` of chosen rows (a change feed's pre-images) decompresses only
    their FSST strings (the kernel gets their mask) and returns exactly the rows a full decode
    gives, compiled and NumPy, for plain, nullable and binary columns."""
    from lance_ops.format.file.v21 import _jit
    from lance_ops.format.read.scan import plan_scan, scan_fragment_rows

    uri, table = pylance_22
    n = table.num_rows
    rows = {
        "none_but_one": np.array([n - 1]),
        "every_7th": np.arange(3, n, 7),
        "random_3pct": np.flatnonzero(np.random.default_rng(5).random(n) < 0.03),
        "all": np.arange(n),
    }[pick]
    masks = []
    kernel = _jit.fsst_chunks

    def spy(*args):
        masks.append(args[-1].copy())
        return kernel(*args)

    monkeypatch.setattr(_jit, "fsst_chunks", spy)
    ds = lf.dataset(uri)
    m = ds._manifest
    (frag,) = m.fragments
    plan = plan_scan(m.schema, ["s", "sn", "bin", "id", "f32"], None, False, False)

    def read() -> pa.Table:
        return pa.Table.from_batches(list(scan_fragment_rows(ds._store, m, frag, plan, rows)), schema=plan.out_schema)

    want = table.select(["s", "sn", "bin", "id", "f32"]).take(pa.array(rows))
    got = read()
    with numpy_only():
        ref = read()
    assert got.equals(want)
    assert ref.equals(want)
    assert masks, "the FSST pages were not decoded by the kernel"
    kept = int(sum(int(k.sum()) for k in masks if k.size))
    if pick == "all":
        assert all(k.size == 0 for k in masks)  # every row kept: no mask at all
    else:  # each FSST column's pages together decompress exactly the chosen rows, no other
        assert all(k.size for k in masks)
        assert kept and kept % rows.size == 0 and kept < sum(k.size for k in masks)
