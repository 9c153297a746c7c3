"""``list_indices`` / ``describe_indices`` / ``index_statistics`` as pylance 14 shapes them.

Coverage is counted as pylance counts it (verified against ``describe_indices`` and
``stats.index_stats``): an index covers the fragments of its bitmaps (all segments of one name
together) that still exist; ``num_rows_indexed`` is their live rows (deleted rows excluded),
``num_unindexed_rows`` the live rows of the other fragments.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from lance_ops.format.errors import SchemaError
from lance_ops.format.index.metadata import IndexMetadata, decode_index_section
from lance_ops.format.table.manifest import Manifest

#: pylance's ``index_type`` strings
_TYPE_NAMES = {
    "BTREE": "BTree",
    "BITMAP": "Bitmap",
    "LABEL_LIST": "LabelList",
    "NGRAM": "NGram",
    "ZONEMAP": "ZoneMap",
    "BLOOMFILTER": "BloomFilter",
    "INVERTED": "Inverted",
    "MINHASHLSH": "MinHashLsh",
    "RTREE": "RTree",
    "FRAG_REUSE": "FragmentReuse",
    "MEM_WAL": "MemWal",
}


def index_type_name(index: IndexMetadata) -> str:
    kind = index.kind
    return _TYPE_NAMES.get(kind, kind)


@dataclass(frozen=True)
class IndexSegmentDescription:
    uuid: str
    dataset_version_at_last_update: int
    fragment_ids: frozenset[int]
    index_version: int
    created_at: datetime | None
    size_bytes: int | None
    base_id: int | None


@dataclass(frozen=True)
class IndexDescription:
    """One index (all its segments), as pylance's ``IndexDescription`` plus unindexed counts."""

    name: str
    type_url: str
    index_type: str
    num_rows_indexed: int
    fields: tuple[int, ...]
    field_names: tuple[str, ...]
    segments: tuple[IndexSegmentDescription, ...]
    details: dict[str, Any] = field(default_factory=dict)
    total_size_bytes: int | None = None
    num_rows_unindexed: int = 0
    num_fragments_indexed: int = 0
    num_fragments_unindexed: int = 0

    @property
    def fragment_ids(self) -> frozenset[int]:
        """Union of the segments' bitmaps (ids of deleted fragments included, as stored)."""
        return frozenset().union(*(s.fragment_ids for s in self.segments))

    @property
    def coverage(self) -> float:
        """Share of the dataset's live rows the index covers (1.0 for an empty dataset)."""
        total = self.num_rows_indexed + self.num_rows_unindexed
        return self.num_rows_indexed / total if total else 1.0


def _segment(i: IndexMetadata) -> IndexSegmentDescription:
    created = datetime.fromtimestamp(i.created_at_ms / 1000, tz=UTC) if i.created_at_ms is not None else None
    size = sum(f.size_bytes for f in i.files) if i.files else None
    return IndexSegmentDescription(
        i.uuid, i.dataset_version, frozenset(i.fragment_ids or ()), i.index_version, created, size, i.base_id
    )


def describe_indices(manifest: Manifest, where: str = "") -> list[IndexDescription]:
    """Every index of ``manifest`` (segments of one name together), sorted by name."""
    indices = decode_index_section(manifest.index_section, where or f"version {manifest.version}")
    by_name: dict[str, list[IndexMetadata]] = {}
    for i in indices:
        by_name.setdefault(i.name, []).append(i)
    rows = {f.id: f.num_rows for f in manifest.fragments}
    out = []
    for name in sorted(by_name):
        segs = by_name[name]
        first = segs[0]
        if any(s.fragment_ids is None for s in segs):
            covered = set(rows)  # no bitmap: pylance assumes the whole dataset at build time
        else:
            covered = set().union(*(s.fragment_ids or () for s in segs)) & set(rows)
        indexed = sum(rows[f] for f in covered)
        sizes = [sum(f.size_bytes for f in s.files) for s in segs if s.files]
        out.append(
            IndexDescription(
                name=name,
                type_url=first.type_url,
                index_type=index_type_name(first),
                num_rows_indexed=indexed,
                fields=first.fields,
                field_names=tuple(_field_name(manifest, f) for f in first.fields),
                segments=tuple(_segment(s) for s in segs),
                total_size_bytes=sum(sizes) if len(sizes) == len(segs) else None,
                num_rows_unindexed=sum(rows.values()) - indexed,
                num_fragments_indexed=len(covered),
                num_fragments_unindexed=len(rows) - len(covered),
            )
        )
    return out


def _field_name(manifest: Manifest, field_id: int) -> str:
    """Dotted path of a field (``s.x`` for a struct child), as pylance names indexed fields."""
    parts = []
    fid = field_id
    try:
        while fid >= 0:
            f = manifest.schema.field_by_id(fid)
            parts.append(f.name)
            fid = f.parent_id
    except SchemaError:
        return f"<field {field_id}>"
    return ".".join(reversed(parts))


def list_indices(descriptions: Sequence[IndexDescription]) -> list[dict[str, Any]]:
    """pylance's (deprecated) ``list_indices``: one dict per segment."""
    return [
        {
            "name": d.name,
            "type": d.index_type,
            "uuid": s.uuid,
            "fields": list(d.field_names),
            "version": s.dataset_version_at_last_update,
            "fragment_ids": set(s.fragment_ids),
            "base_id": s.base_id,
        }
        for d in descriptions
        for s in d.segments
    ]


def index_statistics(d: IndexDescription) -> dict[str, Any]:
    """pylance's ``stats.index_stats(name)`` keys about coverage (not the per-kind details)."""
    created = [s.created_at for s in d.segments if s.created_at is not None]
    return {
        "index_type": d.index_type,
        "name": d.name,
        "num_indices": len(d.segments),
        "num_segments": len(d.segments),
        "num_indexed_fragments": d.num_fragments_indexed,
        "num_indexed_rows": d.num_rows_indexed,
        "num_unindexed_fragments": d.num_fragments_unindexed,
        "num_unindexed_rows": d.num_rows_unindexed,
        "updated_at_timestamp_ms": int(max(created).timestamp() * 1000) if created else None,
    }


def format_fragment_ids(ids: Sequence[int] | frozenset[int], limit: int = 8) -> str:
    """``0-3, 7, 9-12`` (at most ``limit`` runs, then ``... (+N fragments)``)."""
    runs: list[list[int]] = []
    for i in sorted(ids):
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    text = [f"{a}" if a == b else f"{a}-{b}" for a, b in runs[:limit]]
    if len(runs) > limit:
        rest = sum(b - a + 1 for a, b in runs[limit:])
        text.append(f"... (+{rest} fragments)")
    return ", ".join(text)
