"""The Spark source plans only the fragments whose ZONEMAP zones can match the pushed filters
(``prune_fragments``, as the in-process scanner prunes); answers equal an unpruned read."""

import os

import numpy as np
import pyarrow as pa
import pytest

import lance_ops.format as lf

FRAGMENTS = 10
ROWS = 2000


def read(spark, uri, **options):
    r = spark.read.format("lance")
    for k, v in options.items():
        r = r.option(k, v)
    return r.load(uri)


@pytest.fixture
def clustered(tmp_path):
    """10 fragments of 200 rows, ``k`` and ``s`` ascending across them (a clustered table), a
    ZONEMAP index on each; ``id`` (a shuffled copy) has none."""
    uri = str(tmp_path / "ds")
    k = np.arange(ROWS)
    t = pa.table({"id": np.random.default_rng(3).permutation(ROWS), "k": k, "s": [f"s{i:05d}" for i in k]})
    lf.write_dataset(t, uri, max_rows_per_file=ROWS // FRAGMENTS, data_storage_version="2.2")
    ds = lf.dataset(uri)
    ds.create_scalar_index("k", "ZONEMAP")
    ds.create_scalar_index("s", "ZONEMAP")
    return uri


def rows(df):
    return sorted(tuple(r) for r in df.select("id", "k", "s").collect())


CASES = [  # (filter, fragments planned)
    ("k < 150", 1),
    ("k >= 1900", 1),
    ("k IN (5, 1805)", 2),
    ("k BETWEEN 390 AND 410", 2),  # Spark pushes >= and <=
    ("s = 's00450'", 1),
    ("k > 100 AND s < 's00350'", 2),
    ("k = 5000", 0),  # no zone can hold it: nothing read (one empty partition)
    ("k IS NULL", 0),
    ("id < 150", FRAGMENTS),  # no zone map on id
    ("k != 5", FRAGMENTS),  # not judged by zones
    ("k < 150 OR id < 5", FRAGMENTS),  # Spark pushes no OR: nothing to prune by
]


@pytest.mark.parametrize(("where", "planned"), CASES)
def test_fragments_read_by_zone_maps_and_answers_as_unpruned(spark, clustered, where, planned):
    pruned = read(spark, clustered).where(where)
    unpruned = read(spark, clustered, pushDownFilters=False).where(where)
    assert read(spark, clustered, pushDownFilters=False).rdd.getNumPartitions() == FRAGMENTS
    assert pruned.rdd.getNumPartitions() == max(planned, 1)
    assert rows(pruned) == rows(unpruned)
    assert len(rows(pruned)) == lf.dataset(clustered).count_rows(filter=where.replace("!=", "<>"))


def test_fragments_ruled_out_are_never_opened(spark, clustered):
    """Every data file but the first fragment's removed: a filter the zone map confines to it
    still reads, so no other file was opened."""
    first = lf.dataset(clustered).get_fragments()[0]
    keep = {f.path for f in first.metadata.files}
    for name in os.listdir(os.path.join(clustered, "data")):
        if name not in keep:
            os.remove(os.path.join(clustered, "data", name))
    got = read(spark, clustered).where("k < 150 AND s >= 's00100'").select("k").collect()
    assert sorted(r["k"] for r in got) == list(range(100, 150))
