"""What each maintenance operation does with an index, by (kind, ``index_version``, row-id mode).

The one table lance_ops consults before it touches an index's files or bitmap.  Facts verified
on these machines (pylance 14.0.2; lancedb 0.40.0 with Lance core 13), by reading the row
column of the index files each client wrote on datasets whose row ids and row addresses differ:

==============  ================  =====================  ======================================
kind            ``index_version``  written by             entries hold
==============  ================  =====================  ======================================
BTREE           0                 lancedb 0.40; pylance  stable row ids with stable row ids
                                  14 without stable ids  (lancedb), row addresses without
BTREE           1                 pylance 14, stable     row addresses (``page_data`` ``ids``)
                                  row ids
BITMAP          0                 both                   row ids (= addresses without stable)
LABEL_LIST      1 (0: older)      both                   row ids (= addresses without stable)
NGRAM           0                 pylance                row ids (= addresses without stable)
INVERTED        2                 both (and lance_ops'   row ids (= addresses without stable)
                                  optimize_indices)
IVF_*           1                 both                   row ids (= addresses without stable)
ZONEMAP,        0                 pylance                row addresses, never remapped: pylance
BLOOMFILTER                                              drops coverage of rewritten fragments
==============  ================  =====================  ======================================

Actions (:class:`IndexAction`) a rewrite of covered fragments (compaction, deletion
materialisation) takes:

- ``REMAP``: the entries are row addresses; lance_ops writes a remapped copy
  (:mod:`.remap`) and lists it in the Rewrite's ``rewritten_indices``.
- ``FOLLOW``: the entries are stable row ids, which a rewrite keeps; the bitmap moves to the
  new fragments and no file changes.  An Update whose new fragments kept every row id (a
  "pure rewrite") may extend such an index over them (:mod:`.coverage`).
- ``DROP``: entries are row addresses lance_ops (like pylance) does not remap; the rewritten
  fragments leave the bitmap and are scanned until the index is rebuilt.
- ``UNKNOWN``: a kind or version lance_ops has not verified.  Its files are never rewritten:
  the compaction planner leaves the fragments it covers out of the plan (or, with
  ``ignore_remap=True``, drops their coverage); both are reported in the metrics naming the
  index, its kind and version.
"""

from dataclasses import dataclass
from enum import StrEnum

from lance_ops.format.index.metadata import IndexMetadata


class IndexAction(StrEnum):
    """What a rewrite does with an index (see the module docstring)."""

    REMAP = "remap"
    FOLLOW = "follow"
    DROP = "drop"
    UNKNOWN = "unknown"


_R, _F, _D, _U = IndexAction.REMAP, IndexAction.FOLLOW, IndexAction.DROP, IndexAction.UNKNOWN
_IVF = ("IVF_PQ", "IVF_FLAT", "IVF_SQ", "IVF_HNSW_PQ", "IVF_HNSW_SQ", "IVF_HNSW_FLAT")

#: (kind, index_version) -> (action without stable row ids, action with them)
INDEX_ACTIONS: dict[tuple[str, int], tuple[IndexAction, IndexAction]] = {
    ("BTREE", 0): (_R, _F),  # lancedb 0.40 (Lance 13) and older pylance: row ids
    ("BTREE", 1): (_R, _R),  # pylance 14: row addresses even with stable row ids
    ("BITMAP", 0): (_R, _F),
    ("LABEL_LIST", 0): (_R, _F),  # older pylance: the same files, without the null-rows buffer
    ("LABEL_LIST", 1): (_R, _F),
    ("NGRAM", 0): (_R, _F),
    # INVERTED 0/1 (older pylance) have other file layouts: never rewritten, but they hold row ids
    ("INVERTED", 0): (_U, _F),
    ("INVERTED", 1): (_U, _F),
    ("INVERTED", 2): (_R, _F),
    ("ZONEMAP", 0): (_D, _D),
    ("BLOOMFILTER", 0): (_D, _D),
    **{(k, 1): (_R, _F) for k in _IVF},
}
#: kinds whose remapped copy keeps deleted rows as tombstones (see :mod:`.remap`)
TOMBSTONE_KINDS = frozenset({"INVERTED", *_IVF})


@dataclass(frozen=True)
class IndexHandling:
    """The table's answer for one index segment."""

    action: IndexAction
    reason: str = ""

    @property
    def holds_row_ids(self) -> bool:
        return self.action is IndexAction.FOLLOW


def index_action(kind: str, index_version: int, *, stable: bool) -> IndexAction:
    """The rewrite action for ``kind`` at ``index_version`` (``UNKNOWN`` when not in the table)."""
    pair = INDEX_ACTIONS.get((kind, index_version))
    if pair is None:
        return IndexAction.UNKNOWN
    return pair[1] if stable else pair[0]


def handling(index: IndexMetadata, *, stable: bool) -> IndexHandling:
    """How maintenance treats ``index`` on a dataset with (``stable``) or without stable row ids.

    An index stored under another base path (``base_id``: a clone's source) or without a
    fragment bitmap cannot be rewritten; it is ``UNKNOWN`` unless it only needs its bitmap
    moved or dropped.
    """
    action = index_action(index.kind, index.index_version, stable=stable)
    label = f"{index.kind} index_version {index.index_version}"
    if action is IndexAction.UNKNOWN:
        return IndexHandling(action, f"is of a kind lance_ops cannot carry through a rewrite ({label} is not in its table)")
    if index.fragment_ids is None:
        return IndexHandling(IndexAction.UNKNOWN, "stores no fragment bitmap")
    if action is IndexAction.REMAP and index.base_id is not None:
        return IndexHandling(IndexAction.UNKNOWN, f"lives under base path {index.base_id} (a clone's source)")
    return IndexHandling(action)
