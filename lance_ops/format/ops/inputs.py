"""Every input pylance's writers take, as one stream of RecordBatches, and the rules that fit the
stream to a dataset's schema.

:func:`coerce_batches` accepts what pylance 14's ``lance.types._coerce_reader`` accepts (used by
``write_dataset``, ``LanceDataset.insert``, ``merge_insert(...).execute`` and
``LanceFragment.create``): Arrow Tables, RecordBatches, RecordBatchReaders, ``pyarrow.dataset``
Datasets and Scanners, Lance datasets and scanners (anything with ``schema`` and
``to_batches()``), pandas and polars DataFrames (imported lazily, never by lance_ops itself), a
dict of columns, a list of row dicts, and an iterable of batches (with ``schema=``, each batch is
cast to it as pylance casts).

:func:`fit_batch` puts a batch in the dataset's column order and types, as pylance's append
does: columns may come in any order; a nullable column the data lacks is written as nulls (a
non-nullable one is a :class:`SchemaError`); a column of another type is cast when the cast is
lossless by type (:func:`widens`: wider integers and floats, ``string``/``large_string``,
``binary``/``large_binary``, ``list``/``large_list``, dictionary-encoded to plain values, an
all-null column).  pylance 14 refuses those type casts for Tables (``OSError: Append with
different schema``) and accepts them only from an iterable with ``schema=``; lance_ops accepts
them everywhere (a deliberate superset, issue 24).
"""

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import pyarrow as pa

from lance_ops.format.errors import (
    AppendSchemaError,
    ArgumentTypeError,
    CastError,
    InvalidArgumentError,
    MissingDependencyError,
    SchemaError,
)
from lance_ops.format.file.blob_columns import as_blob_storage, is_blob_field
from lance_ops.format.schema import types_equivalent


def coerce_batches(data: Any, schema: pa.Schema | None = None) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
    """``(schema, batches)`` of any input pylance's writers take (see the module docstring).

    With ``schema`` every batch is cast to it (a safe Arrow cast, as pylance's
    ``_casting_recordbatch_iter``); without it an iterable of batches takes the first batch's
    schema (pylance requires ``schema=`` there; lance_ops peeks).

    Raises:
        ArgumentTypeError: not a kind of data pylance writes (a string, None, an iterable of
            anything but batches), or ``schema`` not a ``pyarrow.Schema``.
        InvalidArgumentError: an empty iterable without ``schema``.
        CastError: a batch that cannot be cast to ``schema``.
        MissingDependencyError: a pandas DataFrame while pandas cannot be imported.
    """
    if schema is not None and not isinstance(schema, pa.Schema):
        raise ArgumentTypeError(f"schema must be a pyarrow.Schema, got {type(schema).__name__} {schema!r}")
    data_schema, batches = _as_batches(data, schema)
    if schema is None:
        return data_schema, batches
    return schema, _cast_each(batches, schema)  # an iterable's batches may differ from ``schema``


def _frame_kind(data: Any) -> str | None:
    """``"pandas"`` / ``"polars"`` for their DataFrames (by module name: neither is imported)."""
    module = type(data).__module__
    if type(data).__name__ != "DataFrame":
        return None
    for kind in ("pandas", "polars"):
        if module == kind or module.startswith(kind + "."):
            return kind
    return None


def _from_pandas(frame: Any, schema: pa.Schema | None) -> pa.Table:
    """``pa.Table.from_pandas`` (pyarrow imports pandas itself; lance_ops never does)."""
    try:
        return pa.Table.from_pandas(frame, schema=schema)
    except ImportError as e:  # a frame-like object where pandas is broken or absent
        raise MissingDependencyError("writing a pandas DataFrame", extra="pandas", missing="pandas") from e


def _as_batches(data: Any, schema: pa.Schema | None) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
    if data is None or isinstance(data, str | bytes | bytearray):
        raise ArgumentTypeError(
            f"cannot write data of type {type(data).__name__}; pass a pyarrow Table, RecordBatch, "
            "RecordBatchReader, Dataset or Scanner, a pandas or polars DataFrame, a dict of columns, a list "
            "of row dicts, or an iterable of RecordBatches with schema="
        )
    kind = _frame_kind(data)
    if kind == "pandas":
        data = _from_pandas(data, schema)
    elif kind == "polars":
        data = data.to_arrow()
    if isinstance(data, pa.Table):
        return data.schema, iter(data.to_batches())
    if isinstance(data, pa.RecordBatch):
        return data.schema, iter([data])
    if isinstance(data, pa.RecordBatchReader):
        return data.schema, iter(data)
    if isinstance(data, Mapping):
        batch = pa.RecordBatch.from_pydict(dict(data), schema=schema)
        return batch.schema, iter([batch])
    if isinstance(data, list) and data and isinstance(data[0], Mapping):
        batch = pa.RecordBatch.from_pylist(data, schema=schema)
        return batch.schema, iter([batch])
    if hasattr(data, "to_reader") and hasattr(data, "projected_schema"):  # pyarrow / lance scanners
        reader = data.to_reader()
        return reader.schema, iter(reader)
    if hasattr(data, "to_batches") and hasattr(data, "schema"):  # pyarrow and Lance datasets
        return data.schema, iter(data.to_batches())
    if isinstance(data, Iterable):
        return _iterable(iter(data), schema)
    raise ArgumentTypeError(f"cannot write data of type {type(data).__name__}; pass a pyarrow Table or "
                            "RecordBatchReader (or any input pylance's write_dataset takes)")


def _iterable(it: Iterator[Any], schema: pa.Schema | None) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
    if schema is not None:
        return schema, _batches_of(it)
    first = next(it, None)
    if first is None:
        raise InvalidArgumentError("Must provide schema to write dataset from RecordBatch iterable "
                                   "(the iterable yielded nothing)")
    if not isinstance(first, pa.Table | pa.RecordBatch):
        raise ArgumentTypeError(
            f"cannot write an iterable of {type(first).__name__}; it must yield pyarrow RecordBatches or Tables"
        )
    return first.schema, _batches_of(_chain(first, it))


def _chain(first: Any, rest: Iterator[Any]) -> Iterator[Any]:
    yield first
    yield from rest


def _batches_of(items: Iterator[Any]) -> Iterator[pa.RecordBatch]:
    for item in items:
        if isinstance(item, pa.Table):
            yield from item.to_batches()
        else:
            yield item


def _cast_each(batches: Iterator[pa.RecordBatch], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        if not isinstance(batch, pa.RecordBatch):
            raise ArgumentTypeError(f"the data yielded a {type(batch).__name__}, not a pyarrow RecordBatch")
        if batch.schema == schema or batch.schema.names != schema.names:
            yield batch  # other columns: fitted (or refused, named) where the batch is written
            continue
        try:
            yield pa.Table.from_batches([batch]).cast(schema).combine_chunks().to_batches()[0] \
                if batch.num_rows else pa.RecordBatch.from_pylist([], schema=schema)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError) as e:
            raise CastError(
                "Input RecordBatch iterator yielded a batch with schema that does not match the expected "
                f"schema.\nExpected:\n{schema}\nGot:\n{batch.schema}\n({str(e).splitlines()[0]})"
            ) from None


# --------------------------------------------------------------------------- fitting to a dataset


_INT_BITS = {pa.int8(): 8, pa.int16(): 16, pa.int32(): 32, pa.int64(): 64}
_UINT_BITS = {pa.uint8(): 8, pa.uint16(): 16, pa.uint32(): 32, pa.uint64(): 64}
_FLOAT_BITS = {pa.float16(): 16, pa.float32(): 32, pa.float64(): 64}
_SIBLINGS = ({pa.string(), pa.large_string()}, {pa.binary(), pa.large_binary()})


def widens(src: pa.DataType, dst: pa.DataType) -> bool:
    """Whether every value of type ``src`` is a value of ``dst`` (a cast loses nothing)."""
    if src == dst or pa.types.is_null(src):
        return True
    if isinstance(src, pa.BaseExtensionType):  # e.g. lance.blob.v2 arrays: judged by their storage
        return widens(src.storage_type, dst)
    if isinstance(dst, pa.BaseExtensionType):
        return widens(src, dst.storage_type)
    if pa.types.is_dictionary(src):
        return widens(src.value_type, dst)
    if src in _INT_BITS:
        return (dst in _INT_BITS and _INT_BITS[dst] >= _INT_BITS[src]) or (dst in _FLOAT_BITS and _FLOAT_BITS[dst] > _INT_BITS[src])
    if src in _UINT_BITS:
        return ((dst in _UINT_BITS and _UINT_BITS[dst] >= _UINT_BITS[src])
                or (dst in _INT_BITS and _INT_BITS[dst] > _UINT_BITS[src]))
    if src in _FLOAT_BITS:
        return dst in _FLOAT_BITS and _FLOAT_BITS[dst] >= _FLOAT_BITS[src]
    if any(src in s and dst in s for s in _SIBLINGS):
        return True
    lists = (pa.types.is_list, pa.types.is_large_list)
    if any(f(src) for f in lists) and any(f(dst) for f in lists):
        return widens(src.value_type, dst.value_type)
    if pa.types.is_fixed_size_list(src) and pa.types.is_fixed_size_list(dst):
        return src.list_size == dst.list_size and widens(src.value_type, dst.value_type)
    if pa.types.is_struct(src) and pa.types.is_struct(dst):
        names = [dst.field(i).name for i in range(dst.num_fields)]
        if [src.field(i).name for i in range(src.num_fields)] != names:
            return False
        return all(widens(src.field(i).type, dst.field(i).type) for i in range(src.num_fields))
    return False


def check_fits(data: pa.Schema, target: pa.Schema, where: str) -> None:
    """Raise :class:`SchemaError` unless batches of ``data`` can be fitted to ``target``
    (:func:`fit_batch`); run once before any file is written.

    Raises:
        SchemaError: duplicate columns.
        AppendSchemaError: unexpected columns, a missing non-nullable column, or a column whose
            type does not widen to the dataset's (an ``OSError`` too, as pylance's).
    """
    names = data.names
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise SchemaError(f"{where}: the data has duplicate column names {dup} (columns {names})")
    extra = [n for n in names if target.get_field_index(n) < 0]
    missing = [f.name for f in target if f.name not in names and not f.nullable]
    if extra or missing:
        raise AppendSchemaError(f"{where}: data columns {names} do not match the schema {target.names} "
                          f"(missing non-nullable {missing}, unexpected {extra}); a nullable column the data "
                          "lacks is written as nulls")
    for f in data:
        want = target.field(f.name).type
        if _is_blob_v2(target.field(f.name)) and _is_binary(f.type):
            continue
        if not widens(f.type, want) and not types_equivalent(f.type, want):
            raise AppendSchemaError(f"{where}: column {f.name!r} has type {f.type} in the data but {want} in the "
                              "dataset schema (only lossless casts are applied)")


def fit_batch(batch: pa.RecordBatch, target: pa.Schema, where: str) -> pa.RecordBatch:
    """``batch`` as a batch of ``target``: columns reordered, missing nullable ones null, lossless
    casts applied (vectorised), non-nullable columns checked for nulls.

    Raises:
        ArgumentTypeError: ``batch`` is not a RecordBatch.
        SchemaError: as :func:`check_fits`, or nulls in a non-nullable column.
    """
    if not isinstance(batch, pa.RecordBatch):
        raise ArgumentTypeError(f"{where}: the data yielded a {type(batch).__name__}, not a pyarrow RecordBatch")
    if batch.schema.names == target.names and all(a.type == b.type for a, b in zip(batch.schema, target, strict=True)):
        cols = batch.columns
    else:
        check_fits(batch.schema, target, where)
        cols = [_fit_column(batch, f, where) for f in target]
    for f, col in zip(target, cols, strict=True):
        if not f.nullable and col.null_count:
            raise SchemaError(f"{where}: column {f.name!r} is not nullable but the data has {col.null_count} nulls")
    return pa.RecordBatch.from_arrays(cols, schema=target)


def _fit_column(batch: pa.RecordBatch, field: pa.Field, where: str) -> pa.Array:
    i = batch.schema.get_field_index(field.name)
    if i < 0:
        return pa.nulls(batch.num_rows, field.type)
    col = batch.column(i)
    if col.type == field.type:
        return col
    if _is_blob_v2(field) and _is_binary(col.type):
        return blob_v2_storage(col, field.type)
    if is_blob_field(field):  # lance.blob.v2 extension arrays and payloads, as pylance takes them
        blob = as_blob_storage(col, field.type)
        if blob is not None:
            return blob
    try:
        return col.cast(field.type, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise CastError(f"{where}: column {field.name!r} of type {col.type} cannot be cast to the dataset's "
                        f"{field.type}: {str(e).splitlines()[0]}") from None


# --------------------------------------------------------------------------- blobs at 2.2

BLOB_KEY = b"lance-encoding:blob"
_EXT_NAME = b"ARROW:extension:name"
_BLOB_V2 = b"lance.blob.v2"
#: the storage pylance 14 gives a ``lance-encoding:blob`` large_binary column in a 2.2 dataset
BLOB_V2_FROM_BINARY = pa.struct([pa.field("data", pa.large_binary()), pa.field("uri", pa.string())])


def _is_binary(t: pa.DataType) -> bool:
    return pa.types.is_binary(t) or pa.types.is_large_binary(t)


def _is_blob_v2(f: pa.Field) -> bool:
    return (f.metadata or {}).get(_EXT_NAME) == _BLOB_V2 and pa.types.is_struct(f.type)


def blobs_as_v2(schema: pa.Schema, version: str) -> pa.Schema:
    """``schema`` with each ``lance-encoding:blob`` binary column turned into a blob v2 column when
    the dataset's files are 2.2 or later, as pylance 14 writes them (a ``lance.blob.v2`` struct of
    ``data``/``uri``; the payloads are written by the blob v2 writer)."""
    if tuple(int(x) for x in version.split(".")) < (2, 2):
        return schema
    fields = []
    for f in schema:
        md = dict(f.metadata or {})
        if md.get(BLOB_KEY) == b"true" and _is_binary(f.type):
            md.pop(BLOB_KEY)
            md[_EXT_NAME] = _BLOB_V2
            f = pa.field(f.name, BLOB_V2_FROM_BINARY, f.nullable, metadata=md)
        fields.append(f)
    return pa.schema(fields, metadata=schema.metadata)


def blob_v2_storage(values: pa.Array, storage: pa.StructType) -> pa.StructArray:
    """Binary payloads as the blob v2 storage struct ``storage`` (``data`` set, the rest null)."""
    n = len(values)
    children = [values.cast(pa.large_binary()) if storage.field(i).name == "data" else pa.nulls(n, storage.field(i).type)
                for i in range(storage.num_fields)]
    return pa.StructArray.from_arrays(children, fields=list(storage), mask=values.is_null())
