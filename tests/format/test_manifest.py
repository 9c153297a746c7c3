"""Manifests, fragments and transactions: proto round trips, file layout, naming, flags."""

import re
import struct
from pathlib import Path

import lance
import pyarrow as pa
import pytest
from datagen import simple_table

import lance_ops.format as lf
from lance_ops.format._proto import table_pb2, transaction_pb2
from lance_ops.format.errors import CorruptFileError, UnsupportedFeatureError
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.schema import LanceSchema
from lance_ops.format.table.fragment import DataFile, DeletionFile, FragmentMetadata
from lance_ops.format.table.manifest import (
    Manifest,
    NamingScheme,
    decode_manifest_file,
    encode_manifest_file,
    list_versions,
    parse_manifest_name,
)
from lance_ops.format.txn.transaction import Transaction, decode_transaction


def _pylance_history(uri: str) -> None:
    lance.write_dataset(simple_table(0, 6000), uri, data_storage_version="2.0", enable_stable_row_ids=True,
                        max_rows_per_file=3000)
    ds = lance.write_dataset(simple_table(6000, 10), uri, mode="append")
    ds.delete("id < 5")
    ds.delete("id >= 3000 AND id < 8000")
    ds.update({"val": "'x'"}, where="id = 10")
    ds.update_config({"lance.compaction.target_rows_per_fragment": "5000"})
    ds.optimize.compact_files()


def test_naming_schemes() -> None:
    assert NamingScheme.V2.file_name(1) == "18446744073709551614.manifest"
    assert NamingScheme.V2.file_name(6) == "18446744073709551609.manifest"
    assert NamingScheme.V1.file_name(12) == "12.manifest"
    assert parse_manifest_name("18446744073709551609.manifest") == (NamingScheme.V2, 6)
    assert parse_manifest_name("12.manifest") == (NamingScheme.V1, 12)
    for other in ("latest_version_hint.json", "18446744073709551613.manifest#1", "x.manifest-uuid", "d12.manifest"):
        assert parse_manifest_name(other) is None


def test_mixed_naming_is_an_error(tmp_path: Path) -> None:
    store = ObjectStore(str(tmp_path))
    store.put("_versions/1.manifest", b"x")
    store.put("_versions/18446744073709551613.manifest", b"y")
    with pytest.raises(CorruptFileError, match="both the V1 and the V2"):
        list_versions(store)


def test_pylance_manifests_and_transactions_round_trip(uri: str) -> None:
    _pylance_history(uri)
    store = ObjectStore(uri)
    scheme, versions = list_versions(store)
    assert scheme is NamingScheme.V2 and versions == list(range(1, 9))
    kinds = []
    for v in versions:
        rel = f"_versions/{scheme.file_name(v)}"
        data = store.read(rel)
        mf = decode_manifest_file(data, rel)
        m = mf.manifest
        assert m.version == v
        # raw proto: python re-serialisation is byte-identical and keeps field 23
        assert mf.proto.SerializeToString() == table_pb2.Manifest.FromString(mf.proto.SerializeToString()).SerializeToString()
        assert mf.proto.HasField("transaction_section")
        # domain objects round trip
        assert Manifest.from_proto(m.to_proto()).fragments == m.fragments
        assert Manifest.from_proto(m.to_proto()).schema == m.schema
        for f in m.fragments:
            assert FragmentMetadata.from_proto(f.to_proto()) == f
        assert mf.transaction is not None
        txn = decode_transaction(mf.transaction, rel)
        assert Transaction.from_proto(txn.to_proto()) == txn
        assert transaction_pb2.Transaction.FromString(mf.transaction).SerializeToString() == mf.transaction
        assert (store.read(f"_transactions/{m.transaction_file}")) == mf.transaction
        kinds.append(txn.operation.name)
    assert kinds == ["overwrite", "append", "delete", "delete", "update", "update_config", "reserve_fragments", "rewrite"]
    last = decode_manifest_file(store.read(f"_versions/{scheme.file_name(8)}"), "m").manifest
    assert last.config == {"lance.compaction.target_rows_per_fragment": "5000"}
    assert last.writer_feature_flags & 8 and last.reader_feature_flags == 2


def test_encode_decode_layout() -> None:
    schema = LanceSchema.from_arrow(pa.schema([("id", pa.int64())]))
    frag = FragmentMetadata(
        id=3,
        files=(DataFile("a.lance", (0,), (0,), 2, 0, 100),),
        physical_rows=10,
        deletion_file=DeletionFile(0, 2, 99, 1),
        row_ids=b"\n\x04\n\x02\x10\n",
    )
    m = Manifest(schema=schema, fragments=(frag,), version=4, max_fragment_id=3, next_row_id=10,
                 config={"k": "v"}, reader_feature_flags=3, writer_feature_flags=11)
    txn = Transaction(3, lf.Append([frag]))
    data = encode_manifest_file(m, txn.to_proto())
    pos, major, minor, magic = struct.unpack("<qhh4s", data[-16:])
    assert (major, minor, magic) == (0, 2, b"LANC")
    (txn_len,) = struct.unpack_from("<I", data, 0)
    assert pos == 4 + txn_len
    mf = decode_manifest_file(data, "mem")
    assert mf.manifest.fragments == (frag,)
    assert mf.manifest.writer_library == "lance_ops"
    assert mf.proto.transaction_section == 0
    assert decode_transaction(mf.transaction, "mem") == txn


@pytest.mark.parametrize(
    "flag, name",
    [(32, "disabled transaction files"), (64, "data overlay files"),
     (512, "an unknown feature"), (1024, "fragment reuse index"), (1 << 20, "an unknown feature")],
)
def test_unknown_feature_flags_are_refused_by_name(uri: str, flag: int, name: str) -> None:
    lf.write_dataset(simple_table(0, 3), uri)
    store = ObjectStore(uri)
    rel = f"_versions/{NamingScheme.V2.file_name(1)}"
    mf = decode_manifest_file(store.read(rel), rel)
    m = mf.manifest.with_changes(reader_feature_flags=flag, writer_feature_flags=flag)
    store.put(rel, encode_manifest_file(m, None))
    with pytest.raises(UnsupportedFeatureError, match=re.escape(f"{name} (flag {flag})")):
        lf.dataset(uri)


def test_time_travel_and_versions(uri: str) -> None:
    lf.write_dataset(simple_table(0, 5), uri)
    lf.write_dataset(simple_table(5, 5), uri, mode="append")
    ds = lf.dataset(uri, version=1)
    assert ds.version == 1 and ds.latest_version == 2 and ds.count_rows() == 5
    assert ds.checkout_version(2).count_rows() == 10
    vs = lf.dataset(uri).versions()
    assert [v["version"] for v in vs] == [1, 2]
    assert vs[1]["metadata"]["total_rows"] == "10" and vs[1]["metadata"]["total_fragments"] == "2"
    with pytest.raises(lf.DatasetNotFoundError, match="version 3"):
        lf.dataset(uri, version=3)
    with pytest.raises(lf.DatasetNotFoundError):
        lf.dataset(uri + "-missing")
    with pytest.raises(lf.DatasetAlreadyExistsError):
        lf.write_dataset(simple_table(0, 5), uri)


def test_commit_carries_unchanged_fragments_and_caches_what_it_wrote(tmp_path: Path) -> None:
    """A new version re-uses its unchanged fragments' messages (an unknown field pylance might
    add survives), re-encodes changed ones, and the manifest an append leaves in the cache is
    the one a fresh decode of the file gives."""
    import pickle

    from lance_ops.format.table import manifest as mmod

    uri = str(tmp_path / "ds")
    lf.write_dataset(simple_table(0, 30), uri, max_rows_per_file=10)
    store = ObjectStore(uri)
    path = store.full_path(mmod.manifest_path(NamingScheme.V2, 1))
    raw = Path(path).read_bytes()
    mf = decode_manifest_file(raw, path)
    m = mf.proto
    # field 99 of DataFragment: unknown to lance_ops (varint 7), as a newer pylance might write
    m.fragments[1].MergeFromString(b"\x98\x06\x07")
    patched = mmod.Manifest.from_proto(m, where=path)
    frag = patched.fragments[1]
    assert frag.manifest_message().SerializeToString().endswith(b"\x98\x06\x07")
    out = patched.to_proto()
    assert out.fragments[1].SerializeToString() == m.fragments[1].SerializeToString()
    # a changed fragment is encoded afresh (nothing stale), a pickled one carries no message
    changed = frag.with_changes(physical_rows=9)
    assert changed.manifest_message().physical_rows == 9
    assert not changed.manifest_message().SerializeToString().endswith(b"\x98\x06\x07")
    assert "_pb" not in pickle.loads(pickle.dumps(frag)).__dict__
    assert pickle.loads(pickle.dumps(frag)) == frag

    ds = lf.write_dataset(simple_table(30, 5), uri, mode="append")
    assert ds.version == 2
    cached = mmod.read_manifest(store, 2, NamingScheme.V2)
    fresh = decode_manifest_file(Path(cached.manifest.source).read_bytes(), cached.manifest.source)
    assert cached.manifest == fresh.manifest and cached.manifest.source == fresh.manifest.source
    assert (cached.manifest.writer_library, cached.manifest.writer_version) == (
        fresh.manifest.writer_library, fresh.manifest.writer_version)
    assert cached.transaction == fresh.transaction
    assert [f.id for f in cached.manifest.fragments] == [0, 1, 2, 3]
    assert lance.dataset(uri).to_table().num_rows == 35
