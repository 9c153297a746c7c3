"""Arrow extension types in a Lance schema: their serialized metadata on write, and the
canonical ``arrow.*`` types rebuilt on read (pylance keeps them as extension types).

A C++ extension type (``arrow.fixed_shape_tensor``, ``arrow.opaque``, ...) has no Python
``__arrow_ext_serialize__``; its metadata is read from the field's Arrow C schema export
(``ARROW:extension:metadata``), as any Arrow consumer receives it.
"""

import ctypes
import io

import pyarrow as pa

EXT_NAME_KEY = b"ARROW:extension:name"
EXT_META_KEY = b"ARROW:extension:metadata"
#: canonical Arrow extension types rebuilt on read, as pylance returns them (``arrow.json`` is
#: Lance's JSON column and other names stay their storage with the field metadata)
CANONICAL = frozenset({"arrow.fixed_shape_tensor", "arrow.uuid", "arrow.bool8", "arrow.opaque"})


class _ArrowSchema(ctypes.Structure):
    _fields_ = [("format", ctypes.c_char_p), ("name", ctypes.c_char_p), ("metadata", ctypes.c_void_p),
                ("flags", ctypes.c_int64), ("n_children", ctypes.c_int64)]


def _c_metadata(field: pa.Field) -> dict[bytes, bytes]:
    capsule = field.__arrow_c_schema__()
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    c_schema = _ArrowSchema.from_address(get(capsule, b"arrow_schema"))
    if not c_schema.metadata:
        return {}
    read = ctypes.string_at
    pos = c_schema.metadata
    count = int.from_bytes(read(pos, 4), "little", signed=True)
    pos += 4
    out = {}
    for _ in range(count):
        n = int.from_bytes(read(pos, 4), "little", signed=True)
        key = read(pos + 4, n)
        pos += 4 + n
        n = int.from_bytes(read(pos, 4), "little", signed=True)
        out[key] = read(pos + 4, n)
        pos += 4 + n
    return out


def extension_metadata(t: pa.BaseExtensionType) -> bytes:
    """The serialized parameters of extension type ``t`` (``{"shape":[2,3]}`` for a tensor)."""
    ser = getattr(t, "__arrow_ext_serialize__", None)
    if ser is not None:
        return bytes(ser())
    return _c_metadata(pa.field("x", t)).get(EXT_META_KEY, b"")


def canonical_extension(name: str, storage: pa.DataType, metadata: bytes) -> pa.DataType | None:
    """The canonical Arrow extension type ``name`` over ``storage``, or None when ``name`` is not
    one of :data:`CANONICAL` (or its metadata does not describe ``storage``)."""
    if name not in CANONICAL:
        return None
    field = pa.field("x", storage, metadata={EXT_NAME_KEY: name.encode(), EXT_META_KEY: metadata})
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, pa.schema([field])):
        pass
    try:
        t = pa.ipc.open_stream(sink.getvalue()).schema.field(0).type
    except pa.ArrowInvalid:
        return None
    return t if isinstance(t, pa.BaseExtensionType) else None


_REBUILT: dict[pa.Schema, pa.Schema | None] = {}


def _rebuilt_schema(schema: pa.Schema) -> pa.Schema | None:
    """``schema`` with its canonical extension fields as extension types (None: none to rebuild)."""
    if schema in _REBUILT:
        return _REBUILT[schema]
    fields, changed = [], False
    for f in schema:
        md = f.metadata or {}
        name = md.get(EXT_NAME_KEY, b"").decode()
        ext = None
        if name in CANONICAL and not isinstance(f.type, pa.BaseExtensionType):
            ext = canonical_extension(name, f.type, md.get(EXT_META_KEY, b""))
        if ext is not None:
            rest = {k: v for k, v in md.items() if k not in (EXT_NAME_KEY, EXT_META_KEY)}
            f = pa.field(f.name, ext, f.nullable, metadata=rest or None)
            changed = True
        fields.append(f)
    out = pa.schema(fields, metadata=schema.metadata) if changed else None
    if len(_REBUILT) < 1024:
        _REBUILT[schema] = out
    return out


def with_extensions(data):  # type: ignore[no-untyped-def]
    """A schema, RecordBatch or Table as pylance returns it: top-level columns stored with a
    canonical Arrow extension type's metadata come back as that extension type."""
    schema = data if isinstance(data, pa.Schema) else data.schema
    target = _rebuilt_schema(schema)
    if target is None:
        return data
    if isinstance(data, pa.Schema):
        return target
    columns = []
    for f, col in zip(target, data.columns, strict=True):
        if isinstance(f.type, pa.BaseExtensionType) and not isinstance(col.type, pa.BaseExtensionType):
            col = (pa.ExtensionArray.from_storage(f.type, col) if isinstance(col, pa.Array)
                   else pa.chunked_array([pa.ExtensionArray.from_storage(f.type, c) for c in col.chunks], f.type))
        columns.append(col)
    cls = pa.RecordBatch if isinstance(data, pa.RecordBatch) else pa.Table
    return cls.from_arrays(columns, schema=target)
