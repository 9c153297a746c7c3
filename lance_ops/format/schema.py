"""Arrow schema <-> Lance field list (docs/FORMAT.md §6).

A Lance schema is a flat, depth-first list of ``lance.file.Field`` messages linked by
``parent_id`` (-1 at top level).  Every Arrow field becomes one Lance field, except the item of
a ``fixed_size_list``, which is folded into the parent's logical type
(``fixed_size_list:<item type>:<dimension>``).  List items and struct children are fields of
their own with their own ids.
"""

import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import pyarrow as pa

from lance_ops.format._proto import file_pb2
from lance_ops.format.arrow_ext import extension_metadata
from lance_ops.format.errors import SchemaError, UnsupportedFeatureError

__all__ = [
    "ENCODING_NONE",
    "ENCODING_PLAIN",
    "ENCODING_VAR_BINARY",
    "ENCODING_DICTIONARY",
    "CallableStr",
    "LanceField",
    "PylanceField",
    "LanceSchema",
    "logical_type",
    "arrow_type",
    "normalize_type",
    "types_equivalent",
]

ENCODING_NONE = 0
ENCODING_PLAIN = 1
ENCODING_VAR_BINARY = 2
ENCODING_DICTIONARY = 3

_EXT_NAME_KEY = "ARROW:extension:name"
_EXT_META_KEY = "ARROW:extension:metadata"
_BFLOAT16 = "lance.bfloat16"
_LANCE_JSON = "lance.json"
_JSON_EXT_NAMES = (b"arrow.json", b"lance.json")

_UNIT_STR = {"s": "s", "ms": "ms", "us": "us", "ns": "ns"}

_SIMPLE_TO_LOGICAL: dict[pa.DataType, str] = {
    pa.null(): "null",
    pa.bool_(): "bool",
    pa.int8(): "int8",
    pa.uint8(): "uint8",
    pa.int16(): "int16",
    pa.uint16(): "uint16",
    pa.int32(): "int32",
    pa.uint32(): "uint32",
    pa.int64(): "int64",
    pa.uint64(): "uint64",
    pa.float16(): "halffloat",
    pa.float32(): "float",
    pa.float64(): "double",
    pa.string(): "string",
    pa.binary(): "binary",
    pa.large_string(): "large_string",
    pa.large_binary(): "large_binary",
    pa.date32(): "date32:day",
    pa.date64(): "date64:ms",
}

_LOGICAL_TO_SIMPLE: dict[str, pa.DataType] = {v: k for k, v in _SIMPLE_TO_LOGICAL.items()}
_LOGICAL_TO_SIMPLE.update(
    {
        "time32:s": pa.time32("s"),
        "time32:ms": pa.time32("ms"),
        "time64:us": pa.time64("us"),
        "time64:ns": pa.time64("ns"),
        "duration:s": pa.duration("s"),
        "duration:ms": pa.duration("ms"),
        "duration:us": pa.duration("us"),
        "duration:ns": pa.duration("ns"),
        # lance's JSON extension is stored as large_binary (jsonb)
        "json": pa.large_binary(),
    }
)


def _is_fixed_stride(t: pa.DataType) -> bool:
    """Lance's ``DataTypeExt::is_fixed_stride``: gets ``Encoding.PLAIN``."""
    return (
        pa.types.is_boolean(t)
        or pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_decimal(t)
        or pa.types.is_fixed_size_list(t)
        or pa.types.is_fixed_size_binary(t)
        or (pa.types.is_temporal(t) and not pa.types.is_interval(t))
    )


def _is_binary_like(t: pa.DataType) -> bool:
    return t in (pa.string(), pa.binary(), pa.large_string(), pa.large_binary())


def logical_type(arrow_type: pa.DataType) -> str:
    """The Lance logical type string of an Arrow type (docs/FORMAT.md §6 table).

    Raises:
        UnsupportedFeatureError: the type has no Lance logical type (e.g. interval, union).
    """
    t = arrow_type
    if isinstance(t, pa.BaseExtensionType):
        t = t.storage_type
    simple = _SIMPLE_TO_LOGICAL.get(t)
    if simple is not None:
        return simple
    if pa.types.is_decimal(t):
        bits = 128 if pa.types.is_decimal128(t) else 256 if pa.types.is_decimal256(t) else 0
        if not bits:
            raise UnsupportedFeatureError(f"Lance has no logical type for {t} (only decimal128/decimal256)")
        return f"decimal:{bits}:{t.precision}:{t.scale}"
    if pa.types.is_time32(t):
        return f"time32:{t.unit}"
    if pa.types.is_time64(t):
        return f"time64:{t.unit}"
    if pa.types.is_timestamp(t):
        return f"timestamp:{t.unit}:{t.tz if t.tz else '-'}"
    if pa.types.is_duration(t):
        return f"duration:{t.unit}"
    if pa.types.is_struct(t):
        return "struct"
    if pa.types.is_map(t):
        return "map"
    if pa.types.is_list(t):
        return "list.struct" if pa.types.is_struct(t.value_type) else "list"
    if pa.types.is_large_list(t):
        return "large_list.struct" if pa.types.is_struct(t.value_type) else "large_list"
    if pa.types.is_fixed_size_list(t):
        item = t.value_field
        md = item.metadata or {}
        if md.get(_EXT_NAME_KEY.encode()) == _BFLOAT16.encode():
            return f"fixed_size_list:{_BFLOAT16}:{t.list_size}"
        return f"fixed_size_list:{logical_type(item.type)}:{t.list_size}"
    if pa.types.is_fixed_size_binary(t):
        return f"fixed_size_binary:{t.byte_width}"
    if pa.types.is_dictionary(t):
        return f"dict:{logical_type(t.value_type)}:{logical_type(t.index_type)}:false"
    raise UnsupportedFeatureError(f"Lance has no logical type for Arrow type {t}")


#: the largest fixed_size_list dimension / fixed_size_binary width a logical type may state
#: (Arrow's int32 sizes, and a bound on what one row may make a reader allocate)
MAX_FIXED_SIZE = 2**31 - 1


def _bounded(size: int, lt: str) -> int:
    if not 0 < size <= MAX_FIXED_SIZE:
        raise SchemaError(f"logical type {lt!r}: size {size} is outside [1, {MAX_FIXED_SIZE}]")
    return size


def _parse_logical(lt: str) -> pa.DataType | None:
    """Arrow type of a leaf logical type; None for the nested ones (struct, list, map)."""
    simple = _LOGICAL_TO_SIMPLE.get(lt)
    if simple is not None:
        return simple
    parts = lt.split(":")
    kind = parts[0]
    try:
        if kind == "fixed_size_list" and len(parts) >= 3:
            size = _bounded(int(parts[-1]), lt)
            inner = ":".join(parts[1:-1])
            if inner == _BFLOAT16:
                item = pa.field(
                    "item",
                    pa.binary(2),
                    True,
                    metadata={_EXT_NAME_KEY: _BFLOAT16, _EXT_META_KEY: ""},
                )
                return pa.list_(item, size)
            inner_type = _parse_logical(inner)
            if inner_type is None:
                raise SchemaError(f"unsupported logical type {lt!r}")
            return pa.list_(pa.field("item", inner_type, True), size)
        if kind == "fixed_size_binary" and len(parts) == 2:
            return pa.binary(_bounded(int(parts[1]), lt))
        if kind == "dict" and len(parts) == 4:
            value_type = _parse_logical(parts[1])
            index_type = _parse_logical(parts[2])
            if value_type is None or index_type is None:
                raise SchemaError(f"unsupported dictionary type {lt!r}")
            return pa.dictionary(index_type, value_type)
        if kind == "decimal" and len(parts) == 4:
            bits, precision, scale = int(parts[1]), int(parts[2]), int(parts[3])
            if bits == 128:
                return pa.decimal128(precision, scale)
            if bits == 256:
                return pa.decimal256(precision, scale)
            raise SchemaError(f"unsupported decimal width in logical type {lt!r}")
        if kind == "timestamp" and len(parts) >= 3:
            unit = _UNIT_STR.get(parts[1])
            if unit is None:
                raise SchemaError(f"unsupported time unit in logical type {lt!r}")
            tz = ":".join(parts[2:])  # time zone offsets such as "+01:00" contain ':'
            return pa.timestamp(unit, None if tz == "-" else tz)
    except (ValueError, OverflowError) as e:
        raise SchemaError(f"malformed logical type {lt!r}: {e}") from e
    if lt in ("struct", "list", "list.struct", "large_list", "large_list.struct", "map"):
        return None
    raise SchemaError(f"unsupported logical type {lt!r}")


class MethodStr(str):
    """A str that calling returns itself: an attribute that pylance spells as a method
    (``field.name()``) reads both ways."""

    def __call__(self) -> str:
        return str(self)


class CallableStr(str):
    """pylance's ``DataFile.path``: a str that can still be called as the method it used to be,
    with pylance's ``DeprecationWarning``."""

    def __call__(self) -> str:
        warnings.warn("DataFile.path() is deprecated, use DataFile.path instead", DeprecationWarning, stacklevel=2)
        return str(self)


class PylanceField:
    """pylance's ``LanceField`` shape (what ``LanceSchema.fields()`` returns): ``name()``, ``id()``,
    ``children()``, ``to_arrow()`` and ``metadata`` with str values."""

    __slots__ = ("_field", "_schema")

    def __init__(self, schema: "LanceSchema", f: "LanceField") -> None:
        self._schema, self._field = schema, f

    def name(self) -> str:
        return str(self._field.name)

    def id(self) -> int:
        return self._field.id

    def children(self) -> list["PylanceField"]:
        return [PylanceField(self._schema, c) for c in self._schema.children(self._field.id)]

    @property
    def metadata(self) -> dict[str, str]:
        return {k: bytes(v).decode() for k, v in self._field.metadata.items()}

    def to_arrow(self) -> pa.Field:
        return self._schema.arrow_field(self._field.id)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PylanceField) and self._field == other._field

    def __hash__(self) -> int:
        return hash(self._field)

    def __repr__(self) -> str:
        return f"PylanceField(name={self.name()!r}, id={self.id()}, parent_id={self._field.parent_id})"


class FieldList(tuple):  # type: ignore[type-arg]
    """``LanceSchema.fields``: lance_ops' tuple of every field depth-first; called, pylance's
    ``fields()``: the top-level fields as :class:`PylanceField` (children through ``children()``)."""

    def __call__(self) -> list[PylanceField]:
        schema = LanceSchema(fields=tuple(self))
        return [PylanceField(schema, f) for f in schema.top_level()]


@dataclass(frozen=True)
class LanceField:
    """One node of the flattened Lance schema (``lance.file.Field``, docs/FORMAT.md §6)."""

    name: str
    id: int
    parent_id: int
    logical_type: str
    nullable: bool
    encoding: int = ENCODING_NONE
    metadata: Mapping[str, bytes] = field(default_factory=dict, hash=False)
    extension_name: str = ""
    dictionary: tuple[int, int] | None = None
    unenforced_primary_key: bool = False

    def __post_init__(self) -> None:
        if type(self.name) is not MethodStr:  # pylance's ``name()`` reads too
            object.__setattr__(self, "name", MethodStr(self.name))

    @property
    def is_struct(self) -> bool:
        return self.logical_type == "struct"

    @property
    def is_list(self) -> bool:
        return self.logical_type in ("list", "list.struct", "large_list", "large_list.struct")

    @property
    def is_large_list(self) -> bool:
        return self.logical_type in ("large_list", "large_list.struct")

    def to_proto(self) -> file_pb2.Field:
        pb = file_pb2.Field(
            type=file_pb2.Field.PARENT,  # pylance 14 always writes 0
            name=self.name,
            id=self.id,
            parent_id=self.parent_id,
            logical_type=self.logical_type,
            nullable=self.nullable,
            encoding=self.encoding,  # type: ignore[arg-type]
            extension_name=self.extension_name,
            unenforced_primary_key=self.unenforced_primary_key,
        )
        if self.dictionary is not None:
            pb.dictionary.offset, pb.dictionary.length = self.dictionary
            pb.dictionary.SetInParent()
        for k, v in self.metadata.items():
            pb.metadata[k] = bytes(v)
        return pb

    @classmethod
    def from_proto(cls, pb: file_pb2.Field) -> "LanceField":
        return cls(
            name=pb.name,
            id=pb.id,
            parent_id=pb.parent_id,
            logical_type=pb.logical_type,
            nullable=pb.nullable,
            encoding=int(pb.encoding),
            metadata={k: bytes(v) for k, v in pb.metadata.items()},
            extension_name=pb.extension_name,
            dictionary=(pb.dictionary.offset, pb.dictionary.length) if pb.HasField("dictionary") else None,
            unenforced_primary_key=pb.unenforced_primary_key,
        )


def arrow_type(fld: LanceField, children: list[pa.Field]) -> pa.DataType:
    """Arrow type of a Lance field, given its children already converted to Arrow fields.

    Raises:
        SchemaError: unknown or malformed logical type, or wrong number of children.
    """
    lt = fld.logical_type
    if lt == "struct":
        return pa.struct(children)
    if lt in ("list", "list.struct", "large_list", "large_list.struct"):
        if len(children) != 1:
            raise SchemaError(
                f"list field {fld.name!r} (id {fld.id}) has {len(children)} children, expected 1"
            )
        return pa.large_list(children[0]) if lt.startswith("large") else pa.list_(children[0])
    if lt == "map":
        if len(children) != 1 or not pa.types.is_struct(children[0].type) or children[0].type.num_fields != 2:
            raise SchemaError(
                f"map field {fld.name!r} (id {fld.id}) needs one struct child with key and value"
            )
        entries = children[0].type
        return pa.map_(entries.field(0), entries.field(1))
    if lt.startswith("fixed_size_list:") and lt.split(":")[1] in ("struct", "list", "large_list") and len(children) == 1:
        # a fixed-size list of a nested type (pylance 2.2: fixed_size_list<struct>): its item is a field
        try:
            return pa.list_(children[0], int(lt.rsplit(":", 1)[1]))
        except ValueError as e:
            raise SchemaError(f"malformed logical type {lt!r}: {e}") from e
    t = _parse_logical(lt)
    assert t is not None
    if children:
        raise SchemaError(f"field {fld.name!r} (id {fld.id}) of type {lt!r} cannot have children")
    return t


def normalize_type(t: pa.DataType) -> pa.DataType:
    """The type with child names of list-likes, child nullability and metadata erased.

    Two types with the same normal form have the same physical layout and the same Lance logical
    types, so data of one can be written under a schema of the other.
    """
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, normalize_type(f.type)) for f in t])
    if pa.types.is_list(t):
        return pa.list_(pa.field("item", normalize_type(t.value_type)))
    if pa.types.is_large_list(t):
        return pa.large_list(pa.field("item", normalize_type(t.value_type)))
    if pa.types.is_fixed_size_list(t):
        return pa.list_(pa.field("item", normalize_type(t.value_type)), t.list_size)
    if pa.types.is_map(t):
        return pa.map_(normalize_type(t.key_type), normalize_type(t.item_type))
    if pa.types.is_dictionary(t):
        return pa.dictionary(t.index_type, normalize_type(t.value_type))
    if isinstance(t, pa.BaseExtensionType):
        return normalize_type(t.storage_type)
    return t


def types_equivalent(a: pa.DataType, b: pa.DataType) -> bool:
    """True when ``a`` and ``b`` differ at most in child names, child nullability and metadata."""
    return bool(normalize_type(a) == normalize_type(b))


@dataclass(frozen=True)
class LanceSchema:
    """A Lance schema: fields in depth-first order (parents before children) plus metadata."""

    fields: tuple[LanceField, ...]
    metadata: Mapping[str, bytes] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        if type(self.fields) is not FieldList:  # pylance's ``fields()`` reads too
            object.__setattr__(self, "fields", FieldList(self.fields))

    # ------------------------------------------------------------ conversions
    @classmethod
    def from_arrow(cls, schema: pa.Schema, *, start_id: int = 0) -> "LanceSchema":
        """Assign ids depth-first from ``start_id``; top-level ``parent_id`` is -1.

        Raises:
            UnsupportedFeatureError: a type Lance cannot store.
        """
        out: list[LanceField] = []
        next_id = [start_id]

        def visit(f: pa.Field, parent_id: int) -> None:
            t = f.type
            md: dict[str, bytes] = {k.decode(): bytes(v) for k, v in (f.metadata or {}).items()}
            if isinstance(t, pa.BaseExtensionType):
                md.setdefault(_EXT_NAME_KEY, t.extension_name.encode())
                md.setdefault(_EXT_META_KEY, extension_metadata(t))
                t = t.storage_type
            if md.get(_EXT_NAME_KEY) in _JSON_EXT_NAMES:
                # pylance stores both Arrow's and its own JSON extension as lance.json (JSONB bytes)
                md[_EXT_NAME_KEY] = _LANCE_JSON.encode()
                md[_EXT_META_KEY] = b""
                t = pa.large_binary()
                lt = "json"
            else:
                lt = logical_type(t)
            if pa.types.is_fixed_size_list(t):
                _check_fsl_item(f.name, t)
            if _is_fixed_stride(t) or pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t):
                enc = ENCODING_PLAIN
            elif _is_binary_like(t):
                enc = ENCODING_VAR_BINARY
            elif pa.types.is_dictionary(t):
                enc = ENCODING_DICTIONARY
            else:
                enc = ENCODING_NONE
            ext = md.get(_EXT_NAME_KEY, b"").decode()
            my_id = next_id[0]
            next_id[0] += 1
            out.append(
                LanceField(
                    name=f.name,
                    id=my_id,
                    parent_id=parent_id,
                    logical_type=lt,
                    nullable=f.nullable,
                    encoding=enc,
                    metadata=md,
                    extension_name=ext,
                )
            )
            if pa.types.is_struct(t):
                for child in t:
                    visit(child, my_id)
            elif pa.types.is_map(t):
                entries = pa.field("entries", pa.struct([t.key_field, t.item_field]), nullable=False)
                visit(entries, my_id)
            elif pa.types.is_list(t) or pa.types.is_large_list(t):
                visit(t.value_field, my_id)

        for f in schema:
            visit(f, -1)
        md = {k.decode(): bytes(v) for k, v in (schema.metadata or {}).items()}
        return cls(fields=tuple(out), metadata=md)

    @classmethod
    def from_pyarrow(cls, schema: pa.Schema) -> "LanceSchema":
        """pylance's name: :meth:`from_arrow` with ids from 0 (``LanceSchema.from_pyarrow``)."""
        return cls.from_arrow(schema)

    def to_pyarrow(self) -> pa.Schema:
        """pylance's name for :meth:`to_arrow`."""
        return self.to_arrow()

    def to_arrow(self) -> pa.Schema:
        """Arrow schema with types, nullability and field/schema metadata of this schema."""
        fields = [self._arrow_field(f) for f in self.top_level()]
        md = {k.encode(): bytes(v) for k, v in self.metadata.items()}
        return pa.schema(fields, metadata=md or None)

    def arrow_field(self, field_id: int) -> pa.Field:
        """The Arrow field (with its subtree) of any field of this schema."""
        return self._arrow_field(self._by_id[field_id])

    def _arrow_field(self, f: LanceField) -> pa.Field:
        children = [self._arrow_field(c) for c in self.children(f.id)]
        try:
            t = arrow_type(f, children)
        except SchemaError as e:
            if str(e).startswith("field "):
                raise
            raise SchemaError(f"field {f.name!r} (id {f.id}): {e}") from None
        md = {k.encode(): bytes(v) for k, v in f.metadata.items()}
        if f.extension_name and _EXT_NAME_KEY.encode() not in md:
            md[_EXT_NAME_KEY.encode()] = f.extension_name.encode()
        if f.logical_type == "json":
            md[_EXT_NAME_KEY.encode()] = _LANCE_JSON.encode()
        return pa.field(f.name, t, f.nullable, metadata=md or None)

    @classmethod
    def from_proto(
        cls, fields: Iterable[file_pb2.Field], metadata: Mapping[str, bytes] | None = None
    ) -> "LanceSchema":
        """Build from ``lance.file.Field`` messages (parents are linked by ``parent_id``).

        Raises:
            SchemaError: duplicate ids or a child whose parent is missing.
        """
        flat = [LanceField.from_proto(pb) for pb in fields]
        ids: set[int] = set()
        for f in flat:
            if f.id in ids:
                raise SchemaError(f"duplicate field id {f.id} (field {f.name!r})")
            ids.add(f.id)
        kids: dict[int, list[LanceField]] = {}
        roots: list[LanceField] = []
        for f in flat:
            if f.parent_id == -1:
                roots.append(f)
            elif f.parent_id in ids:
                kids.setdefault(f.parent_id, []).append(f)
            else:
                raise SchemaError(f"field {f.name!r} (id {f.id}) has unknown parent id {f.parent_id}")
        ordered: list[LanceField] = []

        def walk(f: LanceField) -> None:
            ordered.append(f)
            for c in kids.get(f.id, ()):
                walk(c)

        for r in roots:
            walk(r)
        if len(ordered) != len(flat):
            raise SchemaError("schema fields form a cycle (parent_id links do not reach the top level)")
        md = {k: bytes(v) for k, v in (metadata or {}).items()}
        return cls(fields=tuple(ordered), metadata=md)

    def to_proto(self) -> list[file_pb2.Field]:
        """``lance.file.Field`` messages in depth-first order (``type`` 0, top-level parent -1)."""
        return [f.to_proto() for f in self.fields]

    # ------------------------------------------------------------ navigation
    @cached_property
    def _by_id(self) -> dict[int, LanceField]:
        return {f.id: f for f in self.fields}

    @cached_property
    def _children(self) -> dict[int, list[LanceField]]:
        out: dict[int, list[LanceField]] = {}
        for f in self.fields:
            out.setdefault(f.parent_id, []).append(f)
        return out

    def top_level(self) -> list[LanceField]:
        return list(self._children.get(-1, []))

    def children(self, field_id: int) -> list[LanceField]:
        return list(self._children.get(field_id, [])) if field_id != -1 else []

    def field_ids(self) -> list[int]:
        return [f.id for f in self.fields]

    def has_field_ids(self, field_ids: Iterable[int]) -> bool:
        """Whether every id of ``field_ids`` is a field of this schema."""
        return all(fid in self._by_id for fid in field_ids)

    def max_field_id(self) -> int:
        return max((f.id for f in self.fields), default=-1)

    def field_by_id(self, field_id: int) -> LanceField:
        try:
            return self._by_id[field_id]
        except KeyError:
            raise SchemaError(f"no field with id {field_id} in schema (ids {self.field_ids()})") from None

    def field(self, name: str) -> LanceField:
        for f in self.top_level():
            if f.name == name:
                return f
        raise SchemaError(f"no column {name!r} in schema (columns: {[f.name for f in self.top_level()]})")

    def subtree(self, field_id: int) -> list[LanceField]:
        """The field and all its descendants, depth-first."""
        out: list[LanceField] = []

        def walk(f: LanceField) -> None:
            out.append(f)
            for c in self._children.get(f.id, ()):
                walk(c)

        walk(self.field_by_id(field_id))
        return out

    def project(self, names: Sequence[str]) -> "LanceSchema":
        """Top-level columns ``names`` with their subtrees, in the requested order; ids kept."""
        fields: list[LanceField] = []
        for name in names:
            fields.extend(self.subtree(self.field(name).id))
        return LanceSchema(fields=tuple(fields), metadata=dict(self.metadata))

    def project_ids(self, field_ids: Sequence[int]) -> "LanceSchema":
        """Like :meth:`project`, by top-level field id."""
        fields: list[LanceField] = []
        for fid in field_ids:
            f = self.field_by_id(fid)
            if f.parent_id != -1:
                raise SchemaError(f"field id {fid} ({f.name!r}) is not a top-level column")
            fields.extend(self.subtree(fid))
        return LanceSchema(fields=tuple(fields), metadata=dict(self.metadata))

    def check_compatible(self, other: pa.Schema, *, context: str = "") -> None:
        """Check that data of schema ``other`` can be appended under this schema.

        Top-level names must match as sets; types must be equal up to child field names, child
        nullability and metadata (``string`` vs ``large_string`` are different).  Nullability is
        not compared here (writers reject nulls in non-nullable columns).

        Raises:
            SchemaError: naming the first mismatching column and both types.
        """
        where = f"{context}: " if context else ""
        mine = {f.name: f for f in self.top_level()}
        theirs = {f.name: f for f in other}
        if len(theirs) != len(other):
            raise SchemaError(f"{where}data has duplicate column names: {other.names}")
        for name in mine:
            if name not in theirs:
                raise SchemaError(f"{where}column {name!r} of the dataset schema is missing from the data")
        for name in theirs:
            if name not in mine:
                raise SchemaError(f"{where}column {name!r} of the data is not in the dataset schema")
        expected = self.to_arrow()
        for f in other:
            exp = expected.field(f.name).type
            if (expected.field(f.name).metadata or {}).get(b"ARROW:extension:name") == b"lance.blob.v2" and (
                pa.types.is_binary(f.type) or pa.types.is_large_binary(f.type)
            ):
                continue  # payloads into a blob v2 column (as pylance takes them)
            if not types_equivalent(exp, f.type):
                raise SchemaError(
                    f"{where}column {f.name!r} has type {f.type} in the data but {exp} in the dataset schema"
                )


def _check_fsl_item(name: str, t: pa.FixedSizeListType) -> None:
    """Lance stores fixed_size_list items inline: only fixed-width items (or nested FSL)."""
    item = t.value_type
    while pa.types.is_fixed_size_list(item):
        item = item.value_type
    if not (_is_fixed_stride(item) and not pa.types.is_fixed_size_list(item)):
        raise UnsupportedFeatureError(
            f"column {name!r}: fixed_size_list of {item} is not supported (items must be fixed-width)"
        )


_RUST_TYPE_NAMES = {
    "int8": "Int8", "int16": "Int16", "int32": "Int32", "int64": "Int64", "uint8": "UInt8", "uint16": "UInt16",
    "uint32": "UInt32", "uint64": "UInt64", "halffloat": "Float16", "float": "Float32", "double": "Float64",
    "string": "Utf8", "large_string": "LargeUtf8", "string_view": "Utf8View", "binary": "Binary",
    "large_binary": "LargeBinary", "binary_view": "BinaryView", "bool": "Boolean", "date32[day]": "Date32",
    "date64[ms]": "Date64", "null": "Null",
}
_RUST_UNITS = {"s": "Second", "ms": "Millisecond", "us": "Microsecond", "ns": "Nanosecond"}


def rust_type_name(t: pa.DataType) -> str:
    """An Arrow type as arrow-rs prints it (``Int32``, ``Utf8``, ``Timestamp(Microsecond, None)``),
    the names pylance's messages use."""
    if pa.types.is_timestamp(t):
        tz = f'Some("{t.tz}")' if t.tz else "None"
        return f"Timestamp({_RUST_UNITS[t.unit]}, {tz})"
    return _RUST_TYPE_NAMES.get(str(t), str(t))
