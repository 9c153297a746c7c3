"""FSST symbol tables shared by the files of one in-process compaction (``file/v21/fsst_reuse.py``):
a page reuses an earlier file's table for its column unless that compresses it more than
``SLACK`` worse; decoding is exact either way, the bytes depend only on the plan, and pylance
reads the files exactly."""

import os
import shutil

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_ops.format as lf
from lance_ops.format.file.v21 import fsst, fsst_reuse, kernels
from lance_ops.format.file.v21.fsst_reuse import FileTables, PageReuse, reuse_tables

pytestmark = pytest.mark.skipif(kernels.get() is None, reason="FSST is written with the compiled kernels only")


def _strings(words: list[str]) -> tuple[np.ndarray, np.ndarray]:
    a = pa.array(words)
    offs = np.frombuffer(a.buffers()[1], np.int32, count=len(a) + 1).astype(np.int64)
    return np.frombuffer(a.buffers()[2], np.uint8)[: offs[-1]].copy(), offs


def _roundtrip(got, data, offs) -> None:
    table, code_offs, codes = got
    out_offs, out = fsst.decompress(table, code_offs, codes)
    assert np.array_equal(out_offs, offs) and np.array_equal(out, data)


def test_a_reused_table_encodes_exactly_and_a_poor_fit_retrains():
    first = _strings([f"row-{i:07d}-name" for i in range(20_000)])
    similar = _strings([f"row-{i:07d}-name" for i in range(50_000, 70_000)])
    other = _strings([f"{i * 7919 % 100_003:x}|{'ZQXJ' * (i % 3)}" for i in range(20_000)])
    learned: dict = {}
    got = fsst.compress(*first, PageReuse(None, learned, "s"))
    _roundtrip(got, *first)
    prior = learned["s"]
    assert prior.ratio == pytest.approx(len(got[2]) / len(first[0]))
    reused = fsst.compress(*similar, PageReuse(prior, None, "s"))
    _roundtrip(reused, *similar)
    assert reused[0] == got[0]  # the same table
    retrained = fsst.compress(*other, PageReuse(prior, None, "s"))
    _roundtrip(retrained, *other)
    assert retrained[0] == fsst.compress(*other)[0] != got[0]  # its own table, as without reuse


def test_file_tables_publish_each_columns_first_page_only():
    assert FileTables().page("s") is None  # outside a scope: no reuse
    with reuse_tables():
        a = FileTables()
        p1, p2 = a.page("s"), a.page("s")
        assert p1.prior is None and p1.learned is not None and p2.learned is None
        t1 = fsst_reuse.Trained(np.zeros(256, np.uint64), np.zeros(256, np.int64), 0, 0.5)
        p1.record(t1)
        p2.record(fsst_reuse.Trained(np.zeros(256, np.uint64), np.zeros(256, np.int64), 0, 0.9))
        b = FileTables()  # created before ``a`` finished: sees nothing yet
        a.publish()
        assert b.page("s").prior is None
        assert FileTables().page("s").prior is t1


def _files(uri: str) -> list[bytes]:
    ds = lf.dataset(uri)
    out = []
    for frag in ds.get_fragments():
        for f in frag.metadata.files:
            with open(os.path.join(uri, "data", f.path), "rb") as fh:
                out.append(fh.read())
    return out


def test_upgrade_shares_tables_deterministically_and_pylance_reads_it(tmp_path):
    n = 60_000
    t = pa.table({"id": np.arange(n, dtype=np.int64),
                  "s": pa.array([f"user-{i % 977:04d}-{i % 5003:04d}@example.org" for i in range(n)])})
    src = str(tmp_path / "src")
    lf.write_dataset(t, src, max_rows_per_file=n // 20, data_storage_version="2.0")
    copies = []
    for k in range(2):
        d = str(tmp_path / f"c{k}")
        shutil.copytree(src, d)
        lf.dataset(d).compact_files(target_rows_per_fragment=n // 4, data_storage_version="2.2")
        copies.append(d)
        assert lf.dataset(d).to_table().sort_by("id").equals(t)
        assert lance.dataset(d).to_table().sort_by("id").equals(t)
        assert len(lf.dataset(d).get_fragments()) == 4
    files = _files(copies[0])
    assert files == _files(copies[1])  # same plan, same bytes
    tables = {f[f.index(b"TSSF") - 4 : f.index(b"TSSF") - 4 + fsst.TABLE_BYTES] for f in files}
    assert len(files) == 4 and len(tables) == 1  # one table trained, shared by the four files
    # (strings unlike the first file's retrain: test_a_reused_table_encodes_exactly_and_a_poor_fit_retrains)
