"""Data source options: parsing (keys arrive lower-cased, values as strings) and building."""

import json
from collections.abc import Mapping
from typing import Any

STORAGE_PREFIX = "storage."

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def storage_options(options: Mapping[str, str]) -> dict[str, Any]:
    """``storage_options`` (a JSON object) merged with ``storage.<key>`` options (prefix stripped)."""
    out: dict[str, Any] = {}
    raw = options.get("storage_options")
    if raw:
        parsed = json.loads(raw)
        if not isinstance(parsed, dict):
            raise ValueError(f"option storage_options must be a JSON object, got {raw!r}")
        out.update(parsed)
    for k, v in options.items():
        if k.lower().startswith(STORAGE_PREFIX):
            out[k[len(STORAGE_PREFIX):]] = v
    return out


def get_bool(options: Mapping[str, str], key: str, default: bool) -> bool:
    raw = options.get(key)
    if raw is None or raw == "":
        return default
    v = str(raw).strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise ValueError(f"option {key} must be true or false, got {raw!r}")


def get_int(options: Mapping[str, str], key: str, default: int | None) -> int | None:
    raw = options.get(key)
    if raw is None or raw == "":
        return default
    try:
        return int(str(raw).strip())
    except ValueError:
        raise ValueError(f"option {key} must be an integer, got {raw!r}") from None


def source_options(
    *,
    storage_options: Mapping[str, Any] | None = None,
    version: int | None = None,
    **extra: Any,
) -> dict[str, str]:
    """Options for ``spark.read/write.format("lance")`` (None values are left out)."""
    out: dict[str, str] = {}
    if storage_options:
        out["storage_options"] = json.dumps(dict(storage_options), sort_keys=True)
    if version is not None:
        out["version"] = str(int(version))
    for k, v in extra.items():
        if v is None:
            continue
        out[k] = str(v).lower() if isinstance(v, bool) else str(v)
    return out
