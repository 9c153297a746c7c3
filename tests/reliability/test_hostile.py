"""Hostile and damaged files: every one is a typed LanceOpsError, fast, inside the dataset root.

Manifests, inline and ``.txn`` transactions, deletion files (.arrow and .bin) and data files
are truncated, overwritten, given wrong magic and absurd lengths, and manifests name data
files outside ``data/``.  Where a file is at fault the error is a CorruptFileError naming it.
Hypothesis fuzzes the manifest and transaction decoders.
"""

import builtins
import glob
import os
import shutil
import struct
import time
from contextlib import contextmanager

import numpy as np
import pyarrow.compute as pc
import pytest
from datagen import META, simple_table
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from templates import template_copy

import lance_ops.format as lf
from lance_ops.format._proto import transaction_pb2
from lance_ops.format.errors import TagError
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.table.fragment import DataFile
from lance_ops.format.table.manifest import decode_manifest_file, encode_manifest_file
from lance_ops.format.txn.transaction import Transaction, decode_transaction

COLS = ["id", "val", "score"]
V2 = "{:020d}.manifest"
FOOTER = struct.Struct("<QQQIIHH4s")  # data file footer


def manifest_file(uri: str, version: int) -> str:
    return os.path.join(uri, "_versions", V2.format(2**64 - 1 - version))


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """v1: 6010 rows (fragment 0: 6000 rows, fragment 1: 10); v2: 5000 deleted in fragment 0
    (.bin); v3: one row deleted in fragment 1 (.arrow)."""
    path = str(tmp_path_factory.mktemp("hostile") / "ds")
    lf.write_dataset(simple_table(0, 6010), path, enable_stable_row_ids=True, max_rows_per_file=6000)
    lf.dataset(path).delete(pc.field("id") < 5000)
    lf.dataset(path).delete(pc.field("id") == 6005)
    return path


uri = template_copy("uri")


@contextmanager
def quickly(limit: float = 5.0):
    """No hang: hostile input is refused within ``limit`` seconds."""
    t0 = time.monotonic()
    yield
    assert time.monotonic() - t0 < limit


def rewrite(path: str, fn) -> None:
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(fn(data))


def read_all(uri: str, version: int | None = None):
    ds = lf.dataset(uri, version=version)
    return ds.to_table(columns=COLS + META)


# ------------------------------------------------------------------------- manifests
def _set_pos(data: bytes, pos: int) -> bytes:
    return data[:-16] + struct.pack("<q", pos) + data[-8:]


def _huge_len(data: bytes) -> bytes:
    pos = struct.unpack_from("<q", data, len(data) - 16)[0]
    return data[:pos] + struct.pack("<I", 0xFFFFFFFF) + data[pos + 4 :]


def _garbage_body(data: bytes) -> bytes:
    pos = struct.unpack_from("<q", data, len(data) - 16)[0]
    n = len(data) - 16 - pos - 4
    return data[: pos + 4] + b"\xff" * n + data[-16:]


MANIFEST_DAMAGE = {
    "empty": lambda b: b"",
    "truncated-10": lambda b: b[:10],
    "truncated-half": lambda b: b[: len(b) // 2],
    "last-byte-missing": lambda b: b[:-1],
    "wrong-magic": lambda b: b[:-4] + b"LANX",
    "position-huge": lambda b: _set_pos(b, 2**62),
    "position-negative": lambda b: _set_pos(b, -8),
    "position-in-footer": lambda b: _set_pos(b, len(b) - 10),
    "length-prefix-4gib": _huge_len,
    "protobuf-garbage": _garbage_body,
    "random-bytes": lambda b: np.random.default_rng(1).bytes(len(b)),
}


@pytest.mark.parametrize("damage", list(MANIFEST_DAMAGE))
def test_damaged_latest_manifest(uri, damage):
    path = manifest_file(uri, 3)
    rewrite(path, MANIFEST_DAMAGE[damage])
    with quickly(), pytest.raises(lf.CorruptFileError) as info:
        lf.dataset(uri)
    assert info.value.path == path
    assert read_all(uri, 2).num_rows == 1010  # older versions still open
    with quickly(), pytest.raises(lf.CorruptFileError):
        lf.write_dataset(simple_table(9000, 1), uri, mode="append")  # and nothing commits on top


def test_manifest_under_another_versions_name(uri):
    shutil.copy(manifest_file(uri, 2), manifest_file(uri, 3))
    with pytest.raises(lf.CorruptFileError, match="version 3 but the manifest says 2") as info:
        lf.dataset(uri)
    assert info.value.path == manifest_file(uri, 3)


def test_garbage_newer_manifest_and_foreign_names(uri):
    open(manifest_file(uri, 4), "wb").write(b"LANC" * 10)
    open(os.path.join(uri, "_versions", "99999999999999999999.manifest"), "wb").write(b"x")  # > u64
    open(os.path.join(uri, "_versions", "latest_version_hint.json"), "wb").write(b"\xff{not json")
    with pytest.raises(lf.CorruptFileError) as info:
        lf.dataset(uri)
    assert info.value.path == manifest_file(uri, 4)
    os.unlink(manifest_file(uri, 4))
    assert lf.dataset(uri).version == 3  # the out-of-range name and the broken hint are ignored
    ds = lf.dataset(uri)
    assert ds.delete(pc.field("id") == 6001) == {"num_deleted_rows": 1} and ds.version == 4


def test_manifest_with_duplicate_column_names(uri):
    path = manifest_file(uri, 3)
    proto = decode_manifest_file(open(path, "rb").read(), path).proto
    proto.ClearField("transaction_section")
    proto.fields[2].name = proto.fields[0].name  # "score" -> "id": one flipped byte away in the wild
    body = proto.SerializeToString()
    open(path, "wb").write(struct.pack("<I", len(body)) + body + struct.pack("<qhh4s", 0, 0, 2, b"LANC"))
    with pytest.raises(lf.CorruptFileError, match="duplicate column names") as info:
        lf.dataset(uri)
    assert info.value.path == path


def _reencode(path: str, transaction=None, **changes) -> None:
    mf = decode_manifest_file(open(path, "rb").read(), path)
    m = mf.manifest.with_changes(**changes) if changes else mf.manifest
    open(path, "wb").write(encode_manifest_file(m, transaction))


def test_damaged_inline_transaction(uri):
    """A commit planned on version 2 must read version 3's transaction: it is garbage."""
    path = manifest_file(uri, 3)
    raw = open(path, "rb").read()
    (n,) = struct.unpack_from("<I", raw, 0)
    assert 0 < n < len(raw)  # lance_ops inlines the transaction first
    rewrite(path, lambda b: b[:4] + b"\xff" * n + b[4 + n :])
    assert read_all(uri).num_rows == 1009  # reading does not need the transaction
    stale = lf.dataset(uri, version=2)
    with quickly(), pytest.raises(lf.CorruptFileError) as info:
        stale.delete(pc.field("id") == 6001)
    assert info.value.path == path
    assert lf.dataset(uri).version == 3


def _invalid_schema_txn(_b: bytes) -> bytes:
    """Well-formed protobuf, invalid content: an Overwrite whose schema repeats a field id."""
    t = transaction_pb2.Transaction(read_version=2, uuid="x")
    t.overwrite.schema.add(name="a", id=0, parent_id=-1, logical_type="int64")
    t.overwrite.schema.add(name="b", id=0, parent_id=-1, logical_type="int64")
    return t.SerializeToString()


def _outside_path_txn(_b: bytes) -> bytes:
    """Well-formed protobuf: an Append of a data file outside data/."""
    t = transaction_pb2.Transaction(read_version=2, uuid="x")
    f = t.append.fragments.add(id=0, physical_rows=1)
    f.files.add(path="../../../etc/passwd", fields=[0], column_indices=[0])
    return t.SerializeToString()


TXN_DAMAGE = {
    "garbage": lambda b: b"\xff\xfe" * 40,
    "truncated": lambda b: b[: len(b) // 2],
    "invalid-schema": _invalid_schema_txn,
    "path-outside-root": _outside_path_txn,
}


@pytest.mark.parametrize("damage", [*TXN_DAMAGE, "missing"])
def test_damaged_transaction_file(uri, damage):
    """Without an inline copy, the conflict check reads ``_transactions/*.txn``."""
    path = manifest_file(uri, 3)
    _reencode(path, None)  # drop the inline transaction: the .txn file is the only copy
    txn_name = lf.dataset(uri).manifest.transaction_file
    txn_path = os.path.join(uri, "_transactions", txn_name)
    if damage == "missing":
        os.unlink(txn_path)
    else:
        rewrite(txn_path, TXN_DAMAGE[damage])
    stale = lf.dataset(uri, version=2)
    with quickly(), pytest.raises(lf.CorruptFileError) as info:
        stale.delete(pc.field("id") == 6001)
    assert info.value.path == txn_path
    assert lf.dataset(uri).version == 3


@pytest.mark.parametrize("name", ["../../../etc/passwd", "/etc/passwd", "..", "a/b.txn", ""])
def test_transaction_file_name_outside_transactions(uri, name):
    path = manifest_file(uri, 3)
    _reencode(path, None, transaction_file=name)
    if name:
        with pytest.raises(lf.CorruptFileError) as info:
            lf.dataset(uri)
        assert info.value.path == path
    else:  # no transaction at all: a concurrent commit cannot check it, and must redo its work
        stale = lf.dataset(uri, version=2)
        with pytest.raises(lf.RetryableCommitConflictError):
            stale.delete(pc.field("id") == 6001, conflict_retries=0)
        assert stale.delete(pc.field("id") == 6001) == {"num_deleted_rows": 1}  # redone on version 3
        assert stale.version == 4


# --------------------------------------------------------------------- deletion files
def _deletion_file(uri: str, ext: str) -> str:
    (path,) = [p for p in glob.glob(os.path.join(uri, "_deletions", f"*.{ext}"))
               if os.path.basename(p).split("-")[1] in ("1", "2")]
    return path


DELETION_DAMAGE = {
    "empty": lambda b: b"",
    "truncated": lambda b: b[: len(b) // 2],
    "garbage": lambda b: b"\x00\x01" * (len(b) // 2),
    "wrong-magic": lambda b: b[:-6] + b"XXXXXX",
    "huge-cardinality": lambda b: struct.pack("<II", 12346, 1) + struct.pack("<HH", 0, 0xFFFF) + b"\x00" * 8,
}


@pytest.mark.parametrize("ext", ["bin", "arrow"])
@pytest.mark.parametrize("damage", [*DELETION_DAMAGE, "missing"])
def test_damaged_deletion_file(uri, ext, damage):
    path = _deletion_file(uri, ext)
    if damage == "missing":
        os.unlink(path)
    else:
        rewrite(path, DELETION_DAMAGE[damage])
    with quickly(), pytest.raises(lf.CorruptFileError) as info:
        read_all(uri)
    assert info.value.path == path
    # a delete on that fragment must read the old vector: it refuses, nothing is committed
    target = pc.field("id") == (5500 if ext == "bin" else 6001)
    with quickly(), pytest.raises(lf.CorruptFileError):
        lf.dataset(uri).delete(target)
    assert lf.dataset(uri).version == 3


# ------------------------------------------------------------------------- data files
def _footer(fn):
    def damage(b: bytes) -> bytes:
        fields = list(FOOTER.unpack_from(b, len(b) - FOOTER.size))
        fn(fields)
        return b[: -FOOTER.size] + FOOTER.pack(*fields)

    return damage


DATA_DAMAGE = {
    "empty": lambda b: b"",
    "truncated": lambda b: b[: len(b) // 2],
    "footer-only": lambda b: b[-FOOTER.size :],
    "wrong-magic": lambda b: b[:-4] + b"NOPE",
    "garbage": lambda b: np.random.default_rng(2).bytes(len(b)),
    "column-meta-beyond-file": _footer(lambda f: f.__setitem__(0, 2**62)),
    "gbo-table-beyond-file": _footer(lambda f: f.__setitem__(2, 2**40)),
    "billions-of-columns": _footer(lambda f: f.__setitem__(4, 2**31)),
    "no-global-buffers": _footer(lambda f: f.__setitem__(3, 0)),
    "zeroed-metadata": lambda b: b[: len(b) // 2] + b"\x00" * (len(b) - len(b) // 2 - FOOTER.size) + b[-FOOTER.size :],
}


def _data_file(uri: str, fragment_id: int = 1) -> str:
    frag = lf.dataset(uri).manifest.fragment(fragment_id)
    return os.path.join(uri, "data", frag.files[0].path)


@pytest.mark.parametrize("damage", list(DATA_DAMAGE))
def test_damaged_data_file(uri, damage):
    path = _data_file(uri)
    rewrite(path, DATA_DAMAGE[damage])
    with quickly(), pytest.raises(lf.CorruptFileError) as info:
        read_all(uri)
    assert info.value.path == path
    with quickly(), pytest.raises(lf.CorruptFileError):
        lf.dataset(uri).update({"val": "'x'"}, where=pc.field("id") == 6001)
    assert lf.dataset(uri).version == 3


def test_missing_data_file(uri):
    path = _data_file(uri)
    os.unlink(path)
    with quickly(), pytest.raises(lf.LanceOpsError) as info:
        read_all(uri)
    assert path in str(info.value) and isinstance(info.value, FileNotFoundError)


def test_fragment_and_file_disagree_on_rows(uri):
    path = manifest_file(uri, 3)
    frag = lf.dataset(uri).manifest.fragment(1)
    m = lf.dataset(uri).manifest
    _reencode(path, None, fragments=(m.fragment(0), frag.with_changes(physical_rows=11)))
    with pytest.raises(lf.CorruptFileError, match="11"):
        read_all(uri)


@pytest.mark.parametrize(
    ("rows", "deleted"), [(2**40, 0), (2**32 + 1, 0), (10, 11)], ids=["2^40-rows", "2^32+1-rows", "deletes-more-than-it-has"]
)
def test_absurd_row_counts_in_manifest(uri, rows, deleted):
    path = manifest_file(uri, 3)
    m = lf.dataset(uri).manifest
    frag = m.fragment(1).with_changes(physical_rows=rows)
    if deleted:
        frag = frag.with_changes(deletion_file=frag.deletion_file.__class__(0, 2, 1, deleted))
    _reencode(path, None, fragments=(m.fragment(0), frag))
    with quickly(), pytest.raises(lf.CorruptFileError) as info:
        lf.dataset(uri)
    assert info.value.path == path


# ------------------------------------------------------------- paths outside the root
BAD_PATHS = [
    "../outside.lance",
    "../../outside.lance",
    "/etc/passwd",
    "sub/../../outside.lance",
    "./x.lance",
    "",
    "..",
    "a//b.lance",
    "x\\..\\..\\outside.lance",
]


@contextmanager
def opened_paths():
    """Record every path this process opens or stats while the block runs."""
    seen: list[str] = []
    real_open, real_os_open, real_stat = builtins.open, os.open, os.stat

    def rec(p):
        if isinstance(p, str | bytes | os.PathLike):
            seen.append(os.path.abspath(os.fsdecode(p)))

    def open_(file, *a, **k):
        rec(file)
        return real_open(file, *a, **k)

    def os_open(path, *a, **k):
        rec(path)
        return real_os_open(path, *a, **k)

    def stat(path, *a, **k):
        rec(path)
        return real_stat(path, *a, **k)

    builtins.open, os.open, os.stat = open_, os_open, stat
    try:
        yield seen
    finally:
        builtins.open, os.open, os.stat = real_open, real_os_open, real_stat


@pytest.mark.parametrize("bad", BAD_PATHS)
def test_manifest_naming_data_files_outside_data_dir(uri, tmp_path, bad):
    # a valid data file waits outside the dataset: reading it would "work"
    shutil.copy(_data_file(uri), tmp_path / "outside.lance")
    path = manifest_file(uri, 3)
    m = lf.dataset(uri).manifest
    f1 = m.fragment(1)
    df = f1.files[0]
    evil = f1.with_changes(files=(DataFile(bad, df.fields, df.column_indices, 2, 0, df.file_size_bytes),))
    _reencode(path, None, fragments=(m.fragment(0), evil))
    root = os.path.abspath(uri)
    with opened_paths() as seen, quickly(), pytest.raises(lf.CorruptFileError) as info:
        read_all(uri)
    assert info.value.path == path and "data file" in info.value.problem
    outside = [p for p in seen if str(tmp_path) in p and not p.startswith(root + os.sep)]
    assert not outside, f"read outside the dataset root: {outside}"
    # cleanup refuses to work from such a manifest rather than deleting by it
    with pytest.raises(lf.CorruptFileError):
        lf.dataset(uri, version=2).cleanup_old_versions()
    assert (tmp_path / "outside.lance").exists()


@pytest.mark.parametrize("bad", BAD_PATHS)
def test_transactions_with_outside_paths(uri, bad):
    frag = lf.write_fragments(simple_table(7000, 2), uri)[0]
    df = frag.files[0]
    evil = frag.with_changes(files=(DataFile(bad, df.fields, df.column_indices, 2, 0, df.file_size_bytes),))
    # decoding such a transaction (from another writer) is a CorruptFileError ...
    raw = Transaction(3, lf.Append([evil])).to_proto().SerializeToString()
    with pytest.raises(lf.CorruptFileError) as info:
        decode_transaction(raw, "their.txn")
    assert info.value.path == "their.txn"
    # ... and committing one is refused before anything is written
    before = sorted(os.listdir(os.path.join(uri, "_transactions")))
    with pytest.raises(ValueError, match="data file"):
        lf.commit(uri, lf.Append([evil]), read_version=3)
    assert sorted(os.listdir(os.path.join(uri, "_transactions"))) == before
    assert lf.dataset(uri).version == 3


def test_store_refuses_escaping_paths(uri):
    store = ObjectStore(uri)
    for rel in ["../x", "/abs", "a/../../x", "..\\x"]:
        with pytest.raises(lf.LanceOpsError):
            store.read(rel)


# ------------------------------------------------------------------------------ tags
def test_hostile_tags(uri):
    ds = lf.dataset(uri)
    for name in ["../evil", "/abs", "..", "", "a/b", "a\\b"]:
        with pytest.raises(ValueError):
            ds.tags.create(name, 1)
    os.makedirs(os.path.join(uri, "_refs", "tags"), exist_ok=True)
    for body in [b"\xff\xfe", b"[]", b'{"version": "x"}', b'{"version": -1}', b"{}"]:
        open(os.path.join(uri, "_refs", "tags", "bad.json"), "wb").write(body)
        before = sorted(os.listdir(os.path.join(uri, "_versions")))
        with pytest.raises(lf.CorruptFileError) as info:
            ds.cleanup_old_versions(older_than=None)
        assert info.value.path.endswith("bad.json")
        assert sorted(os.listdir(os.path.join(uri, "_versions"))) == before
    with pytest.raises(TagError):
        ds.tags.get_version("missing")


# ------------------------------------------------------------------------- hypothesis
def _valid_manifests(uri: str) -> list[bytes]:
    return [open(manifest_file(uri, v), "rb").read() for v in (1, 2, 3)]


@pytest.fixture(scope="module")
def samples(template):
    txns = [open(p, "rb").read() for p in sorted(glob.glob(os.path.join(template, "_transactions", "*.txn")))]
    # every operation kind lance_ops writes
    schema = lf.dataset(template).lance_schema
    frag = lf.dataset(template).manifest.fragment(1)
    for op in [lf.Update([0], [frag], [frag.with_changes(id=0)], [1], [1]),
               lf.Rewrite([lf.RewriteGroup([frag], [frag.with_changes(id=9)])]),
               lf.ReserveFragments(2), lf.UpdateConfig({"a": "b"}, ["c"]), lf.Restore(1),
               lf.Overwrite([frag], schema, {"k": "v"})]:
        txns.append(Transaction(3, op).to_proto().SerializeToString())
    return _valid_manifests(template), txns


def _mutate(data: bytes, edits: list[tuple[int, int]], cut: int | None) -> bytes:
    b = bytearray(data)
    for pos, value in edits:
        b[pos % len(b)] = value
    return bytes(b[: cut % (len(b) + 1)] if cut is not None else b)


FUZZ = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
EDITS = st.lists(st.tuples(st.integers(0, 2**16), st.integers(0, 255)), min_size=1, max_size=6)


def _decodes_or_typed(fn, data: bytes) -> None:
    t0 = time.monotonic()
    try:
        fn(data)
    except lf.LanceOpsError:
        pass
    assert time.monotonic() - t0 < 1.0


@FUZZ
@given(data=st.binary(max_size=512))
def test_fuzz_manifest_decoder_random_bytes(data):
    _decodes_or_typed(lambda d: decode_manifest_file(d, "fuzz.manifest"), data)


@FUZZ
@given(which=st.integers(0, 2), edits=EDITS, cut=st.none() | st.integers(0, 2**16))
def test_fuzz_manifest_decoder_mutations(samples, which, edits, cut):
    data = _mutate(samples[0][which], edits, cut)
    _decodes_or_typed(lambda d: decode_manifest_file(d, "fuzz.manifest"), data)


@FUZZ
@given(body=st.binary(max_size=300), txn=st.none() | st.binary(max_size=64))
def test_fuzz_manifest_decoder_framed_garbage(body, txn):
    """A well-formed frame (footer, length prefixes) around arbitrary protobuf bytes."""
    parts, pos = [], 0
    if txn is not None:
        parts.append(struct.pack("<I", len(txn)) + txn)
        pos = 4 + len(txn)
    parts.append(struct.pack("<I", len(body)) + body)
    data = b"".join(parts) + struct.pack("<qhh4s", pos, 0, 2, b"LANC")
    _decodes_or_typed(lambda d: decode_manifest_file(d, "fuzz.manifest"), data)


@FUZZ
@given(data=st.binary(max_size=512))
def test_fuzz_transaction_decoder_random_bytes(data):
    _decodes_or_typed(lambda d: decode_transaction(d, "fuzz.txn"), data)


@FUZZ
@given(which=st.integers(0, 50), edits=EDITS, cut=st.none() | st.integers(0, 2**16))
def test_fuzz_transaction_decoder_mutations(samples, which, edits, cut):
    txns = samples[1]
    data = _mutate(txns[which % len(txns)], edits, cut)
    _decodes_or_typed(lambda d: decode_transaction(d, "fuzz.txn"), data)


def test_fuzz_samples_are_valid(samples):
    """The seeds of the mutation fuzzers decode (so mutations start from real files)."""
    manifests, txns = samples
    assert [decode_manifest_file(m, "m").manifest.version for m in manifests] == [1, 2, 3]
    kinds = {decode_transaction(t, "t").operation.name for t in txns}
    assert kinds == {"overwrite", "delete", "update", "rewrite", "reserve_fragments", "update_config", "restore"}
    assert transaction_pb2.Transaction.FromString(txns[0]).read_version == 0


@pytest.mark.parametrize("writer", ["lance_ops", "pylance"])
@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_corrupted_21_22_pages_raise_named_errors(tmp_path, writer, version):
    """Random byte flips in the pages of a nested 2.1/2.2 file: every read either returns a table
    or raises a LanceOpsError (CorruptFileError, ...) naming the file, never a bare numpy/Arrow error."""
    import lance
    import pyarrow as pa
    from datagen import nested_table

    uri = str(tmp_path / "ds")
    t = nested_table(1500)
    t = t.append_column("txt", pa.array([f"some text {i} " * (i % 5) for i in range(1500)]))
    (lf.write_dataset if writer == "lance_ops" else lance.write_dataset)(t, uri, data_storage_version=version)
    (path,) = glob.glob(os.path.join(uri, "data", "*.lance"))
    original = open(path, "rb").read()
    rng = np.random.default_rng(7)
    named = 0
    for _ in range(60):
        data = bytearray(original)
        for _ in range(int(rng.integers(1, 8))):
            data[int(rng.integers(0, len(data) - 40))] = int(rng.integers(0, 256))  # the footer stays
        with open(path, "wb") as f:
            f.write(data)
        try:
            lf.dataset(uri).to_table()
        except lf.LanceOpsError as e:
            named += 1
            assert uri in str(e)  # names the file (or the dataset)
    assert named > 0  # the flips did hit pages and metadata
