"""pylance's ``lance.file``: one standalone Lance file written and read outside a dataset
(``LanceFileWriter``, ``LanceFileReader``), e.g. to stage columns for ``add_columns`` or a
``DataReplacement``.  The file's field ids are numbered from 0 as its schema lists them; a
dataset reads such a file through the ``DataFile`` naming it (``fields`` / ``column_indices``).
"""

import os
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa

from lance_ops.format.errors import InvalidArgumentError
from lance_ops.format.file.reader import DataFileReader
from lance_ops.format.file.writer import DataFileWriter
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.schema import LanceSchema
from lance_ops.format.table.file_versions import normalize_storage_version


def _store_and_name(path: Any, storage_options: Mapping[str, Any] | None) -> tuple[ObjectStore, str]:
    text = os.fspath(path)
    head, name = text.rstrip("/").rsplit("/", 1) if "/" in text else (".", text)
    if not name:
        raise InvalidArgumentError(f"{text!r} does not name a file")
    return ObjectStore(head or "/", storage_options), name


class LanceFileWriter:
    """Writes one Lance file (pylance's ``LanceFileWriter``): ``write_batch`` tables or batches,
    then ``close()`` (or leave the ``with`` block); ``schema`` defaults to the first batch's;
    ``version`` a 2.x file version (default: the stable one, 2.2)."""

    def __init__(self, path: Any, schema: pa.Schema | None = None, *, version: str | None = None,
                 storage_options: Mapping[str, Any] | None = None, max_page_bytes: int | None = None,
                 data_cache_bytes: int | None = None, **kwargs: Any) -> None:
        self._store, self._name = _store_and_name(path, storage_options)
        self._version = normalize_storage_version(version or "stable")
        self._page_bytes = max_page_bytes or 8 * 1024 * 1024
        self._out: Any = None
        self._writer: DataFileWriter | None = None
        self._closed = False
        if schema is not None:
            self._open(schema)

    def _open(self, schema: pa.Schema) -> None:
        self._out = self._store.open_output(self._name).__enter__()
        self._writer = DataFileWriter(self._out, LanceSchema.from_arrow(schema), version=self._version,
                                      max_page_bytes=self._page_bytes)

    def write_batch(self, batch: pa.RecordBatch | pa.Table) -> None:
        """Append the rows of ``batch`` (its schema must be the file's)."""
        if self._closed:
            raise InvalidArgumentError(f"{self._name}: the writer is closed")
        if self._writer is None:
            self._open(batch.schema)
        assert self._writer is not None
        self._writer.write_batch(batch)

    def close(self) -> int:
        """Finish the file; return its number of rows (as pylance's)."""
        if self._closed:
            return self._writer.num_rows if self._writer is not None else 0
        self._closed = True
        if self._writer is None:
            raise InvalidArgumentError(f"{self._name}: nothing was written and no schema was given")
        self._writer.finish()
        self._out.__exit__(None, None, None)
        return self._writer.num_rows

    def __enter__(self) -> "LanceFileWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        if exc[0] is None:
            self.close()
        elif self._out is not None and not self._closed:
            self._closed = True
            self._out.__exit__(*exc)


class ReaderResults:
    """What ``LanceFileReader.read_all`` returns: ``to_table()`` or ``to_batches()``."""

    def __init__(self, batches: Iterator[pa.RecordBatch], schema: pa.Schema) -> None:
        self._batches, self._schema = batches, schema

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        return self._batches

    def to_table(self) -> pa.Table:
        return pa.Table.from_batches(list(self._batches), schema=self._schema)


class LanceFileReader:
    """Reads one Lance file (pylance's ``LanceFileReader``)."""

    def __init__(self, path: Any, storage_options: Mapping[str, Any] | None = None,
                 columns: list[str] | None = None, **kwargs: Any) -> None:
        store, name = _store_and_name(path, storage_options)
        self._reader = DataFileReader(store, name)
        self._ids = None if columns is None else [self._reader.schema.field(c).id for c in columns]

    def read_all(self, *, batch_size: int = 1024, batch_readahead: int = 16) -> ReaderResults:
        """Every row, in batches of ``batch_size``."""
        schema = (self._reader.schema if self._ids is None else self._reader.schema.project_ids(self._ids)).to_arrow()
        return ReaderResults(self._reader.read(self._ids, batch_size=batch_size), schema)

    def num_rows(self) -> int:
        return self._reader.num_rows
