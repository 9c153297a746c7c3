"""pylance's ``lance.dataset.Index``: an index segment as code built for pylance hands it to
``LanceOperation.CreateIndex`` (a distributed build committed by hand)."""

import dataclasses
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from lance_ops.format.index.metadata import IndexMetadata


@dataclasses.dataclass
class Index:
    """An index segment (pylance's fields); ``index_details`` is ``(type_url, bytes)`` when
    given (pylance commits a segment without details and reads its kind off its files)."""

    uuid: str
    name: str
    fields: list[int]
    dataset_version: int
    fragment_ids: Iterable[int]
    index_version: int
    created_at: datetime | None = None
    base_id: int | None = None
    files: list[Any] | None = None
    index_details: tuple[str, bytes] | None = None
    covering_fields: list[int] = dataclasses.field(default_factory=list)


def index_metadata(index: "Index | IndexMetadata") -> IndexMetadata:
    """The segment lance_ops commits for a pylance ``Index`` (an ``IndexMetadata`` as it is)."""
    if isinstance(index, IndexMetadata):
        return index
    type_url, details = index.index_details or ("", b"")
    created = int(index.created_at.timestamp() * 1000) if index.created_at is not None else None
    return IndexMetadata(uuid=str(index.uuid), name=index.name, fields=tuple(int(f) for f in index.fields),
                         dataset_version=int(index.dataset_version),
                         fragment_ids=frozenset(int(f) for f in index.fragment_ids),
                         type_url=type_url, details=bytes(details), index_version=int(index.index_version),
                         created_at_ms=created, base_id=index.base_id)
