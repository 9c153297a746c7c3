"""Index metadata and the row-address codecs, against what pylance 14 writes."""

import os

import lance
import numpy as np
import pyarrow as pa
import pytest
from index_support import build, index_name
from lance.file import LanceFileReader
from pyroaring import BitMap

import lance_ops.format as lf
from lance_ops.format.errors import IncompatibleTransactionError
from lance_ops.format.file.patch import replace_columns
from lance_ops.format.file.reader import DataFileReader
from lance_ops.format.index import coverage
from lance_ops.format.index.metadata import decode_index_section, encode_index_section, vector_kind
from lance_ops.format.index.rowaddr import (
    AddressMap,
    RowAddrSet,
    decode_row_addr_treemap,
    decode_treemap,
    encode_row_addr_treemap,
    encode_treemap,
    portable_size,
)
from lance_ops.format.io.object_store import ObjectStore


@pytest.fixture(scope="module")
def every_kind(tmp_path_factory):
    return build(str(tmp_path_factory.mktemp("kinds") / "ds")).uri


def _addr(frag: int, off: np.ndarray) -> np.ndarray:
    return (np.uint64(frag) << np.uint64(32)) | off.astype(np.uint64)


def _index_file(uri: str, name: str, file: str) -> DataFileReader:
    idx = next(i for i in decode_index_section(lf.dataset(uri).manifest.index_section) if i.name == name)
    return DataFileReader(ObjectStore(uri), f"{idx.directory}/{file}")


def test_index_section_round_trips_byte_for_byte(every_kind):
    raw = lf.dataset(every_kind).manifest.index_section
    indices = decode_index_section(raw)
    assert encode_index_section(indices) == raw
    by = {i.name: i for i in indices}
    assert by["btree_idx"].files and {f.path for f in by["btree_idx"].files} == {"page_data.lance", "page_lookup.lance"}
    assert {i.name: i.kind for i in indices} == {index_name(k): k for k in (
        "BTREE", "BITMAP", "LABEL_LIST", "NGRAM", "ZONEMAP", "BLOOMFILTER", "INVERTED",
        "IVF_PQ", "IVF_FLAT", "IVF_SQ", "IVF_HNSW_PQ", "IVF_HNSW_SQ", "IVF_HNSW_FLAT")}
    assert by["ivf_pq_idx"].fragment_ids == frozenset({0, 1, 2, 3})
    changed = by["btree_idx"].with_changes(fragment_ids=frozenset({7}), uuid="00000000-0000-0000-0000-000000000001")
    again = decode_index_section(encode_index_section([changed]))[0]
    assert (again.fragment_ids, again.uuid, again.files, again.created_at_ms) == (
        frozenset({7}), changed.uuid, changed.files, changed.created_at_ms)


def test_vector_kind_of_unknown_details_is_not_guessed():
    assert vector_kind(b"") == "IVF_FLAT"
    assert vector_kind(b"\x32\x00") == "IVF"  # field 6: a quantisation this reader does not know
    assert vector_kind(b"\xff") == "IVF"  # does not decode


def test_pylance_bitmaps_decode_to_the_rows_holding_each_value(every_kind):
    t = _index_file(every_kind, "bitmap_idx", "bitmap_page_lookup.lance").read_table()
    by_key = dict(zip(t["keys"].to_pylist(), t["bitmaps"].to_pylist(), strict=True))
    red = decode_row_addr_treemap(by_key["red"])
    # 600 rows a fragment, ids 0..2399, cat = red when id % 4 == 0
    expected = np.concatenate([_addr(f, np.arange(0, 600, 4)) for f in range(4)])
    assert np.array_equal(red.addrs, expected) and red.full_fragments == ()
    assert decode_row_addr_treemap(encode_row_addr_treemap(red)).addrs.tolist() == red.addrs.tolist()
    posting = _index_file(every_kind, "ngram_idx", "ngram_postings.lance").read_table()["posting_list"][0].as_py()
    rows = decode_treemap(posting)
    assert rows.size > 0 and np.array_equal(decode_treemap(encode_treemap(rows)), rows)


@pytest.mark.parametrize("values", [
    np.array([1, 5, 9], dtype=np.uint32),                        # array container
    np.arange(0, 20000, 2, dtype=np.uint32),                     # bitmap container
    np.arange(100, 70000, dtype=np.uint32),                      # runs over several containers
    np.concatenate([np.arange(10), np.arange(1 << 16, (1 << 16) + 5000, 3)]).astype(np.uint32),
])
@pytest.mark.parametrize("runs", [False, True])
def test_portable_size_finds_the_end_of_a_bitmap(values, runs):
    bm = BitMap(values)
    if runs:
        bm.run_optimize()
    data = bytes(bm.serialize())
    assert portable_size(data + b"trailing") == len(data)
    assert portable_size(b"xx" + data, 2) == len(data)


def test_address_map_moves_live_rows_and_drops_deleted_ones():
    # fragment 3 (5 rows, rows 1 and 3 deleted) rewritten into fragment 9
    amap = AddressMap(
        old=_addr(3, np.array([0, 2, 4])), new=_addr(9, np.arange(3)),
        old_fragments=frozenset({3}), tombstone_fragments=frozenset({3}), physical_rows=((3, 5),),
    )
    addrs = np.array([*_addr(3, np.arange(5)), *_addr(1, np.array([7]))], dtype=np.uint64)
    assert amap.apply(addrs).tolist() == [*_addr(9, np.array([0])), _addr(3, np.array([1]))[0],
                                          *_addr(9, np.array([1])), _addr(3, np.array([3]))[0],
                                          *_addr(9, np.array([2])), *_addr(1, np.array([7]))]
    assert amap.apply_dropping(addrs).tolist() == [*_addr(9, np.arange(3)), *_addr(1, np.array([7]))]
    moved = amap.apply_set(RowAddrSet(_addr(1, np.array([2])), full_fragments=(3, 5)))
    assert moved.addrs.tolist() == [*_addr(1, np.array([2])), *_addr(9, np.arange(3))]
    assert moved.full_fragments == (5,)


def test_a_rewrite_group_mixing_covered_and_uncovered_fragments_is_refused():
    with pytest.raises(IncompatibleTransactionError, match=r"mixes fragments index 'x' covers"):
        coverage.moved_bitmap(frozenset({1, 2}), [([2, 3], [9])], index="x")
    assert coverage.moved_bitmap(frozenset({1, 2, 3}), [([2, 3], [9, 10])], index="x") == {1, 9, 10}
    assert coverage.dropped_bitmap(frozenset({1, 2, 3}), [([2, 3], [9])]) == {1}


@pytest.mark.parametrize("version", ["2.0", "2.2"])
def test_replace_columns_keeps_the_other_columns_bytes(tmp_path, version):
    uri = str(tmp_path / "ds")
    n = 5000
    t = pa.table({"ids": pa.array(np.arange(n, dtype=np.uint64)),
                  "codes": pa.FixedSizeListArray.from_arrays(pa.array(np.arange(n * 4) % 251, pa.uint8()), 4),
                  "s": pa.array([f"v{i}" for i in range(n)])})
    lf.write_dataset(t, uri, data_storage_version=version)
    store = ObjectStore(uri)
    src = f"data/{lf.dataset(uri).manifest.fragments[0].files[0].path}"
    size = replace_columns(store, src, "patched.lance", {"ids": lambda c: pa.array(c.to_numpy() * 3, pa.uint64())},
                           file_size=store.size(src))
    assert size == os.path.getsize(os.path.join(uri, "patched.lance"))
    ours = DataFileReader(store, "patched.lance").read_table()
    theirs = LanceFileReader(os.path.join(uri, "patched.lance")).read_all().to_table()
    expected = t.set_column(0, "ids", pa.array(np.arange(n, dtype=np.uint64) * 3))
    assert ours.equals(expected) and theirs.equals(expected)
    with open(os.path.join(uri, src), "rb") as a, open(os.path.join(uri, "patched.lance"), "rb") as b:
        head = DataFileReader(store, src)._cmo[:, 0].min()
        assert a.read(int(head)) == b.read(int(head))  # every data byte (and global buffer) copied


def test_lance_reads_the_fragment_reuse_index_it_did_not_write(tmp_path):
    uri = str(tmp_path / "ds")
    build(uri, kinds=["BTREE"])
    lance.dataset(uri).delete("id % 10 = 0")
    lance.dataset(uri).optimize.compact_files(target_rows_per_fragment=1200, defer_index_remap=True)
    from lance_ops.format.index.reuse import read_reuse_versions, reuse_maps

    idx = next(i for i in decode_index_section(lf.dataset(uri).manifest.index_section) if i.is_system)
    versions = read_reuse_versions(ObjectStore(uri), idx)
    assert [(g.old_fragments, g.new_fragments) for g in versions[0].groups] == [((0, 1, 2, 3), (4,))]
    (old, new), = reuse_maps(versions)
    assert old.size == new.size == 2160 and new.tolist() == _addr(4, np.arange(2160)).tolist()
    assert old[:3].tolist() == _addr(0, np.array([1, 2, 3])).tolist()  # row 0 (id 0) was deleted
