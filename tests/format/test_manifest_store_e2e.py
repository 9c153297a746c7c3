import multiprocessing as mp

import lance
import pyarrow.compute as pc
import pytest
from datagen import simple_table

import lance_ops.format as lf
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.txn.manifest_store import SQLiteManifestStore, base_uri_of


def test_e2e(tmp_path):
    uri, db = str(tmp_path / "ds"), str(tmp_path / "m.db")
    lf.write_dataset(simple_table(0, 40), uri, manifest_store=f"sqlite:///{db}")
    ds = lf.write_dataset(simple_table(40, 10), uri, mode="append", manifest_store=db)
    ds.delete(pc.field("id") < 5)
    ds.update({"score": pc.scalar(1.0)}, pc.field("id") == 7)
    assert ds.version == 4 and ds.latest_version == 4
    ms = SQLiteManifestStore(db)
    assert ms.list_versions(base_uri_of(ObjectStore(uri))) == [1, 2, 3, 4]
    assert lance.dataset(uri).version == 4
    assert lance.dataset(uri).to_table().sort_by("id").equals(lf.dataset(uri, manifest_store=db).to_table().sort_by("id"))
    assert [v["version"] for v in ds.versions()] == [1, 2, 3, 4]
    assert ds.checkout_version(2).count_rows() == 50
    r = lf.dataset(uri, manifest_store=ms)
    r.restore(2)
    assert r.version == 5 and ms.latest(base_uri_of(ObjectStore(uri))).version == 5
    c = lf.commit(uri, lf.Append(lf.write_fragments(simple_table(100, 3), uri)), read_version=5, manifest_store=ms)
    assert c.version == 6 and c.count_rows() == 53


def _app(uri, db, i, q):
    ok = 0
    for j in range(5):
        lf.write_dataset(simple_table(1000 * (i + 1) + j, 2), uri, mode="append", manifest_store=db)
        ok += 1
    q.put(ok)


@pytest.mark.slow  # several processes race for versions
def test_e2e_concurrent_appends(tmp_path):
    uri, db = str(tmp_path / "ds"), str(tmp_path / "m.db")
    lf.write_dataset(simple_table(0, 4), uri, manifest_store=db)
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    ps = [ctx.Process(target=_app, args=(uri, db, i, q)) for i in range(3)]
    [p.start() for p in ps]
    assert sum(q.get(timeout=60) for _ in ps) == 15
    [p.join() for p in ps]
    ds = lf.dataset(uri, manifest_store=db)
    assert ds.version == 16 and ds.count_rows() == 34
    assert lance.dataset(uri).count_rows() == 34
