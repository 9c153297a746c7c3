"""pylance's ``LanceOperation.DataReplacement`` and ``lance.file`` on both libraries (issue 34,
docs/PYLANCE_TESTS.md): a fragment's data file replaced by a new file of the same fields (or
added for fields it lacks), standalone files written by ``LanceFileWriter`` (field ids from 0)
read through the ``DataFile`` naming them with the dataset's ids, and the conflicts with an index
over a replaced field ("Retryable commit conflict for version N", pylance's words).
"""

import uuid

import lance
import lance.file
import pyarrow as pa
import pytest

import lance_ops.format as lf

pytestmark = pytest.mark.interop

IMPLS = {"pylance": lance, "lance_ops": lf}
FILES = {"pylance": lance.file, "lance_ops": lf}
OTHER = {"pylance": "lance_ops", "lance_ops": "pylance"}


def _standalone(writer: str, ds_uri, fields, table) -> object:
    name = f"{uuid.uuid4()}.lance"
    with FILES[writer].LanceFileWriter(f"{ds_uri}/data/{name}") as w:
        w.write_batch(table)
    return IMPLS[writer].fragment.DataFile(path=name, fields=fields, column_indices=list(range(len(fields))),
                                           file_major_version=2, file_minor_version=2) \
        if writer == "pylance" else lf.DataFile(name, tuple(fields), tuple(range(len(fields))), 2, 2)


@pytest.mark.parametrize("name", ["pylance", "lance_ops"])
def test_replace_whole_file(tmp_path, name):
    impl, uri = IMPLS[name], tmp_path / "t"
    ds = impl.write_dataset(pa.table({"a": range(100), "b": [str(i) for i in range(100)]}), uri,
                            data_storage_version="2.2")
    frag = impl.LanceFragment.create(uri, pa.table({"a": range(100, 200), "b": [str(i) for i in range(100, 200)]}))
    op = impl.LanceOperation.DataReplacement([impl.LanceOperation.DataReplacementGroup(0, frag.files[0])])
    ds = impl.LanceDataset.commit(ds, op, read_version=1)
    expected = pa.table({"a": range(100, 200), "b": [str(i) for i in range(100, 200)]})
    assert ds.to_table() == expected
    assert IMPLS[OTHER[name]].dataset(uri).to_table() == expected
    assert type(lance.dataset(uri).get_transactions()[0].operation).__name__ == "DataReplacement"


@pytest.mark.parametrize("writer", ["pylance", "lance_ops"])
@pytest.mark.parametrize("name", ["pylance", "lance_ops"])
def test_replace_one_column_from_standalone_file(tmp_path, name, writer):
    impl, uri = IMPLS[name], tmp_path / "t"
    ds = impl.write_dataset(pa.table({"a": range(100)}), uri, data_storage_version="2.2")
    ds.add_columns({"b": "a + 1"})
    new_file = _standalone(writer, ds.uri, [1], pa.table({"b": range(100, 200)}))
    if name == "lance_ops" and writer == "pylance":
        new_file = lf.DataFile(new_file.path, (1,), (0,), 2, 2)
    elif name == "pylance" and writer == "lance_ops":
        new_file = lance.fragment.DataFile(path=new_file.path, fields=[1], column_indices=[0],
                                           file_major_version=2, file_minor_version=2)
    ds = impl.LanceDataset.commit(ds.uri, impl.LanceOperation.DataReplacement(
        [impl.LanceOperation.DataReplacementGroup(0, new_file)]), read_version=ds.version)
    expected = pa.table({"a": range(100), "b": range(100, 200)})
    for reader in IMPLS.values():
        got = reader.dataset(uri)
        assert got.to_table() == expected
        assert got.to_table(filter="b >= 195", columns=["a"]) == pa.table({"a": range(95, 100)})


def test_standalone_file_round_trip(tmp_path):
    table = pa.table({"c": range(100), "d": [str(i) for i in range(100)]})
    with lf.LanceFileWriter(tmp_path / "ours") as w:
        w.write_batch(table)
    writer = lance.file.LanceFileWriter(str(tmp_path / "theirs"))
    writer.write_batch(table)
    assert writer.close() == 100
    assert lance.file.LanceFileReader(str(tmp_path / "ours")).read_all().to_table() == table
    got = lf.LanceFileReader(str(tmp_path / "theirs")).read_all(batch_size=30)
    assert [b.num_rows for b in got.to_batches()] == [30, 30, 30, 10]
    assert lf.LanceFileReader(str(tmp_path / "ours")).read_all().to_table() == table


@pytest.mark.parametrize("name", ["pylance", "lance_ops"])
def test_replacement_conflicts_with_index_on_its_field(tmp_path, name):
    impl, uri = IMPLS[name], tmp_path / "t"
    ds = impl.write_dataset(pa.table({"a": range(100)}), uri, data_storage_version="2.2")
    ds.add_columns({"b": "a + 1"})  # v2
    before_index = impl.dataset(uri)
    impl.dataset(uri).create_scalar_index("a", "BTREE")  # v3
    new_b = lf.DataFile(_standalone("lance_ops", ds.uri, [1], pa.table({"b": range(100, 200)})).path, (1,), (0,), 2, 2)
    new_a = lf.DataFile(_standalone("lance_ops", ds.uri, [0], pa.table({"a": range(100, 200)})).path, (0,), (0,), 2, 2)
    if name == "pylance":
        new_b, new_a = (lance.fragment.DataFile(path=f.path, fields=list(f.fields), column_indices=[0],
                                                file_major_version=2, file_minor_version=2) for f in (new_b, new_a))
    op = impl.LanceOperation.DataReplacement
    group = impl.LanceOperation.DataReplacementGroup
    impl.LanceDataset.commit(uri, op([group(0, new_b)]), read_version=before_index.version)  # b: not indexed
    with pytest.raises(Exception, match="Retryable commit conflict for version 3"):
        impl.LanceDataset.commit(uri, op([group(0, new_a)]), read_version=before_index.version)
    assert impl.dataset(uri).version == 4


def test_replacing_indexed_column_keeps_answers_exact(tmp_path):
    """lance_ops takes the replaced fragments out of the index over the replaced field (pylance
    keeps them and answers from stale entries): both readers then scan those fragments."""
    uri = tmp_path / "t"
    ds = lf.write_dataset(pa.table({"a": range(100)}), uri, max_rows_per_file=50, data_storage_version="2.2")
    ds.create_scalar_index("a", "BTREE")
    new_a = _standalone("lance_ops", ds.uri, [0], pa.table({"a": range(1000, 1050)}))
    ds = lf.LanceDataset.commit(uri, lf.LanceOperation.DataReplacement(
        [lf.LanceOperation.DataReplacementGroup(0, new_a)]), read_version=ds.version)
    assert ds.list_indices()[0]["fragment_ids"] == {1}
    for reader in IMPLS.values():
        got = reader.dataset(uri)
        assert got.to_table(filter="a = 1010").num_rows == 1
        assert got.to_table(filter="a = 10").num_rows == 0
        assert got.to_table(filter="a = 60").num_rows == 1


@pytest.mark.parametrize("writer", ["pylance", "lance_ops"])
@pytest.mark.parametrize("name", ["pylance", "lance_ops"])
def test_fragment_from_standalone_file(tmp_path, name, writer):
    """``LanceFragment.create_from_file``: a file written into ``data/`` becomes a fragment whose
    columns are the dataset's fields of the same names."""
    impl, uri = IMPLS[name], tmp_path / "t"
    schema = pa.schema([pa.field("a", pa.int64()), pa.field("b", pa.string())])
    ds = impl.write_dataset([], uri, schema=schema, data_storage_version="2.2")
    for step, table in enumerate([pa.table({"a": range(8), "b": [str(i) for i in range(8)]}),
                                  pa.table({"a": [100, 101], "b": ["x", "y"]})]):
        file_name = f"{uuid.uuid4()}.lance"
        with FILES[writer].LanceFileWriter(str(uri / "data" / file_name)) as w:
            w.write_batch(table)
        frag = impl.LanceFragment.create_from_file(file_name, ds, 0)
        ds = impl.LanceDataset.commit(ds.uri, impl.LanceOperation.Append([frag]), read_version=ds.version)
        assert ds.get_fragments()[step].fragment_id == step
    expected = pa.table({"a": [*range(8), 100, 101], "b": [*(str(i) for i in range(8)), "x", "y"]})
    for reader in IMPLS.values():
        assert reader.dataset(uri).to_table() == expected
        assert reader.dataset(uri).to_table(filter="a > 50", columns=["b"]) == pa.table({"b": ["x", "y"]})
    # a hand-made compaction: one file of every row, committed as pylance's Rewrite of a RewriteGroup
    file_name = f"{uuid.uuid4()}.lance"
    with FILES[writer].LanceFileWriter(str(uri / "data" / file_name)) as w:
        for batch in ds.to_batches():
            w.write_batch(batch)
    frag = impl.LanceFragment.create_from_file(file_name, ds, 0)
    group = impl.LanceOperation.RewriteGroup(old_fragments=[f.metadata for f in ds.get_fragments()],
                                             new_fragments=[frag])
    ds = impl.LanceDataset.commit(ds.uri, impl.LanceOperation.Rewrite(groups=[group], rewritten_indices=[]),
                                  read_version=ds.version)
    for reader in IMPLS.values():
        got = reader.dataset(uri)
        assert [f.fragment_id for f in got.get_fragments()] == [2] and got.to_table() == expected


@pytest.mark.parametrize("name", ["pylance", "lance_ops"])
def test_strict_overwrite_conflicts(tmp_path, name):
    """An Overwrite committed with ``max_retries=0`` on a read version that is no longer the
    latest is not rebased: "Commit conflict for version N" (pylance raises it as an OSError,
    lance_ops as its RetryableCommitConflictError: README "Deliberate differences")."""
    impl, uri = IMPLS[name], tmp_path / "t"
    table = pa.table({"a": range(10)})
    frag = impl.LanceFragment.create(uri, table)
    op = impl.LanceOperation.Overwrite(table.schema, [frag])
    first = impl.LanceDataset.commit(uri, op, max_retries=0)
    impl.LanceDataset.commit(uri, op, read_version=first.version, max_retries=0)
    with pytest.raises(Exception, match=f"Commit conflict for version {first.version + 1}"):
        impl.LanceDataset.commit(uri, op, read_version=first.version, max_retries=0)
    assert impl.dataset(uri).version == 2


@pytest.mark.parametrize("binary", [pa.binary(), pa.large_binary()])
def test_blob_column_as_pylance(binary):
    values = pa.array([b"foo", None, b"bazz"], binary)
    for column in (values, pa.chunked_array([values.slice(0, 1), values.slice(1)])):
        ours = [None if f is None else f.read() for f in lf.BlobColumn(column)]
        assert ours == [b"foo", None, b"bazz"]
        assert [f.read() for f, v in zip(lance.BlobColumn(column), ours, strict=True) if v is not None] == [b"foo", b"bazz"]
    for impl in (lance, lf):
        with pytest.raises(ValueError, match="Expected a binary array"):
            impl.BlobColumn(pa.array([1, 2, 3]))
