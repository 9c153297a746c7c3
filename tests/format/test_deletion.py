"""Deletion files: round trips, hostile inputs, and pylance 14 in both directions (docs/FORMAT.md §11)."""

import glob
import os
import shutil
import struct

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyroaring import BitMap

from lance_ops.format._proto import table_pb2
from lance_ops.format.errors import CorruptFileError, UnsupportedFeatureError
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.table.deletion import (
    DELETION_BITMAP_THRESHOLD,
    DELETION_SCHEMA,
    deletion_file_path,
    deletion_mask,
    read_deletion_file,
    write_deletion_file,
)

ARROW = table_pb2.DeletionFile.ARROW_ARRAY
BITMAP = table_pb2.DeletionFile.BITMAP


@pytest.fixture
def store(tmp_path):
    return ObjectStore(str(tmp_path / "ds"))


def df_of(file_type=ARROW, read_version=3, id=42, num_deleted_rows=0):
    return table_pb2.DeletionFile(
        file_type=file_type, read_version=read_version, id=id, num_deleted_rows=num_deleted_rows
    )


def arrow_file(*batches, schema=DELETION_SCHEMA, stream=False, compression=None) -> bytes:
    sink = pa.BufferOutputStream()
    opts = ipc.IpcWriteOptions(compression=compression)
    make = ipc.new_stream if stream else ipc.new_file
    with make(sink, schema, options=opts) as w:
        for b in batches:
            w.write_batch(b)
    return sink.getvalue().to_pybytes()


def batch(values, schema=DELETION_SCHEMA):
    return pa.record_batch([pa.array(values, type=schema.field(0).type)], schema=schema)


# ---------------------------------------------------------------- naming


def test_deletion_file_path():
    assert deletion_file_path(7, df_of(ARROW, 3, 2**64 - 1)) == f"_deletions/7-3-{2**64 - 1}.arrow"
    assert deletion_file_path(0, df_of(BITMAP, 12, 5)) == "_deletions/0-12-5.bin"
    with pytest.raises(UnsupportedFeatureError):
        deletion_file_path(0, df_of(file_type=2))
    with_base = df_of()
    with_base.base_id = 1
    with pytest.raises(UnsupportedFeatureError):
        deletion_file_path(0, with_base)


# ---------------------------------------------------------------- round trips


@pytest.mark.parametrize("n", [1, 17, DELETION_BITMAP_THRESHOLD - 1, DELETION_BITMAP_THRESHOLD, 70000])
def test_write_read_round_trip(store, n):
    rng = np.random.default_rng(n)
    offsets = rng.choice(200000, n, replace=False).astype(np.int64)
    df = write_deletion_file(store, 4, 9, offsets)
    assert df.read_version == 9
    assert df.num_deleted_rows == n
    assert df.file_type == (ARROW if n < DELETION_BITMAP_THRESHOLD else BITMAP)
    assert 0 <= df.id < 2**64
    rel = deletion_file_path(4, df)
    assert rel == f"_deletions/4-9-{df.id}.{'arrow' if n < 5000 else 'bin'}"
    assert store.exists(rel)
    got = read_deletion_file(store, 4, df, physical_rows=200000)
    assert got.dtype == np.uint32
    assert np.array_equal(got, np.sort(offsets).astype(np.uint32))


def test_written_arrow_file_shape(store):
    df = write_deletion_file(store, 1, 2, np.array([9, 3, 3, 0, 2**32 - 1]))
    assert df.num_deleted_rows == 4
    data = store.read(deletion_file_path(1, df))
    assert data[:6] == b"ARROW1" and data[-6:] == b"ARROW1"  # IPC file, not stream
    reader = ipc.open_file(pa.py_buffer(data))
    assert reader.num_record_batches == 1
    assert reader.schema.equals(
        pa.schema([pa.field("row_id", pa.uint32(), nullable=False)]), check_metadata=True
    )
    assert reader.schema.metadata is None and reader.schema.field(0).metadata is None
    assert reader.get_batch(0).column(0).to_pylist() == [0, 3, 9, 2**32 - 1]


def test_written_bitmap_is_portable_roaring(store):
    offsets = np.arange(0, 20000, 2)
    df = write_deletion_file(store, 1, 2, offsets)
    data = store.read(deletion_file_path(1, df))
    assert struct.unpack_from("<I", data)[0] in (12346, 12347)  # portable 32-bit roaring cookie
    assert list(BitMap.deserialize(data)) == offsets.tolist()


def test_ids_are_random(store):
    ids = {write_deletion_file(store, 0, 1, np.array([1])).id for _ in range(8)}
    assert len(ids) == 8


def test_write_rejects_bad_offsets(store):
    with pytest.raises(ValueError):
        write_deletion_file(store, 0, 1, np.array([], dtype=np.uint32))
    with pytest.raises(ValueError):
        write_deletion_file(store, 0, 1, np.array([-1, 2]))
    with pytest.raises(ValueError):
        write_deletion_file(store, 0, 1, np.array([2**32]))
    with pytest.raises(TypeError):
        write_deletion_file(store, 0, 1, np.array([1.0]))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=200), st.booleans())
def test_round_trip_property(tmp_path_factory, values, as_bitmap):
    store = ObjectStore(str(tmp_path_factory.mktemp("prop")))
    df = write_deletion_file(store, 3, 5, np.array(values, dtype=np.uint64))
    assert read_deletion_file(store, 3, df).tolist() == sorted(set(values))
    if as_bitmap:  # a small set stored as a bitmap reads the same (pylance reads by file_type)
        bm = df_of(BITMAP, 5, df.id + 1 if df.id < 2**64 - 1 else 0, len(set(values)))
        store.put(deletion_file_path(3, bm), BitMap(values).serialize())
        assert read_deletion_file(store, 3, bm).tolist() == sorted(set(values))


def test_run_containers_and_unknown_count(store):
    bm = BitMap(range(100, 9000))
    bm.run_optimize()
    df = df_of(BITMAP, num_deleted_rows=0)  # 0 = unknown, as pylance treats it
    store.put(deletion_file_path(2, df), bm.serialize())
    assert read_deletion_file(store, 2, df).tolist() == list(range(100, 9000))
    # duplicates in an arrow file collapse like pylance's HashSet
    df = df_of(ARROW, num_deleted_rows=2)
    store.put(deletion_file_path(2, df), arrow_file(batch([5, 1, 5])))
    assert read_deletion_file(store, 2, df).tolist() == [1, 5]
    # an uncompressed file is as good as a zstd one
    store.put(deletion_file_path(2, df), arrow_file(batch([5, 1])))
    assert read_deletion_file(store, 2, df).tolist() == [1, 5]


def test_deletion_mask():
    assert deletion_mask(np.array([0, 3], dtype=np.uint32), 5).tolist() == [False, True, True, False, True]
    assert deletion_mask(np.array([], dtype=np.uint32), 3).tolist() == [True] * 3
    with pytest.raises(ValueError):
        deletion_mask(np.array([5], dtype=np.uint32), 5)


# ---------------------------------------------------------------- hostile files


def _good_arrow() -> bytes:
    return arrow_file(batch([1, 2, 3]), compression="zstd")


HOSTILE_ARROW = {
    "garbage": b"this is not an arrow file at all",
    "empty": b"",
    "truncated": _good_arrow()[:-10],
    "truncated body": _good_arrow()[:40] + _good_arrow()[-40:],
    "stream format": arrow_file(batch([1, 2, 3]), stream=True),
    "nullable field": arrow_file(
        batch([1, 2, 3], pa.schema([pa.field("row_id", pa.uint32())])),
        schema=pa.schema([pa.field("row_id", pa.uint32())]),
    ),
    "other name": arrow_file(
        batch([1, 2, 3], pa.schema([pa.field("rowid", pa.uint32(), False)])),
        schema=pa.schema([pa.field("rowid", pa.uint32(), False)]),
    ),
    "other type": arrow_file(
        batch([1, 2, 3], pa.schema([pa.field("row_id", pa.uint64(), False)])),
        schema=pa.schema([pa.field("row_id", pa.uint64(), False)]),
    ),
    "schema metadata": arrow_file(
        batch([1, 2, 3], DELETION_SCHEMA.with_metadata({"k": "v"})),
        schema=DELETION_SCHEMA.with_metadata({"k": "v"}),
    ),
    "field metadata": arrow_file(
        batch([1, 2, 3], pa.schema([pa.field("row_id", pa.uint32(), False, metadata={"k": "v"})])),
        schema=pa.schema([pa.field("row_id", pa.uint32(), False, metadata={"k": "v"})]),
    ),
    "two columns": arrow_file(
        pa.record_batch(
            [pa.array([1, 2, 3], pa.uint32()), pa.array([1, 2, 3], pa.uint32())],
            schema=pa.schema([pa.field("row_id", pa.uint32(), False), pa.field("x", pa.uint32(), False)]),
        ),
        schema=pa.schema([pa.field("row_id", pa.uint32(), False), pa.field("x", pa.uint32(), False)]),
    ),
    "two batches": arrow_file(batch([1, 2]), batch([3])),
    "no batch": arrow_file(),
    "nulls": arrow_file(pa.record_batch([pa.array([1, None, 3], pa.uint32())], schema=DELETION_SCHEMA)),
}


@pytest.mark.parametrize("name", sorted(HOSTILE_ARROW))
def test_hostile_arrow_files(store, name):
    df = df_of(ARROW, num_deleted_rows=3)
    rel = deletion_file_path(6, df)
    store.put(rel, HOSTILE_ARROW[name])
    with pytest.raises(CorruptFileError) as info:
        read_deletion_file(store, 6, df)
    assert rel in str(info.value) and rel in info.value.path


@pytest.mark.parametrize(
    "data",
    [b"", b"garbage!", BitMap(range(0, 100000, 3)).serialize()[:-5], b"\x3a\x30\x00\x00\xff\xff\xff\x7f"],
    ids=["empty", "garbage", "truncated", "huge container count"],
)
def test_hostile_bitmap_files(store, data):
    df = df_of(BITMAP)
    rel = deletion_file_path(6, df)
    store.put(rel, data)
    with pytest.raises(CorruptFileError, match=rel):
        read_deletion_file(store, 6, df)


def test_arrow_file_labelled_bitmap(store):
    df = df_of(BITMAP)
    store.put(deletion_file_path(1, df), _good_arrow())
    with pytest.raises(CorruptFileError):
        read_deletion_file(store, 1, df)


def test_count_mismatch_and_out_of_range(store):
    df = write_deletion_file(store, 2, 1, np.array([1, 5, 9]))
    rel = deletion_file_path(2, df)
    wrong = table_pb2.DeletionFile()
    wrong.CopyFrom(df)
    wrong.num_deleted_rows = 4
    with pytest.raises(CorruptFileError, match="manifest says 4"):
        read_deletion_file(store, 2, wrong)
    assert read_deletion_file(store, 2, df, physical_rows=10).tolist() == [1, 5, 9]
    with pytest.raises(CorruptFileError, match=rel):
        read_deletion_file(store, 2, df, physical_rows=9)
    big = write_deletion_file(store, 2, 1, np.arange(6000))
    with pytest.raises(CorruptFileError, match="not below"):
        read_deletion_file(store, 2, big, physical_rows=5999)
    wrong.CopyFrom(big)
    wrong.num_deleted_rows = 5999
    with pytest.raises(CorruptFileError, match=deletion_file_path(2, big)):
        read_deletion_file(store, 2, wrong)


def test_missing_file(store):
    df = df_of()
    with pytest.raises(CorruptFileError, match=deletion_file_path(0, df)):
        read_deletion_file(store, 0, df)


# ---------------------------------------------------------------- pylance as the oracle


def manifest_files(root: str) -> dict[int, str]:
    out = {}
    for p in glob.glob(os.path.join(root, "_versions", "*.manifest")):
        out[read_manifest(p)[0].version] = p
    return out


def read_manifest(path: str) -> tuple[table_pb2.Manifest, bytes, int]:
    """``(manifest, file bytes, manifest_pos)`` of ``...[u32 len][Manifest]`` + ``<q pos><h 0><h 2>LANC``."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[-4:] == b"LANC"
    (pos,) = struct.unpack_from("<q", data, len(data) - 16)
    (length,) = struct.unpack_from("<I", data, pos)
    return table_pb2.Manifest.FromString(data[pos + 4 : pos + 4 + length]), data, pos


def write_next_manifest(root: str, m: table_pb2.Manifest, prefix: bytes) -> None:
    """Commit ``m`` as version+1 (V2 naming), keeping pylance's inline transaction prefix."""
    m.version += 1
    body = m.SerializeToString()
    pos = len(prefix)
    data = prefix + struct.pack("<I", len(body)) + body + struct.pack("<qhh", pos, 0, 2) + b"LANC"
    with open(os.path.join(root, "_versions", f"{2**64 - 1 - m.version:020d}.manifest"), "xb") as f:
        f.write(data)


@pytest.fixture(scope="module")
def pylance_ds(tmp_path_factory):
    lance = pytest.importorskip("lance")
    root = str(tmp_path_factory.mktemp("del") / "ds")
    small = pa.table({"id": pa.array(range(0, 10), pa.int64())})
    big = pa.table({"id": pa.array(range(10, 12010), pa.int64())})
    lance.write_dataset(small, root, data_storage_version="2.0", enable_stable_row_ids=True)
    ds = lance.write_dataset(big, root, mode="append")
    ds.delete("id < 3 OR id = 7")
    ds.delete("id >= 10 AND id % 2 = 0")  # 6000 rows -> .bin
    return lance, root


def live_addrs(lance, root, version=None) -> list[int]:
    ds = lance.dataset(root, version=version)
    return ds.to_table(columns=["id"], with_row_address=True)["_rowaddr"].to_pylist()


def test_pylance_files_read(pylance_ds):
    lance, root = pylance_ds
    store = ObjectStore(root)
    files = manifest_files(root)
    kinds = set()
    for version, path in sorted(files.items()):
        m, _, _ = read_manifest(path)
        expected = []
        for frag in m.fragments:
            live = np.ones(frag.physical_rows, dtype=bool)
            if frag.HasField("deletion_file"):
                kinds.add(frag.deletion_file.file_type)
                deleted = read_deletion_file(
                    store, frag.id, frag.deletion_file, physical_rows=frag.physical_rows
                )
                assert deleted.size == frag.deletion_file.num_deleted_rows
                live = deletion_mask(deleted, frag.physical_rows)
            expected += ((frag.id << 32) + np.flatnonzero(live)).tolist()
        assert expected == live_addrs(lance, root, version), version
    assert kinds == {ARROW, BITMAP}
    names = os.listdir(os.path.join(root, "_deletions"))
    assert any(n.endswith(".arrow") for n in names) and any(n.endswith(".bin") for n in names)


def test_pylance_reads_our_files(pylance_ds, tmp_path):
    """Swap our deletion files into a manifest and let pylance scan it."""
    lance, src = pylance_ds
    root = str(tmp_path / "copy")
    shutil.copytree(src, root)
    store = ObjectStore(root)
    files = manifest_files(root)
    m, data, pos = read_manifest(files[max(files)])
    by_id = {f.id: f for f in m.fragments}
    small, big = by_id[0], by_id[1]
    # small fragment: more deletions, still .arrow; big fragment: a few deletions (.bin -> .arrow)
    small_del = np.union1d(read_deletion_file(store, 0, small.deletion_file), [4, 9])
    big_del = np.array([0, 5, 11999, 300], dtype=np.uint32)
    small.deletion_file.CopyFrom(write_deletion_file(store, 0, m.version, small_del))
    big.deletion_file.CopyFrom(write_deletion_file(store, 1, m.version, big_del))
    assert small.deletion_file.file_type == ARROW and big.deletion_file.file_type == ARROW
    write_next_manifest(root, m, data[:pos])
    ds = lance.dataset(root)
    assert ds.version == m.version
    expected = [a for a in range(10) if a not in small_del.tolist()]
    expected += [(1 << 32) + a for a in range(12000) if a not in big_del.tolist()]
    assert live_addrs(lance, root) == expected
    assert ds.count_rows() == len(expected)

    # and .bin: delete 7000 rows of the big fragment with our bitmap file
    m2, data2, pos2 = read_manifest(manifest_files(root)[m.version])
    big2 = next(f for f in m2.fragments if f.id == 1)
    bin_del = np.arange(0, 12000, 12000 / 7000).astype(np.uint32)
    big2.deletion_file.CopyFrom(write_deletion_file(store, 1, m2.version, bin_del))
    assert big2.deletion_file.file_type == BITMAP
    write_next_manifest(root, m2, data2[:pos2])
    got = live_addrs(lance, root)
    assert [a for a in got if a >> 32 == 1] == [
        (1 << 32) + a for a in np.setdiff1d(np.arange(12000), bin_del)
    ]
    assert lance.dataset(root).count_rows() == (10 - small_del.size) + (12000 - np.unique(bin_del).size)


def test_bitmap_claiming_every_row_is_rejected_before_materialising(store):
    bomb = BitMap()
    bomb.add_range(0, 2**32)  # < 1 MiB of run containers, 16 GiB as an array
    bomb.run_optimize()
    df = df_of(BITMAP, num_deleted_rows=0)
    store.put(deletion_file_path(1, df), bomb.serialize())
    with pytest.raises(CorruptFileError, match="not below"):
        read_deletion_file(store, 1, df, physical_rows=10)
    df.num_deleted_rows = 3
    with pytest.raises(CorruptFileError, match="manifest says 3"):
        read_deletion_file(store, 1, df)


_FUZZ_SOURCES = [
    (ARROW, arrow_file(batch(list(range(0, 3000, 7))), compression="zstd")),
    (BITMAP, BitMap(list(range(0, 100000, 3)) + [200000, 300001]).serialize()),
    (BITMAP, BitMap(range(0, 70000)).serialize()),
]


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(range(len(_FUZZ_SOURCES))),
    st.lists(st.tuples(st.integers(0, 2**31), st.integers(0, 255)), min_size=1, max_size=4),
)
def test_fuzzed_files_fail_cleanly(tmp_path_factory, which, edits):
    store = ObjectStore(str(tmp_path_factory.mktemp("fuzz")))
    file_type, src = _FUZZ_SOURCES[which]
    data = bytearray(src)
    for pos, val in edits:
        data[pos % len(data)] = val
    df = df_of(file_type)
    store.put(deletion_file_path(1, df), bytes(data))
    try:
        got = read_deletion_file(store, 1, df)
    except CorruptFileError:
        return
    assert got.dtype == np.uint32
    assert np.all(got[1:] > got[:-1])


def test_delete_across_evaluation_groups_matches_pylance(tmp_path, monkeypatch):
    """Deletes evaluate their predicate on groups of batches: a fragment whose matches fall in
    several groups, one already carrying a deletion file, and one deleted entirely all come out
    as pylance's delete of the same predicate makes them."""
    import lance
    import pyarrow.compute as pc

    import lance_ops.format as lf
    from lance_ops.format.ops import delete_update as mutate

    monkeypatch.setattr(mutate, "DELETE_GROUP_ROWS", 300)
    t = pa.table({"id": np.arange(4000, dtype=np.int64), "x": np.arange(4000, dtype=np.float64) % 13})
    for name in ("ours", "theirs"):
        lance.write_dataset(t, str(tmp_path / name), max_rows_per_file=1000, enable_stable_row_ids=True)
        lance.dataset(str(tmp_path / name)).delete("id < 50 OR id = 1500")
    ours = lf.dataset(str(tmp_path / "ours"))
    ours.delete(
        (pc.field("x") < 3) | ((pc.field("id") >= 2000) & (pc.field("id") < 3000))
    )
    lance.dataset(str(tmp_path / "theirs")).delete("x < 3 OR (id >= 2000 AND id < 3000)")
    cols = ["id", "x", "_rowid"]
    got = lance.dataset(str(tmp_path / "ours")).to_table(columns=cols, with_row_id=False)
    want = lance.dataset(str(tmp_path / "theirs")).to_table(columns=cols, with_row_id=False)
    ids, x = t.column("id").to_numpy(), t.column("x").to_numpy()
    kept = ids[~((ids < 50) | (ids == 1500) | (x < 3) | ((ids >= 2000) & (ids < 3000)))]
    assert got.equals(want) and got.column("id").to_numpy().tolist() == kept.tolist()
    assert ours.to_table(columns=["id"]).column("id").equals(want.column("id"))
    frags = ours.manifest.fragments
    assert [f.id for f in frags] == [f.fragment_id for f in lance.dataset(str(tmp_path / "theirs")).get_fragments()]
    assert [f.num_deleted_rows for f in frags] == [
        f.metadata.deletion_file.num_deleted_rows for f in lance.dataset(str(tmp_path / "theirs")).get_fragments()
    ]


def test_delete_on_an_object_store_writes_through_the_pool(tmp_path, monkeypatch):
    """On an object store (memory://) deletion files are written by a bounded thread pool: the
    result is the local one, fragment for fragment."""
    import uuid

    import pyarrow.compute as pc

    import lance_ops.format as lf
    from lance_ops.format.ops import delete_update as mutate

    monkeypatch.setattr(mutate, "DELETE_WRITERS_REMOTE", 2)  # more fragments than slots in flight
    t = pa.table({"id": np.arange(6000, dtype=np.int64), "x": np.arange(6000, dtype=np.int64) % 7})
    pred = (pc.field("x") == 3) | (pc.field("id") < 1000)
    remote = lf.write_dataset(t, f"memory://{uuid.uuid4().hex}", max_rows_per_file=500)
    remote.delete(pred)
    local = lf.write_dataset(t, str(tmp_path / "local"), max_rows_per_file=500)
    local.delete(pred)
    assert remote.to_table().equals(local.to_table())
    assert [(f.id, f.num_deleted_rows) for f in remote.manifest.fragments] == [
        (f.id, f.num_deleted_rows) for f in local.manifest.fragments
    ]
    assert len(remote.manifest.fragments) == 10  # fragments 0 and 1 (ids < 1000) are gone
