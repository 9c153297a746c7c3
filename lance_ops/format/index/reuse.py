"""The fragment reuse index pylance writes for ``compact_files(defer_index_remap=True)``.

Facts (pylance 14.0.2; upstream ``protos/table.proto`` ``FragmentReuseIndexDetails``,
``rust/lance/src/index/frag_reuse.rs``): a system index named ``__lance_frag_reuse`` with no
fields, whose details hold (inline, or in ``_indices/<uuid>/details.binpb`` above 200 KiB) one
``Version`` per deferred compaction: its dataset version and, per rewrite group, the old and new
fragments' digests (id, physical rows, deleted rows) and the live old row addresses.  The other
indices keep their old bitmaps and files; pylance maps old addresses and bitmaps through the
versions at query time until ``optimize_indices`` remaps them.

Once pylance commits again it persists the mapped bitmaps, but the index files keep the old
addresses until ``optimize_indices``: a bitmap does not tell whether an index's files are still
pending.  lance_ops never writes this index (see the design note in :mod:`.remap`); when it
remaps an index it first maps addresses through every version here (:func:`reuse_maps`), then
through its own compaction, so the files it writes hold current addresses whatever their state.
"""

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from google.protobuf.message import DecodeError

from lance_ops.format._proto import table_pb2
from lance_ops.format.errors import CorruptFileError
from lance_ops.format.index.metadata import FRAG_REUSE_INDEX_NAME, IndexMetadata
from lance_ops.format.index.rowaddr import decode_treemap
from lance_ops.format.io.object_store import ObjectStore

DETAILS_FILE = "details.binpb"


@dataclass(frozen=True)
class ReuseGroup:
    old_fragments: tuple[int, ...]
    new_fragments: tuple[int, ...]
    changed_row_addrs: bytes = b""  # RoaringTreemap of the old live addresses
    new_physical_rows: tuple[int, ...] = ()


@dataclass(frozen=True)
class ReuseVersion:
    dataset_version: int
    groups: tuple[ReuseGroup, ...]


def _versions(content: table_pb2.FragmentReuseIndexDetails.InlineContent) -> tuple[ReuseVersion, ...]:
    versions = [
        ReuseVersion(
            v.dataset_version,
            tuple(
                ReuseGroup(
                    tuple(f.id for f in g.old_fragments),
                    tuple(f.id for f in g.new_fragments),
                    g.changed_row_addrs,
                    tuple(f.physical_rows for f in g.new_fragments),
                )
                for g in v.groups
            ),
        )
        for v in content.versions
    ]
    return tuple(sorted(versions, key=lambda v: v.dataset_version))


def inline_reuse_versions(indices: Sequence[IndexMetadata]) -> tuple[ReuseVersion, ...] | None:
    """The versions of the fragment reuse index among ``indices`` when its details are inline
    (empty when there is none; None when they live in an external file)."""
    for idx in indices:
        if idx.name == FRAG_REUSE_INDEX_NAME:
            details = table_pb2.FragmentReuseIndexDetails.FromString(idx.details)
            if details.WhichOneof("content") == "external":
                return None
            return _versions(details.inline)
    return ()


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
    return _versions(content)


def effective_bitmap(bitmap: frozenset[int], versions: Sequence[ReuseVersion]) -> frozenset[int]:
    """``bitmap`` as pylance sees it: mapped through every deferred rewrite in order."""
    out = set(bitmap)
    for v in versions:
        for g in v.groups:
            if any(f in out for f in g.old_fragments):
                out.difference_update(g.old_fragments)
                out.update(g.new_fragments)
    return frozenset(out)


def reuse_maps(versions: Sequence[ReuseVersion], where: str = "") -> list[tuple[np.ndarray, np.ndarray]]:
    """One ``(old sorted, new)`` address map per version, oldest first: a group's live old
    addresses (ascending) land in its new fragments in order (pylance's
    ``transpose_row_ids_from_digest``); the other old addresses were deleted."""
    out = []
    for v in versions:
        olds, news = [], []
        for g in v.groups:
            old = decode_treemap(g.changed_row_addrs, where) if g.changed_row_addrs else np.empty(0, np.uint64)
            new = np.concatenate(
                [(np.uint64(f) << np.uint64(32)) | np.arange(n, dtype=np.uint64)
                 for f, n in zip(g.new_fragments, g.new_physical_rows, strict=True)]
            ) if g.new_fragments else np.empty(0, np.uint64)
            if old.size != new.size:
                raise CorruptFileError(where, f"reuse group {g.old_fragments} maps {old.size} rows to {new.size}")
            olds.append(old)
            news.append(new)
        old = np.concatenate(olds) if olds else np.empty(0, np.uint64)
        new = np.concatenate(news) if news else np.empty(0, np.uint64)
        order = np.argsort(old, kind="stable")
        out.append((old[order], new[order]))
    return out


def reused_fragments(versions: Sequence[ReuseVersion]) -> frozenset[int]:
    """Every fragment a deferred rewrite replaced."""
    return frozenset(f for v in versions for g in v.groups for f in g.old_fragments)
