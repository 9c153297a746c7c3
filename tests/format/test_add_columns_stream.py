"""``add_columns`` computes and writes a fragment's new column a slice at a time
(``ops/column_stream.py``): the values, their rows (nulls at deleted rows) and a UDF's batch
sizes are what a whole-fragment computation gives, however the slices fall."""

from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_ops.format as lf
from lance_ops.format.ops import column_stream

N = 5_000


def _dataset(tmp_path, deleted) -> str:
    uri = str(tmp_path / "ds")
    rng = np.random.default_rng(3)
    t = pa.table({"id": np.arange(N, dtype=np.int64), "x": rng.random(N),
                  "s": pa.array([f"row-{i}" for i in range(N)])})
    lf.write_dataset(t, uri, max_rows_per_file=N // 2, data_storage_version="2.2")
    if deleted is not None:
        lf.dataset(uri).delete(deleted[0])
    return uri


DELETES = [  # (SQL predicate, the same in Python)
    None,
    ("id % 7 = 3", lambda i: i % 7 == 3),  # scattered
    (f"id >= {N // 2 - 300}", lambda i: i >= N // 2 - 300),  # a fragment's tail (trailing nulls) and more
    ("id >= 100 AND id < 1400", lambda i: 100 <= i < 1400),  # whole slices without a live row
]


@pytest.mark.parametrize("deleted", DELETES, ids=["none", "scattered", "tail", "gap"])
@pytest.mark.parametrize("stream_rows", [64, 1 << 18])
def test_sql_column_equals_the_whole_computation(tmp_path, monkeypatch, deleted, stream_rows):
    monkeypatch.setattr(column_stream, "STREAM_ROWS", stream_rows)
    monkeypatch.setattr(column_stream, "STREAM_PAGE_BYTES", 4096)  # several pages per file
    uri = _dataset(tmp_path, deleted)
    ds = lf.dataset(uri)
    ds.add_columns({"y": "x * 2", "t": "concat(s, '!')"})
    got = lf.dataset(uri).to_table(columns=["id", "x", "s", "y", "t"], with_row_address=True)
    assert got.column("y").to_pylist() == pc.multiply(got.column("x"), 2).to_pylist()
    assert got.column("t").to_pylist() == [s + "!" for s in got.column("s").to_pylist()]
    expect_ids = [i for i in range(N) if deleted is None or not deleted[1](i)]
    assert got.column("id").to_pylist() == expect_ids
    # one value per physical row: deleted rows hold nulls, each new file as long as the fragment
    for frag in lf.dataset(uri).get_fragments():
        meta = frag.metadata
        assert meta.physical_rows == N // 2
    assert got.column("y").null_count == 0


@pytest.mark.parametrize("deleted", DELETES[:2], ids=["none", "scattered"])
def test_udf_sees_exact_batch_sizes(tmp_path, monkeypatch, deleted):
    monkeypatch.setattr(column_stream, "STREAM_ROWS", 100)
    uri = _dataset(tmp_path, deleted)
    sizes: list[int] = []

    def udf(batch: pa.RecordBatch) -> pa.RecordBatch:
        sizes.append(batch.num_rows)
        return pa.record_batch([pc.add(batch.column("id"), 1)], names=["z"])

    lf.dataset(uri).add_columns(udf, read_columns=["id"], batch_size=333)
    got = lf.dataset(uri).to_table(columns=["id", "z"])
    assert got.column("z").to_pylist() == [i + 1 for i in got.column("id").to_pylist()]
    live = [lf.dataset(uri).get_fragments()[k].count_rows() for k in range(2)]
    expect = [s for n in live for s in [333] * (n // 333) + ([n % 333] if n % 333 else [])]
    # fragments run two at a time, so their calls interleave; one more call learns the schema
    rest = Counter(sizes)
    rest.subtract(Counter(expect))
    assert min(rest.values()) >= 0 and sum(rest.values()) <= 1, (sizes, expect)
