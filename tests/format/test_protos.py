"""The checked-in generated protobuf modules match protos/*.proto, and wire facts hold."""

from pathlib import Path

from lance_ops.format._proto import regen, table_pb2, transaction_pb2


def test_generated_modules_are_fresh(tmp_path: Path) -> None:
    regen.generate(tmp_path)
    fresh = {p.name: p.read_text() for p in tmp_path.glob("*_pb2.py*")}
    checked_in = {p.name: p.read_text() for p in regen.OUT_DIR.glob("*_pb2.py*")}
    assert fresh.keys() == checked_in.keys()
    stale = [name for name in fresh if fresh[name] != checked_in[name]]
    assert not stale, f"run `make protos`: stale generated modules {stale}"


def test_manifest_field_23_survives_read_modify_write() -> None:
    m = table_pb2.Manifest(version=7, transaction_file="6-x.txn")
    m.transaction_section = 148
    data = m.SerializeToString()
    assert b"\xb8\x01\x94\x01" in data  # field 23, varint 148
    again = table_pb2.Manifest.FromString(data)
    again.version = 8
    assert table_pb2.Manifest.FromString(again.SerializeToString()).transaction_section == 148


def test_unknown_fields_are_preserved() -> None:
    # A field number lance_ops does not model (e.g. a newer pylance addition) is kept verbatim.
    unknown = b"\xf8\x01\x05"  # field 31, varint 5
    m = table_pb2.Manifest.FromString(table_pb2.Manifest(version=3).SerializeToString() + unknown)
    assert m.SerializeToString().endswith(unknown)


def test_transaction_oneof_numbers() -> None:
    t = transaction_pb2.Transaction(read_version=1)
    t.append.SetInParent()
    assert t.SerializeToString() == b"\x08\x01\xa2\x06\x00"  # field 100, length 0
