"""Tables in known states for the planner tests (counts scaled down: a compaction target of
1,000 rows stands for pylance's 1M)."""

import lance
import numpy as np
import pyarrow as pa

import lance_ops.format as lf
from lance_ops.settings import PolicySettings

TARGET = 1000

#: the policy of every test table: thresholds scaled to the small tables (retention: the default 14 days)
POLICY = PolicySettings(
    target_rows_per_fragment=TARGET, min_small_fragments=4, deleted_ratio_threshold=0.1,
    min_unindexed_rows=1000, max_index_segments=8, cleanup_min_versions=10,
)
#: the same with a retention of 0 days (the test's versions are seconds old)
CLEANUP_POLICY = POLICY.model_copy(update={"cleanup_older_than_days": 0, "cleanup_retention_duration_check": False})


def rows(start: int, n: int, dim: int = 0) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    cols: dict[str, pa.Array] = {"id": pa.array(ids), "val": pa.array(ids * 0.5)}
    if dim:
        rng = np.random.default_rng(start)
        flat = pa.array(rng.random(n * dim, dtype=np.float32))
        cols["vec"] = pa.FixedSizeListArray.from_arrays(flat, dim)
    return pa.table(cols)


def small_fragments(uri: str, n: int = 20, each: int = 100) -> None:
    """``n`` appends of ``each`` rows (lance_ops): ``n`` small fragments."""
    for i in range(n):
        lf.write_dataset(rows(i * each, each), uri, mode="append" if i else "create")


def deleted(uri: str) -> None:
    """4 fragments of twice the target (pylance), 30% of each deleted: still full after."""
    lance.write_dataset(rows(0, 8 * TARGET), uri, max_rows_per_file=2 * TARGET)
    lance.dataset(uri).delete("id % 10 < 3")


def unindexed(uri: str) -> None:
    """6 fragments indexed by a BTREE (id) and an IVF_PQ (vec), then 4 unindexed: 40% (pylance)."""
    lance.write_dataset(rows(0, 6 * TARGET, dim=8), uri, max_rows_per_file=TARGET)
    ds = lance.dataset(uri)
    ds.create_scalar_index("id", "BTREE")
    ds.create_index("vec", "IVF_PQ", num_partitions=2, num_sub_vectors=2)
    lance.write_dataset(rows(6 * TARGET, 4 * TARGET, dim=8), uri, mode="append", max_rows_per_file=TARGET)


def segmented(uri: str, segments: int = 12, each: int = 100) -> None:
    """A BTREE of ``segments`` segments, one per small fragment (lance_ops appends, then
    ``optimize_indices(num_indices_to_merge=0)`` after each)."""
    lf.write_dataset(rows(0, each), uri)
    ds = lf.dataset(uri)
    ds.create_scalar_index("id", "BTREE")
    for i in range(1, segments):
        lf.write_dataset(rows(i * each, each), uri, mode="append")
        lf.dataset(uri).optimize_indices(num_indices_to_merge=0)


def many_versions(uri: str, versions: int = 120) -> None:
    """One full fragment, then config commits up to ``versions``; tags on 10 and 50, a branch from 30."""
    lf.write_dataset(rows(0, TARGET), uri)
    ds = lf.dataset(uri)
    for i in range(versions - 1):
        ds.update_config({"test.step": str(i)})
    ds.create_tag("ten", 10)
    ds.create_tag("fifty", 50)
    ds.create_branch("dev", 30)


def healthy(uri: str) -> None:
    """One full fragment with a BTREE over every row."""
    lf.write_dataset(rows(0, TARGET), uri)
    lf.dataset(uri).create_scalar_index("id", "BTREE")
