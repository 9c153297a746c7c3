"""What Dagster records about a dataset version, read from manifests (no data scan) unless noted.

``manifest_stats`` feeds the metadata of every materialisation and observation (``metadata.py``)
and the compaction sensor; ``fingerprint`` (a scan) backs the compaction asset check.
"""

import hashlib
from collections.abc import Collection, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

import lance_ops.format as lf
from lance_ops.orchestration.policy import (
    MAINTENANCE_OPERATIONS,
    manifest_stats,
    transaction_of,
)
from lance_ops.orchestration.stamps import JOB_PROPERTY, OPERATION_PROPERTY, RUN_ID_PROPERTY
from lance_ops.orchestration.table import TableRef

__all__ = ["JOB_PROPERTY", "MAINTENANCE_OPERATIONS", "OPERATION_PROPERTY", "RUN_ID_PROPERTY", "VERSION_COLUMNS",
           "fingerprint", "manifest_stats", "rewrite_fingerprints", "rewrite_groups", "rewrite_without_deletions",
           "transaction_of", "versions_by"]

VERSION_COLUMNS = ["_rowid", "_row_created_at_version", "_row_last_updated_at_version"]


def versions_by(table: TableRef, run_id: str, after: int) -> list[int]:
    """Versions after ``after`` whose transaction carries ``run_id`` (what one Dagster run committed)."""
    out = []
    for v in table.list_versions():
        if v > after:
            txn = transaction_of(table, v)
            if txn is not None and txn.properties.get(RUN_ID_PROPERTY) == run_id:
                out.append(v)
    return out


def _row_hashes(batches: Iterator[pa.RecordBatch]) -> np.ndarray:
    import pandas as pd  # here: ``lance-ops inspect`` imports this module with the base install only

    parts = []
    for batch in batches:
        if batch.num_rows == 0:
            continue
        df = batch.to_pandas()
        for name, typ in zip(batch.schema.names, batch.schema.types, strict=True):
            if pa.types.is_nested(typ) or pa.types.is_dictionary(typ):
                df[name] = df[name].map(repr)  # lists/structs are not hashable as objects
        parts.append(pd.util.hash_pandas_object(df, index=False).to_numpy(dtype=np.uint64))
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.uint64)


def fingerprint(ds: lf.LanceDataset, fragment_ids: Collection[int] | None = None) -> tuple[int, str]:
    """(rows, digest) of the multiset of live rows: every user column, row id and both row versions.

    Order-independent (per-row hashes are sorted before digesting), so a rewrite that keeps
    every row, id and version leaves it unchanged.  Scans ``fragment_ids`` (default: all).
    """
    columns = list(ds.schema.names) + (VERSION_COLUMNS if ds.has_stable_row_ids else [])
    if fragment_ids is None:
        batches = ds.to_batches(columns=columns)
    else:
        frags = [f for f in ds.manifest.fragments if f.id in set(fragment_ids)]
        batches = ds.to_batches(columns=columns, fragments=frags) if frags else iter(())
    hashes = np.sort(_row_hashes(batches))
    return len(hashes), f"{len(hashes)}:{hashlib.sha256(hashes.tobytes()).hexdigest()}"


@dataclass(frozen=True)
class RewriteFingerprint:
    """The rows a Rewrite at ``version`` moved: its old fragments at ``version - 1``, its new ones at ``version``."""

    version: int
    before: str
    after: str
    rows_before: int
    rows_after: int


def rewrite_groups(table: TableRef, version: int) -> tuple[set[int], set[int]]:
    """(old fragment ids, new fragment ids) of the Rewrite that made ``version``."""
    txn = transaction_of(table, version)
    if txn is None or txn.operation.name != "rewrite":
        raise ValueError(f"{table.uri}: version {version} was not made by a Rewrite "
                         f"({txn.operation.name if txn else 'no transaction'})")
    groups = txn.operation.groups  # type: ignore[union-attr]
    return ({f.id for g in groups for f in g.old_fragments}, {f.id for g in groups for f in g.new_fragments})


def rewrite_fingerprints(ds: lf.LanceDataset, table: TableRef, *, after_only: bool = False) -> RewriteFingerprint:
    """Fingerprints of a Rewrite's rows before and after (``ds`` is checked out at the Rewrite's version)."""
    old_ids, new_ids = rewrite_groups(table, ds.version)
    rows_after, after = fingerprint(ds, new_ids)
    if after_only:
        return RewriteFingerprint(ds.version, "", after, 0, rows_after)
    rows_before, before = fingerprint(ds.checkout_version(ds.version - 1), old_ids)
    return RewriteFingerprint(ds.version, before, after, rows_before, rows_after)


def rewrite_without_deletions(
    table: TableRef, ds: lf.LanceDataset, *, extra_versions: Collection[int] = ()
) -> tuple[list[int], list[str]]:
    """Check deletion materialisations: (versions checked, problems).

    A version is checked when its transaction is a Rewrite stamped ``materialize_deletions``
    or when it is in ``extra_versions`` (versions Dagster recorded as deletion
    materialisations).  A problem is a new fragment of that Rewrite that still has a
    deletion file in the version the Rewrite made.  Manifest metadata only.
    """
    present = set(table.list_versions())
    checked: list[int] = []
    problems: list[str] = []
    for v in sorted(present):
        txn = transaction_of(table, v)
        if txn is None or txn.operation.name != "rewrite":
            continue
        if txn.properties.get(OPERATION_PROPERTY) != "materialize_deletions" and v not in extra_versions:
            continue
        checked.append(v)
        new_ids = {f.id for g in txn.operation.groups for f in g.new_fragments}  # type: ignore[union-attr]
        for frag in ds.checkout_version(v).manifest.fragments:
            if frag.id in new_ids and frag.deletion_file is not None:
                problems.append(
                    f"version {v}: rewritten fragment {frag.id} has a deletion file "
                    f"({frag.num_deleted_rows} deleted rows)"
                )
    return checked, problems
