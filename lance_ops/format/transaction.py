"""Transactions: the ``.txn`` file and the inline manifest copy (FORMAT_NOTES.md §9)."""

import uuid as uuidlib
from collections.abc import Mapping
from dataclasses import dataclass, field

from google.protobuf.message import DecodeError

from ._proto import transaction_pb2
from .errors import CorruptFileError
from .operations import Operation, operation_from_proto
from .store import ObjectStore

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
    t = transaction_pb2.Transaction()
    try:
        t.ParseFromString(data)
    except DecodeError as e:
        raise CorruptFileError(path, f"transaction protobuf does not decode: {e}") from e
    try:
        return Transaction.from_proto(t)
    except (ValueError, KeyError) as e:
        raise CorruptFileError(path, f"transaction content is invalid: {e}") from e


def write_transaction_file(store: ObjectStore, txn: Transaction) -> bytes:
    """Write ``_transactions/{read_version}-{uuid}.txn``; return the bytes (inlined in the manifest too)."""
    data = txn.to_proto().SerializeToString()
    store.put(f"{TRANSACTIONS_DIR}/{txn.file_name}", data)
    return data


def read_transaction_file(store: ObjectStore, name: str) -> Transaction:
    rel = f"{TRANSACTIONS_DIR}/{name}"
    size = store.size(rel)
    if size > MAX_TXN_BYTES:
        raise CorruptFileError(store.full_path(rel), f"transaction file is {size} bytes, larger than the limit")
    return decode_transaction(store.read(rel), store.full_path(rel))
