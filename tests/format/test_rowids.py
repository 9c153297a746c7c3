"""Row id and version sequences: unit, property and pylance-oracle tests (docs/FORMAT.md §8)."""

import glob
import os
import struct

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lance_ops.format._proto import rowids_pb2, table_pb2
from lance_ops.format.errors import CorruptFileError
from lance_ops.format.table import rowids
from lance_ops.format.table.rowids import (
    constant_versions,
    decode_row_ids,
    decode_versions,
    encode_row_id_segments,
    encode_row_ids,
    encode_segment,
    encode_versions,
    encode_versions_like,
    segment_len,
)

U64 = np.uint64


def u64(values) -> np.ndarray:
    return np.asarray(values, dtype=np.uint64)


def seq_of(*segments: rowids_pb2.U64Segment) -> bytes:
    s = rowids_pb2.RowIdSequence()
    s.segments.extend(segments)
    return s.SerializeToString()


def seg_from_text(text: str) -> rowids_pb2.U64Segment:
    from google.protobuf import text_format

    return text_format.Parse(text, rowids_pb2.U64Segment())


# ---------------------------------------------------------------- a model of pylance's choice


def model_segment(values: list[int]) -> tuple[str, object]:
    """Plain-Python restatement of U64Segment::from_slice (segment.rs), for small inputs."""

    def arr(vs: list[int]) -> tuple:
        if not vs:
            return ("u64", tuple(vs))
        lo, hi = min(vs), max(vs)
        if hi - lo <= 0xFFFF:
            return ("u16", lo, tuple(v - lo for v in vs))
        if hi - lo <= 0xFFFFFFFF:
            return ("u32", lo, tuple(v - lo for v in vs))
        return ("u64", tuple(vs))

    if not values:
        return ("range", (0, 0))
    strictly_sorted = all(b > a for a, b in zip(values, values[1:], strict=False))
    if not strictly_sorted:
        return ("array", arr(values))
    lo, hi, n = values[0], values[-1], len(values)
    if hi == 2**64 - 1:  # pylance's `max + 1` would overflow; only an array can hold it
        return ("sorted", arr(values))
    total = hi - lo + 1
    holes = total - n
    if holes == 0:
        return ("range", (lo, hi + 1))
    sizes = [24 + 4 * holes, 24 + -(-total // 8), 24 + 2 * n]
    best = min(sizes)
    present = set(values)
    if best == sizes[0]:
        return ("holes", (lo, hi + 1, arr([v for v in range(lo, hi + 1) if v not in present])))
    if best == sizes[1]:
        bits = bytearray(-(-total // 8))
        for v in values:
            bits[(v - lo) // 8] |= 1 << ((v - lo) % 8)
        return ("bitmap", (lo, hi + 1, bytes(bits)))
    return ("sorted", arr(values))


def describe(seg: rowids_pb2.U64Segment) -> tuple[str, object]:
    def arr(a: rowids_pb2.EncodedU64Array) -> tuple:
        kind = a.WhichOneof("array")
        if kind == "u16_array":
            return ("u16", a.u16_array.base, tuple(np.frombuffer(a.u16_array.offsets, "<u2").tolist()))
        if kind == "u32_array":
            return ("u32", a.u32_array.base, tuple(np.frombuffer(a.u32_array.offsets, "<u4").tolist()))
        return ("u64", tuple(np.frombuffer(a.u64_array.values, "<u8").tolist()))

    kind = seg.WhichOneof("segment")
    if kind == "range":
        return ("range", (seg.range.start, seg.range.end))
    if kind == "range_with_holes":
        r = seg.range_with_holes
        return ("holes", (r.start, r.end, arr(r.holes)))
    if kind == "range_with_bitmap":
        r = seg.range_with_bitmap
        return ("bitmap", (r.start, r.end, r.bitmap))
    if kind == "sorted_array":
        return ("sorted", arr(seg.sorted_array))
    return ("array", arr(seg.array))


# ---------------------------------------------------------------- exact examples (§1.6, §8)


def test_bitmap_is_lsb_first():
    seg = seg_from_text('range_with_bitmap { start: 0 end: 10 bitmap: "\\331\\003" }')
    assert seg.range_with_bitmap.bitmap == b"\xd9\x03"
    assert decode_row_ids(seq_of(seg)).tolist() == [0, 3, 4, 6, 7, 8, 9]
    assert encode_segment(u64([0, 3, 4, 6, 7, 8, 9])) == seg
    assert segment_len(seg) == 7


def test_observed_pylance_choices():
    seg = encode_segment(u64([5, 12]))
    assert seg.WhichOneof("segment") == "range_with_bitmap"
    assert (seg.range_with_bitmap.start, seg.range_with_bitmap.end, seg.range_with_bitmap.bitmap) == (
        5,
        13,
        b"\x81",
    )
    seg = encode_segment(u64([11, 15]))
    assert seg.range_with_bitmap.bitmap == b"\x11"

    rng = np.random.default_rng(1)
    keep = np.sort(rng.choice(1000, 980, replace=False)).astype(U64)
    seg = encode_segment(keep)
    assert seg.WhichOneof("segment") == "range_with_holes"
    assert seg.range_with_holes.holes.WhichOneof("array") == "u16_array"
    assert np.array_equal(decode_row_ids(seq_of(seg)), keep)

    keep = np.sort(rng.choice(np.arange(1000, 2000), 600, replace=False)).astype(U64)
    assert encode_segment(keep).WhichOneof("segment") == "range_with_bitmap"

    sparse = u64([3, 1000, 2000, 3000, 9000, 20000, 30000, 40000, 50000, 60000])
    seg = encode_segment(sparse)
    assert seg.WhichOneof("segment") == "sorted_array"
    assert seg.sorted_array.u16_array.base == 3

    assert encode_segment(u64([9, 3, 5])).WhichOneof("segment") == "array"
    assert encode_segment(u64([4, 5, 6])) == seg_from_text("range { start: 4 end: 7 }")


def test_new_fragment_bytes_match_pylance():
    # v1 of the §7.5 manifest: row ids range{end:10}, versions runs{span{range{end:10}} version:1}
    assert encode_row_ids(np.arange(10, dtype=U64)) == b"\n\x04\n\x02\x10\n"
    assert constant_versions(10, 1) == b"\n\x08\n\x04\n\x02\x10\n\x10\x01"
    assert encode_versions(np.full(10, 1, dtype=U64)) == constant_versions(10, 1)
    assert constant_versions(0, 3) == b""


def test_empty():
    assert encode_segment(u64([])) == seg_from_text("range {}")
    data = encode_row_ids(u64([]))
    assert data == b"\n\x02\n\x00"  # the oneof is present even with default fields
    assert decode_row_ids(data).dtype == U64
    assert decode_row_ids(data).size == 0
    assert decode_row_ids(b"", expected_len=0).size == 0
    assert encode_row_id_segments([u64([]), u64([])]) == b""
    assert encode_versions(u64([])) == b""
    assert decode_versions(b"", expected_len=0).size == 0


def test_tie_breaks_favour_holes_then_bitmap():
    # 8 values spread over 24 slots: holes 24+64=88, bitmap 24+3=27, sorted 24+16=40 -> bitmap
    assert encode_segment(u64(range(0, 24, 3))).WhichOneof("segment") == "range_with_bitmap"
    # 2 holes in 16 slots -> holes 32, bitmap 26, sorted 52 -> bitmap; 1 hole over 8 slots: 28 vs 25
    # holes == bitmap tie: 4*h == ceil(total/8): total=32, h=1 -> 28 vs 28 -> holes
    vals = [v for v in range(32) if v != 17]
    assert encode_segment(u64(vals)).WhichOneof("segment") == "range_with_holes"
    # bitmap == sorted tie: ceil(total/8) == 2n, holes bigger: n=2, total=32 -> 28 == 28 (holes 144)
    assert encode_segment(u64([0, 31])).WhichOneof("segment") == "range_with_bitmap"
    for vals in ([v for v in range(32) if v != 17], [0, 31], list(range(0, 24, 3))):
        assert describe(encode_segment(u64(vals))) == model_segment(vals)


@pytest.mark.parametrize(
    "values, kind",
    [
        ([10, 10 + 0xFFFF], "u16_array"),
        ([10, 10 + 0x10000], "u32_array"),
        ([7, 7 + 0xFFFFFFFF], "u32_array"),
        ([7, 7 + 0x100000000], "u64_array"),
        ([2**64 - 2, 0], "u64_array"),
        ([2**63 + 50000, 2**63], "u16_array"),
    ],
)
def test_encoded_array_width_boundaries(values, kind):
    for ordered in (values, sorted(values)):
        seg = encode_segment(u64(ordered))
        which = seg.WhichOneof("segment")
        assert which in ("array", "sorted_array")
        assert getattr(seg, which).WhichOneof("array") == kind
        assert decode_row_ids(seq_of(seg)).tolist() == ordered


def test_u64_max_is_representable():
    vals = u64([2**64 - 3, 2**64 - 2, 2**64 - 1])
    assert decode_row_ids(encode_row_ids(vals)).tolist() == vals.tolist()
    vals = u64([2**64 - 4, 2**64 - 3, 2**64 - 2])
    assert encode_segment(vals).WhichOneof("segment") == "range"


def test_all_five_segment_kinds_and_three_array_kinds_decode():
    # the fixture of lance's serde.rs test, decoded in order
    segs = [
        seg_from_text("range { start: 0 end: 20 }"),
        seg_from_text("range { start: 30 end: 100 }"),
        rowids_pb2.U64Segment(),
        rowids_pb2.U64Segment(),
        seg_from_text("sorted_array { u16_array { base: 200 offsets: '\\001\\000\\002\\000\\003\\000' } }"),
        rowids_pb2.U64Segment(),
        rowids_pb2.U64Segment(),
    ]
    segs[2].range_with_holes.start, segs[2].range_with_holes.end = 100, 200
    segs[2].range_with_holes.holes.u64_array.values = u64([104, 108, 150]).astype("<u8").tobytes()
    segs[3].range_with_bitmap.start, segs[3].range_with_bitmap.end = 200, 300
    segs[3].range_with_bitmap.bitmap = bytes(13)  # all absent
    segs[5].array.u32_array.base = 1 << 40
    segs[5].array.u32_array.offsets = np.array([70000, 0, 5], "<u4").tobytes()
    segs[6].array.u64_array.values = u64([3, 2, 1]).astype("<u8").tobytes()
    expected = (
        list(range(20))
        + list(range(30, 100))
        + [v for v in range(100, 200) if v not in (104, 108, 150)]
        + [201, 202, 203]
        + [(1 << 40) + 70000, 1 << 40, (1 << 40) + 5]
        + [3, 2, 1]
    )
    data = seq_of(*segs)
    assert decode_row_ids(data).tolist() == expected
    assert decode_row_ids(data, expected_len=len(expected)).tolist() == expected
    assert [segment_len(s) for s in segs] == [20, 70, 97, 0, 3, 3, 3]


def test_encode_row_id_segments_one_per_part():
    parts = [u64([0, 3, 4, 6, 7, 8, 9]), u64([]), u64([10, 11, 13, 14, 16, 17, 18, 19]), u64([5, 12])]
    data = encode_row_id_segments(parts)
    seq = rowids_pb2.RowIdSequence.FromString(data)
    assert [s.WhichOneof("segment") for s in seq.segments] == ["range_with_bitmap"] * 3
    assert seq.segments[1].range_with_bitmap.bitmap == b"\xdb\x03"
    assert decode_row_ids(data, expected_len=17).tolist() == np.concatenate(parts).tolist()


def test_encode_rejects_bad_arguments():
    with pytest.raises(ValueError):
        encode_segment(np.array([1, -1]))
    with pytest.raises(TypeError):
        encode_segment(np.array([1.5]))
    with pytest.raises(ValueError):
        encode_segment(np.zeros((2, 2), dtype=U64))
    assert encode_segment(np.array([3, 4], dtype=np.int32)) == seg_from_text("range { start: 3 end: 5 }")


# ---------------------------------------------------------------- property tests

sorted_ids = st.builds(
    lambda base, vals: sorted({base + v for v in vals}),
    st.sampled_from([0, 1, 2**16 - 3, 2**32 - 5, 2**40, 2**63, 2**64 - 70000]),
    st.lists(st.integers(0, 66000), max_size=300),
)
dense_ids = st.builds(
    lambda base, n, drop: [base + i for i in range(n) if i not in set(drop)],
    st.sampled_from([0, 7, 2**32 - 10, 2**62]),
    st.integers(0, 3000),
    st.lists(st.integers(0, 3000), max_size=400),
)
unsorted_ids = st.lists(st.integers(0, 2**64 - 1), max_size=50) | st.lists(
    st.integers(2**32 - 40, 2**32 + 70000), max_size=50
)


@settings(max_examples=150, deadline=None)
@given(st.one_of(sorted_ids, dense_ids, unsorted_ids))
def test_round_trip_and_choice_match_model(values):
    arr = u64(values) if values else u64([])
    seg = encode_segment(arr)
    assert describe(seg) == model_segment(values)
    assert segment_len(seg) == len(values)
    data = encode_row_ids(arr)
    out = decode_row_ids(data, expected_len=len(values))
    assert out.dtype == U64
    assert out.tolist() == list(values)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(sorted_ids, dense_ids, unsorted_ids), max_size=5))
def test_segments_round_trip(parts):
    arrays = [u64(p) if p else u64([]) for p in parts]
    flat = [v for p in parts for v in p]
    data = encode_row_id_segments(arrays)
    assert len(rowids_pb2.RowIdSequence.FromString(data).segments) == sum(1 for p in parts if p)
    assert decode_row_ids(data, expected_len=len(flat)).tolist() == flat


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from([1, 2, 3, 2**40, 2**64 - 1]), max_size=60), st.data())
def test_versions_round_trip(versions, data):
    v = u64(versions) if versions else u64([])
    enc = encode_versions(v)
    assert decode_versions(enc, expected_len=len(versions)).tolist() == versions
    runs = rowids_pb2.RowDatasetVersionSequence.FromString(enc).runs
    # one run per maximal block of equal values, spans = positions
    assert len(runs) == sum(1 for i in range(len(versions)) if i == 0 or versions[i] != versions[i - 1])
    pos = 0
    for r in runs:
        assert (r.span.range.start, r.span.range.end) == (pos, pos + segment_len(r.span))
        pos = r.span.range.end
    cuts = sorted(data.draw(st.lists(st.integers(0, len(versions)), max_size=4)))
    lengths = [b - a for a, b in zip([0, *cuts], [*cuts, len(versions)], strict=True)]
    enc2 = encode_versions_like(v, lengths)
    assert decode_versions(enc2, expected_len=len(versions)).tolist() == versions
    assert len(rowids_pb2.RowDatasetVersionSequence.FromString(enc2).runs) >= len(runs)


def test_versions_like_splits_at_part_boundaries():
    enc = encode_versions_like(u64([1, 1, 1, 2, 2, 2]), [2, 0, 4])
    runs = rowids_pb2.RowDatasetVersionSequence.FromString(enc).runs
    assert [(r.span.range.start, r.span.range.end, r.version) for r in runs] == [
        (0, 2, 1),
        (2, 3, 1),
        (3, 6, 2),
    ]
    with pytest.raises(ValueError):
        encode_versions_like(u64([1, 2]), [1])


def test_versions_decode_by_run_length_only():
    # stale spans as pylance leaves them after compaction: only len(span) counts
    s = rowids_pb2.RowDatasetVersionSequence()
    r = s.runs.add(version=1)
    r.span.range_with_bitmap.start, r.span.range_with_bitmap.end = 1000, 1010
    r.span.range_with_bitmap.bitmap = b"\xd9\x03"  # 7 set
    r = s.runs.add(version=2)
    r.span.range.start, r.span.range.end = 777, 779  # garbage start, length 2
    r = s.runs.add(version=4)
    r.span.array.u64_array.values = u64([99, 5, 2**63]).astype("<u8").tobytes()  # unsorted, length 3
    r = s.runs.add(version=5)
    r.span.range_with_holes.start, r.span.range_with_holes.end = 50, 60
    r.span.range_with_holes.holes.u16_array.base = 9999  # holes outside the range: still 2 holes
    r.span.range_with_holes.holes.u16_array.offsets = b"\x05\x00\x01\x00"
    r = s.runs.add(version=6)
    r.span.range.SetInParent()  # empty run
    out = decode_versions(s.SerializeToString(), expected_len=20)
    assert out.tolist() == [1] * 7 + [2] * 2 + [4] * 3 + [5] * 8


# ---------------------------------------------------------------- hostile input


def _huge_range(start: int = 0, end: int = 2**60) -> bytes:
    seg = rowids_pb2.U64Segment()
    seg.range.start, seg.range.end = start, end
    return seq_of(seg)


@pytest.mark.parametrize(
    "data", [b"\xff\xff\xff", b"\n\x05\n\x02\x10", b"\n\x04\x0a\x02\x10\x0a\x99", b"garbage bytes!"]
)
def test_garbage_bytes(data):
    with pytest.raises(CorruptFileError, match="frag7"):
        decode_row_ids(data, path="frag7")
    with pytest.raises(CorruptFileError, match="frag7"):
        decode_versions(data, path="frag7")


def test_huge_claims_are_rejected_before_allocating():
    with pytest.raises(CorruptFileError, match="10 physical rows"):
        decode_row_ids(_huge_range(), expected_len=10, path="m")
    with pytest.raises(CorruptFileError):
        decode_row_ids(_huge_range())  # over the 2**32-rows-per-fragment limit
    seg = rowids_pb2.U64Segment()
    seg.range_with_holes.start, seg.range_with_holes.end = 0, 2**62
    seg.range_with_holes.holes.u16_array.offsets = b"\x00\x00"
    with pytest.raises(CorruptFileError):
        decode_row_ids(seq_of(seg), expected_len=10)
    runs = rowids_pb2.RowDatasetVersionSequence()
    runs.runs.add(version=1).span.range.end = 2**60
    with pytest.raises(CorruptFileError):
        decode_versions(runs.SerializeToString(), expected_len=10)
    with pytest.raises(CorruptFileError):
        decode_versions(runs.SerializeToString())


def _bad_segments() -> list[tuple[str, rowids_pb2.U64Segment]]:
    out = []
    out.append(("no segment type", rowids_pb2.U64Segment()))
    s = rowids_pb2.U64Segment()
    s.range.start, s.range.end = 10, 5
    out.append(("end below start", s))
    s = rowids_pb2.U64Segment()
    s.range_with_bitmap.end = 10
    s.range_with_bitmap.bitmap = b"\xff"
    out.append(("short bitmap", s))
    s = rowids_pb2.U64Segment()
    s.range_with_bitmap.end = 10
    s.range_with_bitmap.bitmap = b"\xff\x07"
    out.append(("bits past the end", s))
    s = rowids_pb2.U64Segment()
    s.range_with_holes.end = 10
    out.append(("no holes array", s))
    s = rowids_pb2.U64Segment()
    s.range_with_holes.end = 10
    s.range_with_holes.holes.u16_array.base = 20
    s.range_with_holes.holes.u16_array.offsets = b"\x00\x00"
    out.append(("hole outside range", s))
    s = rowids_pb2.U64Segment()
    s.range_with_holes.end = 10
    s.range_with_holes.holes.u16_array.offsets = b"\x05\x00\x02\x00"
    out.append(("unsorted holes", s))
    s = rowids_pb2.U64Segment()
    s.range_with_holes.end = 2
    s.range_with_holes.holes.u16_array.offsets = b"\x00\x00\x01\x00\x01\x00"
    out.append(("more holes than range", s))
    s = rowids_pb2.U64Segment()
    s.array.u16_array.offsets = b"\x00\x00\x01"
    out.append(("odd u16 bytes", s))
    s = rowids_pb2.U64Segment()
    s.array.u32_array.offsets = b"\x00\x00\x01"
    out.append(("odd u32 bytes", s))
    s = rowids_pb2.U64Segment()
    s.array.u64_array.values = b"\x00" * 9
    out.append(("odd u64 bytes", s))
    s = rowids_pb2.U64Segment()
    s.array.u16_array.base = 2**64 - 2
    s.array.u16_array.offsets = b"\x05\x00"
    out.append(("base overflow", s))
    s = rowids_pb2.U64Segment()
    s.sorted_array.SetInParent()
    out.append(("array without type", s))
    s = rowids_pb2.U64Segment()
    s.sorted_array.u16_array.offsets = b"\x05\x00\x02\x00"
    out.append(("unsorted sorted_array", s))
    return out


@pytest.mark.parametrize("name, seg", _bad_segments(), ids=[n for n, _ in _bad_segments()])
def test_malformed_segments(name, seg):
    with pytest.raises(CorruptFileError, match="some/path") as info:
        decode_row_ids(seq_of(seg), path="some/path")
    assert info.value.path == "some/path"


def test_length_mismatch_and_missing_span():
    with pytest.raises(CorruptFileError, match="holds 10 ids"):
        decode_row_ids(encode_row_ids(np.arange(10)), expected_len=11)
    with pytest.raises(CorruptFileError, match="covers 10 rows"):
        decode_versions(constant_versions(10, 1), expected_len=9)
    s = rowids_pb2.RowDatasetVersionSequence()
    s.runs.add(version=3)
    with pytest.raises(CorruptFileError, match="no span"):
        decode_versions(s.SerializeToString())


def test_module_does_not_import_lance():
    import ast

    tree = ast.parse(open(rowids.__file__).read())
    names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {(n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert "lance" not in names


# ---------------------------------------------------------------- pylance as the oracle


def read_manifest(path: str) -> table_pb2.Manifest:
    """Parse a pylance manifest file: ``...[u32 len][Manifest]`` + ``<q pos><h 0><h 2>LANC``."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[-4:] == b"LANC"
    (pos,) = struct.unpack_from("<q", data, len(data) - 16)
    (length,) = struct.unpack_from("<I", data, pos)
    body = data[pos + 4 : pos + 4 + length]
    assert pos + 4 + length == len(data) - 16
    return table_pb2.Manifest.FromString(body)


def manifests(root: str) -> dict[int, table_pb2.Manifest]:
    out = {}
    for p in glob.glob(os.path.join(root, "_versions", "*.manifest")):
        m = read_manifest(p)
        out[m.version] = m
    return out


@pytest.fixture(scope="module")
def lifecycle(tmp_path_factory):
    """create, append, delete, update, big append + big delete, compact — with stable row ids."""
    lance = pytest.importorskip("lance")
    root = str(tmp_path_factory.mktemp("rowids") / "ds")

    def tbl(lo, hi):
        return pa.table({"id": pa.array(range(lo, hi), pa.int64()), "val": [str(i) for i in range(lo, hi)]})

    ds = lance.write_dataset(tbl(0, 10), root, data_storage_version="2.0", enable_stable_row_ids=True)
    ds = lance.write_dataset(tbl(10, 20), root, mode="append")
    ds.delete("id < 3")
    ds.update({"val": "'x'"}, where="id = 5")
    ds.update({"val": "'y'"}, where="id = 12 OR id = 15")
    ds = lance.write_dataset(tbl(20, 12020), root, mode="append")
    ds.delete("(id >= 20 AND id < 6020) OR id = 7000 OR id = 8000")
    ds.optimize.compact_files()
    return lance, root


def test_pylance_sequences_decode(lifecycle):
    lance, root = lifecycle
    ms = manifests(root)
    assert len(ms) >= 9
    seen: set[str] = set()
    for version, m in sorted(ms.items()):
        ds = lance.dataset(root, version=version)
        t = ds.to_table(
            with_row_id=True,
            columns=["id", "_rowaddr", "_row_created_at_version", "_row_last_updated_at_version"],
        )
        got_ids, got_addr, got_created, got_updated = [], [], [], []
        for frag in m.fragments:
            n = frag.physical_rows
            ids = decode_row_ids(frag.inline_row_ids, expected_len=n, path=f"v{version}/frag{frag.id}")
            created = decode_versions(frag.inline_created_at_versions, expected_len=n)
            updated = decode_versions(frag.inline_last_updated_at_versions, expected_len=n)
            seen |= {
                s.WhichOneof("segment")
                for s in rowids_pb2.RowIdSequence.FromString(frag.inline_row_ids).segments
            }
            live = np.ones(n, dtype=bool)
            if frag.HasField("deletion_file"):
                from lance_ops.format.io.object_store import ObjectStore
                from lance_ops.format.table.deletion import read_deletion_file

                live[read_deletion_file(ObjectStore(root), frag.id, frag.deletion_file, physical_rows=n)] = (
                    False
                )
            got_ids.append(ids[live])
            got_addr.append((np.uint64(frag.id) << np.uint64(32)) + np.flatnonzero(live).astype(U64))
            got_created.append(created[live])
            got_updated.append(updated[live])
        assert np.concatenate(got_ids).tolist() == t["_rowid"].to_pylist(), version
        assert np.concatenate(got_addr).tolist() == t["_rowaddr"].to_pylist(), version
        assert np.concatenate(got_created).tolist() == t["_row_created_at_version"].to_pylist(), version
        assert np.concatenate(got_updated).tolist() == t["_row_last_updated_at_version"].to_pylist(), version
    assert {"range", "range_with_bitmap", "range_with_holes"} <= seen


def test_our_encodings_are_pylances_bytes(lifecycle):
    """Every segment pylance wrote is what encode_segment makes of its values."""
    _, root = lifecycle
    for version, m in sorted(manifests(root).items()):
        for frag in m.fragments:
            seq = rowids_pb2.RowIdSequence.FromString(frag.inline_row_ids)
            parts = [decode_row_ids(seq_of(s)) for s in seq.segments]
            for s, part in zip(seq.segments, parts, strict=True):
                assert encode_segment(part) == s, (version, frag.id, s)
            assert encode_row_id_segments(parts) == frag.inline_row_ids
            n = frag.physical_rows
            if len(seq.segments) == 1:
                assert encode_row_ids(parts[0]) == frag.inline_row_ids
            # fragments pylance created (not rewritten by compaction) carry positional spans
            for field in ("inline_created_at_versions", "inline_last_updated_at_versions"):
                raw = getattr(frag, field)
                v = decode_versions(raw, expected_len=n)
                if len(seq.segments) == 1:
                    assert encode_versions(v) == raw, (version, frag.id, field)


def test_compaction_output_shape(lifecycle):
    _, root = lifecycle
    ms = manifests(root)
    last = ms[max(ms)]
    assert len(last.fragments) == 1
    frag = last.fragments[0]
    seq = rowids_pb2.RowIdSequence.FromString(frag.inline_row_ids)
    # one segment per old fragment, in old-fragment order
    assert len(seq.segments) == 5
    created = rowids_pb2.RowDatasetVersionSequence.FromString(frag.inline_created_at_versions)
    lens = [segment_len(r.span) for r in created.runs]
    v = decode_versions(frag.inline_created_at_versions, expected_len=frag.physical_rows)
    # runs are not merged across old fragments, so ours with part boundaries decodes the same
    seg_lens = [segment_len(s) for s in seq.segments]
    ours = encode_versions_like(v, seg_lens)
    assert decode_versions(ours, expected_len=frag.physical_rows).tolist() == v.tolist()
    assert sum(lens) == frag.physical_rows


_FUZZ_SOURCES = [
    encode_row_id_segments([np.arange(10), u64([5, 12]), u64([9, 3, 1 << 40]), u64([1, 3, 700, 100000])]),
    encode_row_ids(np.sort(np.random.default_rng(3).choice(5000, 4000, replace=False))),
    encode_versions(u64([1, 1, 2, 3, 3])),
]


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(range(len(_FUZZ_SOURCES))),
    st.lists(st.tuples(st.integers(0, 2**31), st.integers(0, 255)), min_size=1, max_size=3),
)
def test_fuzzed_bytes_fail_cleanly(which, edits):
    data = bytearray(_FUZZ_SOURCES[which])
    for pos, val in edits:
        data[pos % len(data)] = val
    for decode in (decode_row_ids, decode_versions):
        try:
            out = decode(bytes(data))
        except CorruptFileError:
            continue
        assert out.dtype == U64
