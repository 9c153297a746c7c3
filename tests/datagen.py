"""Test data shared by the suites: tables with a rich schema."""

import datetime as dt
import decimal

import numpy as np
import pyarrow as pa

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
