"""External manifest store: SQLite semantics, the staged commit, reader-side repair (docs/FORMAT.md §12.3)."""

import hashlib
import logging
import multiprocessing as mp
import os
import pickle
import posixpath
import sqlite3
import uuid

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from datagen import simple_table

import lance_ops.format as lf
from lance_ops.format._proto import transaction_pb2
from lance_ops.format.errors import (
    CommitConflictError,
    CorruptFileError,
    DatasetNotFoundError,
    ManifestStoreConflict,
    ManifestStoreNotFoundError,
)
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.table.manifest import (
    NamingScheme,
    list_versions,
    manifest_path,
    parse_manifest_name,
    read_manifest,
)
from lance_ops.format.txn.handlers import (
    ConditionalPutCommitHandler,
    ExternalManifestCommitHandler,
    commit_handler_for,
)
from lance_ops.format.txn.manifest_store import (
    ManifestLocation,
    ManifestStore,
    SQLiteManifestStore,
    base_uri_of,
    commit_external,
    final_path_of,
    is_staging_path,
    resolve_latest,
    resolve_version,
    staging_path_for,
)

V2 = NamingScheme.V2
BASE = "file:///data/ds"


@pytest.fixture
def mstore(tmp_path):
    return SQLiteManifestStore(tmp_path / "manifests.db")


@pytest.fixture(params=["local", "memory"])
def store(request, tmp_path):
    if request.param == "local":
        return ObjectStore(str(tmp_path / "ds"))
    return ObjectStore(f"memory://ms-{uuid.uuid4().hex}")


def _rows(db_path):
    with sqlite3.connect(db_path) as conn:
        return conn.execute(
            "SELECT base_uri, version, path, committer, size, e_tag FROM lance_manifests ORDER BY base_uri, version"
        ).fetchall()


def _versions_dir(store: ObjectStore) -> list[str]:
    return sorted(store.list_dir("_versions"))


class CrashBeforeFinalize(ObjectStore):
    """A committer that dies right after its KV put: every write of a final manifest fails."""

    def put(self, rel: str, data: bytes, **kwargs: bool) -> None:
        self._crash_on_final(rel)
        super().put(rel, data, **kwargs)

    def put_if_absent(self, rel: str, data: bytes) -> bool:
        self._crash_on_final(rel)
        return super().put_if_absent(rel, data)

    @staticmethod
    def _crash_on_final(rel: str) -> None:
        if parse_manifest_name(posixpath.basename(rel)) is not None:
            raise OSError(f"injected crash writing {rel}")


def crashing(store: ObjectStore) -> CrashBeforeFinalize:
    return CrashBeforeFinalize(store.uri, store.storage_options)


# ----------------------------------------------------------------- SQLite store
def test_put_if_not_exists_twice_conflicts(mstore):
    mstore.put_if_not_exists(BASE, 1, "_versions/a.manifest-x", 10, "etag-1")
    with pytest.raises(ManifestStoreConflict) as exc:
        mstore.put_if_not_exists(BASE, 1, "_versions/b.manifest-y", 20)
    assert isinstance(exc.value, CommitConflictError)
    assert exc.value.conflicting_version == 1
    assert "version 1" in str(exc.value)
    # the winner's row is untouched
    assert mstore.get(BASE, 1) == ManifestLocation(1, "_versions/a.manifest-x", 10, "etag-1")
    # the same version of another dataset is a different key
    mstore.put_if_not_exists("file:///data/other", 1, "_versions/c.manifest", 5)
    assert mstore.get("file:///data/other", 1) == ManifestLocation(1, "_versions/c.manifest", 5, None)


def test_put_if_exists_requires_the_entry_and_keeps_the_committer(mstore):
    with pytest.raises(ManifestStoreNotFoundError, match="version 3 is not in the manifest store"):
        mstore.put_if_exists(BASE, 3, "_versions/x.manifest", 1)
    assert mstore.get(BASE, 3) is None
    committer = SQLiteManifestStore(mstore.path, committer="writer-A")
    committer.put_if_not_exists(BASE, 3, "_versions/x.manifest-u", 7)
    SQLiteManifestStore(mstore.path, committer="reader-B").put_if_exists(
        BASE, 3, "_versions/x.manifest", 7, "e"
    )
    assert mstore.get(BASE, 3) == ManifestLocation(3, "_versions/x.manifest", 7, "e")
    assert _rows(mstore.path) == [(BASE, 3, "_versions/x.manifest", "writer-A", 7, "e")]


def test_latest_and_list_versions(mstore):
    assert mstore.latest(BASE) is None
    assert mstore.list_versions(BASE) == []
    for v in (2, 10, 1, 9):
        mstore.put_if_not_exists(BASE, v, f"_versions/{v}.manifest", v * 100)
    mstore.put_if_not_exists("file:///elsewhere", 50, "_versions/50.manifest", 1)
    assert mstore.latest(BASE) == ManifestLocation(10, "_versions/10.manifest", 1000, None)
    assert mstore.list_versions(BASE) == [1, 2, 9, 10]
    assert mstore.list_versions("file:///elsewhere") == [50]
    # default committer names this host and process
    assert {r[3] for r in _rows(mstore.path)} == {f"lance_ops@{os.uname().nodename}:{os.getpid()}"}


def test_persistence_urls_and_pickling(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rel = SQLiteManifestStore("sqlite:///sub.db")  # SQLAlchemy: three slashes = relative path
    assert rel.path == str(tmp_path / "sub.db")
    rel.put_if_not_exists(BASE, 1, "_versions/1.manifest", 11)
    absolute = SQLiteManifestStore(f"sqlite:///{tmp_path}/sub.db")  # four slashes = absolute
    plain = SQLiteManifestStore(str(tmp_path / "sub.db"))
    assert absolute == plain == rel
    assert absolute.get(BASE, 1) == ManifestLocation(1, "_versions/1.manifest", 11, None)
    clone = pickle.loads(pickle.dumps(plain))
    assert clone.path == plain.path and clone._ready_pid is None
    clone.put_if_not_exists(BASE, 2, "_versions/2.manifest", 22)
    assert SQLiteManifestStore(tmp_path / "sub.db").list_versions(BASE) == [1, 2]
    with sqlite3.connect(tmp_path / "sub.db") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert isinstance(plain, ManifestStore)


@pytest.mark.parametrize(
    "spec, message",
    [
        ("postgresql://db/x", "only sqlite:/// URLs"),
        (":memory:", "in-memory SQLite"),
        ("sqlite://", "in-memory SQLite"),
        ("sqlite:///:memory:", "in-memory SQLite"),
        ("sqlite://host/x.db", "expected sqlite:///"),
    ],
)
def test_rejected_specs(spec, message):
    with pytest.raises(ValueError, match=message):
        SQLiteManifestStore(spec)


def test_rejected_arguments(tmp_path, mstore):
    with pytest.raises(ValueError, match="SQL identifier"):
        SQLiteManifestStore(tmp_path / "x.db", table="t; DROP TABLE x")
    with pytest.raises(TypeError, match="version must be an int"):
        mstore.get(BASE, "1")
    with pytest.raises(ValueError, match=r"version must be in \[0, 2\*\*63\)"):
        mstore.put_if_not_exists(BASE, 2**64 - 2, "p", 1)


# ----------------------------------------------------------------------- names
def test_staging_names_are_ignored_by_listing():
    final = manifest_path(V2, 3)
    staging = staging_path_for(final)
    assert staging.startswith(final + "-") and len(posixpath.basename(staging)) == 29 + 37
    assert parse_manifest_name(posixpath.basename(staging)) is None
    assert parse_manifest_name(posixpath.basename(final)) == (V2, 3)
    assert is_staging_path(staging) and not is_staging_path(final)
    assert final_path_of(staging, 3) == final == "_versions/18446744073709551612.manifest"
    assert final_path_of(staging_path_for("_versions/7.manifest"), 7) == "_versions/7.manifest"
    with pytest.raises(CorruptFileError, match="names version 3"):
        final_path_of(staging, 4)


# ------------------------------------------------------------- staged commits
def test_commit_external_wins_once(store, mstore):
    base = base_uri_of(store)
    assert resolve_latest(store, mstore, V2) is None
    assert commit_external(store, mstore, 1, b"first-bytes", V2) is True
    final = manifest_path(V2, 1)
    assert store.read(final) == b"first-bytes"
    assert mstore.get(base, 1) == ManifestLocation(1, final, 11, None)
    assert commit_external(store, mstore, 1, b"second", V2) is False
    assert store.read(final) == b"first-bytes"
    assert _versions_dir(store) == [posixpath.basename(final)]  # loser's staging object deleted
    assert resolve_latest(store, mstore, V2) == 1
    assert list_versions(store) == (V2, [1])
    assert base.startswith(("file:///", "memory:///"))


def _race_worker(root, mstore, proc, attempts, barrier, results):
    store = ObjectStore(root)
    barrier.wait()
    won = []
    for attempt in range(attempts):
        version = (resolve_latest(store, mstore, V2) or 0) + 1
        data = f"proc={proc} attempt={attempt} version={version};".encode() * (1 + attempt)
        if commit_external(store, mstore, version, data, V2):
            won.append((version, hashlib.sha256(data).hexdigest()))
    results.put((proc, os.getpid(), won))


@pytest.mark.slow  # several processes race for versions
def test_processes_race_for_consecutive_versions(tmp_path, mstore):
    root, procs, attempts = str(tmp_path / "ds"), 4, 20
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(procs), ctx.Queue()
    workers = [
        ctx.Process(target=_race_worker, args=(root, mstore, p, attempts, barrier, results))
        for p in range(procs)
    ]
    for w in workers:
        w.start()
    outcomes = [results.get(timeout=60) for _ in workers]
    for w in workers:
        w.join(timeout=30)
        assert w.exitcode == 0
    winners = {}  # version -> (pid, sha256)
    for _proc, pid, won in outcomes:
        for version, digest in won:
            assert version not in winners, f"version {version} committed twice"
            winners[version] = (pid, digest)
    n = len(winners)
    assert attempts <= n <= procs * attempts
    assert sorted(winners) == list(range(1, n + 1))  # no gaps
    store = ObjectStore(root)
    base = base_uri_of(store)
    assert mstore.list_versions(base) == list(range(1, n + 1))
    assert resolve_latest(store, mstore, V2) == n
    rows = {r[1]: r for r in _rows(mstore.path) if r[0] == base}
    for version, (pid, digest) in winners.items():
        final = manifest_path(V2, version)
        data = store.read(final)
        assert hashlib.sha256(data).hexdigest() == digest
        _base, _v, path, committer, size, _etag = rows[version]
        assert (path, size) == (final, len(data))
        assert committer.endswith(f":{pid}")
    # every staging object was finalized or deleted
    assert _versions_dir(store) == sorted(posixpath.basename(manifest_path(V2, v)) for v in range(1, n + 1))


# ------------------------------------------------------------------- repair
def test_reader_finalizes_a_commit_whose_writer_died(store, mstore, caplog):
    base = base_uri_of(store)
    assert commit_external(store, mstore, 1, b"v1", V2)
    with caplog.at_level(logging.WARNING, logger="lance_ops.format.txn.manifest_store"):
        assert commit_external(crashing(store), mstore, 2, b"version-two", V2) is True
    assert "version 2 committed, finalizing" in caplog.text
    staged = mstore.get(base, 2)
    assert staged.path.startswith(manifest_path(V2, 2) + "-") and staged.size == 11
    assert store.read(staged.path) == b"version-two"
    assert list_versions(store) == (V2, [1])  # a reader without the KV store is one version behind
    # the next writer cannot take version 2
    assert commit_external(store, mstore, 2, b"other", V2) is False

    assert resolve_latest(store, mstore, V2) == 2
    final = manifest_path(V2, 2)
    assert store.read(final) == b"version-two"
    assert mstore.get(base, 2) == ManifestLocation(2, final, 11, None)
    assert _versions_dir(store) == sorted(posixpath.basename(manifest_path(V2, v)) for v in (1, 2))
    assert resolve_latest(store, mstore, V2) == 2  # idempotent


def test_resolve_version_finalizes_and_backfills(store, mstore):
    base = base_uri_of(store)
    store.put(manifest_path(V2, 1), b"legacy-v1")  # committed before the KV store was adopted
    assert resolve_latest(store, mstore, V2) == 1  # empty KV store: the listing answers
    assert resolve_version(store, mstore, 1, V2) == manifest_path(V2, 1)
    assert mstore.list_versions(base) == []  # no backfill that would become the KV "latest"
    assert commit_external(store, mstore, 2, b"v2", V2)
    assert commit_external(crashing(store), mstore, 3, b"v3!", V2)
    assert mstore.get(base, 3).path != manifest_path(V2, 3)
    assert resolve_version(store, mstore, 3, V2) == manifest_path(V2, 3)
    assert store.read(manifest_path(V2, 3)) == b"v3!"
    assert mstore.get(base, 3) == ManifestLocation(3, manifest_path(V2, 3), 3, None)
    # below the KV latest the legacy version is backfilled
    assert resolve_version(store, mstore, 1, None) == manifest_path(V2, 1)
    assert mstore.get(base, 1) == ManifestLocation(1, manifest_path(V2, 1), 9, None)
    with pytest.raises(DatasetNotFoundError, match="version 7 does not exist"):
        resolve_version(store, mstore, 7, V2)


def test_repair_after_another_finalizer_and_refusals(store, mstore):
    base = base_uri_of(store)
    assert commit_external(crashing(store), mstore, 1, b"one", V2)
    staged = mstore.get(base, 1)
    # another finalizer wrote the final manifest and deleted the staging object, but died before
    # repointing the KV entry: the bytes are there, the reader repoints
    store.put(manifest_path(V2, 1), b"one")
    store.delete(staged.path)
    assert resolve_latest(store, mstore, V2) == 1
    assert mstore.get(base, 1).path == manifest_path(V2, 1)

    # staged manifest lost and no final: the reader refuses to load
    assert commit_external(crashing(store), mstore, 2, b"two", V2)
    store.delete(mstore.get(base, 2).path)
    with pytest.raises(CorruptFileError, match="staged manifest is gone"):
        resolve_latest(store, mstore, V2)

    # a final manifest written beside the KV store with other bytes: refuse, keep both
    other = SQLiteManifestStore(mstore.path, table="second")
    assert commit_external(crashing(store), other, 3, b"three", V2)
    staging = other.get(base, 3).path
    store.put(manifest_path(V2, 3), b"THREE")
    with pytest.raises(CorruptFileError, match="differs from the staged manifest"):
        resolve_version(store, other, 3, V2)
    assert store.read(staging) == b"three" and store.read(manifest_path(V2, 3)) == b"THREE"


# ------------------------------------------------------------ commit handlers
def _recommit_all(src: ObjectStore, dst: ObjectStore, handler, *, crash_last: bool) -> list[int]:
    """Copy every file but the manifests, then commit src's manifests through ``handler``."""
    for rel, _size, _mtime in src.list_files(""):
        if not rel.startswith("_versions/"):
            dst.put(rel, src.read(rel))
    scheme, versions = list_versions(src)
    for v in versions:
        mf = read_manifest(src, v, scheme)
        txn = transaction_pb2.Transaction()
        txn.ParseFromString(mf.transaction)
        h = handler
        if crash_last and v == versions[-1]:
            h = ExternalManifestCommitHandler(crashing(dst), handler.manifest_store)
        assert h.put_manifest_if_absent(mf.manifest, txn, scheme) is True
        assert h.put_manifest_if_absent(mf.manifest, txn, scheme) is False
    return versions


def _history(uri):
    lf.write_dataset(simple_table(0, 40), uri, max_rows_per_file=25)
    lf.write_dataset(simple_table(40, 10), uri, mode="append")
    ds = lf.dataset(uri)
    ds.delete(pc.field("id") < 5)
    return ds


def test_dataset_committed_through_the_handler_opens_in_pylance(tmp_path, mstore):
    import lance

    src_uri, dst_uri = str(tmp_path / "src"), str(tmp_path / "dst")
    assert _history(src_uri).version == 3
    src, dst = ObjectStore(src_uri), ObjectStore(dst_uri)
    handler = commit_handler_for(dst, str(mstore.path))
    assert isinstance(handler, ExternalManifestCommitHandler) and handler.manifest_store == mstore
    assert handler.list_versions() == (None, []) and handler.latest_version() == 0
    assert _recommit_all(src, dst, handler, crash_last=True) == [1, 2, 3]
    assert lance.dataset(dst_uri).version == 2  # the last commit is staged only

    fresh = ExternalManifestCommitHandler(dst, SQLiteManifestStore(mstore.path))
    assert fresh.latest_version() == 3  # finalizes version 3
    assert fresh.list_versions() == (V2, [1, 2, 3])
    assert _versions_dir(dst) == sorted(posixpath.basename(manifest_path(V2, v)) for v in (1, 2, 3))
    for v in (1, 2, 3):
        assert fresh.read_manifest(v).manifest == read_manifest(src, v, V2).manifest
        theirs = lance.dataset(dst_uri, version=v)
        assert theirs.to_table().equals(lance.dataset(src_uri, version=v).to_table())
        assert lf.dataset(dst_uri, version=v).to_table().equals(theirs.to_table())
    latest = lance.dataset(dst_uri)
    assert latest.version == 3 and latest.count_rows() == 45
    assert sorted(latest.to_table()["id"].to_pylist()) == list(range(5, 50))
    with pytest.raises(DatasetNotFoundError):
        fresh.read_manifest(4)


def test_handlers_over_memory_store(mstore):
    src_uri, dst_uri = f"memory://hsrc-{uuid.uuid4().hex}", f"memory://hdst-{uuid.uuid4().hex}"
    _history(src_uri)
    src, dst = ObjectStore(src_uri), ObjectStore(dst_uri)
    handler = commit_handler_for(dst, mstore)
    assert _recommit_all(src, dst, handler, crash_last=True) == [1, 2, 3]
    assert list_versions(dst) == (V2, [1, 2])
    assert handler.list_versions() == (V2, [1, 2, 3])
    assert list_versions(dst) == (V2, [1, 2, 3])
    assert handler.read_manifest(3).manifest == read_manifest(src, 3, V2).manifest
    assert lf.dataset(dst_uri).to_table().equals(lf.dataset(src_uri).to_table())
    assert lf.dataset(dst_uri).count_rows() == 45


def test_conditional_put_handler(tmp_path):
    uri = str(tmp_path / "ds")
    _history(uri)
    store = ObjectStore(uri)
    handler = commit_handler_for(store, None)
    assert isinstance(handler, ConditionalPutCommitHandler) and handler.manifest_store is None
    assert handler.list_versions() == (V2, [1, 2, 3])
    assert handler.latest_version() == 3
    m3 = handler.read_manifest(3).manifest
    assert m3.version == 3 and sum(f.num_rows for f in m3.fragments) == 45
    nxt = m3.with_changes(version=4)
    assert handler.put_manifest_if_absent(nxt, None, V2) is True
    assert ConditionalPutCommitHandler(store).put_manifest_if_absent(nxt, None, V2) is False
    assert handler.latest_version() == 4
    assert lf.dataset(uri).version == 4


def test_external_handler_adopts_a_conditional_put_dataset(tmp_path, mstore):
    uri = str(tmp_path / "ds")
    _history(uri)
    store = ObjectStore(uri)
    handler = ExternalManifestCommitHandler(store, mstore)
    assert handler.list_versions() == (V2, [1, 2, 3])  # empty KV store: the listing answers
    m4 = handler.read_manifest(3).manifest.with_changes(version=4)
    assert handler.put_manifest_if_absent(m4, None, V2) is True
    assert ExternalManifestCommitHandler(store, mstore).put_manifest_if_absent(m4, None, V2) is False
    assert mstore.list_versions(base_uri_of(store)) == [4]
    assert handler.latest_version() == 4
    assert handler.read_manifest(2).manifest.version == 2
    assert mstore.list_versions(base_uri_of(store)) == [2, 4]  # backfilled below the latest
    # a manifest dropped into _versions/ without the KV store is ignored once the store holds the dataset
    store.put(manifest_path(V2, 5), b"foreign")
    assert handler.list_versions() == (V2, [1, 2, 3, 4])
    assert handler.latest_version() == 4
    with pytest.raises(TypeError, match="manifest_store must be"):
        commit_handler_for(store, 42)
    assert pa.types.is_int64(lf.dataset(uri, version=4).schema.field("id").type)
