"""Reading Lance 2.1 / 2.2 data files (structural layouts) written by pylance 14."""

import numpy as np
import pyarrow as pa
import pytest

from lance_ops.format.errors import UnsupportedFeatureError
from lance_ops.format.file import DataFileReader
from lance_ops.format.file.v21.bitpacking import BLOCK, unpack_block_count
from lance_ops.format.io.object_store import ObjectStore

lance_file = pytest.importorskip("lance.file")
lance = pytest.importorskip("lance")

VERSIONS = ["2.1", "2.2"]


def write_pylance(path, table: pa.Table, version: str) -> None:
    with lance_file.LanceFileWriter(str(path), table.schema, version=version) as w:
        w.write_batch(table)


def read_ours(path) -> DataFileReader:
    return DataFileReader(ObjectStore(str(path.parent)), path.name)


def assert_reads_equal(path, table: pa.Table) -> None:
    r = read_ours(path)
    got = r.read_table()
    assert got.schema.equals(table.schema), (got.schema, table.schema)
    for name in table.column_names:
        g, e = got.column(name).combine_chunks(), table.column(name).combine_chunks()
        assert g.equals(e), name
    # pylance reads the same thing
    assert lance_file.LanceFileReader(str(path)).read_all().to_table().equals(table)


def numeric_table(n: int, seed: int = 0, nulls: float = 0.2) -> pa.Table:
    rng = np.random.default_rng(seed)
    m = rng.random(n) < nulls

    def mask() -> np.ndarray | None:
        return m if nulls else None

    return pa.table({
        "i8": pa.array(rng.integers(-128, 128, n).astype(np.int8), mask=mask()),
        "i16": pa.array(rng.integers(-300, 300, n).astype(np.int16)),
        "i32": pa.array(rng.integers(-1000, 1000, n).astype(np.int32), mask=mask()),
        "i32big": pa.array(rng.integers(-(2**31), 2**31 - 1, n).astype(np.int32)),
        "i64": pa.array(rng.integers(0, 1 << 40, n), mask=mask()),
        "i64full": pa.array(rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64)),
        "u8": pa.array(rng.integers(0, 255, n).astype(np.uint8)),
        "u16": pa.array(rng.integers(0, 60000, n).astype(np.uint16), mask=mask()),
        "u32": pa.array(rng.integers(0, 2**32 - 1, n, dtype=np.uint64).astype(np.uint32)),
        "u64": pa.array(rng.integers(0, 2**63, n, dtype=np.uint64) * 2, mask=mask()),
        "small": pa.array(rng.integers(0, 5, n).astype(np.int64)),
        "f32": pa.array(rng.random(n).astype(np.float32), mask=mask()),
        "f64": pa.array(rng.standard_normal(n)),
        "f64n": pa.array(rng.standard_normal(n), mask=mask()),
        "date": pa.array(rng.integers(0, 20000, n).astype(np.int32)).cast(pa.date32()),
        "ts": pa.array(rng.integers(0, 1 << 50, n), mask=mask()).cast(pa.timestamp("us")),
        "tsz": pa.array(rng.integers(0, 1 << 60, n)).cast(pa.timestamp("ns", "UTC")),
        "b": pa.array(rng.random(n) < 0.5),
        "bn": pa.array(rng.random(n) < 0.5, mask=mask()),
    })


@pytest.mark.interop
@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("n", [1, 7, 1000, 1024, 1025, 5000])
def test_fixed_width_mini_block(tmp_path, version, n):
    table = numeric_table(n, seed=n)
    path = tmp_path / "f.lance"
    write_pylance(path, table, version)
    assert read_ours(path).version == tuple(int(x) for x in version.split("."))
    assert_reads_equal(path, table)


@pytest.mark.interop
@pytest.mark.parametrize("version", VERSIONS)
def test_fixed_width_no_nulls_many_chunks(tmp_path, version):
    table = numeric_table(70000, seed=3, nulls=0)
    path = tmp_path / "f.lance"
    write_pylance(path, table, version)
    assert_reads_equal(path, table)


@pytest.mark.interop
@pytest.mark.parametrize("version", VERSIONS)
def test_row_ranges_and_batches(tmp_path, version):
    table = numeric_table(6000, seed=5)
    path = tmp_path / "f.lance"
    write_pylance(path, table, version)
    r = read_ours(path)
    for offset, length in [(0, 1), (1023, 3), (1500, 2600), (5999, 10)]:
        got = r.read_table(offset=offset, length=length)
        assert got.equals(table.slice(offset, length).combine_chunks()) or got.combine_chunks().equals(
            table.slice(offset, length).combine_chunks()
        )
    batches = list(r.read(batch_size=1000))
    assert pa.Table.from_batches(batches).equals(table)
    # one field by id
    fid = r.schema.top_level()[4].id
    assert r.read_table([fid]).column(0).combine_chunks().equals(table.column(4).combine_chunks())


@pytest.mark.interop
@pytest.mark.parametrize("version", VERSIONS)
def test_constant_and_all_null(tmp_path, version):
    n = 3000
    table = pa.table({
        "c32": pa.array(np.full(n, 7, np.int32)),
        "c64": pa.array(np.full(n, -5, np.int64)),
        "cf": pa.array(np.full(n, 2.5)),
        "alln": pa.array([None] * n, pa.int64()),
        "allns": pa.array([None] * n, pa.string()),
        "x": pa.array(np.arange(n)),
        "cs": pa.array(["hello world"] * n),
        "cb": pa.array([b"\x00\x01"] * n, pa.large_binary()),
        "ce": pa.array([""] * n),
        "cbool": pa.array([True] * n),
    })
    path = tmp_path / "f.lance"
    write_pylance(path, table, version)
    r = read_ours(path)
    kinds = set()
    for c in range(r.num_columns):
        for p in r._column_pages(c):
            kinds.add(p.encoding.WhichOneof("layout"))
    assert "constant_layout" in kinds
    assert_reads_equal(path, table)  # (2.1 writes constants as RLE mini-blocks)


@pytest.mark.interop
@pytest.mark.parametrize("version", VERSIONS)
def test_strings_binary_and_dictionary(tmp_path, version):
    rng = np.random.default_rng(1)
    n = 3000
    m = rng.random(n) < 0.3
    table = pa.table({
        "bin": pa.array([bytes(rng.integers(0, 256, rng.integers(0, 20)).astype(np.uint8)) for _ in range(n)]),
        "binn": pa.array(
            [None if mm else bytes(rng.integers(0, 256, rng.integers(0, 9)).astype(np.uint8)) for mm in m],
            pa.large_binary(),
        ),
        "dict": pa.array([["apple", "banana", "cherry", None][x] for x in rng.integers(0, 4, n)]),
        "dict2": pa.array([f"k{x}" for x in rng.integers(0, 50, n)], pa.large_string()),
        "empty": pa.array([""] * (n - 1) + ["x"]),
    })
    path = tmp_path / "f.lance"
    write_pylance(path, table, version)
    assert_reads_equal(path, table)


@pytest.mark.interop
@pytest.mark.parametrize("version", VERSIONS)
def test_dataset_data_files(tmp_path, version):
    table = numeric_table(2500, seed=9)
    uri = tmp_path / "ds"
    lance.write_dataset(table, str(uri), data_storage_version=version)
    ds = lance.dataset(str(uri))
    (frag,) = ds.get_fragments()
    (df,) = frag.metadata.files
    r = DataFileReader(ObjectStore(str(uri / "data")), df.path)
    assert list(df.column_indices) == list(range(r.num_columns))
    assert r.read_table().equals(ds.to_table()) or r.read_table().combine_chunks().equals(
        ds.to_table().combine_chunks()
    )


@pytest.mark.interop
@pytest.mark.parametrize("version", VERSIONS)
def test_nested_read_and_unsupported_names_file_column_encoding(tmp_path, version):
    table = pa.table({
        "lst": pa.array([[[1, 2]], None, [[3]]] * 100, pa.list_(pa.list_(pa.int32()))),
        "lstruct": pa.array([[{"a": 1}], None, []] * 100, pa.list_(pa.struct([("a", pa.int64())]))),
        "st": pa.array([{"l": [1, 2]}, None, {"l": None}] * 100, pa.struct([("l", pa.list_(pa.int32()))])),
        "nested_fsl": pa.array([[[1, 2], [3, 4]]] * 300, pa.list_(pa.list_(pa.int32(), 2), 2)),
        "ok": pa.array(np.arange(300)),
    })
    path = tmp_path / "u.lance"
    write_pylance(path, table, version)
    r = read_ours(path)
    ids = {f.name: f.id for f in r.schema.top_level()}
    assert r.read_table([ids["ok"]]).column(0).combine_chunks().equals(table.column("ok").combine_chunks())
    for name in ("lst", "lstruct", "st"):  # any nesting of lists and structs is unravelled
        got = r.read_table([ids[name]]).column(0).combine_chunks()
        assert got.to_pylist() == table.column(name).to_pylist(), name
    # fixed-size lists of fixed-size lists are read now (nested_fsl.py)
    got = r.read_table([ids["nested_fsl"]]).column(0).combine_chunks()
    assert got.equals(table.column("nested_fsl").combine_chunks())
    if version != "2.1":  # pylance writes fixed_size_list<struct> from 2.2 on; lance_ops names what it refuses
        fsl_struct = pa.table({"fs": pa.array([[{"a": 1}, {"a": 2}]] * 10, pa.list_(pa.struct([("a", pa.int64())]), 2))})
        path2 = tmp_path / "w.lance"
        write_pylance(path2, fsl_struct, version)
        r2 = read_ours(path2)
        with pytest.raises(UnsupportedFeatureError, match=rf"w\.lance.*'fs'.*{version}"):
            r2.read_table([r2.schema.top_level()[0].id])


# ------------------------------------------------------------------ FastLanes unit tests
_FL_ORDER = [0, 4, 2, 6, 1, 5, 3, 7]


def reference_pack(values: list[int], width: int, t_bits: int) -> bytes:
    """Straightforward (slow) FastLanes packer used only as a test oracle."""
    lanes = BLOCK // t_bits
    words = [0] * (BLOCK * width // t_bits)
    mask = (1 << width) - 1
    for lane in range(lanes):
        bit = 0
        for row in range(t_bits):
            v = values[_FL_ORDER[row // 8] * 16 + (row % 8) * 128 + lane] & mask
            for b in range(width):
                if (v >> b) & 1:
                    k, off = divmod(bit + b, t_bits)
                    words[k * lanes + lane] |= 1 << off
            bit += width
    return np.array(words, dtype=f"<u{t_bits // 8}").tobytes()


@pytest.mark.parametrize("t_bits,width", [(8, 3), (16, 1), (16, 16), (32, 7), (32, 0), (64, 40), (64, 64)])
def test_fastlanes_unpack_matches_reference(t_bits, width):
    rng = np.random.default_rng(width + t_bits)
    vals = [int(x) for x in rng.integers(0, 1 << width, BLOCK, dtype=np.uint64)] if width else [0] * BLOCK
    if width == 64:
        vals = [int(x) for x in rng.integers(0, 2**64 - 1, BLOCK, dtype=np.uint64)]
    packed = np.frombuffer(reference_pack(vals, width, t_bits), dtype=np.uint8)
    out = unpack_block_count(np.concatenate([packed, packed]), width, t_bits, 2)
    assert out.dtype == np.dtype(f"<u{t_bits // 8}")
    assert out.tolist() == vals + vals


@pytest.mark.interop
@pytest.mark.parametrize("version", VERSIONS)
def test_fsst_strings(tmp_path, version):
    rng = np.random.default_rng(2)
    words = "the quick brown fox jumps over lazy dog lance format reader ünïcödé €".split()

    def sent(k: int) -> str:
        return " ".join(words[i] for i in rng.integers(0, len(words), k))

    n = 20000
    m = rng.random(n) < 0.1
    table = pa.table({
        "t5": pa.array([None if mm else sent(rng.integers(0, 5)) for mm in m]),
        "t10": pa.array([sent(rng.integers(0, 10)) for _ in range(n)]),
        "t30": pa.array([sent(rng.integers(0, 30)) for _ in range(n)], pa.large_string()),
    })
    path = tmp_path / "f.lance"
    write_pylance(path, table, version)
    r = read_ours(path)
    kinds = [r._column_pages(c)[0].encoding.mini_block_layout.value_compression.WhichOneof("compression")
             for c in range(3)]
    assert "fsst" in kinds
    assert_reads_equal(path, table)


def _fsst_table(symbols: list[bytes]) -> bytes:
    n = len(symbols)
    head = (0x46535354 << 32) | (1 << 24) | n
    body = b"".join(s.ljust(8, b"\0") for s in symbols) + bytes(len(s) for s in symbols)
    return head.to_bytes(8, "little") + body.ljust(256 * 8 + 256, b"\0")


@pytest.mark.parametrize("literals", [[255, 0, 65, 254], [0, 65, 254]], ids=["escaped_255", "no_255_literal"])
def test_fsst_escapes_against_reference(literals):
    from lance_ops.format.file.v21 import fsst

    rng = np.random.default_rng(0)
    symbols = [b"ab", b"\xff", b"hello wo", b"x", b"\xff\xff\x00"]
    table = _fsst_table(symbols)
    streams, expected = [], []
    for _ in range(300):
        enc, dec = bytearray(), bytearray()
        for _ in range(int(rng.integers(0, 12))):
            if rng.random() < 0.5:
                c = int(rng.integers(0, len(symbols)))
                enc.append(c)
                dec += symbols[c]
            else:
                b = int(rng.choice(literals))
                enc += bytes([255, b])
                dec.append(b)
        streams.append(bytes(enc))
        expected.append(bytes(dec))
    offs = np.concatenate([[5], 5 + np.cumsum([len(s) for s in streams])])
    data = np.frombuffer(b"junk!" + b"".join(streams) + b"tail", dtype=np.uint8)
    out_offs, out = fsst.decompress(table, offs, data)
    got = [out[out_offs[i] : out_offs[i + 1]].tobytes() for i in range(len(streams))]
    assert got == expected


@pytest.mark.interop
@pytest.mark.parametrize("version", VERSIONS)
def test_full_zip_and_fixed_size_list(tmp_path, version):
    rng = np.random.default_rng(3)
    n = 3000
    m = rng.random(n) < 0.2
    table = pa.table({
        "v": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 128).astype(np.float32)), 128),
        "vn": pa.FixedSizeListArray.from_arrays(
            pa.array(rng.random(n * 128).astype(np.float32)), 128, mask=pa.array(m)
        ),
        "v8": pa.FixedSizeListArray.from_arrays(pa.array(rng.integers(0, 100, n * 8).astype(np.int32)), 8),
        "hex": pa.array(
            [None if mm else bytes(rng.integers(0, 256, rng.integers(0, 40)).astype(np.uint8)).hex() for mm in m]
        ),
        "big": pa.array([None if mm else "y" * int(rng.integers(0, 3000)) for mm in m]),
        "bigb": pa.array([bytes(rng.integers(0, 256, int(rng.integers(0, 500))).astype(np.uint8)) for _ in m]),
    })
    path = tmp_path / "f.lance"
    write_pylance(path, table, version)
    r = read_ours(path)
    kinds = {r._column_pages(c)[0].encoding.WhichOneof("layout") for c in range(r.num_columns)}
    assert "full_zip_layout" in kinds and "mini_block_layout" in kinds
    assert_reads_equal(path, table)
    got = r.read_table(offset=1234, length=700)
    assert got.combine_chunks().equals(table.slice(1234, 700).combine_chunks())


@pytest.mark.interop
@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("comp", ["zstd", "lz4"])
def test_general_compression_and_byte_stream_split(tmp_path, version, comp):
    rng = np.random.default_rng(4)
    n = 5000
    m = rng.random(n) < 0.2
    words = "alpha beta gamma delta epsilon zeta eta theta".split()
    meta = {"lance-encoding:compression": comp}
    arrays = {
        "i": pa.array(rng.integers(0, 1 << 40, n), mask=m),
        "s": pa.array([None if mm else " ".join(rng.choice(words, 5)) for mm in m]),
        "f": pa.array(rng.random(n)),
        "f32n": pa.array(rng.random(n).astype(np.float32), mask=m),
    }
    schema = pa.schema([pa.field(k, v.type, metadata=meta) for k, v in arrays.items()])
    table = pa.table(list(arrays.values()), schema=schema)
    path = tmp_path / "f.lance"
    write_pylance(path, table, version)
    r = read_ours(path)
    kinds = {r._column_pages(c)[0].encoding.mini_block_layout.value_compression.WhichOneof("compression")
             for c in range(r.num_columns)}
    assert kinds == {"general"}
    got = r.read_table()
    for name in table.column_names:
        assert got.column(name).combine_chunks().equals(table.column(name).combine_chunks()), name


def _random_lists(rng, n: int, k: int, item_nulls: bool = True) -> list:
    out = []
    for _ in range(n):
        r = rng.random()
        if r < 0.1:
            out.append(None)
        elif r < 0.2:
            out.append([])
        else:
            out.append([
                None if item_nulls and rng.random() < 0.1 else int(x) for x in rng.integers(0, 100000, rng.integers(1, k))
            ])
    return out


@pytest.mark.interop
@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("n", [5, 3000, 120000])
def test_lists_of_leaves(tmp_path, version, n):
    rng = np.random.default_rng(n)
    strs = _random_lists(rng, n, 4)
    table = pa.table({
        "l": pa.array(_random_lists(rng, n, 6), pa.list_(pa.int32())),
        "lv": pa.array([[1, 2], [3]] * (n // 2) + [[4]] * (n % 2), pa.list_(pa.int64())),
        "ln": pa.array([x if x is None else [v for v in x if v is not None] for x in _random_lists(rng, n, 5)],
                       pa.large_list(pa.float64())),
        "ls": pa.array([None if x is None else [None if y is None else f"w{y}" for y in x] for x in strs],
                       pa.list_(pa.string())),
        "le": pa.array([[] if rng.random() < 0.6 else [i % 60000] for i in range(n)], pa.list_(pa.uint16())),
    })
    path = tmp_path / "f.lance"
    write_pylance(path, table, version)
    r = read_ours(path)
    assert_reads_equal(path, table)
    if n > 100:
        got = r.read_table(offset=n // 3, length=n // 3)
        assert got.combine_chunks().equals(table.slice(n // 3, n // 3).combine_chunks())
        batches = list(r.read(batch_size=997))
        assert pa.Table.from_batches(batches).combine_chunks().equals(table.combine_chunks())


@pytest.mark.interop
@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("n", [10, 5000])
def test_structs_of_leaves(tmp_path, version, n):
    rng = np.random.default_rng(n + 1)
    inner_t = pa.struct([("x", pa.float64()), ("y", pa.string())])
    st_t = pa.struct([("a", pa.int32()), ("b", pa.string()), ("inner", inner_t), ("flag", pa.bool_())])
    rows = []
    for _ in range(n):
        if rng.random() < 0.1:
            rows.append(None)
            continue
        inner = None if rng.random() < 0.1 else {
            "x": None if rng.random() < 0.2 else float(rng.random()),
            "y": f"y{int(rng.integers(0, 1 << 30))}",
        }
        rows.append({
            "a": None if rng.random() < 0.2 else int(rng.integers(-1000, 1000)),
            "b": None if rng.random() < 0.2 else f"b{int(rng.integers(0, 50))}",
            "inner": inner,
            "flag": bool(rng.random() < 0.5),
        })
    table = pa.table({
        "st": pa.array(rows, st_t),
        "sv": pa.array([{"v": int(i)} for i in rng.integers(0, 1 << 40, n)], pa.struct([("v", pa.int64())])),
        "sc": pa.array([{"c": 7, "d": "k"}] * n, pa.struct([("c", pa.int32()), ("d", pa.string())])),
        "id": pa.array(np.arange(n)),
    })
    path = tmp_path / "f.lance"
    write_pylance(path, table, version)
    assert_reads_equal(path, table)
    r = read_ours(path)
    got = r.read_table(offset=n // 2, length=n // 4 + 1)
    assert got.combine_chunks().equals(table.slice(n // 2, n // 4 + 1).combine_chunks())


@pytest.mark.interop
@pytest.mark.parametrize("version", VERSIONS)
def test_many_pages_with_prefetch(tmp_path, version):
    from lance_ops.format.file.reader import PagePrefetcher

    rng = np.random.default_rng(11)
    n = 200000
    base = numeric_table(n, seed=11).select(["i32", "i64full", "f64n", "ts", "bn"])
    table = base.append_column("s", pa.array([f"row {i} {'x' * int(k)}" for i, k in enumerate(rng.integers(0, 30, n))]))
    table = table.append_column("l", pa.array(_random_lists(rng, n, 4), pa.list_(pa.int64())))
    path = tmp_path / "f.lance"
    with lance_file.LanceFileWriter(str(path), table.schema, version=version, data_cache_bytes=1 << 18,
                                    max_page_bytes=1 << 16) as w:
        for off in range(0, n, 30000):
            w.write_batch(table.slice(off, 30000))
    r = read_ours(path)
    assert min(len(r._column_pages(c)) for c in range(r.num_columns)) >= 3
    assert_reads_equal(path, table)
    with PagePrefetcher() as pf:
        got = pa.Table.from_batches(list(r.read(offset=12345, length=150000, batch_size=7000, prefetch=pf)))
    assert got.equals(table.slice(12345, 150000))


@pytest.mark.interop
@pytest.mark.parametrize("version", VERSIONS)
def test_other_fixed_width_types_and_nullable_constants(tmp_path, version):
    import decimal

    rng = np.random.default_rng(0)
    n = 3000
    m = rng.random(n) < 0.2
    table = pa.table({
        "dec": pa.array([None if mm else decimal.Decimal(int(x)) / 100 for mm, x in zip(m, rng.integers(-10**9, 10**9, n), strict=True)],
                        pa.decimal128(12, 2)),
        "h": pa.array(rng.random(n).astype(np.float16)),
        "t32": pa.array(rng.integers(0, 86400000, n).astype(np.int32)).cast(pa.time32("ms")),
        "t64": pa.array(rng.integers(0, 86400000000, n)).cast(pa.time64("us")),
        "dur": pa.array(rng.integers(0, 1 << 40, n), mask=m).cast(pa.duration("ms")),
        "d64": pa.array(rng.integers(0, 1 << 40, n)).cast(pa.date64()),
        "fsb3": pa.array([bytes(rng.integers(0, 256, 3).astype(np.uint8)) for _ in range(n)], pa.binary(3)),
        "fsb16": pa.array([None if mm else bytes(rng.integers(0, 256, 16).astype(np.uint8)) for mm in m], pa.binary(16)),
        "nul": pa.nulls(n),
        "i8c": pa.array(np.full(n, 3, np.int8)),
        "f32c": pa.array(np.full(n, 1.5, np.float32), mask=m),
        "dictc": pa.array([["a", "bb", None][i % 3] for i in range(n)]).dictionary_encode(),
    })
    path = tmp_path / "f.lance"
    write_pylance(path, table, version)
    r = read_ours(path)
    ids = {f.name: f.id for f in r.schema.top_level()}
    got = r.read_table([ids[c] for c in table.column_names[:-1]])
    for name in table.column_names[:-1]:
        assert got.column(name).combine_chunks().equals(table.column(name).combine_chunks()), name
    # an Arrow dictionary column: its page dictionary and indices (values as written)
    dictc = r.read_table([ids["dictc"]]).column(0).combine_chunks()
    assert pa.types.is_dictionary(dictc.type)
    assert dictc.cast(pa.string()).equals(table.column("dictc").combine_chunks().cast(pa.string()))


# ------------------------------------------------------------------ full-zip with repetition
def _layouts(path) -> list[str]:
    r = read_ours(path)
    return [p.encoding.WhichOneof("layout") for c in range(r.num_columns) for p in r._column_pages(c)]


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_full_zip_pages_with_repetition(tmp_path, version):
    """Lists of large values: pylance writes full-zip pages with rep/def control words."""
    n = 3000
    rng = np.random.default_rng(0)

    def big(i):
        return "x" * (300 + i % 50) + str(i)

    vec = [list(rng.random(128).astype(np.float32)) for _ in range(4)]
    table = pa.table({
        "ls": pa.array([[big(i), None if i % 4 == 0 else big(i + 1)] if i % 5 else ([] if i % 10 == 0 else None)
                        for i in range(n)], pa.list_(pa.string())),
        "lv": pa.array([[vec[i % 4]] * (i % 3) if i % 7 else None for i in range(n)],
                       pa.list_(pa.list_(pa.float32(), 128))),
        "lls": pa.array([[[big(i)] * 2, [], None] if i % 7 else None for i in range(n)], pa.list_(pa.list_(pa.string()))),
        "lst": pa.array([[{"a": big(i), "b": i}] if i % 7 else None for i in range(n)],
                        pa.list_(pa.struct([("a", pa.string()), ("b", pa.int64())]))),
    })
    path = tmp_path / "fz.lance"
    write_pylance(path, table, version)
    assert _layouts(path).count("full_zip_layout") >= 4
    got = read_ours(path).read_table()
    for name in table.column_names:
        assert got.column(name).to_pylist() == table.column(name).to_pylist(), name
    # and a range of rows inside the page
    part = read_ours(path).read_table(offset=1001, length=700)
    for name in table.column_names:
        assert part.column(name).to_pylist() == table.column(name).slice(1001, 700).to_pylist(), name


@pytest.mark.parametrize("t_bits", [8, 16, 32, 64])
def test_fastlanes_pack_is_the_inverse_and_matches_the_oracle(t_bits):
    from lance_ops.format.file.v21.bitpacking import inline_pack, pack_blocks
    from lance_ops.format.file.v21.compression import Where, inline_unpack

    rng = np.random.default_rng(t_bits)
    for width in sorted({0, 1, 3, t_bits // 2, t_bits - 1, t_bits}):
        hi = 1 << width
        vals = (rng.integers(0, hi, BLOCK, dtype=np.uint64) if width < 64 else rng.integers(0, 2**63, BLOCK, dtype=np.uint64))
        vals = vals.astype(f"u{t_bits // 8}")
        packed = pack_blocks(vals, width, t_bits)
        if width:
            assert packed.tobytes() == reference_pack([int(x) for x in vals], width, t_bits)
        assert np.array_equal(unpack_block_count(packed, width, t_bits, 1), vals)
        # a chunk of 2.5 blocks: [T-bit width][packed] per block, last block zero-padded
        chunk = np.concatenate([vals, vals, vals[:512]])
        raw = np.frombuffer(inline_pack(chunk, t_bits), dtype=np.uint8)
        assert np.array_equal(inline_unpack(Where("x", 0), raw, t_bits, len(chunk)), chunk)


@pytest.mark.parametrize("nblocks", [0, 1, 3, 9])
def test_fastlanes_unpack_any_number_of_blocks(nblocks):
    from lance_ops.format.file.v21.bitpacking import pack_blocks, unpack_blocks

    rng = np.random.default_rng(nblocks)
    for t_bits in (8, 16, 32, 64):
        for width in (1, 5, t_bits - 1, t_bits):
            hi = 2**width if width < 64 else 2**63
            vals = rng.integers(0, hi, nblocks * BLOCK, dtype=np.uint64).astype(f"u{t_bits // 8}")
            packed = pack_blocks(vals, width, t_bits) if nblocks else np.zeros(0, np.uint8)
            assert np.array_equal(unpack_blocks(packed, width, t_bits), vals), (t_bits, width)


@pytest.mark.parametrize("version", VERSIONS)
def test_many_list_chunks_decoded_as_one_run(tmp_path, version):
    """pylance's list pages: rep/def levels out-of-line bit-packed per chunk (whole blocks, raw or
    packed tails), read for all chunks at once; and the same table written by us (flat/rle levels)."""
    import lance

    import lance_ops.format as lf

    rng = np.random.default_rng(5)
    n = 200_000
    lens = rng.integers(0, 6, n)
    offs = np.zeros(n + 1, np.int32)
    np.cumsum(lens, out=offs[1:])
    valid = rng.random(n) > 0.1
    items = int(offs[-1])
    table = pa.table({
        "l": pa.ListArray.from_arrays(pa.array(offs), pa.array(rng.integers(0, 1000, items).astype(np.int32)),
                                      mask=pa.array(~valid)),
        "t": pa.ListArray.from_arrays(pa.array(offs), pa.array([f"t{i % 50}" if i % 7 else None for i in range(items)])),
    })
    for who, write in (("theirs", lance.write_dataset), ("ours", lf.write_dataset)):
        uri = str(tmp_path / who)
        write(table, uri, data_storage_version=version)
        assert lf.dataset(uri).to_table().equals(table), who
        assert lf.dataset(uri).to_table(offset=12_345, limit=50_000).equals(table.slice(12_345, 50_000)), who


@pytest.mark.interop
def test_one_chunk_pages_decode_and_refuse_as_the_general_path(tmp_path, monkeypatch):
    """Small files (100-row pages of one chunk) take a scalar fast path and are served from one
    whole-file read: they decode to pylance's table, and with random byte flips in their pages
    the fast path returns the same table as the general chunk path or both refuse them."""
    import glob
    import os

    from lance_ops.format.errors import LanceOpsError
    from lance_ops.format.file.v21 import chunks

    rng = np.random.default_rng(5)
    n = 100
    table = pa.table({
        "id": pa.array(np.arange(n, dtype=np.int64)),
        "x": pa.array(rng.random(n)),
        "s": pa.array([f"row {i} " + "ab" * int(rng.integers(0, 5)) for i in range(n)]),
    })
    uri = str(tmp_path / "ds")
    lance.write_dataset(table, uri, data_storage_version="2.2")
    (path,) = glob.glob(os.path.join(uri, "data", "*.lance"))
    assert os.path.getsize(path) < 64 * 1024  # whole-file read
    calls = []
    real = chunks._one_chunk
    monkeypatch.setattr(chunks, "_one_chunk", lambda *a: calls.append(1) or real(*a))
    got = DataFileReader(ObjectStore(uri), "data/" + os.path.basename(path)).read_table()
    assert got.equals(table) and len(calls) == 3  # every page took the fast path
    original = open(path, "rb").read()
    outcomes = {"same": 0, "refused": 0}
    for _ in range(30):
        data = bytearray(original)
        for _ in range(int(rng.integers(1, 4))):
            data[int(rng.integers(0, len(data) // 2))] = int(rng.integers(0, 256))
        with open(path, "wb") as f:
            f.write(data)
        results = []
        for fast in (True, False):
            monkeypatch.setattr(chunks, "_one_chunk", real if fast else (lambda *a: None))
            try:
                results.append(DataFileReader(ObjectStore(uri), "data/" + os.path.basename(path)).read_table())
            except LanceOpsError as e:
                assert path in str(e) or os.path.basename(path) in str(e)
                results.append(None)
        if results[0] is None or results[1] is None:
            assert results[0] is None and results[1] is None, "one path read what the other refused"
            outcomes["refused"] += 1
        else:
            assert results[0].equals(results[1])
            outcomes["same"] += 1
    assert outcomes["refused"] > 0
