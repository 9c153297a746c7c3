"""A dataset committing through an external manifest store, written by every writer.

Told about the store, each writer commits through it: after every step the rows read through
the store equal a pyarrow model, the store's latest version is the newest manifest on disk, and
the dataset opens with and without the store (and in pylance).  Not told, each writer raises
ManifestStoreRequiredError before writing anything.
"""

import os

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_ops.format as lf
from lance_ops import jobs
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.table.manifest import list_versions
from lance_ops.format.txn.manifest_store import MARKER_FILE, base_uri_of, read_marker

DIRS = ("data", "_deletions", "_versions", "_transactions")


def table(start: int, n: int, tag: str = "a") -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table({"id": pa.array(ids), "v": pa.array([tag] * n), "x": pa.array(ids.astype(np.float64) * 0.5)})


def frame(spark, t: pa.Table):
    return spark.createDataFrame(t.to_pandas()).coalesce(1)


def listing(uri: str) -> dict[str, list[str]]:
    out = {}
    for d in DIRS:
        p = os.path.join(uri, d)
        out[d] = sorted(os.listdir(p)) if os.path.isdir(p) else []
    return out


def check(uri: str, db: str, model: pa.Table) -> int:
    """Rows through the store == model; the store's latest is the newest manifest on disk; every open works."""
    store = ObjectStore(uri)
    latest = lf.SQLiteManifestStore(db).latest(base_uri_of(store))
    on_disk = list_versions(store)[1]
    assert latest is not None and latest.version == on_disk[-1]
    assert not latest.is_staging
    ds = lf.dataset(uri, manifest_store=db)
    assert ds.version == latest.version
    got = ds.to_table(columns=model.column_names).sort_by("id")
    assert got.equals(model.sort_by("id"))
    assert lf.dataset(uri).version == latest.version  # a reader without the store reads the finalized manifests
    assert lance.dataset(uri).version == latest.version  # so does pylance
    assert lance.dataset(uri).count_rows() == model.num_rows
    return latest.version


@pytest.fixture
def db(tmp_path):
    return str(tmp_path / "manifests.db")


@pytest.fixture
def dataset(uri, db):
    lf.write_dataset(table(0, 40), uri, enable_stable_row_ids=True, max_rows_per_file=20, manifest_store=db)
    return uri


def test_the_first_commit_through_a_store_records_it(dataset, db):
    marker = read_marker(ObjectStore(dataset))
    assert marker is not None
    assert marker["kind"] == "sqlite" and marker["location"] == os.path.abspath(db)
    assert os.path.exists(os.path.join(dataset, MARKER_FILE))
    # pylance's cleanup keeps it (it only touches _versions/, data/, _deletions/, ...)
    lance.dataset(dataset).cleanup_old_versions(older_than=pa.scalar(0, pa.duration("s")).as_py())
    assert read_marker(ObjectStore(dataset)) is not None


def test_every_writer_told_about_the_store_commits_through_it(spark, dataset, db):
    uri = dataset
    model = table(0, 40)
    versions = [check(uri, db, model)]

    def aware_append(start: int) -> None:
        nonlocal model
        lf.write_dataset(table(start, 5, "s"), uri, mode="append", manifest_store=db)
        model = pa.concat_tables([model, table(start, 5, "s")])
        versions.append(check(uri, db, model))

    # the format API: a delete through the handle, and write_fragments + commit
    lf.dataset(uri, manifest_store=db).delete(pc.field("id") < 3)
    model = model.filter(pc.field("id") >= 3)
    versions.append(check(uri, db, model))
    frags = lf.write_fragments(table(100, 4), uri, manifest_store=db)
    lf.commit(uri, lf.Append(frags), read_version=versions[-1], manifest_store=db)
    model = pa.concat_tables([model, table(100, 4)])
    versions.append(check(uri, db, model))
    aware_append(200)

    # each Spark job
    r = jobs.append(spark, uri, frame(spark, table(300, 6)), manifest_store=db)
    assert r.version == versions[-1] + 1
    model = pa.concat_tables([model, table(300, 6)])
    versions.append(check(uri, db, model))
    aware_append(400)

    r = jobs.delete(spark, uri, "id >= 30 AND id < 36", manifest_store=db)
    assert r.num_deleted_rows == 6
    model = model.filter(pc.invert((pc.field("id") >= 30) & (pc.field("id") < 36)))
    versions.append(check(uri, db, model))
    aware_append(500)

    up = pa.concat_tables([table(10, 2, "u"), table(600, 2, "u")])
    r = jobs.upsert(spark, uri, frame(spark, up), ["id"], manifest_store=db)
    assert (r.num_updated_rows, r.num_inserted_rows) == (2, 2)
    model = pa.concat_tables([model.filter(pc.invert(pc.is_in(pc.field("id"), pa.array([10, 11])))), up])
    versions.append(check(uri, db, model))
    aware_append(700)

    r = jobs.materialize_deletions(spark, uri, 0.05, manifest_store=db)
    assert r.version is not None and r.fragments_removed >= 1
    versions.append(check(uri, db, model))
    aware_append(800)

    r = jobs.compact(spark, uri, manifest_store=db)
    assert r.version is not None and r.fragments_added == 1
    versions.append(check(uri, db, model))
    assert len(lf.dataset(uri, manifest_store=db).get_fragments()) == 1
    aware_append(900)

    # the data source, with the option
    frame(spark, table(1000, 3)).write.format("lance").mode("append").option("manifest_store", db).save(uri)
    model = pa.concat_tables([model, table(1000, 3)])
    versions.append(check(uri, db, model))
    got = spark.read.format("lance").option("manifest_store", db).load(uri).toArrow()
    assert sorted(got["id"].to_pylist()) == sorted(model["id"].to_pylist())
    aware_append(1100)

    # the change feed job reads through the store; its lance sink commits through one too
    sink = uri + "_changes"
    res = jobs.write_change_feed(spark, uri, versions[-3], versions[-1], sink, manifest_store=db,
                                 sink_manifest_store=db)
    assert res.rows_written == 8  # 3 rows by the data source, 5 by the aware append
    assert read_marker(ObjectStore(sink)) is not None
    assert versions == sorted(set(versions)) and versions[-1] == len(list_versions(ObjectStore(uri))[1])


def _refusers(spark, uri, db):
    """Every writer not told about the store, as (name, call)."""
    # write_fragments commits nothing (the caller owns uncommitted fragments, as in pylance): it
    # is not refused; the commit of its fragments is
    frags = lf.write_fragments(table(50, 3), uri, manifest_store=db)
    return [
        ("write_dataset append", lambda: lf.write_dataset(table(50, 3), uri, mode="append")),
        ("write_dataset overwrite", lambda: lf.write_dataset(table(50, 3), uri, mode="overwrite")),
        ("handle delete", lambda: lf.dataset(uri).delete(pc.field("id") < 3)),
        ("commit", lambda: lf.commit(uri, lf.Append(frags), read_version=1)),
        ("jobs.append", lambda: jobs.append(spark, uri, frame(spark, table(50, 3)))),
        ("jobs.delete", lambda: jobs.delete(spark, uri, "id < 3")),
        ("jobs.upsert", lambda: jobs.upsert(spark, uri, frame(spark, table(0, 3, "u")), ["id"])),
        ("jobs.compact", lambda: jobs.compact(spark, uri)),
        ("jobs.materialize_deletions", lambda: jobs.materialize_deletions(spark, uri, 0.0)),
        ("df.write", lambda: frame(spark, table(50, 3)).write.format("lance").mode("append").save(uri)),
    ]


def test_every_writer_not_told_about_the_store_refuses_before_writing(spark, dataset, db):
    uri = dataset
    lf.dataset(uri, manifest_store=db).delete(pc.field("id") < 2)  # something for materialize_deletions
    model = table(2, 38)
    v = check(uri, db, model)
    for name, call in _refusers(spark, uri, db):
        before = listing(uri)
        with pytest.raises(Exception) as info:
            call()
        err = info.value
        if not isinstance(err, lf.ManifestStoreRequiredError):  # Spark wraps the driver-side error
            assert "ManifestStoreRequiredError" in str(err), (name, err)
        else:
            assert isinstance(err, lf.CommitError) and isinstance(err, lf.InvalidArgumentError)
            assert err.dataset.rstrip("/").endswith("ds") and err.recorded["location"] == os.path.abspath(db)
        assert os.path.abspath(db) in str(err), name
        assert listing(uri) == before, name
        assert check(uri, db, model) == v, name
    # and the store-aware writers still work afterwards
    lf.write_dataset(table(60, 2), uri, mode="append", manifest_store=db)
    check(uri, db, pa.concat_tables([model, table(60, 2)]))


def test_a_dataset_made_before_the_marker_gets_it_on_its_next_store_commit(uri, db):
    lf.write_dataset(table(0, 10), uri)  # conditional put: no marker
    assert read_marker(ObjectStore(uri)) is None
    lf.write_dataset(table(10, 10), uri, mode="append")  # unaware writers still allowed
    lf.write_dataset(table(20, 1), uri, mode="append", manifest_store=db)
    assert read_marker(ObjectStore(uri))["location"] == os.path.abspath(db)
    with pytest.raises(lf.ManifestStoreRequiredError):
        lf.write_dataset(table(30, 1), uri, mode="append")
    assert check(uri, db, pa.concat_tables([table(0, 10), table(10, 10), table(20, 1)])) == 3


def test_commit_options_carry_the_store_and_the_idempotency_key(spark, dataset, db):
    opts = lf.CommitOptions(txn_app_id="writer-1", txn_version=7, manifest_store=db)
    assert opts.properties() == {"txnAppId": "writer-1", "txnVersion": "7"}
    first = jobs.append(spark, dataset, frame(spark, table(50, 3)), commit=opts)
    again = jobs.append(spark, dataset, frame(spark, table(50, 3)), commit=opts)
    assert again.version == first.version and again.rows_written == 0
    check(dataset, db, pa.concat_tables([table(0, 40), table(50, 3)]))
    with pytest.raises(lf.InvalidArgumentError):
        lf.CommitOptions(max_retries=-1)


def test_change_feed_reads_a_commit_whose_writer_stopped_before_finalising(spark, tmp_path, monkeypatch):
    """A version committed in the store whose manifest never reached ``_versions/`` (the writer
    stopped after the store's put): told about the store, the streaming and the batch change
    feed read it (and finalise it); the listing alone ends one version earlier."""
    import lance_ops.format.txn.manifest_store as ms

    uri, db = str(tmp_path / "ds"), str(tmp_path / "m.db")
    lf.write_dataset(table(0, 10), uri, enable_stable_row_ids=True, manifest_store=db)
    lf.write_dataset(table(10, 5), uri, mode="append", manifest_store=db)

    def stop(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise OSError("writer stopped before finalising")

    with monkeypatch.context() as m:
        m.setattr(ms, "_finish", stop)
        lf.write_dataset(table(15, 3), uri, mode="append", manifest_store=db)  # version 3, in the store only
    assert list_versions(ObjectStore(uri))[1] == [1, 2]

    q = (spark.readStream.format("lance_changes").option("startingVersion", 2).option("manifest_store", db)
         .load(uri).writeStream.format("memory").queryName("stopped_commit_feed").trigger(availableNow=True).start())
    q.awaitTermination(300)
    rows = spark.sql("SELECT id, _commit_version FROM stopped_commit_feed").toPandas()
    assert sorted(zip(rows["id"], rows["_commit_version"], strict=True)) == (
        [(i, 2) for i in range(10, 15)] + [(i, 3) for i in range(15, 18)])
    assert list_versions(ObjectStore(uri))[1] == [1, 2, 3]  # the reader finalised it

    batch = jobs.change_feed(spark, uri, 2, manifest_store=db).toPandas()
    assert sorted(batch["id"]) == list(range(15, 18))
