"""Index metadata: the manifest's IndexSection as small frozen objects (protos/table.proto).

Facts (pylance 14.0.2, verified on datasets it built; upstream ``protos/table.proto``):

- A manifest with indices starts with ``[u32 len][IndexSection]``; ``Manifest.index_section``
  holds its offset.  One ``IndexMetadata`` per index *segment*: ``uuid`` (16 bytes) names the
  directory ``_indices/<uuid>/``, ``fields`` the indexed field ids, ``dataset_version`` the
  version it was built from, ``fragment_bitmap`` a portable 32-bit roaring set of the fragment
  ids it covers (ids of fragments deleted since are kept: "fragment bitmaps are immutable"),
  ``index_details`` an ``Any`` whose type url names the kind, field 10 ``files`` the files of
  the directory with their sizes (pylance opens them with these sizes: a rewritten file needs
  its new size here).
- Kinds by type url: ``/lance.table.{BTree,Bitmap,LabelList,NGram,ZoneMap,Inverted}IndexDetails``,
  ``/lance.index.pb.BloomFilterIndexDetails``, ``/lance.index.pb.VectorIndexDetails`` (IVF;
  top-level details fields 3 = HNSW params, 4 = PQ, 5 = SQ, 8 = flat) and the system indices
  ``/lance.table.FragmentReuseIndexDetails`` (name ``__lance_frag_reuse``) and MemWAL.
"""

import uuid as uuidlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from google.protobuf.message import DecodeError
from pyroaring import BitMap

from lance_ops.format._proto import table_pb2
from lance_ops.format.errors import CorruptFileError

INDICES_DIR = "_indices"
FRAG_REUSE_INDEX_NAME = "__lance_frag_reuse"
MEM_WAL_INDEX_NAME = "__lance_mem_wal"

_SCALAR_KINDS = {
    "BTreeIndexDetails": "BTREE",
    "BitmapIndexDetails": "BITMAP",
    "LabelListIndexDetails": "LABEL_LIST",
    "NGramIndexDetails": "NGRAM",
    "ZoneMapIndexDetails": "ZONEMAP",
    "BloomFilterIndexDetails": "BLOOMFILTER",
    "InvertedIndexDetails": "INVERTED",
    "MinHashLshIndexDetails": "MINHASHLSH",
    "RTreeIndexDetails": "RTREE",
    "FragmentReuseIndexDetails": "FRAG_REUSE",
    "MemWalIndexDetails": "MEM_WAL",
}
#: index kinds pylance 14 builds (the names ``create_index``/``create_scalar_index`` take)
VECTOR_KINDS = ("IVF_PQ", "IVF_FLAT", "IVF_SQ", "IVF_HNSW_PQ", "IVF_HNSW_SQ", "IVF_HNSW_FLAT")
SCALAR_KINDS = ("BTREE", "BITMAP", "LABEL_LIST", "NGRAM", "ZONEMAP", "BLOOMFILTER", "INVERTED")


def _top_level_fields(data: bytes) -> set[int]:
    """Field numbers present at the top level of a protobuf message (wire format walk)."""
    seen: set[int] = set()
    pos, n = 0, len(data)

    def varint() -> int:
        nonlocal pos
        shift = out = 0
        while True:
            if pos >= n:
                raise ValueError("truncated varint")
            b = data[pos]
            pos += 1
            out |= (b & 0x7F) << shift
            if not b & 0x80:
                return out
            shift += 7

    while pos < n:
        key = varint()
        field, wire = key >> 3, key & 7
        seen.add(field)
        if wire == 0:
            varint()
        elif wire == 1:
            pos += 8
        elif wire == 2:
            length = varint()  # (not `pos += varint()`: pos would be read before varint moves it)
            pos += length
        elif wire == 5:
            pos += 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
    return seen


def vector_kind(details: bytes) -> str:
    """``IVF_[HNSW_]{PQ,SQ,FLAT}`` from the bytes of a ``VectorIndexDetails``; ``IVF`` if unknown."""
    try:
        fields = _top_level_fields(details)
    except ValueError:
        return "IVF"
    hnsw = "HNSW_" if 3 in fields else ""
    if 4 in fields:
        return f"IVF_{hnsw}PQ"
    if 5 in fields:
        return f"IVF_{hnsw}SQ"
    if 8 in fields or not fields - {1, 2, 3, 9}:
        return f"IVF_{hnsw}FLAT"
    return "IVF"  # a quantisation this reader does not know (e.g. RaBitQ)


def encode_bitmap(ids: Iterable[int]) -> bytes:
    """A portable 32-bit roaring bitmap of fragment ids (as ``IndexMetadata.fragment_bitmap``)."""
    bm = BitMap(sorted(int(i) for i in ids))
    bm.run_optimize()
    return bytes(bm.serialize())


def decode_bitmap(data: bytes, where: str) -> frozenset[int]:
    try:
        return frozenset(BitMap.deserialize(data))
    except Exception as e:  # pyroaring raises ValueError or OverflowError for bad bytes
        raise CorruptFileError(where, f"index fragment bitmap does not decode: {e}") from e


@dataclass(frozen=True)
class IndexFile:
    """One file of ``_indices/<uuid>/`` with its size."""

    path: str
    size_bytes: int


@dataclass(frozen=True)
class IndexMetadata:
    """One index segment of a dataset version (``IndexMetadata`` in protos/table.proto).

    ``raw`` keeps the message as read, so fields lance_ops does not model survive a rewrite.
    ``fragment_ids`` is None when the index stores no bitmap (very old writers).
    """

    uuid: str
    name: str
    fields: tuple[int, ...]
    dataset_version: int
    fragment_ids: frozenset[int] | None
    type_url: str = ""
    details: bytes = b""
    index_version: int = 0
    created_at_ms: int | None = None
    files: tuple[IndexFile, ...] | None = None
    base_id: int | None = None
    raw: bytes = b""

    # ---------------------------------------------------------------- kinds
    @property
    def kind(self) -> str:
        """The index type as pylance names it (``BTREE``, ``IVF_PQ``, ...; ``FRAG_REUSE`` for the
        fragment reuse index; ``UNKNOWN`` when there are no details)."""
        short = self.type_url.rsplit(".", 1)[-1]
        if short == "VectorIndexDetails":
            return vector_kind(self.details)
        return _SCALAR_KINDS.get(short, "UNKNOWN" if not short else short)

    @property
    def is_system(self) -> bool:
        """The fragment reuse and MemWAL indices (no user column, never remapped)."""
        return self.name in (FRAG_REUSE_INDEX_NAME, MEM_WAL_INDEX_NAME) or self.kind in ("FRAG_REUSE", "MEM_WAL")

    @property
    def is_vector(self) -> bool:
        return self.type_url.endswith("VectorIndexDetails")

    @property
    def directory(self) -> str:
        return f"{INDICES_DIR}/{self.uuid}"

    def with_changes(self, **changes: object) -> "IndexMetadata":
        return replace(self, **changes)  # type: ignore[arg-type]

    # ------------------------------------------------------------- protobuf
    @classmethod
    def from_proto(cls, m: table_pb2.IndexMetadata, *, where: str = "") -> "IndexMetadata":
        if len(m.uuid.uuid) != 16:
            raise CorruptFileError(where, f"index {m.name!r} has a uuid of {len(m.uuid.uuid)} bytes, expected 16")
        return cls(
            uuid=str(uuidlib.UUID(bytes=m.uuid.uuid)),
            name=m.name,
            fields=tuple(m.fields),
            dataset_version=m.dataset_version,
            fragment_ids=decode_bitmap(m.fragment_bitmap, where) if m.fragment_bitmap else None,
            type_url=m.index_details.type_url if m.HasField("index_details") else "",
            details=m.index_details.value if m.HasField("index_details") else b"",
            index_version=m.index_version if m.HasField("index_version") else 0,
            created_at_ms=m.created_at if m.HasField("created_at") else None,
            files=tuple(IndexFile(f.path, f.size_bytes) for f in m.files) if len(m.files) else None,
            base_id=m.base_id if m.HasField("base_id") else None,
            raw=m.SerializeToString(),
        )

    def to_proto(self) -> table_pb2.IndexMetadata:
        m = table_pb2.IndexMetadata.FromString(self.raw) if self.raw else table_pb2.IndexMetadata()
        m.uuid.uuid = uuidlib.UUID(self.uuid).bytes
        m.name = self.name
        del m.fields[:]
        m.fields.extend(self.fields)
        m.dataset_version = self.dataset_version
        if self.fragment_ids is None:
            m.ClearField("fragment_bitmap")
        else:
            m.fragment_bitmap = encode_bitmap(self.fragment_ids)
        if self.type_url:
            m.index_details.type_url = self.type_url
            m.index_details.value = self.details
        if self.index_version:
            m.index_version = self.index_version
        if self.created_at_ms is not None:
            m.created_at = self.created_at_ms
        del m.files[:]
        for f in self.files or ():
            m.files.add(path=f.path, size_bytes=f.size_bytes)
        if self.base_id is not None:
            m.base_id = self.base_id
        return m


def decode_index_section(data: bytes | None, where: str = "") -> tuple[IndexMetadata, ...]:
    """The indices of a manifest's IndexSection bytes (empty when there is none).

    Raises:
        CorruptFileError: the section or a bitmap does not decode (naming ``where``).
    """
    if not data:
        return ()
    try:
        sec = table_pb2.IndexSection.FromString(data)
    except DecodeError as e:
        raise CorruptFileError(where, f"index section does not decode: {e}") from e
    return tuple(IndexMetadata.from_proto(m, where=where) for m in sec.indices)


def encode_index_section(indices: Sequence[IndexMetadata]) -> bytes:
    sec = table_pb2.IndexSection()
    sec.indices.extend(i.to_proto() for i in indices)
    return sec.SerializeToString()


def user_indices(indices: Iterable[IndexMetadata]) -> list[IndexMetadata]:
    """Indices on user columns (system indices left out)."""
    return [i for i in indices if not i.is_system]
