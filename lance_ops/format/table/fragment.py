"""Fragment metadata: DataFile, DeletionFile and DataFragment as small frozen dataclasses.

Spec: table format "DataFragment" (docs/FORMAT.md §7.4).  Row id and row version
sequences are kept as their inline protobuf bytes; :mod:`lance_ops.format.table.rowids` decodes them.
Instances are picklable so Spark executors can hand them to the driver.
"""

from dataclasses import dataclass, field, replace
from typing import cast

from lance_ops.format._proto import table_pb2
from lance_ops.format.errors import UnsupportedFeatureError

_new = object.__new__
#: ``__dict__`` key of the protobuf message a fragment was decoded from (not a dataclass field:
#: equality, ``repr`` and ``replace`` ignore it)
_PB = "_pb"

ARROW_ARRAY = table_pb2.DeletionFile.ARROW_ARRAY
BITMAP = table_pb2.DeletionFile.BITMAP


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

    @classmethod
    def from_proto(cls, m: table_pb2.DataFile) -> "DataFile":
        # the dataclass __init__ (a setattr per field of a frozen class) is bypassed: manifests
        # of 10,000 fragments decode twice as fast
        out = _new(cls)
        out.__dict__.update(
            path=m.path,
            fields=tuple(m.fields),
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
