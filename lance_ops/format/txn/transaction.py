"""Transactions: the ``.txn`` file and the inline manifest copy (docs/FORMAT.md §9)."""

import uuid as uuidlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import singledispatch

from google.protobuf.message import DecodeError

from lance_ops.format._proto import transaction_pb2
from lance_ops.format.errors import CorruptFileError, InvalidArgumentError, SchemaError
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.table.fragment import FragmentMetadata
from lance_ops.format.table.manifest import check_fragments, is_plain_name
from lance_ops.format.txn.operations import (
    Append,
    Delete,
    Merge,
    Operation,
    Overwrite,
    Rewrite,
    Update,
    operation_from_proto,
)

TRANSACTIONS_DIR = "_transactions"
MAX_TXN_BYTES = 1 << 30


@dataclass(frozen=True)
class Transaction:
    """An operation and the version it was planned against."""

    read_version: int
    operation: Operation
    uuid: str = field(default_factory=lambda: str(uuidlib.uuid4()))
    tag: str = ""
    properties: Mapping[str, str] = field(default_factory=dict)

    @property
    def transaction_properties(self) -> Mapping[str, str]:
        """``properties`` under pylance's name (``Transaction.transaction_properties``)."""
        return self.properties

    @property
    def file_name(self) -> str:
        return f"{self.read_version}-{self.uuid}.txn"

    def to_proto(self) -> transaction_pb2.Transaction:
        t = transaction_pb2.Transaction(read_version=self.read_version, uuid=self.uuid, tag=self.tag)
        t.transaction_properties.update(self.properties)
        self.operation.to_proto(t)
        return t

    @classmethod
    def from_proto(cls, t: transaction_pb2.Transaction) -> "Transaction":
        return cls(
            read_version=t.read_version,
            operation=operation_from_proto(t),
            uuid=t.uuid,
            tag=t.tag,
            properties=dict(t.transaction_properties),
        )


def decode_transaction(data: bytes, path: str) -> Transaction:
    """A Transaction from ``.txn`` bytes (or a manifest's inline copy) read from ``path``.

    Raises:
        CorruptFileError: the bytes do not decode, or the content is invalid (bad schema, a
            data file path leaving ``data/``, absurd row counts), naming ``path``.
        UnsupportedFeatureError: fragments use features lance_ops does not read.
    """
    t = transaction_pb2.Transaction()
    try:
        t.ParseFromString(data)
    except DecodeError as e:
        raise CorruptFileError(path, f"transaction protobuf does not decode: {e}") from e
    if t.WhichOneof("operation") is None:
        raise CorruptFileError(path, "transaction has no operation")
    try:
        txn = Transaction.from_proto(t)
    except (ValueError, KeyError, IndexError, TypeError, OverflowError, SchemaError) as e:
        raise CorruptFileError(path, f"transaction content is invalid: {e}") from e
    check_fragments(operation_fragments(txn.operation), path)
    return txn


def validate_operation(op: Operation) -> None:
    """Refuse an operation whose fragments would make the committed manifest unreadable.

    Raises:
        ValueError: a data file path that is absolute or leaves ``data/``, or absurd row counts.
    """
    try:
        check_fragments(operation_fragments(op), f"{op.name} operation")
    except CorruptFileError as e:
        raise InvalidArgumentError(e.problem) from None


@singledispatch
def operation_fragments(op: Operation) -> list[FragmentMetadata]:
    """Every fragment an operation carries (new, updated and old ones)."""
    return []


@operation_fragments.register
def _(op: Append | Overwrite) -> list[FragmentMetadata]:
    return list(op.fragments)


@operation_fragments.register
def _(op: Delete) -> list[FragmentMetadata]:
    return list(op.updated_fragments)


@operation_fragments.register
def _(op: Update) -> list[FragmentMetadata]:
    return [*op.updated_fragments, *op.new_fragments]


@operation_fragments.register
def _(op: Merge) -> list[FragmentMetadata]:
    return [*op.fragments, *op.new_fragments]


@operation_fragments.register
def _(op: Rewrite) -> list[FragmentMetadata]:
    return [f for g in op.groups for f in (*g.old_fragments, *g.new_fragments)]


def write_transaction_file(store: ObjectStore, txn: Transaction) -> bytes:
    """Write ``_transactions/{read_version}-{uuid}.txn``; return the bytes (inlined in the manifest too)."""
    data = txn.to_proto().SerializeToString()
    store.put(f"{TRANSACTIONS_DIR}/{txn.file_name}", data, atomic=False)  # unique name, read after commit
    return data


def read_transaction_file(store: ObjectStore, name: str) -> Transaction:
    if not is_plain_name(name):
        raise CorruptFileError(store.full_path(TRANSACTIONS_DIR), f"transaction file name {name!r} is not a plain name")
    rel = f"{TRANSACTIONS_DIR}/{name}"
    try:
        size = store.size(rel)
    except FileNotFoundError as e:
        raise CorruptFileError(store.full_path(rel), "transaction file named by the manifest does not exist") from e
    if size > MAX_TXN_BYTES:
        raise CorruptFileError(store.full_path(rel), f"transaction file is {size} bytes, larger than the limit")
    return decode_transaction(store.read(rel), store.full_path(rel))
