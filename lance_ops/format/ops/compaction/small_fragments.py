"""Compaction's reads of many small fragments, a group at a time (:mod:`..file.small`).

A fragment qualifies when it has one data file holding every column, of the plain local store,
no bigger than :data:`~..file.small.SMALL_FILE_BYTES`, holding the fragment's physical rows,
and no deletion file; with stable row ids also when its ids are one range and its versions
single runs (:func:`ranged_meta`), so its metadata needs no per-row arrays.  Any other
fragment, or a group whose bytes do not decode here, is read by the ordinary per-fragment scan
(which raises the named errors).
"""

from collections.abc import Sequence

import pyarrow as pa

from lance_ops.format.file.small import SmallFile, decode_small, open_small
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.read.scan import fields_in_file
from lance_ops.format.table import rowids
from lance_ops.format.table.fragment import FragmentMetadata
from lance_ops.format.table.manifest import Manifest

__all__ = ["GROUP_BYTES", "GROUP_ROWS", "open_small_fragment", "ranged_meta", "read_small_group"]

#: a group ends at this many rows or file bytes (the writer then gets batches of this size)
GROUP_ROWS = 65536
GROUP_BYTES = 8 << 20

#: single-run version sequences by (bytes, rows): streamed fragments repeat them byte for byte
_RUNS: dict[tuple[bytes, int], int | None] = {}


def _single_version(data: bytes | None, rows: int, frag: FragmentMetadata, source: str, created: bool) -> int | None:
    if data is None:
        return 1
    key = (data, rows)
    hit = _RUNS.get(key, 0)
    if hit != 0:
        return hit
    values, _ = rowids.fragment_version_runs(frag, source, created=created)
    out = int(values[0]) if values.size == 1 else None
    if len(_RUNS) >= 4096:
        _RUNS.clear()
    _RUNS[key] = out
    return out


def ranged_meta(frag: FragmentMetadata, source: str) -> tuple[int, int, int] | None:
    """``(first row id, created version, updated version)`` of a fragment without deletions
    whose row ids are one range and whose version sequences are single runs, else None (the
    rows' metadata then comes from the scan's per-row columns)."""
    if frag.deletion_file is not None or frag.row_ids is None:
        return None
    bounds = rowids.fragment_row_id_range(frag, source)
    if bounds is None:
        return None
    c = _single_version(frag.created_at_versions, frag.physical_rows, frag, source, True)
    u = _single_version(frag.last_updated_at_versions, frag.physical_rows, frag, source, False)
    if c is None or u is None:
        return None
    return bounds[0], c, u


def open_small_fragment(store: ObjectStore, manifest: Manifest, frag: FragmentMetadata,
                        top_ids: Sequence[int]) -> SmallFile | None:
    """The fragment's one small data file, read and parsed, or None (see the module)."""
    if len(frag.files) != 1 or frag.deletion_file is not None or not top_ids:
        return None
    df = frag.files[0]
    if df.base_id is not None or (df.file_major_version, df.file_minor_version) not in ((2, 1), (2, 2)):
        return None
    in_file = fields_in_file(manifest.schema, df)
    if any(fid not in in_file for fid in top_ids):
        return None
    f = open_small(store, f"data/{df.path}", df.file_size_bytes or None)
    if f is None or f.num_rows != frag.physical_rows:
        return None
    return f


def read_small_group(files: Sequence[SmallFile], top_ids: Sequence[int], names: Sequence[str]) -> pa.RecordBatch | None:
    """Every row of ``files`` in order as one batch with columns ``names``, or None."""
    got = decode_small(files, top_ids)
    if got is None:
        return None
    _, arrays = got
    rows = sum(f.num_rows for f in files)
    if any(len(a) != rows for a in arrays):
        return None
    return pa.RecordBatch.from_arrays(arrays, names=list(names))
