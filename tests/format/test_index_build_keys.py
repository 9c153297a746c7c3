"""Key order and row sets of the scalar index builders (lance_ops.format.index.build)."""

import numpy as np
import pyarrow as pa
import pytest

from lance_ops.format.index.build.common import dictionary_codes, encode_row_set, sort_order
from lance_ops.format.index.build.zonemap import _zone_starts
from lance_ops.format.index.rowaddr import decode_row_addr_treemap

N = 200_000  # above the sampling threshold: category-like columns take the dictionary path
_I = np.arange(N)


def _columns() -> dict[str, pa.Array]:
    rng = np.random.default_rng(3)
    return {
        "few floats, NaN, nulls": pa.array(np.where(_I % 1000 == 5, np.nan, (_I * 7 % 50) * 1.0), mask=_I % 777 == 0),
        "few strings, nulls": pa.array([f"s{v % 30}" if v % 99 else None for v in _I]),
        "unique floats": pa.array(rng.random(N)),
        "unique ints, nulls": pa.array(rng.permutation(N), mask=_I % 13 == 0),
        "small": pa.array([3.0, None, float("nan"), 1.0, 1.0]),
    }


@pytest.mark.parametrize("name", list(_columns()))
def test_sort_order_nulls_first_nan_last(name):
    values = _columns()[name]
    order = sort_order(values)
    assert sorted(order.tolist()) == list(range(len(values)))
    s = values.take(pa.array(order))
    nulls = values.null_count
    assert s.slice(0, nulls).null_count == nulls
    rest = s.slice(nulls).to_numpy(zero_copy_only=False)
    if rest.dtype.kind == "f":
        finite = rest[~np.isnan(rest)]
        assert np.isnan(rest[len(finite):]).all()
        assert (np.diff(finite) >= 0).all()
    else:
        assert list(rest) == sorted(rest)


def test_dictionary_codes_key_order():
    keys, codes = dictionary_codes(pa.array([2.0, None, float("nan"), 1.0, 2.0, None]))
    assert keys.to_pylist()[:3] == [None, 1.0, 2.0] and np.isnan(keys.to_pylist()[3])
    assert codes.tolist() == [2, 0, 3, 1, 2, 0]


def test_row_set_round_trip_and_layout():
    ids = np.array([(3 << 32) | 7, 5, 1, (3 << 32) | 2, 5], dtype=np.uint64)
    data = encode_row_set(ids)
    assert data[:4] == (2).to_bytes(4, "little")  # two fragments
    assert data[4:8] == (0).to_bytes(4, "little")  # fragment 0 first
    assert decode_row_addr_treemap(data).addrs.tolist() == sorted(set(ids.tolist()))
    assert encode_row_set(np.empty(0, np.uint64)) == b"\0\0\0\0"  # as pylance's empty null bitmap


def test_zone_starts_per_fragment_every_8192_live_rows():
    addrs = np.concatenate([np.arange(20000, dtype=np.uint64), (np.uint64(2) << np.uint64(32)) + np.arange(5, dtype=np.uint64)])
    assert _zone_starts(addrs).tolist() == [0, 8192, 16384, 20000]
