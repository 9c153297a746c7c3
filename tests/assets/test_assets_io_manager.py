"""LanceIOManager: users' assets written and read as Lance datasets, checked with pylance.

No Spark: the IO manager writes in process (lance_ops.format).  pylance (the reference
implementation) reads every dataset the IO manager writes, with its row ids and row versions.
"""

from datetime import UTC, datetime

import lance
import pandas as pd
import pyarrow as pa
import pytest
from dagster import (
    AssetIn,
    AssetKey,
    DailyPartitionsDefinition,
    Definitions,
    StaticPartitionsDefinition,
    asset,
    materialize,
)

from lance_ops.assets.io_manager import LanceIOManager, LanceStorage

META = ["_rowid", "_row_created_at_version", "_row_last_updated_at_version"]


def pylance(uri, columns=None):
    ds = lance.dataset(uri)
    return ds.to_table(columns=(columns or ds.schema.names) + META).sort_by("_rowid")


def mat(result, key):
    (m,) = [e.event_specific_data.materialization for e in result.get_asset_materialization_events()
            if e.event_specific_data.materialization.asset_key == AssetKey(key)]
    return m


def test_tables_round_trip_with_standard_metadata_and_the_version_as_data_version(tmp_path, instance):
    rows = {"n": 3}

    @asset(key_prefix=["sales"], metadata={"mode": "overwrite"})
    def orders() -> pa.Table:
        return pa.table({"id": pa.array(range(rows["n"]), pa.int64()), "amount": [1.5 * i for i in range(rows["n"])]})

    @asset(ins={"orders": AssetIn(key=["sales", "orders"], metadata={"columns": ["amount"]})})
    def total(orders: pd.DataFrame) -> pa.Table:
        assert list(orders.columns) == ["amount"]  # column selection through input metadata
        return pa.table({"total": [float(orders["amount"].sum())]})

    @asset(ins={"orders": AssetIn(key=["sales", "orders"])})
    def streamed(orders: pa.RecordBatchReader) -> pa.RecordBatchReader:
        return pa.RecordBatchReader.from_batches(orders.schema, list(orders))

    io = LanceIOManager(root_uri=str(tmp_path / "lake"))
    first = materialize([orders, total, streamed], resources={"io_manager": io}, instance=instance)
    m = mat(first, ["sales", "orders"])
    md = {k: v.value for k, v in m.metadata.items()}
    uri = str(tmp_path / "lake" / "sales" / "orders.lance")
    assert md["dagster/uri"] == uri and md["dagster/table_name"] == "sales.orders" and md["dagster/row_count"] == 3
    assert [(c.name, c.type) for c in md["dagster/column_schema"].columns] == [("id", "int64"), ("amount", "double")]
    assert md["lance/version"] == 1 and m.tags["dagster/data_version"] == "1"
    assert pylance(str(tmp_path / "lake" / "total.lance"))["total"].to_pylist() == [4.5]
    assert pylance(str(tmp_path / "lake" / "streamed.lance"), ["id"])["id"].to_pylist() == [0, 1, 2]
    import lance_ops.format as lf

    assert lf.dataset(uri).has_stable_row_ids  # created by the IO manager: change feeds work

    rows["n"] = 5  # overwrite: a new version with the new rows; history kept
    second = materialize([orders], resources={"io_manager": io}, instance=instance)
    assert mat(second, ["sales", "orders"]).tags["dagster/data_version"] == "2"
    assert pylance(uri, ["id"])["id"].to_pylist() == [0, 1, 2, 3, 4]
    assert [v["version"] for v in lance.dataset(uri).versions()] == [1, 2]
    assert instance.get_latest_data_version_record(AssetKey(["sales", "orders"])) is not None


def test_append_and_merge_modes_keep_row_ids(tmp_path, instance):
    batch = {"rows": pa.table({"id": pa.array([1, 2, 3], pa.int64()), "v": ["a", "b", "c"]})}

    @asset(metadata={"mode": "append"})
    def log() -> pa.Table:
        return batch["rows"]

    @asset(metadata={"mode": "merge", "merge_on": ["id"]})
    def users() -> pd.DataFrame:
        return batch["rows"].to_pandas()

    io = LanceIOManager(root_uri=str(tmp_path))
    materialize([log, users], resources={"io_manager": io}, instance=instance)
    batch["rows"] = pa.table({"id": pa.array([2, 4], pa.int64()), "v": ["B", "d"]})
    result = materialize([log, users], resources={"io_manager": io}, instance=instance)
    assert pylance(str(tmp_path / "log.lance"), ["id"])["id"].to_pylist() == [1, 2, 3, 2, 4]
    merged = pylance(str(tmp_path / "users.lance"))
    by_id = {r["id"]: r for r in merged.to_pylist()}
    assert {i: r["v"] for i, r in by_id.items()} == {1: "a", 2: "B", 3: "c", 4: "d"}
    assert by_id[2]["_rowid"] == 1 and by_id[2]["_row_created_at_version"] == 1  # updated in place: same row id
    assert by_id[2]["_row_last_updated_at_version"] == 2 and by_id[4]["_row_created_at_version"] == 2
    assert by_id[1]["_row_last_updated_at_version"] == 1
    md = {k: v.value for k, v in mat(result, ["users"]).metadata.items()}
    assert (md["num_updated_rows"], md["num_inserted_rows"], md["dagster/row_count"]) == (1, 1, 4)
    # the change feed of the merge is one update and one insert
    import lance_ops.format as lf

    cf = lf.dataset(str(tmp_path / "users.lance")).change_feed(1, 2)
    assert sorted(cf["_change_type"].to_pylist()) == ["insert", "update_postimage", "update_preimage"]


def test_schema_mode_merge_adds_new_columns_on_append_and_merge(tmp_path, instance):
    batch = {"rows": pa.table({"id": pa.array([1, 2], pa.int64()), "v": ["a", "b"]})}

    @asset(metadata={"mode": "append"})
    def log() -> pa.Table:
        return batch["rows"]

    @asset(metadata={"mode": "merge", "merge_on": ["id"]})
    def users() -> pa.Table:
        return batch["rows"]

    strict = LanceIOManager(root_uri=str(tmp_path))
    materialize([log, users], resources={"io_manager": strict}, instance=instance)
    batch["rows"] = pa.table({"id": pa.array([2, 3], pa.int64()), "v": ["B", "c"], "w": pa.array([20, 30], pa.int32())})
    # without schema_mode the new column is refused and nothing changes
    failed = materialize([log], resources={"io_manager": strict}, instance=instance, raise_on_error=False)
    assert not failed.success and lance.dataset(str(tmp_path / "log.lance")).version == 1
    io = LanceIOManager(root_uri=str(tmp_path), schema_mode="merge")
    result = materialize([log, users], resources={"io_manager": io}, instance=instance)
    log_ds = lance.dataset(str(tmp_path / "log.lance"))
    assert log_ds.schema.field("w").type == pa.int32() and log_ds.schema.field("w").nullable
    assert pylance(str(tmp_path / "log.lance"), ["id", "w"]).select(["id", "w"]).to_pydict() == {
        "id": [1, 2, 2, 3], "w": [None, None, 20, 30]}
    users_rows = {r["id"]: (r["v"], r["w"]) for r in pylance(str(tmp_path / "users.lance")).to_pylist()}
    assert users_rows == {1: ("a", None), 2: ("B", 20), 3: ("c", 30)}
    assert {k: v.value for k, v in mat(result, ["log"]).metadata.items()}["columns_added"] == "w"
    # pylance keeps evolving what the IO manager evolved
    lance.dataset(str(tmp_path / "users.lance")).add_columns({"x": "id + w"})
    assert sorted(lance.dataset(str(tmp_path / "users.lance")).to_table(columns=["x"])["x"].to_pylist(),
                  key=lambda v: (v is None, v)) == [22, 33, None]


def test_time_partitions_are_replaced_on_rerun_and_loaded_per_partition(tmp_path, instance):
    days = DailyPartitionsDefinition(start_date="2026-01-01")
    amounts = {"x": 1.0}

    @asset(partitions_def=days, metadata={"partition_expr": "ts"})
    def events(context) -> pa.Table:
        start = context.partition_time_window.start
        ts = pa.array([start.replace(hour=h) for h in (1, 5, 9)], pa.timestamp("us", tz="UTC"))
        return pa.table({"ts": ts, "amount": [amounts["x"]] * 3})

    @asset(partitions_def=days, ins={"events": AssetIn(metadata={"columns": ["amount"]})})
    def daily_sum(events: pa.Table) -> None:
        assert events.num_rows == 3 and set(events["amount"].to_pylist()) == {amounts["x"]}

    io = LanceIOManager(root_uri=str(tmp_path))
    uri = str(tmp_path / "events.lance")
    for day in ("2026-01-01", "2026-01-02"):
        materialize([events, daily_sum], partition_key=day, resources={"io_manager": io}, instance=instance)
    amounts["x"] = 7.0
    rerun = materialize([events, daily_sum], partition_key="2026-01-01", resources={"io_manager": io},
                        instance=instance)
    md = {k: v.value for k, v in mat(rerun, ["events"]).metadata.items()}
    assert md["rows_replaced"] == 3 and md["lance/version"] == 3
    t = pylance(uri)
    day_of = [v.date().isoformat() for v in t["ts"].to_pylist()]
    assert sorted(zip(day_of, t["amount"].to_pylist(), strict=True)) == [
        ("2026-01-01", 7.0)] * 3 + [("2026-01-02", 1.0)] * 3
    assert set(t.filter(pa.compute.equal(t["amount"], 1.0))["_row_created_at_version"].to_pylist()) == {2}

    @asset(partitions_def=days, name="events", metadata={"partition_expr": "ts"})
    def bad_events(context) -> pa.Table:  # a row of another day in partition 2026-01-03
        return pa.table({"ts": pa.array([datetime(2026, 1, 5, tzinfo=UTC)], pa.timestamp("us", tz="UTC")),
                         "amount": [0.0]})

    bad = materialize([bad_events], partition_key="2026-01-03", resources={"io_manager": io}, instance=instance,
                      raise_on_error=False)
    assert not bad.success
    (err,) = [e.event_specific_data.error for e in bad.all_events if e.event_type_value == "STEP_FAILURE"]
    assert "1 of 1 rows are outside partition(s) ['2026-01-03']" in err.to_string()
    assert [v["version"] for v in lance.dataset(uri).versions()] == [1, 2, 3]


def test_static_partitions_upsert_within_the_partition(tmp_path, instance):
    regions = StaticPartitionsDefinition(["eu", "us"])
    data = {"eu": [(1, 10)], "us": [(1, 20)]}

    @asset(partitions_def=regions, metadata={"partition_expr": "region", "mode": "merge", "merge_on": ["region", "id"]})
    def accounts(context) -> pa.Table:
        rows = data[context.partition_key]
        return pa.table({"region": [context.partition_key] * len(rows), "id": pa.array([r[0] for r in rows], pa.int64()),
                         "balance": pa.array([r[1] for r in rows], pa.int64())})

    io = LanceIOManager(root_uri=str(tmp_path))
    for key in ("eu", "us"):
        materialize([accounts], partition_key=key, resources={"io_manager": io}, instance=instance)
    data["eu"] = [(1, 11), (2, 30)]
    materialize([accounts], partition_key="eu", resources={"io_manager": io}, instance=instance)
    t = pylance(str(tmp_path / "accounts.lance"))
    assert sorted(zip(t["region"].to_pylist(), t["id"].to_pylist(), t["balance"].to_pylist(), strict=True)) == [
        ("eu", 1, 11), ("eu", 2, 30), ("us", 1, 20)]
    eu1 = [r for r in t.to_pylist() if (r["region"], r["id"]) == ("eu", 1)][0]
    assert eu1["_rowid"] == 0 and eu1["_row_last_updated_at_version"] == 3


def test_storage_options_come_from_a_resource(tmp_path, instance, monkeypatch):
    @asset
    def t() -> pa.Table:
        return pa.table({"a": [1]})

    monkeypatch.delenv("LANCE_TEST_SECRET", raising=False)
    io = LanceIOManager(root_uri=str(tmp_path), storage=LanceStorage(storage_options_env={"token": "LANCE_TEST_SECRET"}))
    result = materialize([t], resources={"io_manager": io}, instance=instance, raise_on_error=False)
    assert not result.success
    assert "storage option 'token' comes from $LANCE_TEST_SECRET, which is not set" in "\n".join(
        e.event_specific_data.error.to_string() for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    defs = Definitions(assets=[t], resources={"io_manager": io})
    assert defs.resources["io_manager"].storage.storage_options_env == {"token": "LANCE_TEST_SECRET"}


def test_unknown_output_type_is_refused(tmp_path, instance):
    @asset
    def bad() -> dict:
        return {"a": 1}

    result = materialize([bad], resources={"io_manager": LanceIOManager(root_uri=str(tmp_path))}, instance=instance,
                         raise_on_error=False)
    assert not result.success
    with pytest.raises(TypeError, match="got dict"):
        from lance_ops.assets.io_manager import _to_arrow

        _to_arrow({"a": 1})
