"""pylance's distributed full-text build: ``create_scalar_index(..., index_uuid=u,
fragment_ids=[...])`` per worker stages its fragments (nothing is committed), then
``merge_index_metadata(u, "INVERTED")`` writes the one-partition segment ``_indices/<u>/`` over
all staged fragments -- the files a single ``create_scalar_index`` writes -- and the caller
commits ``LanceOperation.CreateIndex`` with a ``lance.dataset.Index`` of that uuid, as pylance's.

A stage is a small JSON file under ``_indices/<u>/staging/`` (lance_ops' own; the merge removes it).
"""

import dataclasses
import json
from collections.abc import Mapping, Sequence
from functools import singledispatch
from typing import Any

from lance_ops.format.errors import InvalidArgumentError, UnsupportedFeatureError
from lance_ops.format.file.reader import DataFileReader
from lance_ops.format.index.build.inverted import TYPE_URL
from lance_ops.format.index.build.inverted_params import encode_details, inverted_params
from lance_ops.format.index.build.text_tokens import TokenizerParams
from lance_ops.format.index.metadata import INDICES_DIR
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.ops.index_build import _task, execute_index_task
from lance_ops.format.table.manifest import Manifest
from lance_ops.format.txn.operations import CreateIndex

STAGING = "staging"


def _dir(uuid: str) -> str:
    return f"{INDICES_DIR}/{uuid}/{STAGING}"


def stage_fragments(store: ObjectStore, manifest: Manifest, *, uuid: str, column: str, index_type: str,
                    name: str | None, fragment_ids: Sequence[int], params: Mapping[str, Any]) -> None:
    """Record one worker's fragments of a distributed INVERTED build (checked, not indexed yet).

    Raises:
        UnsupportedFeatureError: another index type; InvalidArgumentError: an unknown fragment.
    """
    kind = {"FTS": "INVERTED"}.get(str(index_type).upper(), str(index_type).upper())
    if kind != "INVERTED":
        raise UnsupportedFeatureError(f"create_scalar_index(fragment_ids=...): lance_ops builds INVERTED "
                                      f"indices by fragment, not {index_type!r}")
    known = {f.id for f in manifest.fragments}
    bad = sorted(set(int(f) for f in fragment_ids) - known)
    if bad:
        raise InvalidArgumentError(f"create_scalar_index: fragment {bad[0]} is not in version {manifest.version}")
    manifest.schema.field(column)  # raises for an unknown column
    stage = {"column": column, "name": name or f"{column}_idx", "fragment_ids": sorted(int(f) for f in fragment_ids),
             "params": json.loads(inverted_params(params).to_json())}
    key = "-".join(map(str, stage["fragment_ids"])) or "none"
    store.put(f"{_dir(uuid)}/lance_ops_{key}.json", json.dumps(stage).encode())


def merge_staged(store: ObjectStore, manifest: Manifest, uuid: str, index_type: str) -> None:
    """Write the segment of every staged fragment into ``_indices/<uuid>/`` (uncommitted).

    Raises:
        InvalidArgumentError: nothing staged under that uuid, or stages that disagree.
    """
    names = [n for n in store.list_dir(_dir(uuid)) if n.startswith("lance_ops_") and n.endswith(".json")]
    if not names:
        raise InvalidArgumentError(f"merge_index_metadata: no staged {index_type} index under {_dir(uuid)}")
    stages = [json.loads(store.read(f"{_dir(uuid)}/{n}")) for n in names]
    first = stages[0]
    if any((s["column"], s["params"]) != (first["column"], first["params"]) for s in stages):
        raise InvalidArgumentError(f"merge_index_metadata: the stages under {_dir(uuid)} differ in column or params")
    frags = sorted({f for s in stages for f in s["fragment_ids"]})
    task = _task(manifest, first["name"], "INVERTED", first["column"], frags)
    task = dataclasses.replace(task, uuid=uuid, train={"params": json.dumps(first["params"])})
    execute_index_task(store, manifest, task)
    for n in names:
        store.delete(f"{_dir(uuid)}/{n}")


@singledispatch
def with_index_details(operation: Any, store: ObjectStore) -> Any:
    """A ``CreateIndex`` whose segments without details (pylance's ``Index`` of a distributed
    build) get those of the full-text files in their directory, so lance_ops and pylance
    describe them as ``Inverted``; any other operation as it is."""
    return operation


@with_index_details.register
def _(operation: CreateIndex, store: ObjectStore) -> CreateIndex:
    out = []
    for seg in operation.new_indices:
        rel = f"{seg.directory}/metadata.lance"
        if not seg.type_url and store.exists(rel):
            meta = DataFileReader(store, rel).schema.metadata or {}
            raw = meta.get("params", meta.get(b"params"))
            if raw is not None:
                params = TokenizerParams.from_json(raw.decode() if isinstance(raw, bytes) else str(raw), rel)
                seg = seg.with_changes(type_url=TYPE_URL, details=encode_details(params))
        out.append(seg)
    return dataclasses.replace(operation, new_indices=tuple(out))
