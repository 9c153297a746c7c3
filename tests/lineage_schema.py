"""Validate OpenLineage events against the spec's JSON schema (tests/data/openlineage, see SOURCE.md):
the event as a ``RunEvent`` of ``OpenLineage.json``, then every facet against the schema its
``_schemaURL`` names (the spec's facet files by name, lance_ops' ``LanceOpsRunFacet.json``)."""

import json
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

ROOT = Path(__file__).resolve().parents[1]
SCHEMAS = {p.name: json.loads(p.read_text()) for p in [*(ROOT / "tests/data/openlineage").glob("*.json"),
                                                       ROOT / "docs/openlineage/LanceOpsRunFacet.json"]}
REGISTRY = Registry().with_resources((s["$id"], Resource.from_contents(s)) for s in SCHEMAS.values())
BASE = SCHEMAS["OpenLineage.json"]["$id"]


def _validator(ref: str) -> Draft202012Validator:
    return Draft202012Validator({"$ref": ref}, registry=REGISTRY, format_checker=Draft202012Validator.FORMAT_CHECKER)


def _facets(event: dict[str, Any]) -> list[dict[str, Any]]:
    out = [*event["run"].get("facets", {}).values(), *event["job"].get("facets", {}).values()]
    for d in [*event.get("inputs", []), *event.get("outputs", [])]:
        out += [*d.get("facets", {}).values(), *d.get("inputFacets", {}).values(), *d.get("outputFacets", {}).values()]
    return out


def validate_event(event: dict[str, Any], *, known_only: bool = False) -> list[str]:
    """Validate ``event`` (raises ``jsonschema.ValidationError``); returns the facet schemas used.
    ``known_only``: skip facets whose schema is not here (the Airflow provider's own facets)."""
    _validator(f"{BASE}#/$defs/RunEvent").validate(event)
    used = []
    for facet in _facets(event):
        url = facet["_schemaURL"]
        base, _, pointer = url.partition("#")
        name = base.rpartition("/")[2]
        if known_only and name not in SCHEMAS:
            continue
        assert name in SCHEMAS, f"no schema for facet {url}"
        _validator(f"{SCHEMAS[name]['$id']}#{pointer}").validate(facet)
        used.append(name)
    return used
