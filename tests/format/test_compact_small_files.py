"""Compaction reads small fragments a group at a time (``file/small.py``): pylance builds a
history of small 2.2 fragments (nulls, booleans, bit-packed and dictionary pages, FSST strings,
deletions, an update, a column added and appended after it), lance_ops compacts it, and pylance
reads exactly the rows, row ids and versions its own compaction gives, with the compiled
kernels and with the NumPy paths."""

import os
import shutil

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_ops.format as lf
from lance_ops.format.file.reader import DataFileReader
from lance_ops.format.file.small import decode_small, open_small
from lance_ops.format.file.v21 import kernels
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.ops.compaction import rewrite as compaction
from lance_ops.format.ops.compaction.small_fragments import read_small_group

META = ["_rowid", "_row_created_at_version", "_row_last_updated_at_version"]


def table(n: int, start: int) -> pa.Table:
    ids = np.arange(start, start + n)
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "small": pa.array((ids % 7).astype(np.int32)),
        "f": pa.array([None if i % 5 == 0 else i * 0.5 for i in ids.tolist()], pa.float64()),
        "b": pa.array([None if i % 11 == 0 else bool(i % 2) for i in ids.tolist()], pa.bool_()),
        "s": pa.array([None if i % 13 == 0 else f"value-{i}" for i in ids.tolist()]),
        "cat": pa.array([["red", "green", "blue"][i % 3] for i in ids.tolist()]),
        "long": pa.array([("https://example.com/some/long/path/" * 3) + str(i) for i in ids.tolist()]),
    })


def _base_history(uri: str) -> None:
    lance.write_dataset(table(300, 0), uri, max_rows_per_file=100, enable_stable_row_ids=True,
                        data_storage_version="2.2")
    lance.write_dataset(table(1000, 300), uri, mode="append")  # one file of FSST pages
    lance.write_dataset(table(250, 1300), uri, mode="append", max_rows_per_file=50)
    ds = lance.dataset(uri)
    ds.delete("id % 17 = 0 AND id < 150")  # deletion files: read by the ordinary scan
    ds.update({"s": "'updated'"}, where="id >= 1300 AND id < 1310")


@pytest.fixture(scope="module")
def plain(tmp_path_factory) -> str:
    """Small fragments of one schema: deletions, an update, FSST and dictionary pages."""
    uri = str(tmp_path_factory.mktemp("plain") / "ds")
    _base_history(uri)
    return uri


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> str:
    """``plain``, then a column added (two files per fragment) and small fragments appended."""
    uri = str(tmp_path_factory.mktemp("small") / "ds")
    _base_history(uri)
    ds = lance.dataset(uri)
    ds.add_columns({"z": "id * 2"})  # a second data file per fragment
    t = table(200, 1550)
    lance.write_dataset(t.append_column("z", pa.array(np.arange(1550, 1750) * 2)), uri, mode="append",
                        max_rows_per_file=40)
    return uri


def snapshot(uri: str) -> pa.Table:
    ds = lance.dataset(uri)
    return ds.to_table(columns=ds.schema.names + META).sort_by("_rowid")


@pytest.mark.parametrize("which", ["plain", "history"])
@pytest.mark.parametrize("jit", [True, False], ids=["compiled", "numpy"])
def test_compacting_small_fragments_matches_pylance(request, which, tmp_path, monkeypatch, jit):
    history = request.getfixturevalue(which)
    if jit and kernels.get() is None:
        pytest.skip("numba is not installed")
    if not jit:
        monkeypatch.setenv("LANCE_OPS_NO_JIT", "1")
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    shutil.copytree(history, ours)
    shutil.copytree(history, theirs)
    before = snapshot(history)
    grouped = []

    def spy(files, top_ids, names):
        out = read_small_group(files, top_ids, names)
        grouped.append(0 if out is None else out.num_rows)
        return out

    monkeypatch.setattr(compaction, "read_small_group", spy)
    m = lf.dataset(ours).compact_files(target_rows_per_fragment=2000)
    lance.dataset(theirs).optimize.compact_files(target_rows_per_fragment=2000)
    got, want = snapshot(ours), snapshot(theirs)
    assert m.rows_rewritten > 0 and not m.failed_tasks
    assert got.num_rows == before.num_rows == (1750 if which == "history" else 1550) - 9  # 17 * (0..8)
    # the single-file fragments without deletions were read in groups (FSST pages among them)
    assert sum(grouped) == (200 if which == "history" else 100 + 1000 + 4 * 50 + 10), grouped
    assert got.equals(before)
    assert got.equals(want)
    assert len(lance.dataset(ours).get_fragments()) == len(lance.dataset(theirs).get_fragments())


def test_decode_small_gives_what_the_file_reader_gives(history):
    """The first file of every fragment of the history (schemas before and after a column was
    added), decoded as one group, equals the file-by-file reads (the FSST and dictionary pages inside the group are decoded alone)."""
    store = ObjectStore(history)
    ds = lf.dataset(history)
    files = [f.files[0] for f in ds.manifest.fragments]  # those from before add_columns and after
    ids = [f.id for f in ds.manifest.schema.top_level() if f.name != "z"]
    small = [open_small(store, f"data/{df.path}", df.file_size_bytes or None) for df in files]
    assert all(s is not None for s in small) and len(small) >= 10
    schema, arrays = decode_small(small, ids)
    want = pa.concat_tables(
        [DataFileReader(store, f"data/{df.path}").read_table(ids) for df in files]
    ).combine_chunks()
    assert pa.Table.from_arrays(arrays, schema=schema).equals(want)
    assert any(a.null_count for a in arrays)


def test_files_that_do_not_qualify_are_left_to_the_file_reader(history, tmp_path):
    store = ObjectStore(history)
    df = next(f.files[0] for f in lf.dataset(history).manifest.fragments if len(f.files) == 1)
    assert open_small(store, f"data/{df.path}", df.file_size_bytes + 1) is None  # size disagrees
    bad = tmp_path / "ds"
    shutil.copytree(history, bad)
    path = bad / "data" / df.path
    data = bytearray(path.read_bytes())
    data[-4:] = b"XXXX"  # bad magic: the reader names the file
    path.write_bytes(bytes(data))
    assert open_small(ObjectStore(str(bad)), f"data/{df.path}") is None


def test_small_fragments_without_stable_row_ids(tmp_path):
    """Row ids are addresses: the rows, in order, are what pylance's compaction keeps."""
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    lance.write_dataset(table(400, 0), ours, max_rows_per_file=50, data_storage_version="2.2")
    lance.dataset(ours).delete("id >= 10 AND id < 20")
    shutil.copytree(ours, theirs)
    m = lf.dataset(ours).compact_files()
    lance.dataset(theirs).optimize.compact_files()
    got = lance.dataset(ours).to_table(with_row_id=True)
    want = lance.dataset(theirs).to_table(with_row_id=True)
    assert m.fragments_removed == 8 and m.fragments_added == 1
    assert got.equals(want) and got.num_rows == 390


def test_a_corrupt_small_file_fails_its_task_naming_the_file(plain, tmp_path):
    """Bytes the group decode cannot read send the fragments to the ordinary reader, whose
    error names the file; the task fails and nothing is committed."""
    uri = str(tmp_path / "ds")
    shutil.copytree(plain, uri)
    ds = lf.dataset(uri)
    frag = next(f for f in ds.manifest.fragments if len(f.files) == 1 and f.deletion_file is None)
    df = frag.files[0]
    path = os.path.join(uri, "data", df.path)
    data = bytearray(open(path, "rb").read())
    r = DataFileReader(ObjectStore(uri), f"data/{df.path}")
    meta_pos, _ = r._column_pages(0)[0].ranges[0]
    data[meta_pos : meta_pos + 4] = b"\xff\xff\xff\xff"  # a chunk far bigger than the page
    with open(path, "wb") as f:
        f.write(data)
    version = ds.version
    m = lf.dataset(uri).compact_files(target_rows_per_fragment=2000)
    assert m.failed_tasks and df.path in m.failed_tasks[0], m.failed_tasks
    assert lance.dataset(uri).version == version
