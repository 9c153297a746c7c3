"""Every column kind pylance 14 writes at 2.0 and 2.2, alone and in one wide table, read and
maintained by lance_ops exactly as pylance maintains it.

pylance builds two identical datasets; lance_ops deletes, updates (typed nulls included),
compacts and materialises deletions on one, pylance does the same on the other; both must read
the same in both libraries (rows, ``_rowid``, both version columns, schema with metadata), blob
payloads included, and pylance keeps maintaining what lance_ops wrote.
"""


import lance
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lance.blob import blob_array, blob_field

import lance_ops.format as lf

# 2.0 and 2.2 (the default) are enough here: these do not depend on 2.1 page encodings
pytestmark = [pytest.mark.interop, pytest.mark.parametrize("file_version", ("2.0", "2.2"), indirect=True)]

N = 24
META = ["_rowid", "_row_created_at_version", "_row_last_updated_at_version"]



def kinds(version: str) -> dict[str, tuple[pa.Field, pa.Array]]:
    """column name -> (field, values); the kinds pylance writes at ``version``."""
    big = [None if i % 7 == 3 else (b"x" * (300_000 if i % 5 == 0 else 9) + bytes([i])) for i in range(N)]
    out = {
        "big_binary": (pa.field("big_binary", pa.binary()), pa.array(big, pa.binary())),
        "big_string": (pa.field("big_string", pa.large_string()),
                       pa.array([None if b is None else b.decode("latin1") for b in big], pa.large_string())),
        "dict": (pa.field("dict", pa.dictionary(pa.int32(), pa.string())),
                 pa.array([None if i % 4 == 1 else f"k{i % 3}" for i in range(N)]).dictionary_encode()),
        "lst": (pa.field("lst", pa.list_(pa.int32())), pa.array([None if i % 5 == 2 else list(range(i % 4)) for i in range(N)], pa.list_(pa.int32()))),
        "llst": (pa.field("llst", pa.large_list(pa.string())),
                 pa.array([None if i % 6 == 2 else [f"s{i}"] * (i % 3) for i in range(N)], pa.large_list(pa.string()))),
        "lst_st": (pa.field("lst_st", pa.list_(pa.struct([("a", pa.int32()), ("b", pa.string())]))),
                   pa.array([None if i % 5 == 1 else [{"a": i, "b": None if i % 2 else "b"}] for i in range(N)],
                            pa.list_(pa.struct([("a", pa.int32()), ("b", pa.string())])))),
        "vec": (pa.field("vec", pa.list_(pa.float32(), 3)), pa.array([None if i % 8 == 5 else [i, i + 0.5, -i] for i in range(N)], pa.list_(pa.float32(), 3))),
        "nested_vec": (pa.field("nested_vec", pa.list_(pa.list_(pa.int16(), 2), 2)),
                       pa.array([None if i % 6 == 1 else [[i, None if i % 4 else i], None if i % 5 == 0 else [1, 2]]
                                 for i in range(N)], pa.list_(pa.list_(pa.int16(), 2), 2))),
    }
    blob_values = [None if i % 3 == 0 else bytes([i]) * (i * 97 + 1) for i in range(N)]
    if version == "2.2":
        out["map"] = (pa.field("map", pa.map_(pa.string(), pa.int64())),
                      pa.array([None if i % 4 == 3 else [(f"k{j}", i * j) for j in range(i % 3)] for i in range(N)],
                               pa.map_(pa.string(), pa.int64())))
        out["blob"] = (blob_field("blob"), blob_array(blob_values))
    else:
        out["blob"] = (pa.field("blob", pa.large_binary(), metadata={"lance-encoding:blob": "true"}),
                       pa.array(blob_values, pa.large_binary()))
    return out


def table_of(columns: dict[str, tuple[pa.Field, pa.Array]]) -> pa.Table:
    fields = [pa.field("id", pa.int64())] + [f for f, _ in columns.values()]
    arrays = [pa.array(range(N), pa.int64())] + [a for _, a in columns.values()]
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def read(lib, uri: str) -> pa.Table:
    ds = lib.dataset(uri)
    return ds.to_table(columns=ds.schema.names + META).sort_by("id")


def decoded(t: pa.Table) -> pa.Table:
    cols = [c.cast(c.type.value_type) if pa.types.is_dictionary(c.type) else c for c in t.columns]
    return pa.Table.from_arrays(cols, names=t.column_names)


def blobs(lib, uri: str, column: str = "blob") -> list:
    ds = lib.dataset(uri)
    ids = ds.to_table(columns=["id", "_rowid"]).sort_by("id")["_rowid"].to_pylist()
    return [b.read() if b is not None else None for b in ds.take_blobs(column, ids=ids)]


def maintain_ours(uri: str, nulls: dict[str, pa.DataType]) -> None:
    ds = lf.dataset(uri)
    ds.delete(pc.field("id").isin([1, 2, 13]))
    for k, (col, typ) in enumerate(nulls.items()):  # a typed null of every type, one row each
        ds = lf.dataset(uri)
        ds.update({col: pa.scalar(None, typ)}, where=pc.field("id") == 4 + k)
    ds = lf.dataset(uri)
    ds.update({"id": pc.field("id") + 100}, where=pc.field("id") == 20)
    lf.dataset(uri).compact_files(target_rows_per_fragment=1000)
    lf.dataset(uri).delete(pc.field("id") < 8)
    lf.dataset(uri).materialize_deletions(threshold=0.05)


def maintain_theirs(uri: str, nulls: dict[str, pa.DataType]) -> None:
    lance.dataset(uri).delete("id IN (1, 2, 13)")
    for k, col in enumerate(nulls):
        lance.dataset(uri).update({col: "NULL"}, where=f"id = {4 + k}")
    lance.dataset(uri).update({"id": "id + 100"}, where="id = 20")
    lance.dataset(uri).optimize.compact_files(target_rows_per_fragment=1000)
    lance.dataset(uri).delete("id < 8")
    lance.dataset(uri).optimize.compact_files(materialize_deletions_threshold=0.05)


def check_both(tmp_path, columns, stable: bool) -> None:
    t = table_of(columns)
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    for uri in (ours, theirs):
        lance.write_dataset(t, uri, schema=t.schema, enable_stable_row_ids=stable, max_rows_per_file=8)
    first = read(lance, ours)
    assert read(lf, ours).equals(first) and read(lf, ours).schema.equals(first.schema, check_metadata=True)
    if "blob" in columns:
        assert blobs(lf, ours) == blobs(lance, ours)
    nulls = {c: f.type for c, (f, _) in columns.items() if c not in ("blob", "big_string")}
    maintain_ours(ours, nulls)
    maintain_theirs(theirs, nulls)
    # (the dictionary's item order is the writer's choice: compare dictionary columns by value)
    a, b = decoded(read(lance, ours)), decoded(read(lance, theirs))
    if not stable:  # row ids are addresses: compare rows and versions only
        a, b = a.drop_columns(["_rowid"]), b.drop_columns(["_rowid"])
    assert a.equals(b), f"\nours:   {a.slice(0, 3).to_pylist()}\ntheirs: {b.slice(0, 3).to_pylist()}"
    assert lance.dataset(ours).schema.equals(lance.dataset(theirs).schema, check_metadata=True)
    assert read(lf, ours).equals(read(lance, ours))
    assert lance.dataset(ours).lance_schema.to_pyarrow() == lance.dataset(theirs).lance_schema.to_pyarrow()
    if "blob" in columns:
        assert blobs(lance, ours) == blobs(lance, theirs) == blobs(lf, ours)
    # pylance keeps maintaining what lance_ops wrote
    lance.dataset(ours).delete("id = 9")
    lance.dataset(ours).optimize.compact_files()
    assert lance.dataset(ours).count_rows() == lance.dataset(theirs).count_rows() - 1


@pytest.mark.parametrize("kind", ["big_binary", "big_string", "dict", "map", "blob", "lst_st", "vec", "nested_vec"])
def test_each_kind_alone(tmp_path, file_version, kind):
    cols = kinds(file_version)
    if kind not in cols:  # maps: 2.2+ only; both libraries refuse them earlier, before writing
        t = table_of(kinds("2.2")).select(["id", kind])
        with pytest.raises(lf.UnsupportedFeatureError, match=kind):
            lf.write_dataset(t, str(tmp_path / "refused"), data_storage_version=file_version)
        assert not (tmp_path / "refused").exists()
        return
    check_both(tmp_path, {kind: cols[kind]}, stable=True)


@pytest.mark.parametrize("stable", [True, False], ids=["stable_ids", "address_ids"])
def test_wide_table(tmp_path, file_version, stable):
    check_both(tmp_path, kinds(file_version), stable)


def test_unsupported_kind_is_refused_before_anything_is_written(tmp_path, file_version):
    """fixed_size_list<struct> (pylance: a packed struct in 2.0, leaf columns in 2.2): lance_ops reads the other columns,
    names the file and column when asked for it, refuses rewriting it before writing anything,
    and still deletes rows (deletion files only)."""
    uri = str(tmp_path / "ds")
    t = pa.table({"id": pa.array(range(N), pa.int64()),
                  "fs": pa.array([[{"a": i}, {"a": -i}] for i in range(N)], pa.list_(pa.struct([("a", pa.int64())]), 2))})
    lance.write_dataset(t, uri, enable_stable_row_ids=True, max_rows_per_file=N // 2)
    ds = lf.dataset(uri)
    assert ds.to_table(columns=["id"])["id"].to_pylist() == list(range(N))
    with pytest.raises(lf.UnsupportedFeatureError, match=r"data/.*\.lance: .*'fs'|data/.*\.lance: column 1"):
        ds.to_table()
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    for op in (lambda: ds.update({"id": 0}, where=pc.field("id") == 3), lambda: ds.compact_files(target_rows_per_fragment=1000)):
        with pytest.raises(lf.UnsupportedFeatureError, match="'fs'"):
            op()
        assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
    ds.delete(pc.field("id") < 5)
    assert lance.dataset(uri).to_table(columns=["id"])["id"].to_pylist() == list(range(5, N))
