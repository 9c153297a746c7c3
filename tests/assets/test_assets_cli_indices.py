"""``lance-ops inspect`` lists every index with its coverage."""

import io

import lance
from index_support import build
from test_assets_cli import table_rows

from lance_ops.cli import main


def test_inspect_lists_indices_with_coverage(tmp_path):
    uri = str(tmp_path / "ds")
    build(uri, kinds=["BTREE", "IVF_PQ"], rows=1200)
    lance.write_dataset(lance.dataset(uri).to_table(limit=300), uri, mode="append")  # no index covers it
    buf = io.StringIO()
    assert main(["inspect", uri], out=buf) == 0
    rows = {r[0]: r for r in table_rows(buf.getvalue(), "name  type  fields")}
    assert rows["btree_idx"][:7] == ["btree_idx", "BTree", "id", "1", "1200", "300", "80.0%"]
    assert rows["ivf_pq_idx"][:7] == ["ivf_pq_idx", "IVF_PQ", "v_ivf_pq", "1", "1200", "300", "80.0%"]
    assert rows["btree_idx"][7] == "0-1"
