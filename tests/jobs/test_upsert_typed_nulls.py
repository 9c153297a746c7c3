"""The Spark upsert writes typed nulls of every nested type (issue 12): list, large_list,
list<struct>, fixed_size_list and map columns set to null by the source rows."""

import lance
import pyarrow as pa

from lance_ops import jobs

TYPES = {
    "l": pa.list_(pa.int32()),
    "ll": pa.large_list(pa.string()),
    "ls": pa.list_(pa.struct([("a", pa.int32()), ("b", pa.string())])),
    "fsl": pa.list_(pa.float32(), 2),
    "m": pa.map_(pa.string(), pa.int64()),
}


def test_upsert_sets_typed_nulls(spark, tmp_path):
    uri = str(tmp_path / "ds")
    n = 6
    values = {
        "l": [[i, i] for i in range(n)],
        "ll": [[f"s{i}"] for i in range(n)],
        "ls": [[{"a": i, "b": "x"}] for i in range(n)],
        "fsl": [[float(i), 1.0] for i in range(n)],
        "m": [[("k", i)] for i in range(n)],
    }
    schema = pa.schema([pa.field("id", pa.int64())] + [pa.field(c, t) for c, t in TYPES.items()])
    t = pa.table({"id": pa.array(range(n), pa.int64()), **{c: pa.array(v, TYPES[c]) for c, v in values.items()}},
                 schema=schema)
    lance.write_dataset(t, uri, schema=schema, enable_stable_row_ids=True)  # file format 2.2 (maps need it)
    # source: id 1 with every nested column null, id 9 (new) too, id 2 with values
    src = pa.table({"id": pa.array([1, 9, 2], pa.int64()),
                    **{c: pa.array([None, None, values[c][0]], TYPES[c]) for c in TYPES}}, schema=schema)
    rows = [{**r, "m": dict(r["m"]) if r["m"] is not None else None} for r in src.to_pylist()]  # Spark maps are dicts
    jobs.upsert(spark, uri, spark.createDataFrame(rows, schema=jobs_schema(spark, uri)), on=["id"])
    got = {r["id"]: r for r in lance.dataset(uri).to_table().to_pylist()}
    assert sorted(got) == [0, 1, 2, 3, 4, 5, 9]
    for c in TYPES:
        assert got[1][c] is None and got[9][c] is None, c
        assert got[2][c] == pa.array(values[c][:1], TYPES[c]).to_pylist()[0], c
        assert got[3][c] == pa.array(values[c][3:4], TYPES[c]).to_pylist()[0], c


def jobs_schema(spark, uri):
    """The dataset's Spark schema, as the lance source reports it."""
    return spark.read.format("lance").load(uri).schema
