"""The metadata columns a scan adds (spec "Row ID and lineage"): ``_rowid`` (stable id, or the
row address without stable ids), ``_rowaddr`` = ``fragment_id << 32 | offset``,
``_row_created_at_version`` and ``_row_last_updated_at_version`` (1 where a fragment carries no
sequence, as pylance); a fragment's sequences behind them, and the filters over metadata columns
only, evaluated once per fragment before any data file is opened."""

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.acero as acero
import pyarrow.compute as pc

from lance_ops.format.errors import CorruptFileError
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.table import rowids
from lance_ops.format.table.fragment import FragmentMetadata
from lance_ops.format.table.manifest import Manifest

__all__ = ["CREATED_AT", "META_COLUMNS", "ROW_ADDR", "ROW_ID", "UPDATED_AT", "RowSequences", "add_metadata_columns",
           "filter_table", "metadata_filter", "row_sequences", "version_filter"]

ROW_ID = "_rowid"
ROW_ADDR = "_rowaddr"
CREATED_AT = "_row_created_at_version"
UPDATED_AT = "_row_last_updated_at_version"
META_COLUMNS = (ROW_ID, ROW_ADDR, CREATED_AT, UPDATED_AT)

#: the physical row offset column a metadata filter carries through (dropped afterwards)
_ROW_INDEX = "__lance_ops_row_index"

Filter = pc.Expression | tuple[pc.Expression, ...]


@dataclass(frozen=True, eq=False)
class RowSequences:
    """A fragment's per-row metadata a scan asked for, decoded (None: not asked, or not stored):
    stable row ids, created-at and last-updated-at versions, each indexed by physical row."""

    ids: np.ndarray | None = None
    created: np.ndarray | None = None
    updated: np.ndarray | None = None


def row_sequences(store: ObjectStore, manifest: Manifest, frag: FragmentMetadata, meta: Collection[str]) -> RowSequences:
    """The sequences behind the metadata columns ``meta`` of ``frag``.

    Raises:
        CorruptFileError: the dataset uses stable row ids and the fragment has none.
    """
    ids = created = updated = None
    if ROW_ID in meta and manifest.uses_stable_row_ids:
        if frag.row_ids is None:
            raise CorruptFileError(manifest.source or store.uri,
                                   f"fragment {frag.id} has no row ids but the dataset uses stable row ids")
        ids = rowids.fragment_row_ids(frag, manifest.source)
    if CREATED_AT in meta and frag.created_at_versions is not None:
        created = rowids.fragment_versions(frag, manifest.source, created=True)
    if UPDATED_AT in meta and frag.last_updated_at_versions is not None:
        updated = rowids.fragment_versions(frag, manifest.source, created=False)
    return RowSequences(ids, created, updated)


def add_metadata_columns(
    cols: dict[str, pa.Array], meta: Collection[str], frag_id: int, start: int, stop: int, seqs: RowSequences
) -> None:
    """The metadata columns of physical rows ``[start, stop)`` of fragment ``frag_id``."""
    base = frag_id << 32
    addr = np.arange(base + start, base + stop, dtype=np.uint64)  # one pass, no temporary
    if ROW_ADDR in meta:
        cols[ROW_ADDR] = pa.array(addr, type=pa.uint64())
    if ROW_ID in meta:
        cols[ROW_ID] = pa.array(seqs.ids[start:stop] if seqs.ids is not None else addr, type=pa.uint64())
    one = None
    for name, seq in ((CREATED_AT, seqs.created), (UPDATED_AT, seqs.updated)):
        if name in meta:
            if seq is not None:
                cols[name] = pa.array(seq[start:stop], type=pa.uint64())
            else:
                one = one if one is not None else pa.array(np.ones(stop - start, dtype=np.uint64))
                cols[name] = one


def metadata_filter(
    frag: FragmentMetadata, columns: Sequence[str], expr: Filter, live: np.ndarray | None, seqs: RowSequences
) -> np.ndarray | None:
    """Mask of the live rows matching ``expr``, a filter over the metadata ``columns`` only;
    None when no row matches."""
    rows = np.flatnonzero(live) if live is not None else np.arange(frag.physical_rows, dtype=np.int64)
    if rows.size == 0:
        return None
    cols: dict[str, pa.Array] = {}
    addr = None
    for name in columns:
        if name in (ROW_ADDR, ROW_ID) and addr is None:
            addr = (np.uint64(frag.id) << np.uint64(32)) + rows.astype(np.uint64)
        if name == ROW_ADDR:
            cols[name] = pa.array(addr, type=pa.uint64())
        elif name == ROW_ID:
            cols[name] = pa.array(seqs.ids[rows] if seqs.ids is not None else addr, type=pa.uint64())
        else:
            seq = seqs.created if name == CREATED_AT else seqs.updated
            values = seq[rows] if seq is not None else np.ones(rows.size, dtype=np.uint64)
            cols[name] = pa.array(values, type=pa.uint64())
    cols[_ROW_INDEX] = pa.array(rows)
    hits = filter_table(pa.table(cols), expr).column(_ROW_INDEX).to_numpy()
    if hits.size == 0:
        return None
    mask = np.zeros(frag.physical_rows, dtype=bool)
    mask[hits] = True
    return mask


def _version_runs(frag: FragmentMetadata, name: str, source: str) -> tuple[np.ndarray, np.ndarray]:
    data = frag.created_at_versions if name == CREATED_AT else frag.last_updated_at_versions
    if data is None:  # no sequence: version 1 for every row, as pylance reports it
        return np.ones(1, dtype=np.uint64), np.array([frag.physical_rows], dtype=np.int64)
    field = "inline_created_at_versions" if name == CREATED_AT else "inline_last_updated_at_versions"
    with rowids.inline_field(source, frag.id, field):
        return rowids.decode_version_runs(data, expected_len=frag.physical_rows, path=source or "<inline>")


def version_filter(
    frag: FragmentMetadata, columns: Sequence[str], expr: Filter, live: np.ndarray | None, source: str = ""
) -> np.ndarray | None:
    """Mask of the live rows matching ``expr``, a filter over the version ``columns`` only; None
    for no match.

    The row range is cut where any referenced sequence changes value; the filter runs on one
    row per piece and the result is expanded with ``np.repeat``.
    """
    n = frag.physical_rows
    if n == 0:
        return None
    runs = {name: _version_runs(frag, name, source) for name in columns}
    cuts = [np.cumsum(lens) for _, lens in runs.values()]
    ends = np.unique(np.concatenate([*cuts, np.array([n], dtype=np.int64)]))
    ends = ends[ends > 0]
    starts = np.concatenate([np.zeros(1, dtype=np.int64), ends[:-1]])
    cols: dict[str, pa.Array] = {}
    for (name, (values, _)), run_ends in zip(runs.items(), cuts, strict=True):
        cols[name] = pa.array(values[np.searchsorted(run_ends, starts, side="right")], type=pa.uint64())
    cols[_ROW_INDEX] = pa.array(np.arange(starts.size, dtype=np.int64))
    hits = filter_table(pa.table(cols), expr).column(_ROW_INDEX).to_numpy()
    if hits.size == 0:
        return None
    matched = np.zeros(starts.size, dtype=bool)
    matched[hits] = True
    mask = np.repeat(matched, ends - starts)
    if live is not None:
        mask &= live
        if not mask.any():
            return None
    return mask


def filter_table(table: pa.Table, expr: Filter) -> pa.Table:
    """``table.filter(expr)`` on the calling thread: one batch gains nothing from Acero's pool,
    and the hand-off costs more than the filter for the small batches of small fragments.
    A tuple of expressions (AND terms) is applied as a chain of filter nodes."""
    steps = expr if isinstance(expr, tuple) else (expr,)
    decl = acero.Declaration.from_sequence(
        [acero.Declaration("table_source", acero.TableSourceNodeOptions(table))]
        + [acero.Declaration("filter", acero.FilterNodeOptions(e)) for e in steps]
    )
    return decl.to_table(use_threads=False)
