"""Every column kind pylance 14 writes at 2.0/2.1/2.2 through every lance_ops path (issue 24, item 5).

pylance writes two identical datasets holding every kind it writes at the file version (one
wide table, small: 12 rows in files of 4); lance_ops takes one path on one (append, delete,
update, merge_insert, compaction, deletion materialisation), pylance the same on the other.
Both must then read the same in pylance (rows, ``_rowid``, both version columns, schema), lance_ops
must read its own result as pylance does, blob payloads included, and pylance must keep
maintaining what lance_ops wrote (delete, compact, read).  The change feed path reads, through
lance_ops, what pylance did to a dataset of every kind.  The Spark read and upsert are in
``tests/jobs/test_column_kinds_spark.py``.
"""

import lance
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from datagen import kinds_table

import lance_ops.format as lf

pytestmark = pytest.mark.interop

N = 12
META = ["_rowid", "_row_created_at_version", "_row_last_updated_at_version"]
BLOB_COLUMNS = ("blob", "lb_blob")


def write_twins(tmp_path, version: str, stable: bool = True) -> tuple[str, str]:
    t = kinds_table(version, range(N))
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    for uri in (ours, theirs):
        lance.write_dataset(t, uri, schema=t.schema, data_storage_version=version,
                            enable_stable_row_ids=stable, max_rows_per_file=4)
    return ours, theirs


def values(t: pa.Table) -> pa.Table:
    """Dictionary columns as their values: the item order is the writer's choice, and Arrow
    cannot sort chunks whose dictionaries differ and hold nulls (as 2.0 files store them)."""
    cols = [c.cast(c.type.value_type) if pa.types.is_dictionary(c.type) else c for c in t.columns]
    return pa.Table.from_arrays(cols, names=t.column_names)


def read(lib, uri: str, version: int | None = None, columns: list[str] | None = None) -> pa.Table:
    """Rows (with the metadata columns) sorted by id; the schema is compared apart."""
    ds = lib.dataset(uri, version=version)
    return values(ds.to_table(columns=columns or ds.schema.names + META)).sort_by("id")


def plain(schema: pa.Schema) -> pa.Schema:
    """Extension types (pylance's blob v2) as their storage, field metadata dropped."""
    return pa.schema([pa.field(f.name, f.type.storage_type if isinstance(f.type, pa.ExtensionType) else f.type,
                               f.nullable) for f in schema])


def no_blobs(t: pa.Table) -> pa.Table:
    """Without blob descriptions (where a payload sits is the writer's choice; payloads are compared)."""
    return t.drop_columns([c for c in BLOB_COLUMNS if c in t.column_names])


def payloads(lib, uri: str) -> dict[str, list]:
    ds = lib.dataset(uri)
    ids = ds.to_table(columns=["id", "_rowid"]).sort_by("id")["_rowid"].to_pylist()
    return {c: [b.read() if b is not None else None for b in ds.take_blobs(c, ids=ids)]
            for c in BLOB_COLUMNS if c in ds.schema.names}


def assert_same(ours: str, theirs: str) -> None:
    a, b = no_blobs(read(lance, ours)), no_blobs(read(lance, theirs))
    if not lance.dataset(ours).has_stable_row_ids:  # row ids are addresses: where rows sit is the writer's choice
        a, b = a.drop_columns(["_rowid"]), b.drop_columns(["_rowid"])
    assert a.equals(b), f"\nours:   {a.slice(0, 2).to_pylist()}\ntheirs: {b.slice(0, 2).to_pylist()}"
    assert lance.dataset(ours).schema.equals(lance.dataset(theirs).schema, check_metadata=True)
    assert read(lf, ours).equals(read(lance, ours)), "lance_ops reads its result differently from pylance"
    assert plain(lf.dataset(ours).schema) == plain(lance.dataset(ours).schema)
    assert payloads(lance, ours) == payloads(lance, theirs) == payloads(lf, ours)


def pylance_continues(ours: str, theirs: str) -> None:
    for uri in (ours, theirs):
        lance.dataset(uri).delete("id = 9 OR id = 10")
        lance.dataset(uri).optimize.compact_files()
    assert_same(ours, theirs)


def _append(ours: str, theirs: str, version: str) -> None:
    more = kinds_table(version, range(N, N + 5))
    lf.write_dataset(more, ours, mode="append")
    lance.write_dataset(more, theirs, mode="append")


def _delete(ours: str, theirs: str, version: str) -> None:
    lf.dataset(ours).delete("id IN (1, 2, 6) OR id > 10")
    lance.dataset(theirs).delete("id IN (1, 2, 6) OR id > 10")


def _update(ours: str, theirs: str, version: str) -> None:
    lf.dataset(ours).update({"id": "id + 100"}, where="id % 5 = 1")
    lance.dataset(theirs).update({"id": "id + 100"}, where="id % 5 = 1")


def _merge_insert(ours: str, theirs: str, version: str) -> None:
    # ids 8..15: 8..11 match (every column replaced by the new table's values), 12..15 are new
    src = kinds_table(version, range(8, 16))
    src = src.set_column(src.schema.get_field_index("f64"), src.schema.field("f64"), pc.negate(src["f64"]))
    lf.dataset(ours).merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(src)
    lance.dataset(theirs).merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(src)


def _compaction(ours: str, theirs: str, version: str) -> None:
    lance.dataset(theirs).delete("id = 5")
    lance.dataset(ours).delete("id = 5")
    metrics = lf.dataset(ours).compact_files(target_rows_per_fragment=1000)
    assert metrics.failed_tasks == () and metrics.fragments_removed == 3, metrics
    lance.dataset(theirs).optimize.compact_files(target_rows_per_fragment=1000)


def _materialise(ours: str, theirs: str, version: str) -> None:
    for uri in (ours, theirs):
        lance.dataset(uri).delete("id IN (0, 1, 5)")
    lf.dataset(ours).materialize_deletions(threshold=0.1)
    lance.dataset(theirs).optimize.compact_files(materialize_deletions_threshold=0.1)
    assert all(f.deletion_file() is None for f in lance.dataset(ours).get_fragments())


PATHS = {"append": _append, "delete": _delete, "update": _update, "merge_insert": _merge_insert,
         "compaction": _compaction, "materialise_deletions": _materialise}


@pytest.mark.parametrize("stable", [True, False], ids=["stable_ids", "address_ids"])
@pytest.mark.parametrize("path", PATHS)
def test_kinds_through_path(tmp_path, file_version, path, stable):
    ours, theirs = write_twins(tmp_path, file_version, stable)
    assert read(lf, ours).equals(read(lance, ours))
    PATHS[path](ours, theirs, file_version)
    assert lance.dataset(ours).version == lance.dataset(theirs).version
    assert_same(ours, theirs)
    pylance_continues(ours, theirs)


def test_kinds_through_change_feed(tmp_path, file_version):
    """lance_ops' change feed of what pylance did (append, delete, update) to every kind: inserted
    and updated rows as pylance reads them at the end, deleted ones as at the start."""
    ours, _ = write_twins(tmp_path, file_version)
    lance.write_dataset(kinds_table(file_version, range(N, N + 3)), ours, mode="append")
    lance.dataset(ours).delete("id IN (2, 3)")
    lance.dataset(ours).update({"id": "id + 100"}, where="id = 7")
    feed = lf.dataset(ours).change_feed(1)
    counts = dict(zip(*pc.value_counts(feed["_change_type"]).flatten(), strict=True))
    assert {k.as_py(): v.as_py() for k, v in counts.items()} == {
        "insert": 3, "delete": 2, "update_preimage": 1, "update_postimage": 1}
    user = lance.dataset(ours).schema.names

    def rows(kinds: list[str]) -> pa.Table:
        mask = pc.is_in(feed["_change_type"], pa.array(kinds))
        return values(feed.filter(mask).select([*user, "_rowid"])).sort_by("id")

    end = read(lance, ours, columns=[*user, "_rowid"])
    start = read(lance, ours, 1, [*user, "_rowid"])
    posts = end.filter(pc.is_in(end["_rowid"], rows(["insert", "update_postimage"])["_rowid"]))
    gone = start.filter(pc.is_in(start["_rowid"], rows(["delete", "update_preimage"])["_rowid"]))
    assert rows(["insert", "update_postimage"]).equals(posts)
    assert rows(["delete", "update_preimage"]).equals(gone)
    assert feed.schema.field("id").type == pa.int64() and posts.num_rows == 4 and gone.num_rows == 3


@pytest.mark.parametrize("stable", [True, False], ids=["stable_ids", "address_ids"])
def test_dictionary_fragments_compact(tmp_path, file_version, stable):
    """Fragments whose dictionaries differ and hold nulls (2.0 files store null keys as a null
    item, which Arrow cannot unify) compact into one, read back by value (issue 24: every task
    of such a compaction failed)."""
    uri = str(tmp_path / "ds")
    for k in range(3):
        t = pa.table({"id": pa.array(range(k * 6, k * 6 + 6), pa.int64()),
                      "d": pa.array([None if i % 4 == 1 else f"k{k}{i % 3}" for i in range(6)]).dictionary_encode()})
        lance.write_dataset(t, uri, mode="append" if k else "create", data_storage_version=file_version,
                            enable_stable_row_ids=stable)
    before = read(lance, uri)
    metrics = lf.dataset(uri).compact_files()
    assert metrics.failed_tasks == () and (metrics.fragments_removed, metrics.fragments_added) == (3, 1)
    after = read(lance, uri)
    assert after.drop_columns(["_rowid"]).equals(before.drop_columns(["_rowid"]))
    if stable:
        assert after["_rowid"].equals(before["_rowid"])
    assert lance.dataset(uri).schema.field("d").type == pa.dictionary(pa.int32(), pa.string())
    assert after["d"].to_pylist() == [None if i % 4 == 1 else f"k{k}{i % 3}" for k in range(3) for i in range(6)]
    assert read(lf, uri).equals(after)
