"""A history with every schema evolution pylance offers, and the change feed oracle for it.

Shared by the format-level (tests/interop) and Spark-level (tests/jobs) change feed tests.
"""

from datetime import UTC

import lance
import pyarrow as pa
import pyarrow.compute as pc

import lance_ops.format as lf

META = ["_rowid", "_row_created_at_version", "_row_last_updated_at_version"]
CHANGE = ["_rowid", "_change_type", "_commit_version", "_commit_timestamp"]


def build_history(uri: str) -> dict[int, str]:
    """Every evolution pylance offers, between row changes; returns version -> what it did."""
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("x", pa.int32(), nullable=False), pa.field("s", pa.string())])
    t = pa.table({"id": range(8), "x": pa.array(range(8), pa.int32()), "s": list("abcdefgh")}, schema=schema)
    lance.write_dataset(t, uri, schema=schema, enable_stable_row_ids=True, max_rows_per_file=4)
    steps = {1: "create"}

    def step(what: str) -> None:
        steps[lance.dataset(uri).version] = what

    t2 = pa.table({"id": [8, 9], "x": pa.array([8, 9], pa.int32()), "s": ["i", "j"]}, schema=schema)
    lance.write_dataset(t2, uri, mode="append"), step("append")
    lance.dataset(uri).add_columns({"y": "x * 2"}), step("add_columns sql")
    lance.dataset(uri).delete("id = 1"), step("delete")
    lance.dataset(uri).add_columns(
        lambda b: pa.record_batch({"z": pc.add(b.column("x").cast(pa.int64()), 100)}), read_columns=["x"]
    ), step("add_columns udf")
    lance.dataset(uri).alter_columns({"path": "s", "name": "s2"}), step("rename")
    lance.dataset(uri).update({"s2": "'U'"}, where="id = 4"), step("update")
    lance.dataset(uri).alter_columns({"path": "x", "nullable": True}), step("nullable")
    lance.dataset(uri).alter_columns({"path": "x", "data_type": pa.int64()}), step("cast")
    lance.dataset(uri).drop_columns(["z"]), step("drop")
    lance.dataset(uri).merge(pa.table({"id": pa.array([2, 3, 9], pa.int64()), "m": ["m2", "m3", "m9"]}), "id"), step("merge")
    lance.dataset(uri).delete("id = 7"), step("delete")
    # lance_ops maintains the evolved dataset: update, append, delete, compaction
    lf.dataset(uri).update({"m": "'mu'", "y": 99}, where=pc.field("id") == 2), step("lance_ops update")
    add = lf.dataset(uri).schema.empty_table().to_pylist()
    assert add == []
    extra = pa.table({"id": pa.array([20, 21], pa.int64()), "x": pa.array([20, 21], pa.int64()), "s2": ["t", "u"],
                      "y": pa.array([40, 42], pa.int32()), "m": [None, "m21"]})
    lf.write_dataset(extra, uri, mode="append"), step("lance_ops append")
    lf.dataset(uri).delete(pc.field("id") == 3), step("lance_ops delete")
    lf.dataset(uri).compact_files()
    steps[lance.dataset(uri).version - 1] = "reserve"
    step("compaction")
    return steps


class Oracle:
    """Reads every version once with pylance."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        ds = lance.dataset(uri)
        self.latest = ds.version
        self.stamps = {v["version"]: v["timestamp"] for v in ds.versions()}
        self.tables = {}
        self.ids = {}
        for v in range(1, self.latest + 1):
            d = lance.dataset(uri, version=v)
            t = d.to_table(columns=d.schema.names + META)
            self.tables[v] = (t, {f.id(): f.name() for f in d.lance_schema.fields()}, d.schema)

    def mapped(self, begin: int, end: int, rows: list[dict]) -> list[dict]:
        """Begin-version rows as the end version's columns: by field id, casts by name."""
        if not rows:
            return []
        _, bnames, bschema = self.tables[begin]
        _, enames, eschema = self.tables[end]
        by_name = {n: i for i, n in bnames.items()}
        out = []
        for r in rows:
            m = {}
            for fid, name in enames.items():
                src = bnames.get(fid)
                if src is None and name in by_name and by_name[name] not in enames:
                    src = name  # the same name under a new id: a cast replaced the field
                value = r[src] if src is not None else None
                if value is not None and eschema.field(name).type != bschema.field(src).type:
                    value = pa.scalar(value, bschema.field(src).type).cast(eschema.field(name).type).as_py()
                m[name] = value
            m["_rowid"] = r["_rowid"]
            out.append(m)
        return out

    def feed(self, begin: int, end: int) -> list[tuple]:
        et, _, eschema = self.tables[end]
        user = eschema.names
        e = {r["_rowid"]: r for r in et.to_pylist()}
        b = {r["_rowid"]: r for r in self.tables[begin][0].to_pylist()} if begin else {}
        out = []

        def emit(r, kind, v):
            row = {k: r[k] for k in user}
            row.update(_rowid=r["_rowid"], _change_type=kind, _commit_version=v, _commit_timestamp=self.stamps[v])
            out.append(row)

        pre_rows, pre_versions = [], []
        for rid, r in e.items():
            if rid not in b:
                if r["_row_created_at_version"] > begin:
                    emit(r, "insert", r["_row_created_at_version"])
            elif r["_row_last_updated_at_version"] > begin:
                pre_rows.append(b[rid])
                pre_versions.append(r["_row_last_updated_at_version"])
                emit(r, "update_postimage", r["_row_last_updated_at_version"])
        for r, v in zip(self.mapped(begin, end, pre_rows), pre_versions, strict=True):
            emit(r, "update_preimage", v)
        dead = [r for rid, r in b.items() if rid not in e]
        live = {v: {r["_rowid"] for r in self.tables[v][0].to_pylist()} for v in range(begin + 1, end + 1)}
        for r in self.mapped(begin, end, dead):
            emit(r, "delete", min(v for v in range(begin + 1, end + 1) if r["_rowid"] not in live[v]))
        return normalize(out)


def normalize(rows: list[dict]) -> list[tuple]:
    out = []
    for r in rows:
        r = dict(r)
        ts = r.pop("_commit_timestamp")
        if ts is not None and ts.tzinfo is not None:
            ts = ts.astimezone(UTC).replace(tzinfo=None)
        out.append((tuple(sorted(r.items())), ts))
    return sorted(out, key=repr)


def same_feed(got: list[tuple], want: list[tuple]) -> bool:
    """Equal rows; commit times equal to the microsecond (pylance truncates, lance_ops too)."""
    if [g for g, _ in got] != [w for w, _ in want]:
        return False
    return all(abs((g - w).total_seconds()) <= 1e-6 for (_, g), (_, w) in zip(got, want, strict=True))
