"""The (kind, index_version, row-id mode) -> action table and what the compaction planner does
with an index whose version it does not know."""

import lance
import pyarrow as pa
import pytest

import lance_ops.format as lf
from lance_ops.format.index.handling import INDEX_ACTIONS, IndexAction, index_action
from lance_ops.format.index.metadata import decode_index_section, encode_index_section
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.ops.compaction.index_remap import index_constraints


@pytest.mark.parametrize(
    ("kind", "version", "stable", "action"),
    [
        ("BTREE", 0, True, IndexAction.FOLLOW),  # lancedb 0.40: stable row ids
        ("BTREE", 1, True, IndexAction.REMAP),  # pylance 14: row addresses
        ("BTREE", 0, False, IndexAction.REMAP),
        ("BITMAP", 0, True, IndexAction.FOLLOW),
        ("INVERTED", 2, False, IndexAction.REMAP),
        ("INVERTED", 1, False, IndexAction.UNKNOWN),  # an older layout: never rewritten
        ("INVERTED", 1, True, IndexAction.FOLLOW),
        ("IVF_PQ", 1, True, IndexAction.FOLLOW),
        ("ZONEMAP", 0, True, IndexAction.DROP),
        ("BTREE", 2, False, IndexAction.UNKNOWN),  # newer than lance_ops knows
        ("IVF", 3, False, IndexAction.UNKNOWN),  # IVF_RQ
        ("MINHASHLSH", 0, True, IndexAction.UNKNOWN),
    ],
)
def test_index_action_table(kind, version, stable, action):
    assert index_action(kind, version, stable=stable) is action


def test_table_has_one_entry_per_kind_and_version():
    assert len(INDEX_ACTIONS) == len(set(INDEX_ACTIONS))
    assert all(len(pair) == 2 for pair in INDEX_ACTIONS.values())


def test_unknown_index_version_is_kept_out_of_the_plan_and_named(tmp_path):
    uri = str(tmp_path / "ds")
    ds = lance.write_dataset(pa.table({"id": list(range(400))}), uri, max_rows_per_file=100)
    ds.create_scalar_index("id", "BTREE")
    m = lf.dataset(uri)._manifest
    idx = decode_index_section(m.index_section)
    future = m.with_changes(index_section=encode_index_section([i.with_changes(index_version=9) for i in idx]))
    c = index_constraints(ObjectStore(uri), future)
    assert set(c.blocked) == {0, 1, 2, 3}
    assert c.blocked[0] == ["index 'id_idx' (BTREE) is of a kind lance_ops cannot carry through a rewrite "
                            "(BTREE index_version 9 is not in its table)"]
    dropped = index_constraints(ObjectStore(uri), future, ignore_remap=True)
    assert not dropped.blocked and "ignore_remap=True" in dropped.drops[0][0]
