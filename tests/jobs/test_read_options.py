"""Read options as Delta and lance-spark name them, the projection, and partition pruning from metadata."""

import datetime as dt
import os

import lance
import pyarrow as pa
import pytest
from datagen import simple_table

import lance_ops.format as lf
from lance_ops.jobs._options import READ_OPTIONS


def read(spark, uri, **options):
    r = spark.read.format("lance")
    for k, v in options.items():
        r = r.option(k, v)
    return r.load(uri)


def ids(df) -> list[int]:
    return sorted(r["id"] for r in df.select("id").collect())


def iso(micros: int) -> str:
    return (dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=micros)).isoformat()


@pytest.fixture
def history(uri):
    """pylance builds three versions (10, 20, 30 rows) and tags version 1 "gold"."""
    lance.write_dataset(simple_table(0, 10), uri)
    lance.write_dataset(simple_table(10, 10), uri, mode="append")
    lance.write_dataset(simple_table(20, 10), uri, mode="append")
    lance.dataset(uri).tags.create("gold", 1)
    return uri


def test_version_as_of_numbers_and_tags(spark, history):
    assert ids(read(spark, history)) == list(range(30))
    assert ids(read(spark, history, versionAsOf=2)) == list(range(20))  # Delta's name
    assert ids(read(spark, history, version="1")) == list(range(10))  # lance-spark's name
    assert ids(read(spark, history, versionAsOf="gold")) == list(range(10))  # a tag
    with pytest.raises(Exception, match="version 7 does not exist"):
        read(spark, history, versionAsOf=7).collect()
    with pytest.raises(Exception, match="versionAsOf='silver' is neither a version number nor a tag"):
        read(spark, history, versionAsOf="silver").collect()


def test_timestamp_as_of_picks_the_version_committed_at_or_before(spark, history):
    stamps = {v: lf.dataset(history, version=v).manifest.timestamp_ns // 1000 for v in (1, 2, 3)}
    assert stamps[1] < stamps[2] < stamps[3]
    cases = [(iso(stamps[2]), 20), (iso(stamps[2] + 1), 20), (iso(stamps[3] - 1), 20), (iso(stamps[3]), 30),
             (iso(stamps[1]).replace("+00:00", "Z"), 10),
             (iso(stamps[2]).replace("+00:00", ""), 20)]  # no offset: UTC
    for when, n in cases:
        assert len(ids(read(spark, history, timestampAsOf=when))) == n, when
    assert len(ids(read(spark, history, timestamp=iso(stamps[2])))) == 20  # alias
    with pytest.raises(Exception, match=r"InvalidOptionError.*timestampAsOf=.* is before the first version \(1"):
        read(spark, history, timestampAsOf=iso(stamps[1] - 1)).collect()
    with pytest.raises(Exception, match=r"timestampAsOf=.* is after the latest version \(3"):
        read(spark, history, timestampAsOf=iso(stamps[3] + 1)).collect()
    with pytest.raises(Exception, match="options versionAsOf and timestampAsOf cannot be given together"):
        read(spark, history, versionAsOf=1, timestampAsOf=iso(stamps[2])).collect()
    with pytest.raises(Exception, match="option timestampAsOf: cannot read 'yesterday' as a timestamp"):
        read(spark, history, timestampAsOf="yesterday").collect()


def test_unknown_options_are_refused_listing_the_known_ones(spark, history):
    with pytest.raises(Exception) as e:
        read(spark, history, versionAsof=1, verison=2).collect()
    msg = str(e.value)
    assert "InvalidOptionError" in msg and "unknown read option 'verison'" in msg
    assert all(name in msg for name in READ_OPTIONS if name != "changed_between")
    with pytest.raises(Exception, match="option batch_size must be at least 1"):
        read(spark, history, batch_size=0).collect()
    with pytest.raises(Exception, match="(?i)unknown write option 'mergeSchemaa'"):
        spark.range(3).write.format("lance").mode("append").option("mergeSchemaa", True).save(history)
    assert lance.dataset(history).version == 3


def test_only_selected_columns_are_decoded(spark, uri):
    """The "extra" column lives in its own data files (pylance add_columns); once they are
    gone, a read that selects other columns still works, so it never opened them."""
    lance.write_dataset(simple_table(0, 40), uri, max_rows_per_file=20)
    lance.dataset(uri).add_columns({"extra": "id * 2"})
    m = lf.dataset(uri).manifest
    extra_id = m.schema.field("extra").id
    extra_files = [df.path for f in m.fragments for df in f.files if extra_id in df.fields]
    assert len(extra_files) == 2
    assert sorted(r["extra"] for r in read(spark, uri).collect()) == [2 * i for i in range(40)]
    for name in extra_files:
        os.remove(os.path.join(uri, "data", name))
    got = read(spark, uri, columns="id, val").where("id > 30").collect()
    assert sorted((r["id"], r["val"]) for r in got) == [(i, f"v{i}") for i in range(31, 40)]
    assert read(spark, uri, columns="id,_rowid").columns == ["id", "_rowid"]
    assert ids(spark.read.format("lance").schema("id long").load(uri)) == list(range(40))  # a user schema too
    with pytest.raises(Exception, match=f"ObjectNotFoundError: .*{extra_files[0][:20]}|{extra_files[1][:20]}"):
        read(spark, uri).collect()  # all columns: the missing files are needed
    with pytest.raises(Exception, match=r"SchemaError.*option columns='id,nope'"):
        read(spark, uri, columns="id,nope").collect()


def test_partitions_whose_metadata_rules_a_filter_out_are_not_read(spark, uri):
    """Six fragments: v1 three, v2 three more, then a delete.  Filters on the metadata columns
    plan only the fragments that can match; the other fragments' files are removed to prove it."""
    lf.write_dataset(simple_table(0, 30), uri, enable_stable_row_ids=True, max_rows_per_file=10)
    lf.write_dataset(simple_table(30, 30), uri, mode="append", max_rows_per_file=10)
    lf.dataset(uri).delete(pa.compute.field("id") == 44)
    df = read(spark, uri, with_metadata=True)

    def planned(where: str) -> int:
        return df.where(where).rdd.getNumPartitions()

    assert planned("id >= 0") == 6  # no metadata filter: every fragment
    assert planned("_rowid = 47") == 1  # point lookup
    assert planned("_rowid IN (3, 55)") == 2
    assert planned("_row_created_at_version > 1") == 3  # incremental readers
    assert planned("_row_created_at_version >= 2 AND _rowid < 40") == 1
    assert planned("_rowaddr >= 4294967296 AND _rowaddr < 8589934592") == 1  # fragment 1
    assert planned("_row_last_updated_at_version > 2") == 1  # an empty scan still has one partition
    frag_of_47 = lance.dataset(uri).get_fragments()[4]
    keep = {df_.path for df_ in frag_of_47.metadata.data_files()}
    for name in os.listdir(os.path.join(uri, "data")):
        if name not in keep:
            os.remove(os.path.join(uri, "data", name))
    got = df.where("_rowid = 47").select("id", "val", "_rowid", "_row_created_at_version").collect()
    assert [r.asDict() for r in got] == [{"id": 47, "val": "v47", "_rowid": 47, "_row_created_at_version": 2}]
    assert df.where("_rowid = 44").count() == 0  # deleted: pruned to the fragment, then filtered
