"""Manifests: the on-disk layout, version naming, latest-version discovery and feature flags.

Layout (docs/FORMAT.md §7.1)::

    [u32 len][IndexSection]      optional
    [u32 len][Transaction]       inline copy of the .txn (offset in Manifest field 23)
    [u32 len][Manifest]          <- manifest_pos
    [i64 manifest_pos][i16 0][i16 2]["LANC"]

Names (§2): V2 ``%020d.manifest % (2**64 - 1 - version)`` (default), V1 ``{version}.manifest``.
"""

import os
import re
import struct
import uuid
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from functools import cached_property
from typing import Any, cast

from google.protobuf.message import DecodeError

from lance_ops.format._proto import table_pb2, transaction_pb2
from lance_ops.format._version import __version__
from lance_ops.format.errors import (
    CorruptFileError,
    DatasetNotFoundError,
    SchemaError,
    UnsupportedFeatureError,
)
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.schema import LanceSchema
from lance_ops.format.table.bases import BasePath, parse_base_paths
from lance_ops.format.table.fragment import FragmentMetadata

VERSIONS_DIR = "_versions"
MAGIC = b"LANC"
FOOTER = struct.Struct("<qhh4s")
U64_MAX = 2**64 - 1
# A manifest larger than this is treated as corrupt rather than read into memory.
MAX_MANIFEST_BYTES = 1 << 31

FLAG_DELETION_FILES = 1
FLAG_STABLE_ROW_IDS = 2
FLAG_USE_V2_FORMAT_DEPRECATED = 4
FLAG_TABLE_CONFIG = 8
FLAG_BASE_PATHS = 16  # files under other base paths: branches (shallow clones), multi-base datasets
#: data files of other 2.x file versions than ``data_format.version`` (pylance 14's compaction with
#: ``data_storage_version``); both words, kept once set (docs/FORMAT.md §17)
FLAG_MIXED_FILE_VERSIONS = 256
KNOWN_READER_FLAGS = (
    FLAG_DELETION_FILES | FLAG_STABLE_ROW_IDS | FLAG_USE_V2_FORMAT_DEPRECATED | FLAG_TABLE_CONFIG | FLAG_BASE_PATHS
    | FLAG_MIXED_FILE_VERSIONS
)
KNOWN_WRITER_FLAGS = KNOWN_READER_FLAGS
#: what each feature flag bit means (upstream ``rust/lance-table/src/feature_flags.rs``; bits
#: from 64 on as pylance 14 treats them, docs/FORMAT.md §7.3)
FLAG_NAMES = {
    1: "deletion files",
    2: "stable row ids",
    4: "v2 file format (deprecated)",
    8: "table config",
    16: "base paths",
    32: "disabled transaction files",
    64: "data overlay files",
    256: "mixed data file versions",
    1024: "fragment reuse index",
}

WRITER_LIBRARY = "lance_ops"


#: the high bit marks a detached version (a commit outside the lineage, ``d{version}.manifest``)
DETACHED_VERSION_MASK = 1 << 63


def is_detached_version(version: int) -> bool:
    """A detached version (pylance ``commit(..., detached=True)``): never the latest, never listed."""
    return bool(version & DETACHED_VERSION_MASK)


class NamingScheme(Enum):
    V1 = 1
    V2 = 2

    def file_name(self, version: int) -> str:
        if is_detached_version(version):
            # after every attached manifest in a listing, under both schemes (upstream commit.rs)
            return f"d{version}.manifest"
        if self is NamingScheme.V2:
            return f"{U64_MAX - version:020d}.manifest"
        return f"{version}.manifest"


def parse_manifest_name(name: str) -> tuple[NamingScheme, int] | None:
    """``(scheme, version)`` of a manifest file name, or None for other files (temps, hint, detached)."""
    if not name.endswith(".manifest"):
        return None
    stem = name[: -len(".manifest")]
    if not stem.isdigit():
        return None  # detached ("d...") or foreign names
    if len(name) == 29:
        if int(stem) > U64_MAX:
            return None  # not a version any writer can produce
        return NamingScheme.V2, U64_MAX - int(stem)
    return NamingScheme.V1, int(stem)


_MANIFEST_NAME = re.compile(r"(\d+)\.manifest")
_DETACHED_NAME = re.compile(r"d(\d+)\.manifest")


def list_detached_versions(store: ObjectStore) -> list[int]:
    """Detached versions in ``_versions/`` (``d{version}.manifest``), sorted."""
    out = []
    for name in store.list_dir(VERSIONS_DIR):
        m = _DETACHED_NAME.fullmatch(name)
        if m is not None and int(m.group(1)) <= U64_MAX and is_detached_version(int(m.group(1))):
            out.append(int(m.group(1)))
    return sorted(out)


#: ``NNN.manifest`` lines of a newline-joined directory listing (names cannot contain newlines
#: here: a name with one would not match either way)
_MANIFEST_LINES = re.compile(r"^(\d+)\.manifest$", re.MULTILINE)


def _list_versions_local(store: ObjectStore) -> tuple[NamingScheme | None, list[int]] | None:
    """:func:`list_versions` of a local directory with the per-name work done by the regex
    engine (commits list every version each time); None when the names need the general path."""
    try:
        names = os.listdir(store.full_path(VERSIONS_DIR))
    except FileNotFoundError:
        return None, []
    except NotADirectoryError:
        return None
    found = _MANIFEST_LINES.findall("\n".join(names))
    if not found or any(len(n) != 20 for n in found):
        return None  # V1 names, or a mixture: the general path decides
    inverted = sorted(map(int, found), reverse=True)
    if inverted[0] > U64_MAX:
        return None
    return NamingScheme.V2, [U64_MAX - n for n in inverted]


def list_versions(store: ObjectStore) -> tuple[NamingScheme | None, list[int]]:
    """Naming scheme and sorted versions present in ``_versions/`` (one listing)."""
    if type(store) is ObjectStore and store.is_local:
        fast = _list_versions_local(store)
        if fast is not None:
            return fast
    v1: list[int] = []
    v2: list[int] = []
    match = _MANIFEST_NAME.fullmatch
    for name in store.list_dir(VERSIONS_DIR):
        m = match(name)
        if m is None:
            continue  # temps, the hint, detached ("d...") or foreign names
        if len(name) == 29:
            n = int(m.group(1))
            if n <= U64_MAX:  # else not a version any writer can produce
                v2.append(U64_MAX - n)
        else:
            v1.append(int(m.group(1)))
    if v1 and v2:
        raise CorruptFileError(
            store.full_path(VERSIONS_DIR), "manifests use both the V1 and the V2 naming scheme"
        )
    if v2:
        v2.sort()
        return NamingScheme.V2, v2
    v1.sort()
    return (NamingScheme.V1 if v1 else None), v1


def check_flags(reader: int, writer: int, *, path: str, for_write: bool) -> None:
    """Refuse feature flags lance_ops does not implement (docs/FORMAT.md §7.3)."""
    unknown = reader & ~KNOWN_READER_FLAGS
    if for_write:
        unknown |= writer & ~KNOWN_WRITER_FLAGS
    if unknown:
        bits = [1 << i for i in range(64) if unknown >> i & 1]
        named = ", ".join(f"{FLAG_NAMES.get(b, 'an unknown feature')} (flag {b})" for b in bits)
        raise UnsupportedFeatureError(
            f"{path}: the dataset uses {named}, which lance_ops does not support "
            f"(reader_feature_flags={reader}, writer_feature_flags={writer})"
        )


class FragmentList(Sequence[FragmentMetadata]):
    """A decoded manifest's fragments, built from their protobuf messages on first use.

    Opening a dataset reads its manifest, but a version of 10,000 small fragments need not
    become 10,000 Python objects until something looks at them (a scan, a commit, a planner):
    ``len()`` is free, anything else decodes them all once (and then checks their data file
    paths, raising :class:`CorruptFileError` naming the manifest).  Behaves as the tuple it
    stands for: equal to it, hashes and pickles as it.
    """

    __slots__ = ("_protos", "_path", "_items", "_base_paths")

    def __init__(self, protos: Any, path: str, base_paths: bool | None = None) -> None:
        self._protos = protos
        self._path = path
        self._items: tuple[FragmentMetadata, ...] | None = None
        self._base_paths = base_paths  # whether the manifest has base paths (checks data file base_ids)

    def _all(self) -> tuple[FragmentMetadata, ...]:
        items = self._items
        if items is None:
            try:
                items = tuple([FragmentMetadata.from_proto(f, where=self._path) for f in self._protos])
            except (ValueError, KeyError, IndexError, TypeError, OverflowError) as e:
                raise CorruptFileError(self._path, f"manifest content is invalid: {e}") from e
            check_fragments(items, self._path, base_paths=self._base_paths)
            self._items, self._protos = items, None
        return items

    def undecoded(self) -> Any:
        """The fragment messages while none has been decoded yet, else None: for readers that
        need a field or two of every fragment and no checked objects (cleanup's kept paths)."""
        protos = self._protos
        return protos if self._items is None else None

    def __len__(self) -> int:
        return len(self._items) if self._items is not None else len(self._protos)

    def __getitem__(self, i: Any) -> Any:
        return self._all()[i]

    def __iter__(self) -> Iterator[FragmentMetadata]:
        return iter(self._all())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FragmentList):
            other = other._all()
        return self._all() == other

    def __hash__(self) -> int:
        return hash(self._all())

    def __add__(self, other: Any) -> tuple[FragmentMetadata, ...]:
        return self._all() + tuple(other)

    def __radd__(self, other: Any) -> tuple[FragmentMetadata, ...]:
        return tuple(other) + self._all()

    def __reduce__(self) -> Any:
        return (tuple, (self._all(),))

    def __repr__(self) -> str:
        return repr(self._all())


@dataclass(frozen=True)
class Manifest:
    """One dataset version.  ``extra`` keeps proto fields lance_ops does not model."""

    schema: LanceSchema
    fragments: tuple[FragmentMetadata, ...]
    version: int
    timestamp_ns: int = 0
    reader_feature_flags: int = 0
    writer_feature_flags: int = 0
    max_fragment_id: int | None = None
    transaction_file: str = ""
    writer_library: str = WRITER_LIBRARY
    writer_version: str = ""
    next_row_id: int = 0
    data_storage_version: str = "2.0"
    config: Mapping[str, str] = field(default_factory=dict)
    table_metadata: Mapping[str, str] = field(default_factory=dict)
    tag: str = ""
    index_section: bytes | None = None  # raw IndexSection bytes, carried forward unchanged
    base_paths: tuple[bytes, ...] = ()  # raw BasePath messages
    branch: str | None = None
    #: the manifest file this was read from (named in errors), "" for one not yet written
    source: str = field(default="", compare=False, repr=False)

    @cached_property
    def bases(self) -> dict[int, BasePath]:
        """``base_paths`` by id (where files with a ``base_id`` live; see :mod:`.bases`)."""
        return parse_base_paths(self.base_paths)

    @property
    def uses_stable_row_ids(self) -> bool:
        return bool(self.reader_feature_flags & FLAG_STABLE_ROW_IDS)

    def fragment(self, fragment_id: int) -> FragmentMetadata | None:
        for f in self.fragments:
            if f.id == fragment_id:
                return f
        return None

    def with_changes(self, **changes: object) -> "Manifest":
        return replace(self, **changes)  # type: ignore[arg-type]

    def computed_flags(self) -> tuple[int, int]:
        """Feature flags as pylance 14 sets them for this content (§7.3)."""
        flags = 0
        if any(f.deletion_file is not None for f in self.fragments):
            flags |= FLAG_DELETION_FILES
        if self.uses_stable_row_ids:
            flags |= FLAG_STABLE_ROW_IDS
        if self.base_paths:
            flags |= FLAG_BASE_PATHS
        # kept once set, as pylance keeps it (§17); build_manifest sets it for a new mixed file
        flags |= self.reader_feature_flags & FLAG_MIXED_FILE_VERSIONS
        writer = flags | (FLAG_TABLE_CONFIG if self.config else 0)
        return flags, writer

    # ---------------------------------------------------------------- protobuf
    @classmethod
    def from_proto(
        cls, m: table_pb2.Manifest, *, index_section: bytes | None = None, where: str = "", lazy: bool = False
    ) -> "Manifest":
        """``lazy``: fragments as a :class:`FragmentList` (decoded on first use; ``m`` must then
        stay unchanged)."""
        return cls(
            schema=LanceSchema.from_proto(m.fields, dict(m.schema_metadata)),
            # a FragmentList behaves as the tuple it stands for
            fragments=cast("tuple[FragmentMetadata, ...]", FragmentList(
                m.fragments, where, base_paths=bool(m.reader_feature_flags & FLAG_BASE_PATHS) and len(m.base_paths) > 0,
            )) if lazy else tuple(
                FragmentMetadata.from_proto(f, where=where) for f in m.fragments
            ),
            version=m.version,
            timestamp_ns=m.timestamp.seconds * 1_000_000_000 + m.timestamp.nanos,
            reader_feature_flags=m.reader_feature_flags,
            writer_feature_flags=m.writer_feature_flags,
            max_fragment_id=m.max_fragment_id if m.HasField("max_fragment_id") else None,
            transaction_file=m.transaction_file,
            writer_library=m.writer_version.library,
            writer_version=m.writer_version.version,
            next_row_id=m.next_row_id,
            data_storage_version=m.data_format.version or "",
            config=dict(m.config),
            table_metadata=dict(m.table_metadata),
            tag=m.tag,
            index_section=index_section,
            base_paths=tuple(b.SerializeToString() for b in m.base_paths),
            branch=m.branch if m.HasField("branch") else None,
            source=where,
        )

    def to_proto(self) -> table_pb2.Manifest:
        m = table_pb2.Manifest(
            fields=self.schema.to_proto(),
            # unchanged fragments keep the message they were decoded from (one copy each)
            fragments=[f.manifest_message() for f in sorted(self.fragments, key=lambda f: f.id)],
            version=self.version,
            tag=self.tag,
            reader_feature_flags=self.reader_feature_flags,
            writer_feature_flags=self.writer_feature_flags,
            transaction_file=self.transaction_file,
            next_row_id=self.next_row_id,
        )
        m.schema_metadata.update(self.schema.metadata)
        m.timestamp.seconds, m.timestamp.nanos = divmod(self.timestamp_ns, 1_000_000_000)
        if self.max_fragment_id is not None:
            m.max_fragment_id = self.max_fragment_id
        m.writer_version.library = WRITER_LIBRARY
        m.writer_version.version = __version__
        m.data_format.file_format = "lance"
        m.data_format.version = self.data_storage_version
        m.config.update(self.config)
        m.table_metadata.update(self.table_metadata)
        for raw in self.base_paths:
            m.base_paths.add().ParseFromString(raw)
        if self.branch is not None:
            m.branch = self.branch
        return m


# -------------------------------------------------------------------- file I/O
def _u32_section(payload: bytes) -> bytes:
    return struct.pack("<I", len(payload)) + payload


def encode_manifest_file(manifest: Manifest, transaction: transaction_pb2.Transaction | None) -> bytes:
    """Bytes of a manifest file: [index section][inline txn][manifest][footer]."""
    return _encode_manifest_file(manifest, transaction)[0]


def _encode_manifest_file(
    manifest: Manifest, transaction: transaction_pb2.Transaction | None
) -> tuple[bytes, table_pb2.Manifest, bytes | None]:
    """:func:`encode_manifest_file`, with the Manifest message and the inline transaction bytes."""
    parts: list[bytes] = []
    pos = 0
    m = manifest.to_proto()
    if manifest.index_section is not None:
        m.index_section = pos
        sec = _u32_section(manifest.index_section)
        parts.append(sec)
        pos += len(sec)
    txn = None
    if transaction is not None:
        m.transaction_section = pos
        txn = transaction.SerializeToString()
        sec = _u32_section(txn)
        parts.append(sec)
        pos += len(sec)
    parts.append(_u32_section(m.SerializeToString()))
    parts.append(FOOTER.pack(pos, 0, 2, MAGIC))
    return b"".join(parts), m, txn


def _section(data: bytes, offset: int, path: str, what: str) -> bytes:
    if offset < 0 or offset + 4 > len(data):
        raise CorruptFileError(path, f"{what} offset {offset} is outside the file ({len(data)} bytes)")
    (n,) = struct.unpack_from("<I", data, offset)
    if offset + 4 + n > len(data):
        raise CorruptFileError(path, f"{what} at {offset} claims {n} bytes but the file has {len(data)}")
    return data[offset + 4 : offset + 4 + n]


@dataclass(frozen=True)
class ManifestFile:
    manifest: Manifest
    transaction: bytes | None  # inline Transaction bytes, when present
    proto: table_pb2.Manifest


def decode_manifest_file(data: bytes, path: str) -> ManifestFile:
    """Parse a whole manifest file; every problem is a CorruptFileError naming ``path``."""
    if len(data) < FOOTER.size + 4:
        raise CorruptFileError(path, f"file is {len(data)} bytes, too short for a manifest")
    pos, _major, _minor, magic = FOOTER.unpack_from(data, len(data) - FOOTER.size)
    if magic != MAGIC:
        raise CorruptFileError(path, f"bad magic {magic!r}, expected {MAGIC!r}")
    body_end = len(data) - FOOTER.size
    if pos < 0 or pos + 4 > body_end:
        raise CorruptFileError(path, f"manifest position {pos} is outside the file ({len(data)} bytes)")
    body = _section(data[:body_end], pos, path, "manifest")
    m = table_pb2.Manifest()
    try:
        m.ParseFromString(body)
    except DecodeError as e:
        raise CorruptFileError(path, f"manifest protobuf does not decode: {e}") from e
    index = None
    if m.HasField("index_section"):
        index = _section(data[:pos], m.index_section, path, "index section")
        section = table_pb2.IndexSection()
        try:
            # carried forward byte for byte: a damaged one must not reach the next version
            section.ParseFromString(index)
        except DecodeError as e:
            raise CorruptFileError(path, f"index section does not decode: {e}") from e
    txn = None
    if m.HasField("transaction_section"):
        txn = _section(data[:pos], m.transaction_section, path, "inline transaction")
    elif m.HasField("transaction_section_deprecated"):
        txn = _section(data[:pos], m.transaction_section_deprecated, path, "inline transaction")
    try:
        manifest = Manifest.from_proto(m, index_section=index, where=path, lazy=True)
        manifest.schema.to_arrow()  # every field's type resolves (sizes bounded) before any read
    except (ValueError, KeyError, IndexError, TypeError, OverflowError, SchemaError) as e:
        raise CorruptFileError(path, f"manifest content is invalid: {e}") from e
    names = [f.name for f in manifest.schema.top_level()]
    if not names:
        raise CorruptFileError(path, "fields: the schema has no columns")
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise CorruptFileError(path, f"the schema has duplicate column names {dup}")
    precheck_fragments(m.fragments, path)
    precheck_fragment_ids(m, path)
    if index is not None:
        check_indices(section, manifest, path)
    if manifest.transaction_file and not is_plain_name(manifest.transaction_file):
        raise CorruptFileError(
            path, f"transaction_file {manifest.transaction_file!r} is not a plain file name in _transactions/"
        )
    return ManifestFile(manifest, txn, m)


#: A fragment's rows are addressed by a u32 offset (row address = fragment id << 32 | offset).
MAX_FRAGMENT_ROWS = 2**32


def is_plain_name(name: str) -> bool:
    """A single path component: no separators, not ``.``/``..``, no NUL."""
    return bool(name) and name not in (".", "..") and not any(c in name for c in "/\\\0")


def is_safe_relative_path(path: str) -> bool:
    """Relative, ``/``-separated, without ``.``/``..``/empty components (stays below its base)."""
    if not path or path.startswith("/") or "\\" in path or "\0" in path:
        return False
    return all(part not in ("", ".", "..") for part in path.split("/"))


def check_fragments(fragments: Sequence[FragmentMetadata], path: str, *, base_paths: bool | None = None) -> None:
    """Refuse fragments whose data file paths could leave ``data/`` or whose sizes are absurd.

    Args:
        base_paths: whether the manifest holding the fragments has base paths (feature flag
            16); when False a data or deletion file with a ``base_id`` is corrupt.  None: unknown
            (a transaction), not checked.

    Raises:
        CorruptFileError: naming ``path`` (the manifest or transaction holding the fragments).
    """
    for i, f in enumerate(fragments):
        for j, df in enumerate(f.files):
            if df.base_id is not None and base_paths is False:
                raise CorruptFileError(
                    path, f"fragments[{i}].files[{j}].base_id: data file {df.path!r} of fragment {f.id} has "
                    f"base_id {df.base_id} but the manifest has no base paths (feature flag {FLAG_BASE_PATHS})",
                )
            if df.file_size_bytes > MAX_DATA_FILE_BYTES:
                raise CorruptFileError(
                    path, f"fragments[{i}].files[{j}].file_size_bytes: data file {df.path!r} of fragment {f.id} "
                    f"claims {df.file_size_bytes} bytes",
                )
            if df.column_indices and len(df.column_indices) != len(df.fields):
                raise CorruptFileError(
                    path, f"fragments[{i}].files[{j}].column_indices: data file {df.path!r} of fragment {f.id} "
                    f"lists {len(df.fields)} fields but {len(df.column_indices)} column indices",
                )
        if f.deletion_file is not None and f.deletion_file.base_id is not None and base_paths is False:
            raise CorruptFileError(
                path, f"fragments[{i}].deletion_file.base_id: fragment {f.id}'s deletion file has base_id "
                f"{f.deletion_file.base_id} but the manifest has no base paths",
            )
    for f in fragments:
        if f.physical_rows > MAX_FRAGMENT_ROWS:
            raise CorruptFileError(
                path, f"fragment {f.id} claims {f.physical_rows} rows, more than a fragment can address (2**32)"
            )
        if f.deletion_file is not None and f.deletion_file.num_deleted_rows > f.physical_rows:
            raise CorruptFileError(
                path,
                f"fragment {f.id} deletes {f.deletion_file.num_deleted_rows} rows of its {f.physical_rows}",
            )
        for df in f.files:
            if not is_safe_relative_path(df.path):
                raise CorruptFileError(
                    path, f"fragment {f.id} names data file {df.path!r}: not a relative path inside data/"
                )


def precheck_fragments(protos: Any, path: str) -> None:
    """What :func:`check_fragments` checks without decoding the fragments (their row counts,
    external row-id files), so a manifest with absurd fragments fails on open; data file paths
    are checked when the fragments are first used (:class:`FragmentList`).

    Raises:
        CorruptFileError / UnsupportedFeatureError: naming ``path``.
    """
    for f in protos:
        has = f.HasField
        if (
            f.physical_rows > MAX_FRAGMENT_ROWS
            or (has("deletion_file") and f.deletion_file.num_deleted_rows > f.physical_rows)
            or has("external_row_ids") or has("external_created_at_versions")
            or has("external_last_updated_at_versions")
        ):
            check_fragments([FragmentMetadata.from_proto(f, where=path)], path)  # raises, naming it


#: fragment ids are u32 (``max_fragment_id`` is a uint32 and a row address keeps the id in its
#: high 32 bits)
MAX_FRAGMENT_ID = 2**32 - 1
#: a data file claiming more bytes than this is corrupt (1 PiB; a reader would seek to it)
MAX_DATA_FILE_BYTES = 2**50
FLAG_BASE_PATHS = 16  # pylance 14: data/deletion files may live under another base path


def precheck_fragment_ids(m: table_pb2.Manifest, path: str) -> None:
    """Refuse fragment lists no writer produces, from the protobuf (no fragment is decoded):
    repeated ids, ids beyond ``max_fragment_id`` or the u32 id width, fragments without data
    files or rows.  Per data file checks run when the fragments are first used
    (:func:`check_fragments` with ``base_paths``).

    Raises:
        CorruptFileError: naming ``path`` (the manifest) and the offending field.
    """
    limit = m.max_fragment_id if m.HasField("max_fragment_id") else None
    if limit is not None and limit > MAX_FRAGMENT_ID:
        raise CorruptFileError(path, f"max_fragment_id: {limit} is beyond the u32 id width")
    frags = m.fragments
    if not len(frags):
        return
    rows = [(f.id, f.physical_rows, len(f.files)) for f in frags]
    ids = [r[0] for r in rows]
    top = max(ids)
    if len(set(ids)) == len(ids) and top <= min(MAX_FRAGMENT_ID, MAX_FRAGMENT_ID if limit is None else limit) \
            and min(r[1] for r in rows) > 0 and min(r[2] for r in rows) > 0:
        return
    seen: set[int] = set()
    for i, (fid, n, files) in enumerate(rows):
        if fid in seen:
            raise CorruptFileError(path, f"fragments[{i}].id: fragment id {fid} is listed twice")
        seen.add(fid)
        if fid > MAX_FRAGMENT_ID:
            raise CorruptFileError(path, f"fragments[{i}].id: fragment id {fid} is beyond the u32 id width")
        if limit is not None and fid > limit:
            raise CorruptFileError(path, f"fragments[{i}].id: fragment id {fid} is beyond max_fragment_id {limit}")
        if not files:
            raise CorruptFileError(path, f"fragments[{i}].files: fragment {fid} has no data files")
        if n == 0:
            raise CorruptFileError(path, f"fragments[{i}].physical_rows: fragment {fid} has 0 rows (no writer makes "
                                   "an empty fragment; its data file disagrees)")


def check_indices(section: table_pb2.IndexSection, manifest: "Manifest", path: str) -> None:
    """Refuse index entries no writer produces (they are carried into every later version).

    Raises:
        CorruptFileError: a uuid that is not 16 bytes, a field the schema does not have, or an
            index built on a version newer than the manifest's.
    """
    ids = {f.id for f in manifest.schema.fields}
    for i, idx in enumerate(section.indices):
        if len(idx.uuid.uuid) != 16:
            raise CorruptFileError(path, f"index section indices[{i}].uuid: {len(idx.uuid.uuid)} bytes, not 16")
        missing = [f for f in idx.fields if f >= 0 and f not in ids]  # negative: system indices
        if missing:
            raise CorruptFileError(path, f"index section indices[{i}] ({idx.name!r}).fields: ids {missing} are not in the schema")
        if idx.dataset_version > manifest.version:
            raise CorruptFileError(
                path, f"index section indices[{i}] ({idx.name!r}).dataset_version: {idx.dataset_version} is after "
                f"this version {manifest.version}",
            )


def manifest_path(scheme: NamingScheme, version: int) -> str:
    return f"{VERSIONS_DIR}/{scheme.file_name(version)}"


#: decoded manifests of local files, keyed by (path, size, mtime_ns, inode): a version's manifest
#: is written once (create-if-absent), so a file with the same identity has the same content
_MANIFEST_CACHE: "OrderedDict[tuple, ManifestFile]" = OrderedDict()
_MANIFEST_CACHE_ENTRIES = 64


def _cache_key(path: str, st: os.stat_result, version: int) -> tuple:
    return (path, st.st_size, st.st_mtime_ns, st.st_ino, version)


def _remember(key: tuple, mf: ManifestFile) -> None:
    _MANIFEST_CACHE[key] = mf
    while len(_MANIFEST_CACHE) > _MANIFEST_CACHE_ENTRIES:
        _MANIFEST_CACHE.popitem(last=False)


def read_manifest(store: ObjectStore, version: int, scheme: NamingScheme) -> ManifestFile:
    rel = manifest_path(scheme, version)
    key = None
    if type(store) is ObjectStore and store.is_local:
        path = store.full_path(rel)
        try:
            st = os.stat(path)
        except FileNotFoundError:
            raise DatasetNotFoundError(f"{store.uri}: version {version} does not exist") from None
        key = _cache_key(path, st, version)
        hit = _MANIFEST_CACHE.get(key)
        if hit is not None:
            try:
                _MANIFEST_CACHE.move_to_end(key)
            except KeyError:  # evicted by another thread meanwhile
                pass
            return hit
        size = st.st_size
    else:
        try:
            size = store.size(rel)
        except FileNotFoundError:
            raise DatasetNotFoundError(f"{store.uri}: version {version} does not exist") from None
    if size > MAX_MANIFEST_BYTES:
        raise CorruptFileError(store.full_path(rel), f"manifest is {size} bytes, larger than the limit")
    try:
        data = store.read(rel)
    except FileNotFoundError:
        raise DatasetNotFoundError(f"{store.uri}: version {version} does not exist (removed meanwhile)") from None
    mf = decode_manifest_file(data, store.full_path(rel))
    if mf.manifest.version != version:
        raise CorruptFileError(
            store.full_path(rel), f"file name says version {version} but the manifest says {mf.manifest.version}"
        )
    if key is not None and len(data) == key[1]:
        _remember(key, mf)
    return mf


def write_manifest_if_absent(
    store: ObjectStore, manifest: Manifest, transaction: transaction_pb2.Transaction | None, scheme: NamingScheme
) -> bool:
    """Atomically create the manifest of ``manifest.version``; False if that version already exists.

    A local manifest created here goes into the cache :func:`read_manifest` keeps, as the
    manifest it would decode from these bytes, so the next commit on this version (an append
    loop) neither reads nor decodes it and reuses its fragments' messages.
    """
    rel = manifest_path(scheme, manifest.version)
    data, m, txn = _encode_manifest_file(manifest, transaction)
    if not store.put_if_absent(rel, data):
        return False
    if type(store) is ObjectStore and store.is_local:
        path = store.full_path(rel)
        try:
            st = os.stat(path)
        except OSError:  # removed meanwhile (a cleanup): nothing to remember
            return True
        if st.st_size == len(data):
            written = manifest.with_changes(writer_library=WRITER_LIBRARY, writer_version=__version__, source=path)
            _remember(_cache_key(path, st, manifest.version), ManifestFile(written, txn, m))
    return True


def write_version_hint(store: ObjectStore, version: int) -> None:
    """``_versions/latest_version_hint.json`` (advisory, local filesystems only, as pylance).

    Written as a temp file renamed into place, as pylance does, but after removing the old hint:
    ext4 (``auto_da_alloc``) flushes a file renamed over an existing one, which cost 0.3-4 ms
    per commit (the largest share of an append's commit), while a rename to a free name costs
    ~20 us.  Between the two calls there is no hint, which readers handle as they handle a
    stale one (pylance then lists ``_versions/``; lance_ops always lists).
    """
    if not store.is_local:
        return
    try:
        path = store.full_path(f"{VERSIONS_DIR}/latest_version_hint.json")
        tmp = f"{path}.tmp-{uuid.uuid4().hex}"  # the temp name cleanup recognises
        with open(tmp, "wb") as f:
            f.write(b'{"version":%d}' % version)
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        os.rename(tmp, path)
    except OSError:
        pass  # the hint is advisory; a failure must not fail a commit that already landed
