"""The change feed across schema evolution, row by row against an oracle built from pylance reads.

pylance builds a history with every kind of evolution (``add_columns`` SQL and UDF, ``alter_columns``
rename / nullable / cast, ``drop_columns``, ``merge``) interleaved with deletes and updates (by
pylance and by lance_ops, which also appends and updates on the evolved schema).  For every
range the oracle diffs pylance's reads of the two versions by ``_rowid`` and maps begin-version
rows onto the end version's columns by field id (pylance's ``lance_schema``); a cast column
(a new field id under the same name) is followed by name.
"""

import functools
from datetime import UTC

import lance
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_ops.format as lf
import lance_ops.format.versions as lf_versions

pytestmark = pytest.mark.interop

META = ["_rowid", "_row_created_at_version", "_row_last_updated_at_version"]
CHANGE = ["_rowid", "_change_type", "_commit_version", "_commit_timestamp"]


@pytest.fixture(params=("2.0", "2.2"), autouse=True)
def file_version(request, monkeypatch):
    version = request.param
    monkeypatch.setattr(lf_versions, "DEFAULT_STORAGE_VERSION", version)
    original = lance.write_dataset

    @functools.wraps(original)
    def write_dataset(*args, **kwargs):
        if kwargs.get("mode", "create") != "append":
            kwargs.setdefault("data_storage_version", version)
        return original(*args, **kwargs)

    monkeypatch.setattr(lance, "write_dataset", write_dataset)
    return version


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
    lf.dataset(uri).update({"m": "mu", "y": 99}, where=pc.field("id") == 2), step("lance_ops update")
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


@pytest.fixture
def history(tmp_path):
    uri = str(tmp_path / "ds")
    steps = build_history(uri)
    return uri, steps


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


def test_change_feed_across_every_evolution_matches_the_oracle(history):
    uri, steps = history
    oracle = Oracle(uri)
    ds = lf.dataset(uri)
    assert ds.version == oracle.latest
    for end in range(1, oracle.latest + 1):
        for begin in range(0, end):
            got = ds.change_feed(begin, end)
            assert got.schema.names == oracle.tables[end][2].names + CHANGE, (begin, end)
            assert got.schema.field("x").type == oracle.tables[end][2].field("x").type
            want = oracle.feed(begin, end)
            assert same_feed(normalize(got.to_pylist()), want), (
                f"({begin}, {end}] across {[steps.get(v) for v in range(begin + 1, end + 1)]}:\n"
                f"got  {normalize(got.to_pylist())[:4]}\nwant {want[:4]}"
            )


def test_each_evolution_step_alone(history):
    """The per-version feed (what the Dagster backfill runs): a rename or drop changes no row, an
    add_columns / merge / cast updates every row, pre-images have the new column null."""
    uri, steps = history
    ds = lf.dataset(uri)
    by_step = {what: v for v, what in steps.items()}
    kinds = lambda t: sorted(set(t.column("_change_type").to_pylist()))  # noqa: E731
    for what in ("rename", "nullable", "drop"):
        assert ds.change_feed(by_step[what] - 1, by_step[what]).num_rows == 0, what
    for what, col in (("add_columns sql", "y"), ("add_columns udf", "z"), ("merge", "m")):
        v = by_step[what]
        t = ds.checkout_version(v).change_feed(v - 1, v)
        assert kinds(t) == ["update_postimage", "update_preimage"], what
        pre = t.filter(pc.equal(t.column("_change_type"), "update_preimage"))
        assert pre.column(col).null_count == pre.num_rows > 0, what
    v = by_step["cast"]
    t = ds.checkout_version(v).change_feed(v - 1, v)
    pre = t.filter(pc.equal(t.column("_change_type"), "update_preimage"))
    assert pre.schema.field("x").type == pa.int64() and pre.column("x").null_count == 0
    # one-version ranges and empty ones
    assert ds.change_feed(by_step["rename"], by_step["rename"]).num_rows == 0
    assert ds.change_feed(by_step["reserve"] - 1, by_step["compaction"]).num_rows == 0


def test_refusal_of_schema_changes_on_request(history):
    uri, steps = history
    ds = lf.dataset(uri)
    by_step = {what: v for v, what in steps.items()}
    v = by_step["rename"]
    with pytest.raises(lf.SchemaChangeError, match=r"version %d \(column 's' renamed to 's2'\)" % v) as info:
        ds.change_feed(v - 1, v, on_schema_change="fail")
    assert info.value.version == v
    with pytest.raises(lf.SchemaChangeError, match="column 'y' added"):
        ds.change_feed(1, by_step["add_columns sql"], on_schema_change="fail")
    with pytest.raises(lf.SchemaChangeError, match="column 'x' changed type"):
        ds.change_feed(by_step["cast"] - 1, by_step["cast"], on_schema_change="fail")
    # ranges without a schema change are served as usual
    u = by_step["update"]
    assert ds.change_feed(u - 1, u, on_schema_change="fail").num_rows == 2
    # tags name versions of the change feed too
    ds.tags.create("before_rename", v - 1)
    assert ds.change_feed("before_rename", v).num_rows == 0
