"""Fragment metadata: DataFile, DeletionFile and DataFragment as small frozen dataclasses.

Spec: table format "DataFragment" (docs/FORMAT.md §7.4).  Row id and row version
sequences are kept as their inline protobuf bytes; :mod:`lance_ops.format.table.rowids` decodes them.
Instances are picklable so Spark executors can hand them to the driver.
"""

import json
from dataclasses import dataclass, field, replace
from typing import Any, cast

from lance_ops.format._proto import table_pb2
from lance_ops.format.errors import InvalidArgumentError, UnsupportedFeatureError
from lance_ops.format.schema import CallableStr

_new = object.__new__
#: ``__dict__`` key of the protobuf message a fragment was decoded from (not a dataclass field:
#: equality, ``repr`` and ``replace`` ignore it)
_PB = "_pb"

ARROW_ARRAY = table_pb2.DeletionFile.ARROW_ARRAY
BITMAP = table_pb2.DeletionFile.BITMAP


class FieldIds(tuple):
    """A data file's field ids: a tuple (hashable, immutable) that also equals the list of the
    same ids, as pylance's ``DataFile.fields`` (a list) compares."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return list(self) == other if isinstance(other, list) else tuple.__eq__(self, other)  # type: ignore[arg-type]

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = tuple.__hash__


@dataclass(frozen=True)
class DataFile:
    """One data file of a fragment; ``path`` is relative to ``<root>/data/``."""

    path: str
    fields: tuple[int, ...]
    column_indices: tuple[int, ...]
    file_major_version: int = 2
    file_minor_version: int = 0
    file_size_bytes: int = 0
    base_id: int | None = None

    def __post_init__(self) -> None:
        if type(self.path) is not CallableStr:  # pylance's deprecated ``path()`` reads too
            object.__setattr__(self, "path", CallableStr(self.path))
        if type(self.fields) is not FieldIds:
            object.__setattr__(self, "fields", FieldIds(self.fields))

    @classmethod
    def from_proto(cls, m: table_pb2.DataFile) -> "DataFile":
        # the dataclass __init__ (a setattr per field of a frozen class) is bypassed: manifests
        # of 10,000 fragments decode twice as fast
        out = _new(cls)
        out.__dict__.update(
            path=CallableStr(m.path),
            fields=FieldIds(m.fields),
            column_indices=tuple(m.column_indices),
            file_major_version=m.file_major_version,
            file_minor_version=m.file_minor_version,
            file_size_bytes=m.file_size_bytes,
            base_id=m.base_id if m.HasField("base_id") else None,
        )
        return out

    def to_proto(self) -> table_pb2.DataFile:
        m = table_pb2.DataFile(
            path=self.path,
            fields=self.fields,
            column_indices=self.column_indices,
            file_major_version=self.file_major_version,
            file_minor_version=self.file_minor_version,
            file_size_bytes=self.file_size_bytes,
        )
        if self.base_id is not None:
            m.base_id = self.base_id
        return m

    @property
    def version(self) -> str:
        return f"{self.file_major_version}.{self.file_minor_version}"


@dataclass(frozen=True)
class DeletionFile:
    """A fragment's deletion vector file (``.arrow`` below 5000 rows, ``.bin`` from 5000)."""

    file_type: int
    read_version: int
    id: int
    num_deleted_rows: int
    base_id: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.file_type, str):  # pylance's spelling: "array" / "bitmap"
            kinds = {"array": ARROW_ARRAY, "bitmap": BITMAP}
            if self.file_type not in kinds:
                raise InvalidArgumentError(f"DeletionFile file_type must be 'array' or 'bitmap', got {self.file_type!r}")
            object.__setattr__(self, "file_type", kinds[self.file_type])

    @classmethod
    def from_proto(cls, m: table_pb2.DeletionFile) -> "DeletionFile":
        return cls(
            file_type=m.file_type,
            read_version=m.read_version,
            id=m.id,
            num_deleted_rows=m.num_deleted_rows,
            base_id=m.base_id if m.HasField("base_id") else None,
        )

    def to_proto(self) -> table_pb2.DeletionFile:
        m = table_pb2.DeletionFile(
            file_type=cast("table_pb2.DeletionFile.DeletionFileType", self.file_type),
            read_version=self.read_version,
            id=self.id,
            num_deleted_rows=self.num_deleted_rows,
        )
        if self.base_id is not None:
            m.base_id = self.base_id
        return m

    @property
    def extension(self) -> str:
        return "bin" if self.file_type == BITMAP else "arrow"

    def asdict(self) -> dict[str, Any]:
        """pylance's ``DeletionFile.asdict()``."""
        return deletion_file_dict(self)


@dataclass(frozen=True)
class FragmentMetadata:
    """A fragment as stored in the manifest (and in transactions).

    ``row_ids``, ``created_at_versions`` and ``last_updated_at_versions`` are the inline
    RowIdSequence / RowDatasetVersionSequence bytes, or None when absent.
    """

    id: int
    files: tuple[DataFile, ...]
    physical_rows: int
    deletion_file: DeletionFile | None = None
    row_ids: bytes | None = None
    created_at_versions: bytes | None = None
    last_updated_at_versions: bytes | None = None
    extra: tuple[str, ...] = field(default=(), compare=False)

    @property
    def num_deleted_rows(self) -> int:
        return self.deletion_file.num_deleted_rows if self.deletion_file else 0

    @property
    def num_rows(self) -> int:
        """Live rows (physical rows less deleted ones)."""
        return self.physical_rows - self.num_deleted_rows

    def with_changes(self, **changes: object) -> "FragmentMetadata":
        return replace(self, **changes)  # type: ignore[arg-type]

    @property
    def row_id_meta(self) -> bytes | None:
        """pylance's name for the inline row id sequence (None without stable row ids)."""
        return self.row_ids

    def to_json(self) -> dict[str, Any]:
        """pylance's ``FragmentMetadata.to_json()`` (a JSON-ready dict; pylance's
        ``FragmentMetadata.from_json(json.dumps(...))`` reads it back)."""
        return fragment_to_json(self)

    @classmethod
    def from_json(cls, text: "str | dict[str, Any]") -> "FragmentMetadata":
        """A fragment from pylance's JSON (``json.dumps(pylance_fragment.to_json())``)."""
        return fragment_from_json(text)

    @classmethod
    def from_proto(cls, m: table_pb2.DataFragment, *, where: str = "") -> "FragmentMetadata":
        for name in ("external_row_ids", "external_created_at_versions", "external_last_updated_at_versions"):
            if m.HasField(name):
                raise UnsupportedFeatureError(
                    f"{where}: fragment {m.id} stores {name} in an external file, which lance_ops does not read yet"
                )
        has = m.HasField
        out = _new(cls)  # as DataFile.from_proto: no dataclass __init__
        out.__dict__.update(
            id=m.id,
            files=tuple([DataFile.from_proto(f) for f in m.files]),
            physical_rows=m.physical_rows,
            deletion_file=DeletionFile.from_proto(m.deletion_file) if has("deletion_file") else None,
            row_ids=m.inline_row_ids if has("inline_row_ids") else None,
            created_at_versions=m.inline_created_at_versions if has("inline_created_at_versions") else None,
            last_updated_at_versions=(
                m.inline_last_updated_at_versions if has("inline_last_updated_at_versions") else None
            ),
            extra=(),
        )
        out.__dict__[_PB] = m  # what it was decoded from: re-encoded as is (see manifest_message)
        return out

    def __getstate__(self) -> dict[str, object]:
        # the protobuf message is a cache: not pickled (Spark ships fragments to executors)
        state = dict(self.__dict__)
        state.pop(_PB, None)
        return state

    def manifest_message(self) -> table_pb2.DataFragment:
        """This fragment's message for a manifest being encoded: the one it was decoded from
        (or last encoded to), unchanged, else a new one.

        A new version's manifest carries its unchanged fragments, so this makes encoding it
        cost a protobuf copy per fragment instead of a Python re-encode (``append_commit``:
        every commit re-encoded every fragment).  ``with_changes`` builds a new instance
        without the message, so a changed fragment is always encoded afresh.  Callers copy the
        message (``RepeatedCompositeField.extend``); they must not modify it.
        """
        pb = self.__dict__.get(_PB)
        if pb is None:
            pb = self.to_proto()
            self.__dict__[_PB] = pb
        return pb

    def to_proto(self) -> table_pb2.DataFragment:
        m = table_pb2.DataFragment(
            id=self.id, files=[f.to_proto() for f in self.files], physical_rows=self.physical_rows
        )
        if self.deletion_file is not None:
            m.deletion_file.CopyFrom(self.deletion_file.to_proto())
        if self.row_ids is not None:
            m.inline_row_ids = self.row_ids
        if self.last_updated_at_versions is not None:
            m.inline_last_updated_at_versions = self.last_updated_at_versions
        if self.created_at_versions is not None:
            m.inline_created_at_versions = self.created_at_versions
        return m


# ------------------------------------------------------------ pylance's JSON form
# The shape is Lance's serde form of its ``Fragment`` struct: data files with their field ids,
# ``deletion_file`` with ``file_type`` "array" or "bitmap", and the row id / row version
# sequences as ``{"Inline": [bytes]}`` / ``{"inline": [bytes]}``.

_FILE_TYPES = {ARROW_ARRAY: "array", BITMAP: "bitmap"}


def deletion_file_dict(d: DeletionFile) -> dict[str, Any]:
    """pylance's ``DeletionFile.asdict()``."""
    return {"read_version": d.read_version, "id": d.id, "file_type": _FILE_TYPES[d.file_type],
            "num_deleted_rows": d.num_deleted_rows, "base_id": d.base_id}


def _inline(raw: bytes | None, key: str) -> dict[str, list[int]] | None:
    return None if raw is None else {key: list(raw)}


def fragment_to_json(f: FragmentMetadata) -> dict[str, Any]:
    """The JSON-ready dict pylance's ``FragmentMetadata.to_json()`` gives."""
    files = [{"fields": list(df.fields), "column_indices": list(df.column_indices),
              "file_major_version": df.file_major_version, "file_minor_version": df.file_minor_version,
              "file_size_bytes": df.file_size_bytes or None, "base_id": df.base_id, "path": df.path}
             for df in f.files]
    return {"id": f.id, "files": files, "overlays": [], "physical_rows": f.physical_rows,
            "deletion_file": deletion_file_dict(f.deletion_file) if f.deletion_file else None,
            "row_id_meta": _inline(f.row_ids, "Inline"),
            "created_at_version_meta": _inline(f.created_at_versions, "inline"),
            "last_updated_at_version_meta": _inline(f.last_updated_at_versions, "inline")}


def _bytes(meta: dict[str, Any] | None, what: str) -> bytes | None:
    if meta is None:
        return None
    inline = meta.get("Inline", meta.get("inline"))
    if inline is None:
        raise UnsupportedFeatureError(f"fragment JSON: {what} {sorted(meta)} is not inline; lance_ops reads "
                                      "inline sequences only")
    return bytes(inline)


def fragment_from_json(text: str | dict[str, Any]) -> FragmentMetadata:
    """A fragment from pylance's JSON (a string, or the dict ``to_json`` gives).

    Raises:
        InvalidArgumentError: not fragment JSON.
        UnsupportedFeatureError: overlays, or external row id / version sequences.
    """
    try:
        d = json.loads(text) if isinstance(text, str) else dict(text)
        if d.get("overlays"):
            raise UnsupportedFeatureError(f"fragment JSON: fragment {d['id']} has data overlays, which lance_ops "
                                          "does not support")
        files = tuple(DataFile(path=f["path"], fields=tuple(f["fields"]), column_indices=tuple(f["column_indices"]),
                               file_major_version=f["file_major_version"], file_minor_version=f["file_minor_version"],
                               file_size_bytes=f.get("file_size_bytes") or 0, base_id=f.get("base_id"))
                      for f in d["files"])
        dfile = d.get("deletion_file")
        deletion = None if dfile is None else DeletionFile(
            file_type={v: k for k, v in _FILE_TYPES.items()}[dfile["file_type"]], read_version=dfile["read_version"],
            id=dfile["id"], num_deleted_rows=dfile.get("num_deleted_rows") or 0, base_id=dfile.get("base_id"))
        return FragmentMetadata(id=d["id"], files=files, physical_rows=d["physical_rows"], deletion_file=deletion,
                                row_ids=_bytes(d.get("row_id_meta"), "row_id_meta"),
                                created_at_versions=_bytes(d.get("created_at_version_meta"), "created_at_version_meta"),
                                last_updated_at_versions=_bytes(d.get("last_updated_at_version_meta"),
                                                                "last_updated_at_version_meta"))
    except (KeyError, TypeError, ValueError) as e:
        if isinstance(e, UnsupportedFeatureError):
            raise
        raise InvalidArgumentError(f"fragment JSON: not a Lance fragment ({type(e).__name__}: {e})") from None
