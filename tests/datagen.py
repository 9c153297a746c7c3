"""Test data shared by the suites: tables with a rich schema, and every column kind pylance 14 writes."""

import datetime as dt
import decimal

import numpy as np
import pyarrow as pa
from lance.blob import blob_array, blob_field

META = ["_rowid", "_row_created_at_version", "_row_last_updated_at_version"]


def simple_table(start: int, n: int) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table(
        {
            "id": ids,
            "val": pa.array([f"v{i}" for i in ids]),
            "score": (ids * 0.5).astype(np.float64),
        }
    )


def rich_table(n: int = 50, seed: int = 0) -> pa.Table:
    """Many 2.0 types, with nulls at every level 2.0 allows."""
    rng = np.random.default_rng(seed)
    mask = rng.random(n) < 0.2
    ints = rng.integers(-1000, 1000, n)

    def nullable(values, typ):
        return pa.array([None if m else v for v, m in zip(values, mask, strict=True)], type=typ)

    lists = [None if i % 7 == 3 else ([] if i % 5 == 0 else [int(x) for x in range(i % 4)]) for i in range(n)]
    structs = [{"x": int(i), "y": None if i % 3 == 0 else f"s{i}"} for i in range(n)]
    return pa.table(
        {
            "i8": nullable(ints % 100, pa.int8()),
            "i64": pa.array(ints, type=pa.int64()),
            "u32": nullable(np.abs(ints), pa.uint32()),
            "f32": nullable(ints / 3, pa.float32()),
            "f64": pa.array(rng.random(n)),
            "b": nullable(ints % 2 == 0, pa.bool_()),
            "s": nullable([f"str{i}" for i in range(n)], pa.string()),
            "ls": nullable([f"large{i}" * (i % 3) for i in range(n)], pa.large_string()),
            "bin": nullable([bytes([i % 256]) * (i % 5) for i in range(n)], pa.binary()),
            "fsb": nullable([bytes([i % 256]) * 4 for i in range(n)], pa.binary(4)),
            "dec": nullable([decimal.Decimal(i) / 100 for i in range(n)], pa.decimal128(10, 2)),
            "d32": nullable([dt.date(2020, 1, 1) + dt.timedelta(days=i) for i in range(n)], pa.date32()),
            "ts": nullable([dt.datetime(2024, 1, 1) + dt.timedelta(seconds=i) for i in range(n)], pa.timestamp("us")),
            "tstz": nullable([dt.datetime(2024, 1, 1) + dt.timedelta(seconds=i) for i in range(n)], pa.timestamp("ns", "UTC")),
            "vec": pa.array([[float(i), float(i + 1)] for i in range(n)], type=pa.list_(pa.float32(), 2)),
            "lst": pa.array(lists, type=pa.list_(pa.int32())),
            "st": pa.array(structs, type=pa.struct([("x", pa.int64()), ("y", pa.string())])),
            "lstst": pa.array([[s] if i % 2 else [] for i, s in enumerate(structs)],
                              type=pa.list_(pa.struct([("x", pa.int64()), ("y", pa.string())]))),
        }
    )


def nested_table(n: int = 2000, seed: int = 0, null_structs: bool = True) -> pa.Table:
    """Deeper nesting (lists of lists, lists of structs with lists, large lists), nulls and empty
    lists at every level, a constant column, low-cardinality strings and random floats."""
    rng = np.random.default_rng(seed)

    def maybe(i: int, v, k: int = 7):
        return None if i % k == 3 else v

    ll = [maybe(i, [maybe(j, list(range(j % 3)), 5) for j in range(i % 4)]) for i in range(n)]
    ls = [
        maybe(i, [
            None if null_structs and (i + j) % 6 == 1 else {"a": j, "tags": maybe(j, [f"t{j}"] * (j % 3), 4)}
            for j in range(i % 3)
        ])
        for i in range(n)
    ]
    st = [
        None if null_structs and i % 9 == 4 else {"inner": {"v": maybe(i, float(i), 5)}, "l": maybe(i, [i] * (i % 2))}
        for i in range(n)
    ]
    return pa.table(
        {
            "id": np.arange(n, dtype=np.int64),
            "ll": pa.array(ll, type=pa.list_(pa.list_(pa.int64()))),
            "ls": pa.array(ls, type=pa.list_(pa.struct([("a", pa.int32()), ("tags", pa.list_(pa.string()))]))),
            "st": pa.array(st, type=pa.struct([("inner", pa.struct([("v", pa.float64())])), ("l", pa.list_(pa.int32()))])),
            "big": pa.array([maybe(i, list(range(i % 5))) for i in range(n)], type=pa.large_list(pa.int16())),
            "const": pa.array(np.full(n, 7, dtype=np.int32)),
            "cat": pa.array([f"cat{i % 5}" for i in range(n)]),
            "rnd": pa.array(rng.standard_normal(n)),
        }
    )


def _blob_values(ids: range) -> list[bytes | None]:
    # inline payloads, and one packed one (over 64 KiB) at 2.2
    return [None if i % 3 == 0 else bytes([i % 251]) * (70_000 if i % 7 == 2 else i * 31 + 1) for i in ids]


def kinds_table(version: str, ids: range) -> pa.Table:
    """One row per id of every column kind pylance 14 writes at ``version``."""
    idx = list(ids)

    def nul(k: int, v, i: int):
        return None if i % k == 1 else v

    st = pa.struct([("x", pa.int64()), ("y", pa.string())])
    cols: dict[str, tuple[pa.Field | pa.DataType, list | pa.Array]] = {
        "i8": (pa.int8(), [nul(4, i % 100, i) for i in idx]),
        "u32": (pa.uint32(), [nul(5, i * 7, i) for i in idx]),
        "f32": (pa.float32(), [nul(4, i / 3, i) for i in idx]),
        "f64": (pa.float64(), [i * 0.25 for i in idx]),
        "b": (pa.bool_(), [nul(3, i % 2 == 0, i) for i in idx]),
        "s": (pa.string(), [nul(4, f"s{i}", i) for i in idx]),
        "ls": (pa.large_string(), [nul(5, "L" * (i % 4), i) for i in idx]),
        "bin": (pa.binary(), [nul(3, bytes([i % 256]) * (i % 5), i) for i in idx]),
        "big_bin": (pa.binary(), [nul(6, b"x" * (40_000 if i % 5 == 0 else 9) + bytes([i % 256]), i) for i in idx]),
        "fsb": (pa.binary(4), [nul(4, bytes([i % 256]) * 4, i) for i in idx]),
        "dec": (pa.decimal128(10, 2), [nul(5, decimal.Decimal(i) / 100, i) for i in idx]),
        "d32": (pa.date32(), [nul(4, dt.date(2020, 1, 1) + dt.timedelta(days=i), i) for i in idx]),
        "ts_ns": (pa.timestamp("ns"), [nul(4, dt.datetime(2024, 1, 1) + dt.timedelta(seconds=i), i) for i in idx]),
        "ts_us": (pa.timestamp("us"), [nul(5, dt.datetime(2024, 1, 1) + dt.timedelta(minutes=i), i) for i in idx]),
        "tstz": (pa.timestamp("ns", "UTC"), [nul(3, dt.datetime(2024, 1, 1) + dt.timedelta(hours=i), i) for i in idx]),
        "dict": (pa.dictionary(pa.int32(), pa.string()), [nul(4, f"k{i % 3}", i) for i in idx]),
        "dict_int": (pa.dictionary(pa.int32(), pa.int64()), [nul(3, i % 4 * 1000, i) for i in idx]),
        "f16": (pa.float16(), [nul(4, np.float16(i / 2), i) for i in idx]),
        "i16": (pa.int16(), [nul(5, -i, i) for i in idx]),
        "u64": (pa.uint64(), [nul(4, 2**40 + i, i) for i in idx]),
        "d64": (pa.date64(), [nul(4, dt.date(2021, 1, 1) + dt.timedelta(days=i), i) for i in idx]),
        "t32": (pa.time32("ms"), [nul(4, dt.time(1, i % 60), i) for i in idx]),
        "t64": (pa.time64("ns"), [nul(5, dt.time(2, i % 60, 1), i) for i in idx]),
        "dur": (pa.duration("us"), [nul(4, dt.timedelta(seconds=i), i) for i in idx]),
        "tz_ms": (pa.timestamp("ms", "Europe/Paris"), [nul(4, dt.datetime(2024, 6, 1, i % 24), i) for i in idx]),
        "lbin": (pa.large_binary(), [nul(4, b"y" * (i % 6), i) for i in idx]),
        "lst": (pa.list_(pa.int32()), [nul(5, list(range(i % 4)), i) for i in idx]),
        "llst": (pa.large_list(pa.string()), [nul(6, [f"s{i}"] * (i % 3), i) for i in idx]),
        # (2.0 has no struct validity: pylance refuses null structs there)
        "st": (st, [(nul(5, s, i) if version != "2.0" else s) for i, s in ((i, {"x": i, "y": None if i % 3 else "y"}) for i in idx)]),
        "lst_st": (pa.list_(st), [nul(5, [{"x": i, "y": None if i % 2 else "b"}], i) for i in idx]),
        "vec": (pa.list_(pa.float32(), 3), [nul(8, [i, i + 0.5, -i], i) for i in idx]),
        "nested_vec": (pa.list_(pa.list_(pa.int16(), 2), 2),
                       [nul(6, [[i, None if i % 4 else i], None if i % 5 == 0 else [1, 2]], i) for i in idx]),
    }
    fields = [pa.field("id", pa.int64())]
    arrays: list[pa.Array] = [pa.array(idx, pa.int64())]
    for name, (typ, values) in cols.items():
        arr = pa.array(values, typ.value_type).dictionary_encode() if pa.types.is_dictionary(typ) else pa.array(values, typ)
        fields.append(pa.field(name, arr.type))
        arrays.append(arr)
    blobs = _blob_values(ids)
    lb = pa.field("lb_blob", pa.large_binary(), metadata={"lance-encoding:blob": "true"})
    if version == "2.2":
        m = pa.map_(pa.string(), pa.int64())
        fields += [pa.field("map", m), blob_field("blob"), lb]
        arrays += [pa.array([nul(4, [(f"k{j}", i * j) for j in range(i % 3)], i) for i in idx], m),
                   blob_array(blobs), pa.array(blobs, pa.large_binary())]
    elif version == "2.0":  # (pylance 14 refuses lance-encoding:blob columns at 2.1)
        fields.append(lb)
        arrays.append(pa.array(blobs, pa.large_binary()))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))
