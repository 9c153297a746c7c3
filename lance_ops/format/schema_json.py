"""pylance's ``lance.schema_to_json`` / ``lance.json_to_schema``: an Arrow schema as Lance's JSON
dict (``{"fields": [{"name", "type": {"type": ...}, "nullable", "metadata"?}], "metadata"?}``).

Leaf types are Lance's logical type strings (``"int64"``, ``"timestamp:us:UTC"``,
``"dict:string:int32:false"``, ...); nested ones carry their children under ``"fields"``:
``struct``, ``list``, ``large_list``, ``fixed_size_list`` (with ``"length"``), and
``fixed_size_binary`` is ``{"type": "fixed_size_binary", "length": n}``, as pylance's.
"""

from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from lance_ops.format.errors import SchemaError, UnsupportedFeatureError
from lance_ops.format.schema import _parse_logical, logical_type

__all__ = ["json_to_schema", "schema_to_json"]


def _type_json(t: pa.DataType) -> dict[str, Any]:
    if pa.types.is_struct(t):
        return {"type": "struct", "fields": [_field_json(t.field(i)) for i in range(t.num_fields)]}
    if pa.types.is_fixed_size_list(t):
        return {"type": "fixed_size_list", "fields": [_field_json(t.value_field)], "length": t.list_size}
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return {"type": "large_list" if pa.types.is_large_list(t) else "list", "fields": [_field_json(t.value_field)]}
    if pa.types.is_map(t):
        raise UnsupportedFeatureError(f"schema_to_json: Unsupported type: {t} (as pylance's)")
    if pa.types.is_fixed_size_binary(t):
        return {"type": "fixed_size_binary", "length": t.byte_width}
    return {"type": logical_type(t)}


def _field_json(f: pa.Field) -> dict[str, Any]:
    out: dict[str, Any] = {"name": f.name, "type": _type_json(f.type), "nullable": f.nullable}
    if f.metadata:
        out["metadata"] = {k.decode(): v.decode() for k, v in f.metadata.items()}
    return out


def schema_to_json(schema: pa.Schema) -> dict[str, Any]:
    """``schema`` as pylance's JSON-ready dict.

    Raises:
        UnsupportedFeatureError: a type Lance's JSON has no name for (maps, unions, ...).
    """
    out: dict[str, Any] = {"fields": [_field_json(f) for f in schema]}
    if schema.metadata:
        out["metadata"] = {k.decode(): v.decode() for k, v in schema.metadata.items()}
    return out


def _json_type(j: Mapping[str, Any]) -> pa.DataType:
    kind = str(j.get("type"))
    children = [_json_field(c) for c in j.get("fields") or ()]
    if kind == "struct":
        return pa.struct(children)
    if kind in ("list", "large_list", "fixed_size_list"):
        if len(children) != 1:
            raise SchemaError(f"json_to_schema: a {kind} needs one child field, got {len(children)}")
        if kind == "fixed_size_list":
            return pa.list_(children[0], int(j["length"]))
        return pa.large_list(children[0]) if kind == "large_list" else pa.list_(children[0])
    if kind == "fixed_size_binary":
        return pa.binary(int(j["length"]))
    t = _parse_logical(kind)
    if t is None:
        raise SchemaError(f"json_to_schema: unknown type {kind!r}")
    return t


def _json_field(j: Mapping[str, Any]) -> pa.Field:
    return pa.field(str(j["name"]), _json_type(j["type"]), bool(j.get("nullable", True)), metadata=j.get("metadata"))


def json_to_schema(schema_json: Mapping[str, Any]) -> pa.Schema:
    """The Arrow schema of pylance's JSON dict (:func:`schema_to_json`'s inverse).

    Raises:
        SchemaError: an unknown type name or a malformed nested type.
    """
    try:
        return pa.schema([_json_field(f) for f in schema_json["fields"]], metadata=schema_json.get("metadata"))
    except (KeyError, TypeError, ValueError) as e:
        raise SchemaError(f"json_to_schema: not a Lance JSON schema ({type(e).__name__}: {e})") from None
