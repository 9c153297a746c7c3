"""Arrow schema <-> Lance field list (docs/FORMAT.md §6)."""

import random

import pyarrow as pa
import pytest

from lance_ops.format._proto import file_pb2
from lance_ops.format.errors import SchemaError, UnsupportedFeatureError
from lance_ops.format.schema import (
    ENCODING_DICTIONARY,
    ENCODING_NONE,
    ENCODING_PLAIN,
    ENCODING_VAR_BINARY,
    LanceField,
    LanceSchema,
    arrow_type,
    logical_type,
    types_equivalent,
)

LOGICAL_TYPES = [
    (pa.null(), "null"),
    (pa.bool_(), "bool"),
    (pa.int8(), "int8"),
    (pa.int16(), "int16"),
    (pa.int32(), "int32"),
    (pa.int64(), "int64"),
    (pa.uint8(), "uint8"),
    (pa.uint16(), "uint16"),
    (pa.uint32(), "uint32"),
    (pa.uint64(), "uint64"),
    (pa.float16(), "halffloat"),
    (pa.float32(), "float"),
    (pa.float64(), "double"),
    (pa.decimal128(7, 3), "decimal:128:7:3"),
    (pa.decimal256(40, -2), "decimal:256:40:-2"),
    (pa.string(), "string"),
    (pa.large_string(), "large_string"),
    (pa.binary(), "binary"),
    (pa.large_binary(), "large_binary"),
    (pa.binary(16), "fixed_size_binary:16"),
    (pa.date32(), "date32:day"),
    (pa.date64(), "date64:ms"),
    (pa.time32("s"), "time32:s"),
    (pa.time32("ms"), "time32:ms"),
    (pa.time64("us"), "time64:us"),
    (pa.time64("ns"), "time64:ns"),
    (pa.timestamp("us"), "timestamp:us:-"),
    (pa.timestamp("ns", "UTC"), "timestamp:ns:UTC"),
    (pa.timestamp("s", "America/New_York"), "timestamp:s:America/New_York"),
    (pa.timestamp("ms", "+01:00"), "timestamp:ms:+01:00"),
    (pa.duration("ms"), "duration:ms"),
    (pa.duration("ns"), "duration:ns"),
    (pa.struct([("a", pa.int32())]), "struct"),
    (pa.list_(pa.int32()), "list"),
    (pa.list_(pa.struct([("a", pa.int32())])), "list.struct"),
    (pa.large_list(pa.string()), "large_list"),
    (pa.large_list(pa.struct([("a", pa.int32())])), "large_list.struct"),
    (pa.list_(pa.float32(), 8), "fixed_size_list:float:8"),
    (pa.list_(pa.list_(pa.int32(), 2), 2), "fixed_size_list:fixed_size_list:int32:2:2"),
    (pa.dictionary(pa.int32(), pa.string()), "dict:string:int32:false"),
    (pa.dictionary(pa.int8(), pa.string()), "dict:string:int8:false"),
    (pa.map_(pa.string(), pa.int32()), "map"),
]


@pytest.mark.parametrize(("atype", "expected"), LOGICAL_TYPES, ids=[e for _, e in LOGICAL_TYPES])
def test_logical_type(atype, expected):
    assert logical_type(atype) == expected


@pytest.mark.parametrize(("atype", "expected"), LOGICAL_TYPES, ids=[e for _, e in LOGICAL_TYPES])
def test_single_field_round_trip(atype, expected):
    schema = pa.schema([pa.field("c", atype)])
    ls = LanceSchema.from_arrow(schema)
    assert ls.fields[0].logical_type == expected
    assert ls.to_arrow().equals(schema, check_metadata=True)
    back = LanceSchema.from_proto(ls.to_proto(), ls.metadata)
    assert back == ls
    assert back.to_arrow().equals(schema, check_metadata=True)


def test_unsupported_types():
    with pytest.raises(UnsupportedFeatureError):
        logical_type(pa.month_day_nano_interval())
    with pytest.raises(UnsupportedFeatureError):
        LanceSchema.from_arrow(pa.schema([("u", pa.dense_union([pa.field("a", pa.int32())]))]))
    with pytest.raises(UnsupportedFeatureError, match="fixed_size_list"):
        LanceSchema.from_arrow(pa.schema([("f", pa.list_(pa.string(), 2))]))
    with pytest.raises(SchemaError):
        arrow_type(LanceField("x", 0, -1, "nonsense:1", True), [])
    with pytest.raises(SchemaError):
        arrow_type(LanceField("x", 0, -1, "decimal:64:3:2", True), [])


NESTED = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False, metadata={"k": "v"}),
        pa.field(
            "s",
            pa.struct(
                [
                    pa.field("x", pa.int32()),
                    pa.field("l", pa.list_(pa.field("item", pa.string(), nullable=False))),
                    pa.field("inner", pa.struct([pa.field("deep", pa.float64())]), nullable=False),
                ]
            ),
        ),
        pa.field("v", pa.list_(pa.float32(), 4)),
        pa.field("ll", pa.large_list(pa.list_(pa.int8()))),
        pa.field("d", pa.dictionary(pa.int16(), pa.string())),
        pa.field("b", pa.binary()),
        pa.field("n", pa.null()),
    ],
    metadata={"owner": "me", "blob": b"\x00\xff"},
)


def test_from_arrow_ids_parents_encodings():
    ls = LanceSchema.from_arrow(NESTED)
    got = [(f.name, f.id, f.parent_id, f.logical_type, f.nullable, f.encoding) for f in ls.fields]
    assert got == [
        ("id", 0, -1, "int64", False, ENCODING_PLAIN),
        ("s", 1, -1, "struct", True, ENCODING_NONE),
        ("x", 2, 1, "int32", True, ENCODING_PLAIN),
        ("l", 3, 1, "list", True, ENCODING_PLAIN),
        ("item", 4, 3, "string", False, ENCODING_VAR_BINARY),
        ("inner", 5, 1, "struct", False, ENCODING_NONE),
        ("deep", 6, 5, "double", True, ENCODING_PLAIN),
        ("v", 7, -1, "fixed_size_list:float:4", True, ENCODING_PLAIN),
        ("ll", 8, -1, "large_list", True, ENCODING_PLAIN),
        ("item", 9, 8, "list", True, ENCODING_PLAIN),
        ("item", 10, 9, "int8", True, ENCODING_PLAIN),
        ("d", 11, -1, "dict:string:int16:false", True, ENCODING_DICTIONARY),
        ("b", 12, -1, "binary", True, ENCODING_VAR_BINARY),
        ("n", 13, -1, "null", True, ENCODING_NONE),
    ]
    assert ls.fields[0].metadata == {"k": b"v"}
    assert ls.metadata == {"owner": b"me", "blob": b"\x00\xff"}
    assert all(f.dictionary is None for f in ls.fields)
    shifted = LanceSchema.from_arrow(NESTED, start_id=100)
    assert shifted.field_ids() == [i + 100 for i in ls.field_ids()]
    assert shifted.fields[2].parent_id == 101
    assert shifted.max_field_id() == 113


def test_to_arrow_exact_round_trip():
    ls = LanceSchema.from_arrow(NESTED)
    assert ls.to_arrow().equals(NESTED, check_metadata=True)
    back = LanceSchema.from_proto(ls.to_proto(), ls.metadata)
    assert back == ls
    assert back.to_arrow().equals(NESTED, check_metadata=True)


def test_fsl_item_is_normalised_like_pylance():
    # fixed_size_list items have no Lance field: they come back as a nullable "item"
    schema = pa.schema([pa.field("v", pa.list_(pa.field("x", pa.float32(), nullable=False), 3))])
    ls = LanceSchema.from_arrow(schema)
    assert len(ls.fields) == 1
    assert ls.to_arrow().field("v").type == pa.list_(pa.field("item", pa.float32()), 3)
    assert types_equivalent(ls.to_arrow().field("v").type, schema.field("v").type)


def test_proto_fields():
    ls = LanceSchema.from_arrow(NESTED)
    protos = ls.to_proto()
    assert all(p.type == 0 for p in protos)
    assert protos[0].parent_id == -1 and protos[2].parent_id == 1
    # parent_id -1 is a 10-byte varint; id 0 and type 0 are omitted
    raw = file_pb2.Field(
        name="a", id=0, parent_id=-1, logical_type="int32", nullable=True, encoding=1
    ).SerializeToString()
    assert raw == bytes.fromhex(
        "120161 20ffffffffffffffffff01 2a05".replace(" ", "")
    ) + b"int32" + bytes.fromhex("30013801")
    assert protos[0].SerializeToString() == LanceField.from_proto(protos[0]).to_proto().SerializeToString()
    with_dict = LanceField(
        "d", 3, -1, "dict:string:int32:false", True, ENCODING_DICTIONARY, dictionary=(0, 0)
    )
    p = with_dict.to_proto()
    assert p.HasField("dictionary")
    assert LanceField.from_proto(p).dictionary == (0, 0)
    pk = LanceField("k", 1, -1, "int64", False, ENCODING_PLAIN, unenforced_primary_key=True)
    assert LanceField.from_proto(pk.to_proto()) == pk


def test_from_proto_reorders_to_depth_first_and_validates():
    ls = LanceSchema.from_arrow(NESTED)
    protos = ls.to_proto()
    # children listed before parents, interleaved: still rebuilt depth-first
    shuffled = protos[:]
    random.Random(4).shuffle(shuffled)
    top = [p for p in protos if p.parent_id == -1]
    kids = [p for p in shuffled if p.parent_id != -1]
    kids.sort(key=lambda p: [q.id for q in protos].index(p.id))  # siblings keep their order
    back = LanceSchema.from_proto(kids + top, ls.metadata)
    assert back == ls
    orphan = file_pb2.Field(name="o", id=50, parent_id=49, logical_type="int32")
    with pytest.raises(SchemaError, match="unknown parent"):
        LanceSchema.from_proto([*protos, orphan])
    with pytest.raises(SchemaError, match="duplicate"):
        LanceSchema.from_proto([*protos, protos[0]])


def test_navigation_and_projection():
    ls = LanceSchema.from_arrow(NESTED)
    assert [f.name for f in ls.top_level()] == ["id", "s", "v", "ll", "d", "b", "n"]
    assert [f.name for f in ls.children(1)] == ["x", "l", "inner"]
    assert ls.children(7) == []
    assert ls.field("ll").id == 8
    with pytest.raises(SchemaError, match="'nope'"):
        ls.field("nope")
    p = ls.project(["ll", "s"])
    assert [f.id for f in p.fields] == [8, 9, 10, 1, 2, 3, 4, 5, 6]
    assert p.to_arrow().names == ["ll", "s"]
    assert p.to_arrow().field("s").type == NESTED.field("s").type
    assert p.metadata == ls.metadata
    assert ls.project_ids([12, 0]).to_arrow().names == ["b", "id"]
    with pytest.raises(SchemaError):
        ls.project_ids([2])
    assert LanceSchema(fields=(), metadata={}).max_field_id() == -1
    assert hash(ls) == hash(LanceSchema.from_arrow(NESTED))


def test_check_compatible():
    ls = LanceSchema.from_arrow(NESTED)
    ls.check_compatible(NESTED)
    # order and nullability and list item names do not matter
    reordered = pa.schema([NESTED.field(n) for n in reversed(NESTED.names)])
    ls.check_compatible(reordered)
    ls.check_compatible(NESTED.set(0, NESTED.field(0).with_nullable(True)))
    ls.check_compatible(NESTED.set(3, pa.field("ll", pa.large_list(pa.field("e", pa.list_(pa.int8()))))))
    with pytest.raises(SchemaError, match=r"append: column 'b' has type large_binary .* binary"):
        ls.check_compatible(NESTED.set(5, pa.field("b", pa.large_binary())), context="append")
    with pytest.raises(SchemaError, match="'n'.*missing"):
        ls.check_compatible(NESTED.remove(6))
    with pytest.raises(SchemaError, match="'extra'"):
        ls.check_compatible(NESTED.append(pa.field("extra", pa.int8())))
    with pytest.raises(SchemaError, match="'s'"):
        ls.check_compatible(NESTED.set(1, pa.field("s", pa.struct([("x", pa.int64())]))))


def test_extension_and_json_fields():
    schema = pa.schema([pa.field("j", pa.json_(pa.string())), pa.field("u", pa.uuid())])
    ls = LanceSchema.from_arrow(schema)
    j, u = ls.fields
    assert (j.logical_type, j.encoding, j.extension_name) == ("json", ENCODING_VAR_BINARY, "lance.json")
    assert j.metadata == {"ARROW:extension:name": b"lance.json", "ARROW:extension:metadata": b""}
    assert u.logical_type == "fixed_size_binary:16" and u.extension_name == "arrow.uuid"
    out = ls.to_arrow()
    assert out.field("j").type == pa.large_binary()
    assert out.field("u").metadata[b"ARROW:extension:name"] == b"arrow.uuid"


@pytest.mark.interop
def test_map_and_json_schema_match_pylance(tmp_path):
    lance_file = pytest.importorskip("lance.file")
    from lance_ops.format.file import DataFileReader
    from lance_ops.format.io.object_store import ObjectStore

    table = pa.table(
        {
            "m": pa.array([[("a", 1)], None], pa.map_(pa.string(), pa.int32())),
            "j": pa.array(["{}", '{"a": 1}'], pa.json_(pa.string())),
        }
    )
    w = lance_file.LanceFileWriter(str(tmp_path / "m.lance"), table.schema, version="2.2")
    w.write_batch(table)
    w.close()
    theirs = DataFileReader(ObjectStore(str(tmp_path)), "m.lance").schema
    ours = LanceSchema.from_arrow(table.schema)
    assert [p.SerializeToString(deterministic=True) for p in ours.to_proto()] == [
        p.SerializeToString(deterministic=True) for p in theirs.to_proto()
    ]
    assert theirs.to_arrow().field("m").type == table.schema.field("m").type
