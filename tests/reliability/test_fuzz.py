"""A seeded fuzzer over every file kind of datasets written by lance_ops and by pylance.

Each case copies a small dataset, damages one file (flips bytes, truncates it, or inflates it:
a length-like field set huge, or garbage appended), then opens, reads and commits through
lance_ops.  Every case must end either normally or in a ``LanceOpsError`` that names the damaged
file, within a time limit and without a large allocation; a failed case commits nothing.
Truncated files must always be detected.  Lance files carry no checksums (as in pylance), so a
flipped byte inside page values may decode to other values: that is counted, not failed.

Kinds: the latest manifest, a ``.txn`` (read by the conflict check of a stale writer), data
files (2.0 and 2.2), deletion files (``.arrow`` and ``.bin``), the inline row-id and version
sequences (bytes inside the manifest), index files and the index section, and tag files.
Index files are never read by lance_ops (indices are carried as manifest metadata): damaging
them must leave reads and commits unaffected.

Bounded: ``LANCE_OPS_FUZZ_ROUNDS`` (default 2) rounds of every (dataset, kind, damage), seeded by
``LANCE_OPS_FUZZ_SEED`` (default 14); about 20 s on 2 cores.
"""

import glob
import os
import resource
import shutil
import time
from collections import Counter
from dataclasses import dataclass

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from datagen import META, simple_table

import lance_ops.format as lf
from lance_ops.format.table.manifest import Manifest, decode_manifest_file, encode_manifest_file

SEED = int(os.environ.get("LANCE_OPS_FUZZ_SEED", "14"))
ROUNDS = int(os.environ.get("LANCE_OPS_FUZZ_ROUNDS", "2"))
CASE_SECONDS = 5.0  # per case (open + read + one commit attempt)
CASE_ARROW_BYTES = 256 << 20  # peak Arrow allocation per case
RSS_GROWTH = 1 << 30  # peak resident memory growth over the whole fuzz
COLS = ["id", "val", "score"]
DAMAGES = ("flip", "truncate", "inflate")
# Per-case Arrow pools stay alive for the whole process: buffers allocated from one (cached
# footers, manifests) may be released after the case, and a freed pool would crash then.
_CASE_POOLS: list[pa.MemoryPool] = []


def manifest_file(uri: str, version: int) -> str:
    return os.path.join(uri, "_versions", f"{2**64 - 1 - version:020d}.manifest")


def latest(uri: str) -> int:
    return max(2**64 - 1 - int(os.path.basename(p)[:20]) for p in glob.glob(os.path.join(uri, "_versions", "*.manifest")))


def _history(uri: str, writer: str, version: str) -> None:
    """v1 write (fragment 0: 6000 rows, 1: 10), v2 delete 5000 in fragment 0 (.bin), v3 delete one
    row of fragment 1 (.arrow), v4 update (new fragment with row ids and versions); pylance also
    builds a BTREE index and a tag."""
    t = simple_table(0, 6010)
    if writer == "lance_ops":
        lf.write_dataset(t, uri, enable_stable_row_ids=True, max_rows_per_file=6000, data_storage_version=version)
        lf.dataset(uri).delete(pc.field("id") < 5000)
        lf.dataset(uri).delete(pc.field("id") == 6005)
        lf.dataset(uri).update({"val": "'u'"}, where=pc.field("id") == 6001)
        lf.dataset(uri).tags.create("gold", 2)
    else:
        ds = lance.write_dataset(t, uri, enable_stable_row_ids=True, max_rows_per_file=6000,
                                 data_storage_version=version)
        ds.delete("id < 5000")
        ds.delete("id = 6005")
        ds.update({"val": "'u'"}, where="id = 6001")
        ds.create_scalar_index("id", "BTREE")
        ds.tags.create("gold", 2)


@pytest.fixture(scope="module")
def templates(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz")
    out = {}
    for writer in ("lance_ops", "pylance"):
        for version in ("2.0", "2.2"):
            uri = str(root / f"{writer}-{version}")
            _history(uri, writer, version)
            out[f"{writer}-{version}"] = uri
    return out


# ------------------------------------------------------------------------------ damage
def _damage(data: bytes, how: str, rng: np.random.Generator, protect_tail: int = 0) -> bytes:
    if not data:
        return b"\x00" if how == "inflate" else data
    if how == "truncate":
        return data[: int(rng.integers(0, len(data)))]
    b = bytearray(data)
    if how == "flip":
        for _ in range(int(rng.integers(1, 6))):
            pos = int(rng.integers(0, max(1, len(b) - protect_tail)))
            b[pos] ^= 1 << int(rng.integers(0, 8))
        return bytes(b)
    # inflate: a length-like field set huge at an aligned offset, or garbage appended
    if rng.random() < 0.7 and len(b) >= 8:
        width = 8 if rng.random() < 0.5 else 4
        pos = int(rng.integers(0, len(b) - width + 1)) & ~(width - 1)
        value = int(rng.choice([2**31 - 1, 2**32 - 1, 2**40, 2**62]))
        b[pos : pos + width] = (value & ((1 << (8 * width)) - 1)).to_bytes(width, "little")
        return bytes(b)
    return bytes(b) + rng.bytes(int(rng.integers(1, 4096)))


def _rewrite(path: str, fn) -> None:
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(fn(data))


def _reencode(path: str, mutate=None, *, inline_txn: bool = True) -> None:
    """Re-write a manifest file after ``mutate(proto)`` (keeping its index section)."""
    mf = decode_manifest_file(open(path, "rb").read(), path)
    proto = mf.proto
    if mutate is not None:
        mutate(proto)
    m = Manifest.from_proto(proto, index_section=mf.manifest.index_section, where=path)
    txn = _txn_proto(mf.transaction) if inline_txn and mf.transaction else None
    open(path, "wb").write(encode_manifest_file(m, txn))


def _txn_proto(raw: bytes):
    from lance_ops.format._proto import transaction_pb2

    t = transaction_pb2.Transaction()
    t.ParseFromString(raw)
    return t


# ------------------------------------------------------------------------------ kinds
@dataclass
class Case:
    """A damaged copy: ``path`` is the file that must be named; ``probe`` exercises it."""

    uri: str
    path: str
    probe: object
    must_detect: bool = True  # whether truncation of this file is necessarily visible


def _fragment_file(uri: str, fragment_id: int) -> str:
    frag = lf.dataset(uri).manifest.fragment(fragment_id)
    return os.path.join(uri, "data", frag.files[0].path)


def _read_and_append(uri: str) -> None:
    lf.dataset(uri).to_table(columns=COLS + META)
    lf.write_dataset(simple_table(9000, 3), uri, mode="append")


def _read_and_update(uri: str, row: int):
    def probe(_uri: str = uri) -> None:
        lf.dataset(uri).to_table(columns=COLS + META)
        lf.dataset(uri).update({"val": "'fz'"}, where=pc.field("id") == row)

    return probe


def _read_and_delete(uri: str, row: int):
    def probe(_uri: str = uri) -> None:
        lf.dataset(uri).to_table(columns=COLS + META)
        lf.dataset(uri).delete(pc.field("id") == row)

    return probe


def kind_manifest(uri, how, rng):
    path = manifest_file(uri, latest(uri))
    _rewrite(path, lambda b: _damage(b, how, rng))
    return Case(uri, path, lambda: _read_and_append(uri))


def kind_index_section(uri, how, rng):
    """The index section inside the manifest (pylance datasets): carried forward byte for byte."""
    path = manifest_file(uri, latest(uri))
    mf = decode_manifest_file(open(path, "rb").read(), path)
    if mf.manifest.index_section is None:
        return None
    bad = _damage(mf.manifest.index_section, how, rng)
    m = mf.manifest.with_changes(index_section=bad)
    open(path, "wb").write(encode_manifest_file(m, _txn_proto(mf.transaction) if mf.transaction else None))
    return Case(uri, path, lambda: _read_and_append(uri), must_detect=False)


def kind_txn(uri, how, rng):
    """The latest version's .txn, read by a writer that planned on the version before."""
    n = latest(uri)
    path = manifest_file(uri, n)
    _reencode(path, inline_txn=False)  # the .txn file is the only copy now
    name = lf.dataset(uri).manifest.transaction_file
    txn_path = os.path.join(uri, "_transactions", name)
    _rewrite(txn_path, lambda b: _damage(b, how, rng))

    def probe() -> None:
        lf.dataset(uri, version=n - 1).delete(pc.field("id") == 6002)

    return Case(uri, txn_path, probe)


def kind_data_fragment0(uri, how, rng):
    path = _fragment_file(uri, 0)
    _rewrite(path, lambda b: _damage(b, how, rng))
    return Case(uri, path, _read_and_update(uri, 5500))


def kind_data_fragment1(uri, how, rng):
    path = _fragment_file(uri, 1)
    _rewrite(path, lambda b: _damage(b, how, rng))
    return Case(uri, path, _read_and_update(uri, 6002))


def _deletion_file(uri: str, ext: str) -> str:
    m = lf.dataset(uri).manifest
    (frag,) = [f for f in m.fragments if f.deletion_file is not None and f.deletion_file.extension == ext]
    d = frag.deletion_file
    return os.path.join(uri, "_deletions", f"{frag.id}-{d.read_version}-{d.id}.{ext}"), frag.id


def kind_deletion_bin(uri, how, rng):
    path, _ = _deletion_file(uri, "bin")
    _rewrite(path, lambda b: _damage(b, how, rng))
    return Case(uri, path, _read_and_delete(uri, 5500))


def kind_deletion_arrow(uri, how, rng):
    path, _ = _deletion_file(uri, "arrow")
    _rewrite(path, lambda b: _damage(b, how, rng))
    return Case(uri, path, _read_and_delete(uri, 6002))


def _sequence_kind(field: str):
    def kind(uri, how, rng):
        path = manifest_file(uri, latest(uri))
        which = int(rng.integers(0, 3))

        def mutate(proto) -> None:
            frags = [f for f in proto.fragments if f.HasField(field)]
            f = frags[which % len(frags)]
            setattr(f, field, _damage(getattr(f, field), how, rng))

        _reencode(path, mutate)
        return Case(uri, path, _read_and_update(uri, 6002), must_detect=field == "inline_row_ids")

    return kind


def kind_index_files(uri, how, rng):
    files = sorted(glob.glob(os.path.join(uri, "_indices", "*", "*")))
    if not files:
        return None
    path = files[int(rng.integers(0, len(files)))]
    _rewrite(path, lambda b: _damage(b, how, rng))
    return Case(uri, path, lambda: _read_and_append(uri), must_detect=False)


def kind_tag(uri, how, rng):
    path = os.path.join(uri, "_refs", "tags", "gold.json")
    _rewrite(path, lambda b: _damage(b, how, rng))

    def probe() -> None:
        lf.dataset(uri).cleanup_old_versions(older_than=None, dry_run=True)

    return Case(uri, path, probe)


KINDS = {
    "manifest": kind_manifest,
    "index_section": kind_index_section,
    "txn": kind_txn,
    "data_fragment0": kind_data_fragment0,
    "data_fragment1": kind_data_fragment1,
    "deletion_bin": kind_deletion_bin,
    "deletion_arrow": kind_deletion_arrow,
    "row_ids": _sequence_kind("inline_row_ids"),
    "created_at_versions": _sequence_kind("inline_created_at_versions"),
    "last_updated_at_versions": _sequence_kind("inline_last_updated_at_versions"),
    "index_files": kind_index_files,
    "tag": kind_tag,
}


def _state(uri: str) -> tuple[list[str], list[str]]:
    return (sorted(os.listdir(os.path.join(uri, "_versions"))),
            sorted(os.listdir(os.path.join(uri, "_transactions"))))


def test_fuzz_every_file_kind_of_both_libraries(templates, tmp_path):
    rng = np.random.default_rng(SEED)
    outcomes: Counter[tuple[str, str]] = Counter()
    failures: list[str] = []
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    default_pool = pa.default_memory_pool()
    case_no = 0
    for _round in range(ROUNDS):
        for name, template in templates.items():
            for kind, make in KINDS.items():
                for how in DAMAGES:
                    case_no += 1
                    uri = str(tmp_path / f"c{case_no}")
                    shutil.copytree(template, uri)
                    case = make(uri, how, rng)
                    if case is None:
                        shutil.rmtree(uri)
                        continue
                    before = _state(uri)
                    label = f"{name}/{kind}/{how} (case {case_no}, seed {SEED})"
                    pool = pa.proxy_memory_pool(default_pool)
                    _CASE_POOLS.append(pool)
                    pa.set_memory_pool(pool)
                    t0 = time.monotonic()
                    try:
                        case.probe()
                        outcome = "ok"
                    except lf.SchemaError as e:
                        # a flip that turned a column name into another: a valid manifest of a
                        # different table, and the probe asked for a column it no longer has
                        outcome = "changed"
                        if "is not in the dataset schema" not in str(e) or how == "truncate":
                            failures.append(f"{label}: {e}")
                    except lf.LanceOpsError as e:
                        outcome = "error"
                        if case.path not in str(e) and getattr(e, "path", None) != case.path:
                            failures.append(f"{label}: {type(e).__name__} does not name {case.path}: {e}")
                        if _state(uri) != before:
                            failures.append(f"{label}: a failed case committed or left files: {_state(uri)} vs {before}")
                    except Exception as e:  # noqa: BLE001 - the defect this test looks for
                        outcome = "untyped"
                        failures.append(f"{label}: untyped {type(e).__name__}: {e}")
                    finally:
                        pa.set_memory_pool(default_pool)
                    elapsed = time.monotonic() - t0
                    if elapsed > CASE_SECONDS:
                        failures.append(f"{label}: took {elapsed:.1f} s")
                    if pool.max_memory() > CASE_ARROW_BYTES:
                        failures.append(f"{label}: Arrow peak {pool.max_memory()} bytes")
                    if how == "truncate" and case.must_detect and outcome == "ok":
                        failures.append(f"{label}: a truncated {case.path} went unnoticed")
                    if kind == "index_files" and outcome != "ok":
                        failures.append(f"{label}: lance_ops does not read index files, yet failed")
                    outcomes[(kind, outcome)] += 1
                    shutil.rmtree(uri)
    rss_growth = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - rss0
    print(f"\n{case_no} cases: " + ", ".join(f"{k}/{o}={n}" for (k, o), n in sorted(outcomes.items())))
    assert not failures, f"{len(failures)} of {case_no} cases failed:\n" + "\n".join(failures[:40])
    assert rss_growth < RSS_GROWTH, f"resident memory grew by {rss_growth} bytes"
    # the damage really was seen: most cases of every kind lance_ops reads ended in a typed error
    for kind in KINDS:
        if kind in ("index_files",):
            continue
        seen = outcomes[(kind, "error")]
        assert seen > 0, f"no {kind} damage was ever detected: {outcomes}"


def test_fuzz_templates_are_sound(templates):
    """The undamaged templates read identically in both libraries and hold every file kind."""
    for name, uri in templates.items():
        a = lf.dataset(uri).to_table(columns=COLS + META)
        b = lance.dataset(uri).to_table(columns=COLS + META)
        assert a.equals(b), name
        assert a.num_rows == 1009
        assert glob.glob(os.path.join(uri, "_deletions", "*.bin")) and glob.glob(os.path.join(uri, "_deletions", "*.arrow"))
        m = lf.dataset(uri).manifest
        assert all(f.row_ids is not None for f in m.fragments)
        assert any(f.last_updated_at_versions is not None for f in m.fragments)
        if name.startswith("pylance"):
            assert glob.glob(os.path.join(uri, "_indices", "*", "*")) and m.index_section
