"""Damaged manifest content no writer produces is a CorruptFileError naming the manifest and the
field, before anything the manifest describes is read or committed on.

Checked on open (from the protobuf): repeated fragment ids, ids beyond ``max_fragment_id`` or the
u32 width, fragments without rows or data files, fixed-size types beyond 2^31-1, an empty
schema, a damaged index entry.  Checked when the fragments are first used (they decode lazily):
``base_id`` without base paths, absurd file sizes, fields/column_indices that disagree.  A
fragment whose data file holds other rows than ``physical_rows`` fails when it is read.
"""

import os
import struct

import lance
import pyarrow as pa
import pytest
from templates import template_copy

import lance_ops.format as lf
from lance_ops.format.table.fragment import DataFile, DeletionFile
from lance_ops.format.table.manifest import decode_manifest_file, encode_manifest_file

FSL = pa.list_(pa.int64(), 2)


def manifest_file(uri: str, version: int) -> str:
    return os.path.join(uri, "_versions", f"{2**64 - 1 - version:020d}.manifest")


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """Two fragments (ids 0 and 1) of 3 rows each, stable row ids, a fixed-size list column."""
    uri = str(tmp_path_factory.mktemp("validation") / "ds")
    lf.write_dataset(pa.table({"id": [1, 2, 3], "v": pa.array([[1, 2]] * 3, FSL)}), uri, enable_stable_row_ids=True)
    lf.write_dataset(pa.table({"id": [4, 5, 6], "v": pa.array([[3, 4]] * 3, FSL)}), uri, mode="append")
    return uri


uri = template_copy("uri")


def edit(uri: str, fn) -> str:
    """Rewrite version 2's manifest with ``fn(manifest)`` (no inline transaction)."""
    path = manifest_file(uri, 2)
    mf = decode_manifest_file(open(path, "rb").read(), path)
    m = mf.manifest
    m = m.with_changes(fragments=tuple(m.fragments))
    open(path, "wb").write(encode_manifest_file(fn(m), None))
    return path


def edit_proto(uri: str, fn) -> str:
    path = manifest_file(uri, 2)
    proto = decode_manifest_file(open(path, "rb").read(), path).proto
    fn(proto)
    proto.ClearField("transaction_section")
    body = proto.SerializeToString()
    open(path, "wb").write(struct.pack("<I", len(body)) + body + struct.pack("<qhh4s", 0, 0, 2, b"LANC"))
    return path


def _file(m, **changes) -> DataFile:
    df = m.fragments[0].files[0]
    return DataFile(**{**df.__dict__, **changes})


def _frag0(m, **changes):
    return m.with_changes(fragments=(m.fragments[0].with_changes(**changes), m.fragments[1]))


ON_OPEN = {
    "repeated-id": (lambda m: m.with_changes(fragments=(m.fragments[0], m.fragments[1].with_changes(id=0))),
                    "fragments[1].id", "listed twice"),
    "id-beyond-u32": (lambda m: m.with_changes(fragments=(m.fragments[0], m.fragments[1].with_changes(id=2**40)),
                                               max_fragment_id=None),
                      "fragments[1].id", "u32"),
    "id-beyond-max_fragment_id": (lambda m: m.with_changes(fragments=(m.fragments[0], m.fragments[1].with_changes(id=7)),
                                                           max_fragment_id=1),
                                  "fragments[1].id", "max_fragment_id 1"),
    "zero-physical-rows": (lambda m: _frag0(m, physical_rows=0), "fragments[0].physical_rows", "0 rows"),
    "no-data-files": (lambda m: _frag0(m, files=()), "fragments[0].files", "no data files"),
}

ON_FIRST_USE = {
    "base_id-without-base-paths": (lambda m: _frag0(m, files=(_file(m, base_id=1),)),
                                   "fragments[0].files[0].base_id", "no base paths"),
    "deletion-base_id-without-base-paths": (
        lambda m: _frag0(m, deletion_file=DeletionFile(0, 1, 5, 1, base_id=3)), "fragments[0].deletion_file.base_id",
        "no base paths"),
    "file-size-2^62": (lambda m: _frag0(m, files=(_file(m, file_size_bytes=2**62),)),
                       "fragments[0].files[0].file_size_bytes", str(2**62)),
    "column-indices-mismatch": (lambda m: _frag0(m, files=(_file(m, column_indices=(0,)),)),
                                "fragments[0].files[0].column_indices", "column indices"),
}


def _nothing_committed(uri: str) -> None:
    assert sorted(n for n in os.listdir(os.path.join(uri, "_versions")) if n.endswith(".manifest")) == sorted(
        os.path.basename(manifest_file(uri, v)) for v in (1, 2))


def _append(uri: str) -> None:
    lf.write_dataset(pa.table({"id": [9], "v": pa.array([[0, 0]], FSL)}), uri, mode="append")


@pytest.mark.parametrize("case", list(ON_OPEN))
def test_refused_on_open(uri, case):
    fn, field, says = ON_OPEN[case]
    path = edit(uri, fn)
    for action in (lambda: lf.dataset(uri), lambda: _append(uri)):
        with pytest.raises(lf.CorruptFileError) as info:
            action()
        assert info.value.path == path and field in info.value.problem and says in info.value.problem
    _nothing_committed(uri)
    assert lf.dataset(uri, version=1).count_rows() == 3  # the older version still opens


@pytest.mark.parametrize("case", list(ON_FIRST_USE))
def test_refused_before_the_fragments_are_used(uri, case):
    fn, field, says = ON_FIRST_USE[case]
    path = edit(uri, fn)
    ds = lf.dataset(uri)  # fragments decode lazily: opening reads no fragment
    for action in (lambda: ds.to_table(), lambda: ds.count_rows(), lambda: ds.get_fragments(),
                   lambda: ds.update({"id": 0})):
        with pytest.raises(lf.CorruptFileError) as info:
            action()
        assert info.value.path == path and field in info.value.problem and says in info.value.problem
    _nothing_committed(uri)


def test_fixed_size_beyond_arrow_and_an_empty_schema(uri):
    def fsl(proto) -> None:
        (f,) = [f for f in proto.fields if f.logical_type.startswith("fixed_size_list")]
        f.logical_type = f"fixed_size_list:int64:{2**60}"

    original = open(manifest_file(uri, 2), "rb").read()
    path = edit_proto(uri, fsl)
    with pytest.raises(lf.CorruptFileError, match=r"field 'v' \(id 1\).*1152921504606846976") as info:
        lf.dataset(uri)
    assert info.value.path == path
    open(path, "wb").write(original)
    edit_proto(uri, lambda proto: proto.ClearField("fields"))
    with pytest.raises(lf.CorruptFileError, match="the schema has no columns"):
        lf.dataset(uri)


def test_physical_rows_disagreeing_with_the_data_file(uri):
    """A count the data file contradicts fails on the first read of that fragment (pylance reads
    the file's count silently); checking every file on open would cost a read per fragment."""
    path = edit(uri, lambda m: _frag0(m, physical_rows=2))
    data = os.path.join(uri, "data", lf.dataset(uri).manifest.fragment(0).files[0].path)
    with pytest.raises(lf.CorruptFileError) as info:
        lf.dataset(uri).to_table()
    assert info.value.path == data and "3 rows but fragment 0 says 2" in info.value.problem
    assert path in str(info.value)  # and the manifest naming it
    with pytest.raises(lf.CorruptFileError):
        lf.dataset(uri).update({"id": 0})
    _nothing_committed(uri)


def test_damaged_index_entries_are_not_carried_forward(tmp_path):
    uri = str(tmp_path / "ds")
    ds = lance.write_dataset(pa.table({"id": list(range(100))}), uri)
    ds.create_scalar_index("id", "BTREE")
    path = manifest_file(uri, 2)
    mf = decode_manifest_file(open(path, "rb").read(), path)
    from lance_ops.format._proto import table_pb2

    section = table_pb2.IndexSection.FromString(mf.manifest.index_section)
    section.indices[0].fields[:] = [42]
    m = mf.manifest.with_changes(index_section=section.SerializeToString(), fragments=tuple(mf.manifest.fragments))
    open(path, "wb").write(encode_manifest_file(m, None))
    with pytest.raises(lf.CorruptFileError, match=r"indices\[0\].*fields: ids \[42\]") as info:
        lf.write_dataset(pa.table({"id": [1000]}), uri, mode="append")
    assert info.value.path == path
    assert lance.dataset(uri, version=1).count_rows() == 100
