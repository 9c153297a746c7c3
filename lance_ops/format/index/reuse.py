"""The fragment reuse index pylance writes for ``compact_files(defer_index_remap=True)``.

Facts (pylance 14.0.2; upstream ``protos/table.proto`` ``FragmentReuseIndexDetails``,
``rust/lance/src/index/frag_reuse.rs``): a system index named ``__lance_frag_reuse`` with no
fields, whose details hold (inline, or in ``_indices/<uuid>/details.binpb`` above 200 KiB) one
``Version`` per deferred compaction: its dataset version and, per rewrite group, the old and new
fragments' digests (id, physical rows, deleted rows) and the live old row addresses.  The other
indices keep their old bitmaps and files; pylance maps old addresses and bitmaps through the
versions at query time until ``optimize_indices`` remaps them.

lance_ops never writes this index (see the design note in :mod:`.remap`); it reads it to know
which coverage is still pending a deferred remap and leaves that coverage alone.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from google.protobuf.message import DecodeError

from .._proto import table_pb2
from ..errors import CorruptFileError
from ..store import ObjectStore
from .metadata import IndexMetadata

DETAILS_FILE = "details.binpb"


@dataclass(frozen=True)
class ReuseGroup:
    old_fragments: tuple[int, ...]
    new_fragments: tuple[int, ...]


@dataclass(frozen=True)
class ReuseVersion:
    dataset_version: int
    groups: tuple[ReuseGroup, ...]


def read_reuse_versions(store: ObjectStore, index: IndexMetadata) -> tuple[ReuseVersion, ...]:
    """The versions of a fragment reuse index, oldest first.

    Raises:
        CorruptFileError: the details do not decode.
    """
    where = f"{store.uri}: index {index.name} ({index.uuid})"
    try:
        details = table_pb2.FragmentReuseIndexDetails.FromString(index.details)
        if details.WhichOneof("content") == "external":
            ext = details.external
            data = store.read_range(f"{index.directory}/{ext.path or DETAILS_FILE}", ext.offset, ext.size)
            content = table_pb2.FragmentReuseIndexDetails.InlineContent.FromString(data)
        else:
            content = details.inline
    except DecodeError as e:
        raise CorruptFileError(where, f"fragment reuse index details do not decode: {e}") from e
    versions = [
        ReuseVersion(
            v.dataset_version,
            tuple(
                ReuseGroup(tuple(f.id for f in g.old_fragments), tuple(f.id for f in g.new_fragments))
                for g in v.groups
            ),
        )
        for v in content.versions
    ]
    return tuple(sorted(versions, key=lambda v: v.dataset_version))


def effective_bitmap(bitmap: frozenset[int], versions: Sequence[ReuseVersion]) -> frozenset[int]:
    """``bitmap`` as pylance sees it: mapped through every deferred rewrite in order."""
    out = set(bitmap)
    for v in versions:
        for g in v.groups:
            if any(f in out for f in g.old_fragments):
                out.difference_update(g.old_fragments)
                out.update(g.new_fragments)
    return frozenset(out)


def pending_remap(bitmap: frozenset[int], versions: Sequence[ReuseVersion]) -> bool:
    """True if some deferred rewrite still moved rows this index covers."""
    return any(f in bitmap for v in versions for g in v.groups for f in g.old_fragments)
