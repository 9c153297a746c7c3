"""Oracles for the jobs tests: pylance snapshots, brute-force change feeds, file listings."""

import datetime as dt
import os

import lance
import pyarrow as pa
import pyarrow.compute as pc
from datagen import META

import lance_ops.format as lf

CHANGE_COLS = ["_rowid", "_change_type", "_commit_version", "_commit_timestamp"]


def snapshot(uri: str, version: int | None = None, columns=None) -> pa.Table:
    """All rows with the metadata columns, read by pylance, sorted by _rowid."""
    ds = lance.dataset(uri, version=version)
    cols = (columns or ds.schema.names) + META
    return ds.to_table(columns=cols).sort_by("_rowid")


def rows(table: pa.Table, sort_by=("_rowid",)) -> list[dict]:
    return sorted(table.to_pylist(), key=lambda r: tuple(r[k] for k in sort_by))


def spark_rows(df, sort_by=("_rowid", "_change_type")) -> list[dict]:
    return sorted((r.asDict() for r in df.collect()), key=lambda r: tuple(r[k] for k in sort_by))


def data_files(uri: str) -> set[str]:
    d = os.path.join(uri, "data")
    return set(os.listdir(d)) if os.path.isdir(d) else set()


def referenced_files(uri: str) -> set[str]:
    """Data files referenced by any version (what must exist; everything else is an orphan)."""
    out = set()
    ds = lf.dataset(uri)
    for v in ds.versions():
        for f in lf.dataset(uri, version=v["version"]).manifest.fragments:
            out.update(df.path for df in f.files)
    return out


def deletion_files(uri: str) -> int:
    return sum(1 for f in lance.dataset(uri).get_fragments() if f.metadata.deletion_file is not None)


def normalize_feed(rows_: list[dict], *, with_timestamps: bool = True) -> list[tuple]:
    """Change rows as comparable tuples (timestamps naive UTC, or left out)."""
    out = []
    for r in rows_:
        r = dict(r)
        ts = r.pop("_commit_timestamp")
        if ts is not None and getattr(ts, "tzinfo", None) is not None:
            ts = ts.astimezone(dt.UTC).replace(tzinfo=None)
        out.append(tuple(sorted(r.items())) + ((("_commit_timestamp", ts),) if with_timestamps else ()))
    return sorted(out, key=repr)


def without_timestamps(feed: list[tuple]) -> list[tuple]:
    return sorted((t[:-1] for t in feed), key=repr)


def commit_times(feed: list[tuple]) -> dict[int, dt.datetime]:
    """_commit_version -> _commit_timestamp of a normalized feed (one timestamp per version)."""
    out: dict[int, dt.datetime] = {}
    for t in feed:
        version, ts = dict(t[:-1])["_commit_version"], t[-1][1]
        assert out.setdefault(version, ts) == ts
    return out


def reference_feed(uri: str, begin: int, end: int) -> list[tuple]:
    """The in-process change feed of lance_ops.format."""
    return normalize_feed(lf.dataset(uri, version=end).change_feed(begin, end).to_pylist())


def brute_force_feed(uri: str, begin: int, end: int) -> list[tuple]:
    """The change feed from first principles: pylance reads of every version, diffed by _rowid."""
    user = lance.dataset(uri, version=end).schema.names
    stamps = {
        v["version"]: v["timestamp"]
        for v in lance.dataset(uri).versions()
    }
    e = {r["_rowid"]: r for r in snapshot(uri, end, user).to_pylist()}
    b = {r["_rowid"]: r for r in snapshot(uri, begin, user).to_pylist()} if begin > 0 else {}
    live = {v: {r["_rowid"] for r in snapshot(uri, v, user).to_pylist()} for v in range(begin + 1, end + 1)}

    def row(r, kind, version):
        out = {k: r[k] for k in user}
        out.update(_rowid=r["_rowid"], _change_type=kind, _commit_version=version, _commit_timestamp=stamps[version])
        return out

    out = []
    for rid, r in e.items():
        if rid not in b:
            if r["_row_created_at_version"] > begin:  # (a row can only be new if it was created after begin)
                out.append(row(r, "insert", r["_row_created_at_version"]))
        elif r["_row_last_updated_at_version"] > begin:
            out.append(row(b[rid], "update_preimage", r["_row_last_updated_at_version"]))
            out.append(row(r, "update_postimage", r["_row_last_updated_at_version"]))
        else:  # untouched: identical content in both versions
            assert {k: r[k] for k in user} == {k: b[rid][k] for k in user}, rid
    for rid, r in b.items():
        if rid not in e:
            first = min(v for v in range(begin + 1, end + 1) if rid not in live[v])
            out.append(row(r, "delete", first))
    return normalize_feed(out)


def count_where(uri: str, expr) -> int:
    return lance.dataset(uri).count_rows(filter=expr)


__all__ = ["pc"]
