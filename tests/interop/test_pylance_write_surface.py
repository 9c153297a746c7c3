"""pylance's write-side surface on both libraries (issue 34, docs/PYLANCE_TESTS.md): progress
callbacks (``FragmentWriteProgress``, ``FileSystemFragmentWriteProgress``), ``max_bytes_per_file``,
``LanceFragment.scanner`` and ``merge`` keyed on ``_rowid`` / ``_rowaddr``, ``DataFile.fields``
compared with a list, the columns a scan's plan reads, and ``create_index``'s shuffle options.

Each test runs the same calls on ``lance`` (pylance 14) and ``lance_ops.format``.
"""

import json

import lance
import lance.progress
import numpy as np
import pyarrow as pa
import pytest

import lance_ops.format as lf

pytestmark = pytest.mark.interop

IMPLS = {"pylance": lance, "lance_ops": lf}
PROGRESS = {"pylance": lance.progress, "lance_ops": lf}


def _counting(impl_name):
    base = PROGRESS[impl_name].FragmentWriteProgress

    class Counting(base):
        def __init__(self):
            self.begun, self.completed = [], []

        def begin(self, fragment, **kwargs):
            self.begun.append((fragment.id, fragment.physical_rows))

        def complete(self, fragment, **kwargs):
            self.completed.append((fragment.id, fragment.physical_rows))

    return Counting()


def test_write_dataset_and_create_report_progress(tmp_path):
    seen = []
    for name, impl in IMPLS.items():
        p = _counting(name)
        ds = impl.write_dataset(pa.table({"a": range(10)}), str(tmp_path / name), max_rows_per_file=4, progress=p)
        assert len(ds.get_fragments()) == 3
        q = _counting(name)
        frag = impl.LanceFragment.create(str(tmp_path / f"{name}_f"), pa.table({"a": range(3)}), fragment_id=7,
                                         progress=q)
        seen.append((len(p.begun), [c[1] for c in p.completed], [b[0] for b in q.begun], q.completed,
                     frag.physical_rows))
    (pb, pc, pq, pqc, prows), (ob, oc, oq, oqc, orows) = seen
    assert (pb, pq, pqc, prows) == (ob, oq, oqc, orows) == (3, [7], [(7, 3)], 3)
    # pylance 14 does not call complete() for the file its write_dataset finishes at the end of the
    # input (a deliberate difference, README): lance_ops completes every file it begins
    assert pc == [4, 4] and oc == [4, 4, 2]


def test_file_system_progress_files(tmp_path):
    for name, impl in IMPLS.items():
        where = tmp_path / f"{name}_progress"
        progress = PROGRESS[name].FileSystemFragmentWriteProgress(str(where), metadata={"worker": "w1"})
        frag = impl.LanceFragment.create(str(tmp_path / name), pa.table({"a": range(5)}), fragment_id=2,
                                         progress=progress)
        assert not (where / "fragment_2.in_progress").exists(), name
        meta = json.loads((where / "fragment_2.json").read_text())
        assert meta["id"] == 2 and meta["files"][0]["path"] == frag.files[0].path, name
        # a failing write leaves its in-progress marker (what a cleanup job looks for)
        progress.begin(frag)
        assert json.loads((where / "fragment_2.in_progress").read_text()) == {
            "fragment_id": 2, "metadata": {"worker": "w1"}}, name


def test_max_bytes_per_file_cuts_after_the_batch_reaching_it(tmp_path):
    """A file closes after the input batch that brings it to the limit (for wide vectors and long
    strings, where pylance's encoders flush every batch)."""
    strings = pa.schema([pa.field("a", pa.string())])
    batch = pa.record_batch([pa.array(["0" * 1024] * 1024 * 8)], names=["a"])  # 8 MiB of characters
    wide = pa.table({"a": pa.FixedSizeListArray.from_arrays(pa.array(range(4 * 1024 * 1024)), 1024)})
    out = []
    for name, impl in IMPLS.items():
        write_fragments = lance.fragment.write_fragments if name == "pylance" else lf.write_fragments
        frags = write_fragments(pa.RecordBatchReader.from_batches(strings, [batch, batch]), str(tmp_path / name),
                                max_rows_per_group=512, max_bytes_per_file=1024)
        sizes = []
        for limit, chunk in ((1000, 64), (3 << 20, 128), (10 << 20, 4096)):
            ds = impl.write_dataset(pa.Table.from_batches(wide.to_batches(max_chunksize=chunk)),
                                    str(tmp_path / f"{name}_{limit}"), max_bytes_per_file=limit)
            sizes.append([f.count_rows() for f in ds.get_fragments()])
        out.append(([f.physical_rows for f in frags], sizes))
    assert out[0] == out[1]
    assert out[1][0] == [8192, 8192] and out[1][1][0] == [64] * 64 and out[1][1][1][:2] == [384, 384]


def test_fragment_scanner_and_merge_on_row_ids(tmp_path):
    out = []
    for name, impl in IMPLS.items():
        ds = impl.write_dataset(pa.table({"a": range(9)}), str(tmp_path / name), max_rows_per_file=4)
        ds.delete("a = 5")
        merged, schema = [], None
        for frag in ds.get_fragments():
            t = frag.scanner(with_row_id=True, columns=[]).to_table()
            t = t.add_column(0, "b", [[i * 10 for i in range(len(t))]])
            f, schema = frag.merge(t, "_rowid")
            merged.append(f)
        ds = impl.LanceDataset.commit(ds.uri, impl.LanceOperation.Merge(merged, schema), read_version=ds.version)
        merged = []
        for frag in ds.get_fragments():
            t = frag.scanner(with_row_address=True, columns=[], filter="a > 1").to_table()
            t = t.add_column(0, "c", [[i + 1 for i in range(len(t))]])
            f, schema = frag.merge(t, "_rowaddr")
            merged.append(f)
        ds = impl.LanceDataset.commit(ds.uri, impl.LanceOperation.Merge(merged, schema), read_version=ds.version)
        out.append(ds.to_table())
        assert ds.get_fragments()[0].metadata.files[0].fields == [0], name
    assert out[0] == out[1]


def test_plan_names_the_columns_read(tmp_path):
    for name, impl in IMPLS.items():
        ds = impl.write_dataset(pa.table({"a": range(100), "b": range(100), "ab": range(100)}), str(tmp_path / name))
        assert "projection=[a]" in ds.scanner(columns=[], filter="a < 50", with_row_id=True).explain_plan(True)
        assert "projection=[b, ab]" in ds.scanner(columns=["b"], filter="ab < 50").explain_plan()


def test_create_index_accepts_shuffle_options(tmp_path):
    mat = np.random.default_rng(3).standard_normal((600, 8)).astype(np.float32)
    for name, impl in IMPLS.items():
        ds = impl.write_dataset(lf.vec_to_table(mat), str(tmp_path / name))
        ds = ds.create_index("vector", "IVF_PQ", num_partitions=2, num_sub_vectors=2,
                             shuffle_partition_batches=1, shuffle_partition_concurrency=10)
        assert ds.stats.index_stats("vector_idx")["num_indexed_rows"] == 600, name


def test_commit_batch_merges_appends(tmp_path):
    out = []
    for name, impl in IMPLS.items():
        data = [pa.table({"a": range(i * 10, i * 10 + 10)}) for i in range(3)]
        ds = impl.write_dataset(data[0], str(tmp_path / name))
        write_fragments = lance.fragment.write_fragments if name == "pylance" else lf.write_fragments
        f2, f3 = write_fragments(data[1], ds), write_fragments(data[2], ds)  # the dataset itself as the target
        txns = [impl.Transaction(1, impl.LanceOperation.Append(f2)), impl.Transaction(2, impl.LanceOperation.Append(f3))]
        result = impl.LanceDataset.commit_batch(ds, txns)
        merged = result["merged"]
        assert isinstance(merged, impl.Transaction) and isinstance(merged.operation, impl.LanceOperation.Append), name
        assert merged.operation.fragments == f2 + f3, name
        out.append((result["dataset"].version, len(result["dataset"].get_fragments()), result["dataset"].to_table()))
    assert out[0] == out[1] and out[1][:2] == (2, 3)


def test_fragment_open_session(tmp_path):
    out = []
    for name, impl in IMPLS.items():
        ds = impl.write_dataset(pa.table({"a": range(100), "b": range(100, 200)}), str(tmp_path / name))
        ds.delete("a < 3")
        frag = ds.get_fragments()[0]
        plain = frag.open_session(columns=["a", "b"], with_row_address=False)
        assert plain.take(range(1, 50)) == frag.take(indices=range(1, 50), columns=["a", "b"]), name
        addr = frag.open_session(columns=["b"], with_row_address=True).take([0, 2, 4])
        out.append((addr.schema.names, addr.to_pydict()))
    assert out[0] == out[1] and out[1][0] == ["b", "_rowaddr"]


def test_commit_lock(tmp_path):
    import contextlib
    import warnings

    for name, impl in IMPLS.items():
        calls = []

        @contextlib.contextmanager
        def lock(version, calls=calls):
            calls.append(("lock", version))
            yield
            calls.append(("release", version))

        ds = impl.write_dataset(pa.table({"a": range(10)}), str(tmp_path / f"{name}1"), commit_lock=lock)
        impl.dataset(ds.uri, commit_lock=lock).delete("a < 3")
        assert calls == [("lock", 1), ("release", 1), ("lock", 2), ("release", 2)], name

        @contextlib.contextmanager
        def failing_release(_version):
            try:
                yield
            finally:
                raise Exception("hello world!")

        with pytest.raises(Exception, match="hello world!"):
            impl.write_dataset(pa.table({"a": range(3)}), str(tmp_path / f"{name}2"), commit_lock=failing_release)

        @contextlib.contextmanager
        def refusing(_version, name=name):
            raise lf.CommitConflictError("taken") if name == "lance_ops" else lance.commit.CommitConflictError()
            yield  # pragma: no cover

        with pytest.raises(Exception, match="CommitConflictError"):
            impl.write_dataset(pa.table({"a": range(3)}), str(tmp_path / f"{name}3"), commit_lock=refusing)
        with pytest.raises(Exception, match="CommitConflictError"):
            impl.dataset(ds.uri, commit_lock=refusing).delete("a < 5")
        assert impl.dataset(ds.uri).count_rows() == 7, name
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            impl.dataset(ds.uri, index_cache_size=256)
        assert [x.category for x in w] == [DeprecationWarning] and "index_cache_size_bytes" in str(w[0].message)
        assert impl.dataset(ds.uri, index_cache_size_bytes=0, metadata_cache_size_bytes=0).count_rows() == 7


def test_format_fragment(tmp_path):
    from lance.debug import format_fragment

    for name, impl, fmt in (("pylance", lance, format_fragment), ("lance_ops", lf, lf.format_fragment)):
        ds = impl.write_dataset(pa.table({"a": range(10), "s": ["x"] * 10}), str(tmp_path / name))
        text = fmt(ds.get_fragments()[0].metadata, ds)
        assert text.startswith("PrettyPrintableFragment {") and "PrettyPrintableDataFile {" in text, name
        minor = ds.data_storage_version.split(".")[1]
        for part in ("id: 0,", f'path: "{ds.get_fragments()[0].metadata.files[0].path}"', "major_version: 2,",
                     f"minor_version: {minor},", "deletion_file: None,", "physical_rows: Some(", '"a"' if name == "pylance"
                     else "a: int64 (id 0)"):
            assert part in text, (name, part)
