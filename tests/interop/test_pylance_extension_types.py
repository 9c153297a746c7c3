"""Canonical Arrow extension columns on both libraries (issue 34, docs/PYLANCE_TESTS.md):
lance_ops writes an ``arrow.fixed_shape_tensor`` (or ``arrow.uuid``, ``arrow.bool8``,
``arrow.opaque``) column with its serialized parameters (``{"shape":[2,3]}``; it wrote them empty,
and pylance then failed to read the column), and reads such columns back as the extension type,
as pylance does (it returned the storage type).
"""

import lance
import pyarrow as pa
import pytest

import lance_ops.format as lf
from lance_ops.format.arrow_ext import extension_metadata

pytestmark = pytest.mark.interop

IMPLS = {"pylance": lance, "lance_ops": lf}


def _table(n: int = 10) -> pa.Table:
    tensor = pa.fixed_shape_tensor(pa.float32(), [2, 3])
    permuted = pa.fixed_shape_tensor(pa.int8(), [2, 2], dim_names=["h", "w"], permutation=[1, 0])
    return pa.table({
        "tensor": pa.ExtensionArray.from_storage(tensor, pa.FixedSizeListArray.from_arrays(
            pa.array([float(x) for x in range(6 * n)], pa.float32()), 6)),
        "permuted": pa.ExtensionArray.from_storage(permuted, pa.FixedSizeListArray.from_arrays(
            pa.array([x % 100 for x in range(4 * n)], pa.int8()), 4)),
        "uuid": pa.ExtensionArray.from_storage(pa.uuid(), pa.array([bytes([i]) * 16 for i in range(n)], pa.binary(16))),
        "i": pa.array(range(n), pa.int64()),
    })


def test_extension_metadata_serialized():
    assert extension_metadata(pa.fixed_shape_tensor(pa.float32(), [2, 3])) == b'{"shape":[2,3]}'
    assert extension_metadata(pa.opaque(pa.binary(), "t", "v")) == b'{"type_name":"t","vendor_name":"v"}'
    assert extension_metadata(pa.uuid()) == b""


@pytest.mark.parametrize("writer", ["pylance", "lance_ops"])
def test_extension_columns_round_trip(tmp_path, writer):
    table = _table()
    IMPLS[writer].write_dataset(table, tmp_path / "t", data_storage_version="2.2")
    for name, impl in IMPLS.items():
        ds = impl.dataset(tmp_path / "t")
        assert ds.schema == table.schema, name
        assert ds.to_table() == table, name
        assert ds.to_table(filter="i >= 5", columns=["tensor", "uuid"]) == table.slice(5).select(["tensor", "uuid"])
        assert pa.Table.from_batches(ds.to_batches(batch_size=3)) == table, name
    ours = lf.dataset(tmp_path / "t")
    assert ours.scanner(columns=["permuted"]).to_reader().read_all() == table.select(["permuted"])
    assert ours.take([1, 8]) == table.take([1, 8])
    # the other library appends to it
    other = "lance_ops" if writer == "pylance" else "pylance"
    IMPLS[other].write_dataset(table, tmp_path / "t", mode="append")
    for impl in IMPLS.values():
        assert impl.dataset(tmp_path / "t").to_table() == pa.concat_tables([table, table])
