"""In-process table writes the IO manager needs beyond append/overwrite, each one atomic commit.

- ``replace_where``: delete the rows matching a predicate (a partition) and add new rows, in one
  Update transaction, so a reader never sees the partition half replaced.
- ``merge``: upsert on key columns (optionally within a predicate): matched rows are rewritten
  and keep their ``_rowid`` and ``_row_created_at_version`` (stable row ids), the others are
  inserted; one Update transaction.  The same semantics as ``jobs.upsert``, without Spark.

Both work on whole Arrow tables (the output of one asset partition) with vectorised kernels.
"""

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads

import lance_ops.format as lf
from lance_ops.format.commit_handler import commit_handler_for
from lance_ops.format.errors import SchemaError
from lance_ops.format.mutate import plan_delete, with_deletions
from lance_ops.format.rowids import encode_row_ids, encode_versions
from lance_ops.format.store import ObjectStore
from lance_ops.format.write import require_writable, write_fragment_files

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
    """Upsert ``table`` on the key columns ``on``; returns (dataset, rows updated, rows inserted).

    Keys compare with ``=`` (a null key never matches); a key present twice in ``table`` is an
    error (it would update one row twice).
    """
    on = list(on)
    ds = _open_for_write(uri, storage_options, manifest_store)
    missing = [k for k in on if k not in ds.schema.names or k not in table.column_names]
    if not on or missing:
        raise SchemaError(f"{uri}: merge key column(s) {missing or on} must be columns of the dataset and the data "
                          f"(dataset: {ds.schema.names})")
    keys = table.select(on)
    if keys.group_by(on).aggregate([]).num_rows != keys.num_rows:
        raise SchemaError(f"{uri}: the data has the same key {on} on several rows; merge needs at most one per key")
    stable = ds.has_stable_row_ids
    meta = [ROW_ADDR] + ([ROW_ID, CREATED_AT] if stable else [])
    target = ds.to_table(columns=on + meta, filter=where)
    # join the keys only (payload columns of any type stay out of the hash join), then take rows
    tagged = keys.append_column("__pos", pa.array(np.arange(table.num_rows, dtype=np.int64)))
    joined = tagged.join(target, keys=on, join_type="left outer").sort_by("__pos")
    matched = pc.is_valid(joined[ROW_ADDR])
    hits = joined.filter(matched)
    upd = table.take(hits["__pos"])
    ins = table.take(joined.filter(pc.invert(matched))["__pos"])
    store = ObjectStore(uri, storage_options)
    m = ds.manifest
    updated, removed = [], []
    if upd.num_rows:
        addrs = hits[ROW_ADDR].to_numpy().astype(np.uint64)
        frag_ids = (addrs >> np.uint64(32)).astype(np.int64)
        by_id = {f.id: f for f in m.fragments}
        for fid in np.unique(frag_ids):
            offsets = (addrs[frag_ids == fid] & LOCAL_MASK).astype(np.uint32)
            new_frag = with_deletions(store, by_id[int(fid)], offsets, m.version)
            (removed.append(int(fid)) if new_frag is None else updated.append(new_frag))
    new_upd = _new_fragments(store, ds, upd, max_rows_per_file) if upd.num_rows else []
    if stable and new_upd:
        ids = hits[ROW_ID].to_numpy().astype(np.uint64)
        created = hits[CREATED_AT].to_numpy().astype(np.uint64)
        pos, out = 0, []
        for f in new_upd:
            sl = slice(pos, pos + f.physical_rows)
            out.append(f.with_changes(row_ids=encode_row_ids(ids[sl]), created_at_versions=encode_versions(created[sl])))
            pos += f.physical_rows
        new_upd = out
    new_ins = _new_fragments(store, ds, ins, max_rows_per_file) if ins.num_rows else []
    if not new_upd and not new_ins:
        return ds, 0, 0
    modified = [m.schema.field(c).id for c in ds.schema.names if c not in on]
    op = lf.Update(removed, updated, new_upd + new_ins, fields_for_preserving_frag_bitmap=modified)
    out_ds = lf.commit(uri, op, read_version=m.version, storage_options=storage_options,
                       transaction_properties=properties, manifest_store=manifest_store)
    return out_ds, upd.num_rows, ins.num_rows
