"""Fragment pruning by BTREE indices: which fragments hold a row a filter may match.

A BTREE segment (:mod:`lance_ops.format.index.build.btree`) holds every indexed value sorted with
its row address, in pages of rows whose ``min`` / ``max`` the lookup file lists.  For a predicate
of the zone-map grammar (:mod:`.zone_pruning`: comparisons, ``BETWEEN``, ``IN``, ``IS NULL``
of one column against literals, under ``AND`` / ``OR``) on an indexed column, the pages whose
range may match are read, the predicate is evaluated exactly on their values (lance_ops' own SQL
translation, as the scan's), and the fragments of the matching addresses are the only covered
fragments that may match.  Fragments the index does not cover are always read, and every row
read is still filtered exactly: the index decides which fragments are opened, never which rows
are returned.  An index is used only when its rows are addresses (no stable row ids), it is the
two-file layout, and at most half of its pages (or :data:`SMALL_PAGES`) may match: a broad
predicate would read most of the index to save little.
"""

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from sqlglot import exp

from lance_ops.format.errors import LanceOpsError
from lance_ops.format.file.reader import DataFileReader
from lance_ops.format.index.metadata import IndexMetadata, decode_index_section, user_indices
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.read.filters import resolve_filter
from lance_ops.format.read.zone_pruning import Zone, judge_leaf, query_text
from lance_ops.format.sql import parse_sql
from lance_ops.format.table.fragment import FragmentMetadata
from lance_ops.format.table.manifest import Manifest

DATA_FILE, LOOKUP_FILE = "page_data.lance", "page_lookup.lance"
SMALL_PAGES = 4


@dataclass(frozen=True)
class _Segment:
    index: IndexMetadata
    covered: frozenset[int]

    def _reader(self, store: ObjectStore, name: str) -> DataFileReader:
        size = next((f.size_bytes for f in self.index.files or () if f.path == name), None)
        return DataFileReader(store, f"{self.index.directory}/{name}", file_size=size)


def _segments(store: ObjectStore, manifest: Manifest) -> dict[str, list[_Segment]]:
    """Column name -> the usable BTREE segments covering a live fragment."""
    if not manifest.index_section or manifest.uses_stable_row_ids:
        return {}
    top = {f.id: f.name for f in manifest.schema.top_level()}
    live = {f.id for f in manifest.fragments}
    out: dict[str, list[_Segment]] = {}
    for idx in user_indices(decode_index_section(manifest.index_section, store.uri)):
        if idx.kind != "BTREE" or len(idx.fields) != 1 or idx.fields[0] not in top or idx.fragment_ids is None:
            continue
        if idx.files is None or {f.path for f in idx.files} != {DATA_FILE, LOOKUP_FILE}:
            continue
        covered = frozenset(idx.fragment_ids & live)
        if covered:
            out.setdefault(top[idx.fields[0]], []).append(_Segment(idx, covered))
    return out


def _leaf_fragments(
    store: ObjectStore, manifest: Manifest, node: exp.Expr, judged: tuple[str, Callable[[Zone], bool]], seg: _Segment
) -> set[int] | None:
    """Covered fragments holding a row matching ``node``; None when too many pages may match.
    A page's ``min`` is its first value, null when it starts with nulls (sorted first): such a
    page with a non-null ``max`` may hold any value up to it, so it is always read."""
    col, judge = judged
    reader = seg._reader(store, LOOKUP_FILE)
    size = int((reader.schema.metadata or {}).get("batch_size", b"4096"))
    lookup = reader.read_table().to_pydict()
    try:
        pages = [i for i, (lo, hi, n) in enumerate(zip(lookup["min"], lookup["max"], lookup["null_count"], strict=True))
                 if (lo is None and hi is not None) or judge(Zone(0, lo, hi, int(n)))]
    except TypeError:  # a literal of another type than the column's
        return None
    if len(pages) > max(SMALL_PAGES, len(lookup["min"]) // 2):
        return None
    if size <= 0 or lookup["page_idx"] != list(range(len(pages_all := lookup["min"]))) or not pages_all:
        return None
    data = seg._reader(store, DATA_FILE)
    expr = resolve_filter(manifest.schema, node.sql())
    out: set[int] = set()
    for p in pages:
        t = data.read_table(offset=p * size, length=size)
        t = pa.table({col: t.column("values"), "__ids": t.column("ids")}).filter(expr)
        out |= set(np.unique(t.column("__ids").to_numpy() >> np.uint64(32)).tolist())
    return out


Leaves = dict[int, tuple[str, dict[int, set[int]]]]  # id(node) -> (column, segment index -> fragments)


def _leaves(store: ObjectStore, manifest: Manifest, node: exp.Expr, segs: dict[str, list[_Segment]], out: Leaves) -> None:
    """Evaluate every usable leaf of ``node`` on its column's segments into ``out``."""
    if isinstance(node, exp.Paren):
        return _leaves(store, manifest, node.this, segs, out)
    if isinstance(node, exp.And | exp.Or):
        _leaves(store, manifest, node.left, segs, out)
        return _leaves(store, manifest, node.right, segs, out)
    judged = judge_leaf(node, segs)
    if judged is None:
        return None
    found = {k: _leaf_fragments(store, manifest, node, judged, s) for k, s in enumerate(segs[judged[0]])}
    if all(v is not None for v in found.values()):
        out[id(node)] = (judged[0], found)  # type: ignore[assignment]
    return None


def _may_match(node: exp.Expr, leaves: Leaves, segs: dict[str, list[_Segment]], fid: int) -> bool:
    if isinstance(node, exp.Paren):
        return _may_match(node.this, leaves, segs, fid)
    if isinstance(node, exp.And):
        return _may_match(node.left, leaves, segs, fid) and _may_match(node.right, leaves, segs, fid)
    if isinstance(node, exp.Or):
        return _may_match(node.left, leaves, segs, fid) or _may_match(node.right, leaves, segs, fid)
    if id(node) not in leaves:
        return True
    col, found = leaves[id(node)]
    for k, seg in enumerate(segs[col]):
        if fid in seg.covered:
            return fid in found[k]
    return True  # not covered by the index


def _evaluate(store: ObjectStore, manifest: Manifest, filter_text: str):
    segs = _segments(store, manifest)
    if not segs:
        return None
    tree = parse_sql(filter_text)
    leaves: Leaves = {}
    _leaves(store, manifest, tree, segs, leaves)
    return (tree, leaves, segs) if leaves else None


def prune_fragments_btree(
    store: ObjectStore, manifest: Manifest, filter_text: str, fragments: list[FragmentMetadata]
) -> list[FragmentMetadata]:
    """The fragments of ``fragments`` that may hold a row matching ``filter_text`` by the
    dataset's BTREE indices (all of them when none is usable)."""
    try:
        found = _evaluate(store, manifest, filter_text)
    except LanceOpsError:  # pruning only saves reads: an index it cannot use reads everything
        return fragments
    if found is None:
        return fragments
    tree, leaves, segs = found
    return [f for f in fragments if _may_match(tree, leaves, segs, f.id)]


def btree_query(store: ObjectStore, manifest: Manifest, filter_text: str) -> tuple[str, str] | None:
    """``(query, index names)`` of the BTREE indices :func:`prune_fragments_btree` uses for
    ``filter_text``, as pylance prints a ``ScalarIndexQuery``, or None."""
    try:
        found = _evaluate(store, manifest, filter_text)
    except LanceOpsError:
        return None
    if found is None:
        return None
    tree, leaves, segs = found
    used = {col for col, _ in leaves.values()}
    text = _text(tree, leaves, segs)
    names = dict.fromkeys(s.index.name for c in used for s in segs[c])
    return (text, ",".join(names)) if text else None


def _text(node: exp.Expr, leaves: Leaves, segs: dict[str, list[_Segment]]) -> str | None:
    """The part of ``node`` the index answered, as pylance prints an index query."""
    if isinstance(node, exp.Paren):
        return _text(node.this, leaves, segs)
    if isinstance(node, exp.And | exp.Or):
        left, right = _text(node.left, leaves, segs), _text(node.right, leaves, segs)
        if isinstance(node, exp.Or):
            return f"{left} || {right}" if left and right else None
        return " && ".join(t for t in (left, right) if t) or None
    return query_text(node, segs) if id(node) in leaves else None
