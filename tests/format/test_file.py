"""Lance 2.0 data files: our writer and reader against each other and against pylance 14."""

import decimal
import struct

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lance_ops.format._proto import file_pb2
from lance_ops.format.errors import CorruptFileError, SchemaError, UnsupportedFeatureError
from lance_ops.format.file import DataFileReader, DataFileWriter, data_file_field_info, write_data_file
from lance_ops.format.file.reader import TAIL_BYTES
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.schema import LanceSchema

lance_file = pytest.importorskip("lance.file")
LanceFileWriter = lance_file.LanceFileWriter
LanceFileReader = lance_file.LanceFileReader


# ------------------------------------------------------------------------------ helpers
def make_table(n: int = 37, seed: int = 0, nulls: bool = True, struct_col: bool = True) -> pa.Table:
    """One column per type 2.0 can store, nulls at every level 2.0 allows."""
    rng = np.random.default_rng(seed)

    def m(p: float = 0.3) -> np.ndarray:
        return rng.random(n) < p if nulls else np.zeros(n, dtype=bool)

    cols: dict[str, pa.Array] = {}
    for t in [
        pa.int8(),
        pa.int16(),
        pa.int32(),
        pa.int64(),
        pa.uint8(),
        pa.uint16(),
        pa.uint32(),
        pa.uint64(),
    ]:
        dt = t.to_pandas_dtype()
        info = np.iinfo(dt)
        cols[str(t)] = pa.array(
            rng.integers(info.min, info.max, n, dtype=dt, endpoint=True), type=t, mask=m()
        )
    cols["float16"] = pa.array(rng.standard_normal(n).astype(np.float16), mask=m())
    cols["float32"] = pa.array(rng.standard_normal(n).astype(np.float32), mask=m())
    cols["float64"] = pa.array(rng.standard_normal(n), mask=m())
    cols["bool"] = pa.array(rng.random(n) < 0.5, mask=m())
    words = ["", "a", "hello", "wörld", "x" * 40]
    sv = [words[i] + str(j) for j, i in enumerate(rng.integers(0, len(words), n))]
    cols["string"] = pa.array(sv, pa.string(), mask=m())
    cols["large_string"] = pa.array(sv, pa.large_string(), mask=m())
    cols["binary"] = pa.array([s.encode() for s in sv], pa.binary(), mask=m())
    cols["large_binary"] = pa.array([s.encode() for s in sv], pa.large_binary(), mask=m())
    cols["fsb"] = pa.array(
        [bytes(rng.integers(0, 255, 3, dtype=np.uint8)) for _ in range(n)], pa.binary(3), mask=m()
    )
    cols["dec128"] = pa.array(
        [decimal.Decimal(int(v)).scaleb(-2) for v in rng.integers(-(10**8), 10**8, n)],
        pa.decimal128(10, 2),
        mask=m(),
    )
    cols["dec256"] = pa.array(
        [decimal.Decimal(int(v)).scaleb(-5) for v in rng.integers(-(10**15), 10**15, n)],
        pa.decimal256(40, 5),
        mask=m(),
    )
    cols["date32"] = pa.array(rng.integers(-1000, 30000, n).astype(np.int32), mask=m()).cast(pa.date32())
    cols["date64"] = pa.array(rng.integers(0, 10**12, n) // 86400000 * 86400000, mask=m()).cast(pa.date64())
    for unit in ["s", "ms"]:
        cols[f"time32_{unit}"] = pa.array(rng.integers(0, 86400, n).astype(np.int32), mask=m()).cast(
            pa.time32(unit)
        )
    for unit in ["us", "ns"]:
        cols[f"time64_{unit}"] = pa.array(rng.integers(0, 86400 * 10**6, n), mask=m()).cast(pa.time64(unit))
    for unit in ["s", "ms", "us", "ns"]:
        for tz in [None, "UTC", "America/New_York"]:
            cols[f"ts_{unit}_{tz}"] = pa.array(rng.integers(0, 10**9, n), mask=m()).cast(
                pa.timestamp(unit, tz)
            )
        cols[f"dur_{unit}"] = pa.array(rng.integers(-(10**9), 10**9, n), mask=m()).cast(pa.duration(unit))
    cols["null"] = pa.nulls(n)
    items = pa.array(
        rng.standard_normal(n * 3).astype(np.float32), mask=(rng.random(n * 3) < 0.3) if nulls else None
    )
    cols["fsl"] = pa.FixedSizeListArray.from_arrays(items, type=pa.list_(pa.float32(), 3), mask=pa.array(m()))
    inner = pa.FixedSizeListArray.from_arrays(pa.array(rng.integers(0, 100, n * 4).astype(np.int32)), 2)
    cols["nested_fsl"] = pa.FixedSizeListArray.from_arrays(inner, 2)
    lv = []
    for _ in range(n):
        k = int(rng.integers(0, 4))
        lv.append([None if (nulls and rng.random() < 0.2) else int(rng.integers(0, 1000)) for _ in range(k)])
    lmask = m()
    cols["list"] = pa.array([None if lmask[i] else v for i, v in enumerate(lv)], pa.list_(pa.int32()))
    cols["large_list_str"] = pa.array(
        [
            None if lmask[(i + 1) % n] else [None if x is None else str(x) for x in v]
            for i, v in enumerate(lv)
        ],
        pa.large_list(pa.string()),
    )
    st_t = pa.struct([("x", pa.int32()), ("y", pa.string())])
    cols["list_struct"] = pa.array(
        [
            None if lmask[(i + 2) % n] else [{"x": x, "y": None if x is None else str(x)} for x in v]
            for i, v in enumerate(lv)
        ],
        pa.list_(st_t),
    )
    cols["list_list"] = pa.array(
        [None if lmask[(i + 3) % n] else [v, None, []] for i, v in enumerate(lv)],
        pa.list_(pa.list_(pa.int64())),
    )
    if struct_col:
        sx = pa.array(rng.integers(0, 100, n), pa.int64(), mask=m())
        sy = pa.array(sv, pa.string(), mask=m())
        cols["struct"] = pa.StructArray.from_arrays(
            [sx, sy, cols["list"], pa.StructArray.from_arrays([sx], names=["deep"])],
            names=["x", "y", "l", "inner"],
        )
    return pa.table(cols)


def write_ours(tmp_path, table, name="f.lance", schema=None, **kw):
    store = ObjectStore(str(tmp_path))
    schema = schema or LanceSchema.from_arrow(table.schema)
    n, size = write_data_file(store, name, table, schema, **kw)
    assert n == table.num_rows
    assert size == (tmp_path / name).stat().st_size
    return store, name


def write_pylance(path, table, *, batches=None, **kw):
    w = LanceFileWriter(str(path), table.schema, version="2.0", **kw)
    for b in batches if batches is not None else [table]:
        w.write_batch(b)
    w.close()


def read_pylance(path) -> pa.Table:
    return LanceFileReader(str(path)).read_all().to_table()


def assert_tables_equal(got: pa.Table, want: pa.Table) -> None:
    assert got.schema.equals(want.schema), f"{got.schema}\n!=\n{want.schema}"
    for name in want.column_names:
        assert got[name].equals(want[name]), f"column {name}: {got[name]} != {want[name]}"


class CountingStore(ObjectStore):
    """An ObjectStore that records every range read."""

    def __init__(self, uri):
        super().__init__(uri)
        self.calls: list[tuple[str, list[tuple[int, int]]]] = []

    def read_range(self, rel, start, length):
        self.calls.append(("range", [(start, length)]))
        return super().read_range(rel, start, length)

    def read_ranges(self, rel, ranges):
        self.calls.append(("ranges", list(ranges)))
        return super().read_ranges(rel, ranges)


# ------------------------------------------------------------------------------ byte level
TINY_COL0 = (
    bytes.fromhex("0a29 1227 0a25 0a1f".replace(" ", ""))
    + b"/lance.encodings.ColumnEncoding"
    + bytes.fromhex("12020a00 1248 0a020040 1202010c 1803 223c 123a 0a38 0a1e".replace(" ", ""))
    + b"/lance.encodings.ArrayEncoding"
    + bytes.fromhex("1216 1214 1212 0a06 0a04 0801 1200 1208 0a06 0820 1202 0801".replace(" ", ""))
)
NEG1 = bytes.fromhex("ffffffffffffffffff01")
TINY_FD = (
    bytes.fromhex("0a39 0a19 120161 20".replace(" ", ""))
    + NEG1
    + b"\x2a\x05int32\x30\x01\x38\x01"
    + bytes.fromhex("0a1c 120173 1801 20".replace(" ", ""))
    + NEG1
    + b"\x2a\x06string\x30\x01\x38\x02"
    + b"\x10\x03"
)


def test_tiny_example_layout(tmp_path):
    table = pa.table({"a": pa.array([1, None, 3], pa.int32()), "s": pa.array(["x", None, "yz"])})
    store, name = write_ours(tmp_path, table)
    data = (tmp_path / name).read_bytes()
    assert len(data) == 647
    assert data[0:1] == b"\x05" and data[1:64] == b"H" * 63
    assert data[64:76] == bytes.fromhex("010000000000000003000000") and data[76:128] == b"H" * 52
    assert data[128:152] == struct.pack("<3Q", 1, 5, 3)
    assert data[192:195] == b"xyz"
    assert struct.unpack("<QQQIIHH4s", data[-40:]) == (317, 559, 591, 1, 2, 0, 3, b"LANC")
    assert struct.unpack_from("<QQ", data, 591) == (256, 61)
    assert struct.unpack_from("<4Q", data, 559) == (317, 117, 434, 125)
    assert data[317:434] == TINY_COL0
    assert len(TINY_FD) == 61 and data[256:317] == TINY_FD
    # identical to what pylance writes
    write_pylance(tmp_path / "ref.lance", table)
    assert (tmp_path / "ref.lance").read_bytes() == data
    reader = DataFileReader(store, name)
    assert reader.version == (2, 0) and reader.footer_version == (0, 3)
    assert reader.num_rows == 3
    assert_tables_equal(reader.read_table(), table)


@pytest.mark.interop
@pytest.mark.parametrize("nulls", [True, False])
def test_types_file_byte_identical_to_pylance(tmp_path, nulls):
    table = make_table(37, seed=1, nulls=nulls)
    store, name = write_ours(tmp_path, table)
    write_pylance(tmp_path / "ref.lance", table)
    assert (tmp_path / name).read_bytes() == (tmp_path / "ref.lance").read_bytes()


@pytest.mark.interop
def test_schema_proto_byte_identical_to_pylance(tmp_path):
    table = make_table(5)
    md_table = table.replace_schema_metadata({"owner": "me"})
    fields = [f.with_metadata({"k": "v"}) if i % 3 == 0 else f for i, f in enumerate(md_table.schema)]
    md_table = pa.Table.from_arrays(md_table.columns, schema=pa.schema(fields, metadata={"owner": "me"}))
    write_pylance(tmp_path / "ref.lance", md_table)
    reader = DataFileReader(ObjectStore(str(tmp_path)), "ref.lance")
    fd_bytes = reader.global_buffer(0)
    ours = LanceSchema.from_arrow(md_table.schema)
    fd = file_pb2.FileDescriptor()
    fd.schema.fields.extend(ours.to_proto())
    fd.schema.metadata["owner"] = b"me"
    fd.length = md_table.num_rows
    assert fd.SerializeToString() == fd_bytes
    assert reader.schema == ours
    assert reader.schema.to_arrow().equals(md_table.schema, check_metadata=True)


# ------------------------------------------------------------------------------ round trips
COLUMNS = make_table(3).column_names


@pytest.mark.parametrize("column", COLUMNS)
def test_roundtrip_each_type_sliced(tmp_path, column):
    table = make_table(203, seed=2).select([column])
    for k, (off, ln) in enumerate([(0, 203), (3, 150), (13, 1), (200, 3)]):
        part = table.slice(off, ln)
        store, name = write_ours(tmp_path, part, name=f"{k}.lance")
        got = DataFileReader(store, name).read_table()
        assert_tables_equal(got, part)


def test_roundtrip_all_types_chunked_multipage(tmp_path):
    table = make_table(1500, seed=5)
    chunked = pa.concat_tables([table.slice(0, 7), table.slice(7, 500), table.slice(507, 993)])
    store, name = write_ours(tmp_path, chunked, max_page_bytes=300)
    reader = DataFileReader(store, name)
    pages = [len(reader.column_metadata(i).pages) for i in range(reader.num_columns)]
    assert max(pages) > 10
    assert_tables_equal(reader.read_table(), table)
    for off, ln, bs in [(0, 1500, 1500), (1, 1000, 77), (1499, 10, 3), (700, 1, 1), (333, 444, 1000)]:
        batches = list(reader.read(offset=off, length=ln, batch_size=bs))
        want = table.slice(off, ln)
        assert [b.num_rows for b in batches][:-1] == [bs] * (len(batches) - 1)
        assert_tables_equal(pa.Table.from_batches(batches, schema=want.schema), want)
        assert_tables_equal(reader.read_table(offset=off, length=ln), want)


def test_write_streamed_batches_and_reordered_columns(tmp_path):
    table = make_table(400, seed=6)
    schema = LanceSchema.from_arrow(table.schema)
    store = ObjectStore(str(tmp_path))
    with store.open_output("s.lance") as f:
        w = DataFileWriter(f, schema, max_page_bytes=1000)
        for b in table.to_batches(max_chunksize=37):
            rev = pa.RecordBatch.from_arrays(list(reversed(b.columns)), names=list(reversed(b.schema.names)))
            w.write_batch(rev)
        assert w.num_rows == 400
        size = w.finish()
    assert size == (tmp_path / "s.lance").stat().st_size
    assert_tables_equal(DataFileReader(store, "s.lance").read_table(), table)
    assert_tables_equal(read_pylance(tmp_path / "s.lance"), table)


def test_many_pages_for_big_column(tmp_path):
    n = 3_000_000
    table = pa.table({"x": pa.array(np.arange(n, dtype=np.int64))})
    store, name = write_ours(tmp_path, table)
    reader = DataFileReader(store, name)
    pages = reader.column_metadata(0).pages
    assert [p.length for p in pages] == [1048576, 1048576, n - 2 * 1048576]
    assert all(p.priority == 0 for p in pages)
    got = reader.read_table(offset=1048570, length=20)
    assert got["x"].to_pylist() == list(range(1048570, 1048590))


def test_projection_and_order(tmp_path):
    table = make_table(50)
    store, name = write_ours(tmp_path, table)
    reader = DataFileReader(store, name)
    ids = [
        reader.schema.field("struct").id,
        reader.schema.field("int8").id,
        reader.schema.field("list_list").id,
    ]
    got = reader.read_table(ids)
    assert got.column_names == ["struct", "int8", "list_list"]
    assert_tables_equal(got, table.select(["struct", "int8", "list_list"]))
    child_id = reader.schema.children(ids[0])[0].id
    with pytest.raises(SchemaError):
        reader.read_table([child_id])
    with pytest.raises(CorruptFileError, match="does not hold"):  # the manifest and the file disagree
        reader.read_table([9999])
    assert reader.read_table(offset=60).num_rows == 0
    assert list(reader.read(offset=50)) == []


def test_reader_reads_only_needed_pages(tmp_path):
    table = pa.table(
        {"a": pa.array(np.arange(100_000, dtype=np.int64)), "s": pa.array([str(i) for i in range(100_000)])}
    )
    write_ours(tmp_path, table, max_page_bytes=64 * 1024)
    store = CountingStore(str(tmp_path))
    reader = DataFileReader(store, "f.lance")
    assert len(store.calls) == 1  # the 64 KiB tail holds all metadata
    store.calls.clear()
    got = reader.read_table([reader.schema.field("a").id], offset=50_000, length=10)
    assert got["a"].to_pylist() == list(range(50_000, 50_010))
    assert len(store.calls) == 1
    kind, ranges = store.calls[0]
    assert kind == "ranges" and len(ranges) == 1 and ranges[0][1] <= 64 * 1024


def test_open_with_big_metadata_uses_two_reads(tmp_path):
    table = pa.table({f"c{i}": pa.array([i], pa.int32()) for i in range(1500)})
    write_ours(tmp_path, table)
    store = CountingStore(str(tmp_path))
    reader = DataFileReader(store, "f.lance")
    assert reader.file_size > TAIL_BYTES
    assert len(store.calls) == 2
    assert reader.read_table([reader.schema.field("c1499").id])["c1499"].to_pylist() == [1499]


def test_empty_file(tmp_path):
    table = make_table(0)
    store, name = write_ours(tmp_path, table)
    write_pylance(tmp_path / "ref.lance", table)
    assert (tmp_path / name).read_bytes() == (tmp_path / "ref.lance").read_bytes()
    reader = DataFileReader(store, name)
    assert reader.num_rows == 0
    assert_tables_equal(reader.read_table(), table)
    assert list(reader.read()) == []


def test_dictionary_column_roundtrip(tmp_path):
    d = pa.array(["a", "b", None, "a", "c"] * 40).dictionary_encode()
    table = pa.table(
        {"d": d, "d8": d.cast(pa.dictionary(pa.int8(), pa.string())), "plain": pa.array(["q"] * 200)}
    )
    store, name = write_ours(
        tmp_path, pa.concat_tables([table.slice(0, 3), table.slice(3)]), max_page_bytes=100
    )
    got = DataFileReader(store, name).read_table()
    assert got.schema.equals(table.schema)
    for c in table.column_names:
        assert got[c].cast(pa.string()).equals(table[c].cast(pa.string()))
    ref = read_pylance(tmp_path / name)
    for c in table.column_names:
        assert ref[c].cast(pa.string()).equals(table[c].cast(pa.string()))


# ------------------------------------------------------------------------------ interop
@pytest.mark.interop
def test_read_pylance_multipage_file(tmp_path):
    table = make_table(3000, seed=3, struct_col=False)  # pylance 14 panics on tiny pages of struct<list>
    write_pylance(
        tmp_path / "p.lance",
        table,
        batches=table.to_batches(max_chunksize=700),
        data_cache_bytes=2000,
        max_page_bytes=1000,
    )
    reader = DataFileReader(ObjectStore(str(tmp_path)), "p.lance")
    assert max(len(reader.column_metadata(i).pages) for i in range(reader.num_columns)) > 50
    assert_tables_equal(reader.read_table(), table)
    for off, ln in [(5, 1000), (1500, 1499), (2999, 5)]:
        want = table.slice(off, ln)
        got = pa.Table.from_batches(
            list(reader.read(offset=off, length=ln, batch_size=97)), schema=want.schema
        )
        assert_tables_equal(got, want)


@pytest.mark.interop
def test_read_pylance_dictionary_and_zstd_pages(tmp_path):
    n = 300
    schema = pa.schema(
        [
            pa.field("low", pa.string()),
            pa.field("allnull", pa.string()),
            pa.field("empty", pa.string()),
            pa.field("z", pa.string(), metadata={"lance-encoding:compression": "zstd"}),
            pa.field(
                "z7",
                pa.large_binary(),
                metadata={"lance-encoding:compression": "zstd", "lance-encoding:compression-level": "7"},
            ),
            pa.field("adict", pa.dictionary(pa.int16(), pa.string())),
        ]
    )
    table = pa.table(
        {
            "low": pa.array(["a", "bb", None, "ccc"] * (n // 4)),
            "allnull": pa.array([None] * n, pa.string()),
            "empty": pa.array([""] * n),
            "z": pa.array([f"hello world {i}" if i % 5 else None for i in range(n)]),
            "z7": pa.array([b"x%d" % i for i in range(n)], pa.large_binary()),
            "adict": pa.array(["p", None, "q"] * (n // 3))
            .dictionary_encode()
            .cast(schema.field("adict").type),
        },
        schema=schema,
    )
    write_pylance(tmp_path / "p.lance", table)
    reader = DataFileReader(ObjectStore(str(tmp_path)), "p.lance")
    encs = [reader._column_pages(i)[0].encoding for i in range(reader.num_columns)]
    assert [e.WhichOneof("array_encoding") for e in encs] == ["dictionary"] * 3 + ["binary"] * 2 + [
        "dictionary"
    ]
    assert encs[3].binary.bytes.flat.compression.scheme == "zstd"
    got = reader.read_table()
    ref = read_pylance(tmp_path / "p.lance")
    assert_tables_equal(got, ref)
    for c in table.column_names:
        assert got[c].cast(pa.large_binary()).equals(table[c].cast(pa.large_binary()))
    # and our zstd writer produces the same compressed buffers pylance does
    store, name = write_ours(tmp_path, table.select(["z", "z7"]))
    ours = DataFileReader(store, name)
    for i in range(2):
        a, b = ours._column_pages(i)[0], reader._column_pages(3 + i)[0]
        assert a.encoding == b.encoding
        assert [s for _, s in a.ranges] == [s for _, s in b.ranges]
    assert_tables_equal(read_pylance(tmp_path / name), table.select(["z", "z7"]))


@pytest.mark.interop
def test_pylance_reads_our_multipage_file(tmp_path):
    table = make_table(2000, seed=9)
    write_ours(tmp_path, table, max_page_bytes=700)
    assert_tables_equal(read_pylance(tmp_path / "f.lance"), table)


@pytest.mark.interop
def test_version_22_nested_lists_read(tmp_path):
    # nested lists in 2.2 are unravelled from their rep/def levels (pylance's writer)
    table = pa.table({"a": pa.array([[[1]], None, [[2, 3], [], None]], pa.list_(pa.list_(pa.int32())))})
    w = LanceFileWriter(str(tmp_path / "v22.lance"), table.schema, version="2.2")
    w.write_batch(table)
    w.close()
    reader = DataFileReader(ObjectStore(str(tmp_path)), "v22.lance")
    assert reader.version == (2, 2) and reader.num_rows == 3
    assert reader.schema.to_arrow().equals(table.schema)
    assert reader.read_table().to_pylist() == table.to_pylist()


# ------------------------------------------------------------------------------ hypothesis
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    values=st.lists(st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)), max_size=300),
    page=st.integers(8, 600),
    cut=st.integers(0, 20),
)
def test_hypothesis_int64(tmp_path, values, page, cut):
    arr = pa.array(values, pa.int64())
    table = pa.table({"v": arr.slice(min(cut, len(arr)))})
    store, name = write_ours(tmp_path, table, max_page_bytes=page)
    assert_tables_equal(DataFileReader(store, name).read_table(), table)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    values=st.lists(st.one_of(st.none(), st.text(max_size=12)), max_size=200),
    large=st.booleans(),
    page=st.integers(8, 600),
    cut=st.integers(0, 20),
)
def test_hypothesis_strings(tmp_path, values, large, page, cut):
    arr = pa.array(values, pa.large_string() if large else pa.string())
    table = pa.table({"v": arr.slice(min(cut, len(arr)))})
    store, name = write_ours(tmp_path, table, max_page_bytes=page)
    reader = DataFileReader(store, name)
    assert_tables_equal(reader.read_table(), table)
    if table.num_rows > 3:
        assert_tables_equal(
            pa.Table.from_batches(list(reader.read(offset=1, batch_size=3)), schema=table.schema),
            table.slice(1),
        )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    values=st.lists(
        st.one_of(st.none(), st.lists(st.one_of(st.none(), st.integers(-(2**31), 2**31 - 1)), max_size=5)),
        max_size=120,
    ),
    page=st.integers(8, 400),
    cut=st.integers(0, 10),
    bools=st.lists(st.one_of(st.none(), st.booleans()), min_size=130, max_size=130),
)
def test_hypothesis_lists_and_bools(tmp_path, values, page, cut, bools):
    arr = pa.array(values, pa.list_(pa.int32()))
    n = len(arr)
    table = pa.table({"l": arr, "b": pa.array(bools[:n], pa.bool_())}).slice(min(cut, n))
    store, name = write_ours(tmp_path, table, max_page_bytes=page)
    reader = DataFileReader(store, name)
    assert_tables_equal(reader.read_table(), table)
    if table.num_rows > 2:
        assert_tables_equal(
            reader.read_table(offset=1, length=table.num_rows - 2), table.slice(1, table.num_rows - 2)
        )


# ------------------------------------------------------------------------------ writer errors
def _writer(tmp_path, table_schema):
    f = open(tmp_path / "w.lance", "wb")
    return f, DataFileWriter(f, LanceSchema.from_arrow(table_schema))


def test_writer_rejects_struct_nulls(tmp_path):
    st_t = pa.struct([("x", pa.int32())])
    arr = pa.array([{"x": 1}, None], st_t)
    f, w = _writer(tmp_path, pa.schema([("s", st_t)]))
    with f, pytest.raises(UnsupportedFeatureError, match="struct validity"):
        w.write_batch(pa.table({"s": arr}))
    lst = pa.array([[{"x": 1}, None]], pa.list_(st_t))
    f, w = _writer(tmp_path, pa.schema([("l", lst.type)]))
    with f, pytest.raises(UnsupportedFeatureError):
        w.write_batch(pa.table({"l": lst}))


def test_writer_type_and_name_errors(tmp_path):
    f, w = _writer(tmp_path, pa.schema([("a", pa.int32()), ("s", pa.string())]))
    with f:
        with pytest.raises(SchemaError, match=r"'a'.*int64.*int32"):
            w.write_batch(pa.table({"a": pa.array([1], pa.int64()), "s": ["x"]}))
        with pytest.raises(SchemaError, match=r"'s'.*large_string"):
            w.write_batch(pa.table({"a": pa.array([1], pa.int32()), "s": pa.array(["x"], pa.large_string())}))
        with pytest.raises(SchemaError, match="'s'.*missing"):
            w.write_batch(pa.table({"a": pa.array([1], pa.int32())}))
        with pytest.raises(SchemaError, match="'zz'"):
            w.write_batch(pa.table({"a": pa.array([1], pa.int32()), "s": ["x"], "zz": [1]}))
        with pytest.raises(TypeError):
            w.write_batch({"a": [1]})


def test_writer_nullability_and_unsupported(tmp_path):
    schema = pa.schema([pa.field("a", pa.int32(), nullable=False)])
    f, w = _writer(tmp_path, schema)
    with f, pytest.raises(SchemaError, match="not nullable"):
        w.write_batch(pa.table({"a": pa.array([1, None], pa.int32())}))
    with pytest.raises(UnsupportedFeatureError, match="map"):
        _writer(tmp_path, pa.schema([("m", pa.map_(pa.string(), pa.int32()))]))
    with pytest.raises(UnsupportedFeatureError, match="2.3"):
        DataFileWriter(open(tmp_path / "x", "wb"), LanceSchema.from_arrow(schema), version="2.3")


def test_list_item_names_are_not_types(tmp_path):
    # data whose list item is named differently is the same type; it is written under the schema's names
    schema = pa.schema([("l", pa.list_(pa.int32()))])
    data = pa.table({"l": pa.array([[1], None], pa.list_(pa.field("element", pa.int32())))})
    store, name = write_ours(tmp_path, data, schema=LanceSchema.from_arrow(schema))
    got = DataFileReader(store, name).read_table()
    assert got.schema.equals(schema) and got["l"].to_pylist() == [[1], None]


def test_data_file_field_info():
    table = make_table(1)
    schema = LanceSchema.from_arrow(table.schema)
    fields, cols = data_file_field_info(schema)
    assert fields == list(range(len(schema.fields))) and cols == fields
    fsl = LanceSchema.from_arrow(pa.schema([("v", pa.list_(pa.float32(), 8)), ("l", pa.list_(pa.int8()))]))
    assert data_file_field_info(fsl) == ([0, 1, 2], [0, 1, 2])


# ------------------------------------------------------------------------------ reader errors
@pytest.fixture
def good_file(tmp_path):
    table = pa.table(
        {"a": pa.array(np.arange(1000), pa.int64()), "s": pa.array([str(i) for i in range(1000)])}
    )
    write_ours(tmp_path, table)
    return tmp_path, (tmp_path / "f.lance").read_bytes()


def _open(tmp_path, data: bytes):
    (tmp_path / "bad.lance").write_bytes(data)
    r = DataFileReader(ObjectStore(str(tmp_path)), "bad.lance")
    return r.read_table()


def _rebuild(data: bytes, new_columns: dict[int, bytes]) -> bytes:
    """The same file with some ColumnMetadata messages replaced (metadata section rewritten)."""
    a, b, c, ngb, ncols, major, minor, magic = struct.unpack("<QQQIIHH4s", data[-40:])
    g0, gs = struct.unpack_from("<QQ", data, c)
    out = bytearray(data[: g0 + gs])
    start = len(out)
    cmo = []
    for i in range(ncols):
        pos, size = struct.unpack_from("<QQ", data, b + 16 * i)
        raw = new_columns.get(i, data[pos : pos + size])
        cmo.append((len(out), len(raw)))
        out += raw
    cmo_off = len(out)
    for pos, size in cmo:
        out += struct.pack("<QQ", pos, size)
    gbo_off = len(out)
    out += struct.pack("<QQ", g0, gs)
    out += struct.pack("<QQQIIHH4s", start, cmo_off, gbo_off, 1, ncols, major, minor, magic)
    return bytes(out)


def _patch_footer(data: bytes, **changes) -> bytes:
    names = ["a", "b", "c", "ngb", "ncols", "major", "minor", "magic"]
    vals = dict(zip(names, struct.unpack("<QQQIIHH4s", data[-40:]), strict=True))
    vals.update(changes)
    return data[:-40] + struct.pack("<QQQIIHH4s", *[vals[k] for k in names])


@pytest.mark.parametrize(
    "mutate",
    [
        pytest.param(lambda d: d[:-1], id="truncated-1"),
        pytest.param(lambda d: d[: len(d) // 2], id="truncated-half"),
        pytest.param(lambda d: b"", id="empty"),
        pytest.param(lambda d: d[:30], id="tiny"),
        pytest.param(lambda d: d[:-4] + b"LANX", id="magic"),
        pytest.param(lambda d: _patch_footer(d, a=2**63), id="column-meta-start"),
        pytest.param(lambda d: _patch_footer(d, b=2**62), id="cmo-offset"),
        pytest.param(lambda d: _patch_footer(d, c=2**64 - 1), id="gbo-offset"),
        pytest.param(lambda d: _patch_footer(d, ncols=2**32 - 1), id="ncols"),
        pytest.param(lambda d: _patch_footer(d, ngb=2**31), id="ngb"),
        pytest.param(lambda d: _patch_footer(d, ngb=0), id="no-global-buffer"),
    ],
)
def test_corrupt_footer(good_file, mutate):
    tmp_path, data = good_file
    with pytest.raises(CorruptFileError, match="bad.lance"):
        _open(tmp_path, mutate(data))


def test_corrupt_tables_and_pages(good_file):
    tmp_path, data = good_file
    a, b, c, ngb, ncols, *_ = struct.unpack("<QQQIIHH4s", data[-40:])
    # CMO entry with an absurd size
    bad = bytearray(data)
    struct.pack_into("<QQ", bad, b, 0, 2**60)
    with pytest.raises(CorruptFileError, match="bad.lance"):
        _open(tmp_path, bytes(bad))
    # GBO entry pointing outside the file
    bad = bytearray(data)
    struct.pack_into("<QQ", bad, c, len(data) * 2, 10)
    with pytest.raises(CorruptFileError, match="bad.lance"):
        _open(tmp_path, bytes(bad))
    # FileDescriptor bytes garbled
    bad = bytearray(data)
    g0, gs = struct.unpack_from("<QQ", data, c)
    bad[g0 : g0 + gs] = b"\xff" * gs
    with pytest.raises(CorruptFileError, match="bad.lance"):
        _open(tmp_path, bytes(bad))
    # page buffers beyond the end of the file, absurd page lengths, more rows than the file
    reader = DataFileReader(ObjectStore(str(tmp_path)), "f.lance")
    for attr, value, match in [
        ("buffer_offsets", 2**40, "beyond the file size"),
        ("buffer_sizes", 2**40, "beyond the file size"),
        ("length", 2**50, "rows"),
        ("length", 1001, "rows"),
    ]:
        cm = reader.column_metadata(0)
        if attr == "length":
            cm.pages[0].length = value
        else:
            getattr(cm.pages[0], attr)[0] = value
        with pytest.raises(CorruptFileError, match=match):
            _open(tmp_path, _rebuild(data, {0: cm.SerializeToString()}))
    # a binary page whose offsets go backwards
    off_pos = reader.column_metadata(1).pages[0].buffer_offsets[0]
    bad = bytearray(data)
    struct.pack_into("<Q", bad, off_pos + 8 * 10, 1)
    with pytest.raises(CorruptFileError, match="monotonic"):
        _open(tmp_path, bytes(bad))
    # a list/binary page claiming more bytes than its data buffer holds
    bad = bytearray(data)
    struct.pack_into("<Q", bad, off_pos + 8 * 999, 10**6)
    with pytest.raises(CorruptFileError):
        _open(tmp_path, bytes(bad))


def test_unknown_encoding_and_raw_zstd(good_file):
    from google.protobuf import any_pb2

    from lance_ops.format._proto import encodings_v2_0_pb2 as epb
    from lance_ops.format.file import encodings

    tmp_path, data = good_file
    reader = DataFileReader(ObjectStore(str(tmp_path)), "f.lance")
    cm = reader.column_metadata(0)
    e = epb.ArrayEncoding()
    e.constant.value = b"\x01"
    cm.pages[0].encoding.direct.encoding = any_pb2.Any(
        type_url=encodings.ARRAY_ENCODING_URL, value=e.SerializeToString()
    ).SerializeToString()
    with pytest.raises(UnsupportedFeatureError, match="'constant'"):
        _open(tmp_path, _rebuild(data, {0: cm.SerializeToString()}))
    assert "constant" not in encodings.DECODERS and "binary" in encodings.DECODERS
    # zstd buffers: with the u64 length prefix (what 2.0 writes) and as a raw frame
    payload = b"lance " * 1000
    ctx = encodings.PageBuffers("x", [])
    comp = epb.Compression(scheme="zstd")
    prefixed = pa.py_buffer(encodings.compress_zstd(payload, None))
    raw = pa.py_buffer(pa.Codec("zstd").compress(payload, asbytes=True))
    assert encodings.decompress(ctx, prefixed, comp).to_pybytes() == payload
    assert encodings.decompress(ctx, raw, comp).to_pybytes() == payload
    with pytest.raises(UnsupportedFeatureError, match="lz4"):
        encodings.decompress(ctx, raw, epb.Compression(scheme="lz4"))
    with pytest.raises(CorruptFileError):
        encodings.decompress(ctx, pa.py_buffer(prefixed.to_pybytes()[:20]), comp)
