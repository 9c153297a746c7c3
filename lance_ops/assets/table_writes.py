"""In-process table writes the IO manager needs beyond append/overwrite, each one atomic commit.

- ``replace_where``: delete the rows matching a predicate (a partition) and add new rows, in one
  Update transaction, so a reader never sees the partition half replaced.
- ``merge``: upsert on key columns (optionally within a predicate) through
  ``LanceDataset.merge_insert``: matched rows are rewritten and keep their ``_rowid`` and
  ``_row_created_at_version`` (stable row ids), the others are inserted; one Update transaction.

Both work on whole Arrow tables (the output of one asset partition) with vectorised kernels.
"""

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads

import lance_ops.format as lf
from lance_ops.format.distributed import (
    ObjectStore,
    commit_handler_for,
    plan_delete,
    require_writable,
    write_fragment_files,
)
from lance_ops.format.errors import SchemaError

ROW_ADDR, ROW_ID, CREATED_AT = "_rowaddr", "_rowid", "_row_created_at_version"
LOCAL_MASK = np.uint64(0xFFFFFFFF)


def rows_outside(table: pa.Table, where: pc.Expression) -> int:
    """How many rows of ``table`` do not satisfy ``where``."""
    return pads.dataset(table).count_rows(filter=~where) if table.num_rows else 0


def _new_fragments(store: ObjectStore, ds: lf.LanceDataset, table: pa.Table, max_rows_per_file: int) -> list[Any]:
    schema = ds.lance_schema
    target = schema.to_arrow()
    missing = [n for n in target.names if n not in table.column_names]
    extra = [n for n in table.column_names if n not in target.names]
    if missing or extra:
        raise SchemaError(f"{ds.uri}: the data has columns {table.column_names}, the dataset has {target.names}")
    batches = iter(table.select(target.names).to_batches())
    return write_fragment_files(store, batches, schema, version=require_writable(ds.data_storage_version, ds.uri),
                                max_rows_per_file=max_rows_per_file)


def _open_for_write(uri: str, storage_options: Mapping[str, Any] | None, manifest_store: Any) -> lf.LanceDataset:
    """The latest version through the dataset's commit handler; refuses (ManifestStoreRequiredError)
    before anything is written when the dataset commits through a manifest store not given."""
    commit_handler_for(ObjectStore(uri, storage_options), manifest_store).check_writable()
    return lf.dataset(uri, storage_options=storage_options, manifest_store=manifest_store)


def replace_where(uri: str, table: pa.Table, where: pc.Expression, *, storage_options: Mapping[str, Any] | None,
                  max_rows_per_file: int, properties: Mapping[str, str],
                  manifest_store: Any = None) -> tuple[lf.LanceDataset, int]:
    """Replace the rows matching ``where`` by ``table`` in one commit; returns (dataset, rows deleted)."""
    ds = _open_for_write(uri, storage_options, manifest_store)
    store = ObjectStore(uri, storage_options)
    updated, removed, deleted = plan_delete(store, ds.manifest, where)
    new = _new_fragments(store, ds, table, max_rows_per_file)
    if not new and not updated and not removed:
        return ds, 0
    out = lf.commit(uri, lf.Update(removed, updated, new), read_version=ds.version, storage_options=storage_options,
                    transaction_properties=properties, manifest_store=manifest_store)
    return out, deleted


def merge(uri: str, table: pa.Table, on: Sequence[str], *, where: pc.Expression | None,
          storage_options: Mapping[str, Any] | None, max_rows_per_file: int,
          properties: Mapping[str, str], manifest_store: Any = None) -> tuple[lf.LanceDataset, int, int]:
    """Upsert ``table`` on the key columns ``on`` with ``format``'s merge_insert; returns
    (dataset, rows updated, rows inserted).

    Only target rows matching ``where`` (the partition) can match (``target_filter``).  Keys
    compare with ``=`` (a null key never matches); a target row matched by several rows of
    ``table`` is an ``AmbiguousMergeInsertError``.  Nothing is committed when ``table`` is empty.
    """
    ds = _open_for_write(uri, storage_options, manifest_store)
    if not table.num_rows:
        return ds, 0, 0
    stats = (ds.merge_insert(list(on), target_filter=where, max_rows_per_file=max_rows_per_file)
             .when_matched_update_all().when_not_matched_insert_all()
             .execute(table, transaction_properties=properties))
    return ds, stats["num_updated_rows"], stats["num_inserted_rows"]  # ``execute`` moved ``ds`` to its commit
