"""Batch sizes of a filtered scan on both libraries (issue 34, docs/PYLANCE_TESTS.md): with
``late_materialization`` on (True or a list of columns) pylance refills each batch to
``batch_size`` rows after the filter; without it a batch keeps the rows of its read batch that
passed."""

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_ops.format as lf

pytestmark = pytest.mark.interop

IMPLS = {"pylance": lance, "lance_ops": lf}


@pytest.mark.parametrize("late", [True, False, None, ["values"]])
@pytest.mark.parametrize(("predicate", "batch_size"), [("filter % 2 == 0", 32), ("filter % 3 == 0", 32),
                                                       ("filter < 500", 100)])
def test_filtered_batch_sizes_as_pylance(tmp_path, late, predicate, batch_size):
    table = pa.table({"filter": np.arange(32 * 32), "values": np.arange(32 * 32)})
    got = {}
    for name, impl in IMPLS.items():
        ds = impl.write_dataset(table, tmp_path / name, data_storage_version="2.2", max_rows_per_file=10000)
        kw = {} if late is None else {"late_materialization": late}
        batches = list(ds.to_batches(columns=["values"], filter=predicate, batch_size=batch_size, **kw))
        got[name] = ([b.num_rows for b in batches], pa.Table.from_batches(batches).to_pydict())
    assert got["lance_ops"] == got["pylance"]
