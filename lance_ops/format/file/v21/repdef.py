"""Repetition / definition levels of Lance 2.1+ pages, both directions, vectorised.

A leaf column of a nested field is stored as one level per *slot*: every leaf item, plus one slot
for each null or empty list (at any depth) whose subtree has no items.  Layers are listed
innermost first (``layers[0]`` = the leaf item).

- Definition: each nullable item layer takes one level, a nullable list one (null), an emptyable
  list one (empty), a nullable-and-emptyable list two (null, then empty).  Levels are numbered
  from the innermost layer up (0 = valid item); a slot carries the level of its *outermost*
  null / empty ancestor.
- Repetition: list layers are numbered from the innermost (1) to the outermost (``max_rep``).  A
  slot's rep level is the level of the outermost list that starts at it (``max_rep`` = a new row),
  0 for a further item of the innermost list.
- A slot is *visible* (has a value in the value buffers) if its def level is at most the levels of
  the layers below the innermost list.

:func:`build_levels` turns an Arrow array into levels and visible leaf values (what pylance's
``RepDefBuilder`` serialises); :func:`unravel` turns levels and decoded leaf values back into the
Arrow array (pylance's ``RepDefUnraveler``).  Both work on whole NumPy arrays.
"""

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from lance_ops.format._proto import encodings_v2_1_pb2 as pb
from lance_ops.format.errors import LevelsError

__all__ = ["Levels", "build_levels", "unravel", "def_counts", "max_visible_level", "is_list_layer"]

_LIST_LAYERS = (
    pb.REPDEF_ALL_VALID_LIST, pb.REPDEF_NULLABLE_LIST, pb.REPDEF_EMPTYABLE_LIST, pb.REPDEF_NULL_AND_EMPTY_LIST
)
_DEF_COUNT = {
    pb.REPDEF_ALL_VALID_ITEM: 0,
    pb.REPDEF_ALL_VALID_LIST: 0,
    pb.REPDEF_NULLABLE_ITEM: 1,
    pb.REPDEF_NULLABLE_LIST: 1,
    pb.REPDEF_EMPTYABLE_LIST: 1,
    pb.REPDEF_NULL_AND_EMPTY_LIST: 2,
}


def is_list_layer(layer: int) -> bool:
    return layer in _LIST_LAYERS


def def_counts(layers: list[int]) -> list[int]:
    try:
        return [_DEF_COUNT[x] for x in layers]
    except KeyError as e:
        raise LevelsError(f"unknown rep/def layer {e.args[0]}") from None


def max_visible_level(layers: list[int]) -> int | None:
    """Highest def level that still has a value slot (None if there are no lists)."""
    counts = def_counts(layers)
    for i, x in enumerate(layers):
        if is_list_layer(x):
            return sum(counts[:i])
    return None


def _is_list_type(t: pa.DataType) -> bool:
    return pa.types.is_list(t) or pa.types.is_large_list(t)


@dataclass
class Levels:
    """Levels of one leaf column over some rows, and the leaf values of its visible slots."""

    layers: list[int]
    rep: np.ndarray | None  # uint16 per slot, None without lists
    defs: np.ndarray | None  # uint16 per slot, None if every layer is all-valid
    leaf: pa.Array  # visible leaf items (null items included, as nulls)
    num_rows: int

    @property
    def num_levels(self) -> int:
        if self.rep is not None:
            return len(self.rep)
        if self.defs is not None:
            return len(self.defs)
        return len(self.leaf)


def _validity(arr: pa.Array) -> np.ndarray | None:
    if arr.null_count == 0:
        return None
    return np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)


def build_levels(arr: pa.Array, path: list[int]) -> Levels:
    """Levels of the leaf reached from ``arr`` by ``path`` (a child index per struct on the way).

    Lists (and large lists) are followed through their single child; a fixed-size list or any
    other non-struct type ends the path and is the leaf.

    Layer kinds are chosen so that pylance 14 reads the pages (it misreads some valid stacks):
    struct nulls are pushed down (a layer under a null struct is nullable), a nullable struct
    above a list is always ``NULLABLE_ITEM``, and no ``ALL_VALID_LIST`` lies below a layer with
    definition levels (see :func:`_layer_kinds`).
    """
    n = len(arr)
    t0 = arr.type
    if not path and not (_is_list_type(t0) or pa.types.is_struct(t0)):  # a plain leaf column
        valid = _validity(arr)
        if valid is None or valid.all():
            return Levels(layers=[pb.REPDEF_ALL_VALID_ITEM], rep=None, defs=None, leaf=arr, num_rows=n)
        return Levels(layers=[pb.REPDEF_NULLABLE_ITEM], rep=None, defs=(~valid).astype(np.uint16), leaf=arr,
                      num_rows=n)
    w = _Walk.start(n, _count_lists(arr.type, path))
    node = arr
    path = list(path)
    while True:
        if _is_list_type(node.type):
            w.through_list(node)
            node = node.values
        else:
            w.at_item(node)
            if not (pa.types.is_struct(node.type) and path):
                break
            w.may_null = w.may_null or node.type.field(path[0]).nullable  # pushed-down nulls
            node = node.field(path.pop(0))
        w.layer += 1
    top_down = _layer_kinds(w.kinds, w.declared)
    layers = top_down[::-1]
    defs = _def_levels(top_down, layers, w)
    visible = w.idx >= 0
    leaf = node.take(pa.array(w.idx[visible])) if not visible.all() or len(w.idx) != len(node) else node
    return Levels(layers=layers, rep=w.rep, defs=defs, leaf=leaf, num_rows=n)


def _count_lists(t: pa.DataType, path: list[int]) -> int:
    """Lists on the way to the leaf (rep levels count down from the top)."""
    p = list(path)
    num_lists = 0
    while True:
        if _is_list_type(t):
            num_lists += 1
            t = t.value_type
        elif pa.types.is_struct(t) and p:
            t = t.field(p.pop(0)).type
        else:
            return num_lists


@dataclass
class _Walk:
    """Per slot, while walking down from the top: index into the current node (-1 = terminated
    special), rep level, and the (layer number from the top, kind) of the outermost null/empty
    ancestor (-1 = none); per layer from the top, what it holds."""

    idx: np.ndarray
    rep: np.ndarray | None
    null_layer: np.ndarray
    null_kind: np.ndarray  # 0 null, 1 empty list
    rep_level: int
    layer: int = 0
    #: per layer from the top: (item|list, nullable, emptyable)
    kinds: list[tuple[str, bool, bool]] = field(default_factory=list)
    #: per layer from the top: the Arrow field, or a struct it is (a chain of) children of, may
    #: hold nulls (the top-level field's nullability is unknown here: assumed)
    declared: list[bool] = field(default_factory=list)
    may_null: bool = True

    @classmethod
    def start(cls, n: int, num_lists: int) -> "_Walk":
        return cls(
            idx=np.arange(n, dtype=np.int64),
            rep=np.full(n, num_lists, dtype=np.uint16) if num_lists else None,
            null_layer=np.full(n, -1, dtype=np.int16),
            null_kind=np.zeros(n, dtype=np.int8),
            rep_level=num_lists,
        )

    def through_list(self, node: pa.Array) -> None:
        """Record a list layer and expand every live slot into its items."""
        idx = self.idx
        live = idx >= 0
        li = idx[live]
        valid = _validity(node)
        offs = node.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
        lens = offs[li + 1] - offs[li]
        v = valid[li] if valid is not None else np.ones(len(li), dtype=bool)
        # slots under an already-null ancestor (a null struct) are terminated here too
        free = self.null_layer[live] < 0
        # as in pylance (which pushes struct nulls down into the children), a list under a
        # null struct counts as null: pylance 14 maps a null struct above ALL_VALID_LIST layers
        # only to repetition level 0 and so reads its slot as a visible item
        nullable = not (v.all() and free.all())
        empty = v & (lens == 0) & free
        self.kinds.append(("list", nullable, bool(empty.any())))
        self.declared.append(self.may_null)
        self.may_null = node.type.value_field.nullable
        lv = np.flatnonzero(live)
        expand = np.zeros(len(idx), dtype=bool)
        expand[lv[free & v & (lens > 0)]] = True
        self._mark(lv[free & ~v], 0)
        self._mark(lv[free & empty], 1)
        counts = np.ones(len(idx), dtype=np.int64)
        full_lens = np.zeros(len(idx), dtype=np.int64)
        full_lens[lv] = lens
        counts[expand] = full_lens[expand]
        total = int(counts.sum())
        starts = np.zeros(len(idx), dtype=np.int64)
        np.cumsum(counts[:-1], out=starts[1:]) if len(idx) else None
        owner = np.repeat(np.arange(len(idx)), counts)
        pos_in = np.arange(total, dtype=np.int64) - starts[owner]
        first = pos_in == 0
        new_idx = np.full(total, -1, dtype=np.int64)
        exp_slot = expand[owner]
        base = np.where(idx >= 0, idx, 0)
        new_idx[exp_slot] = offs[base[owner[exp_slot]]] + pos_in[exp_slot]
        # rep: first slot of each group keeps the parent's level (or this list's level)
        assert self.rep is not None
        parent_rep = self.rep[owner]
        new_rep = np.zeros(total, dtype=np.uint16)
        new_rep[first] = np.where(parent_rep[first] != 0, parent_rep[first], self.rep_level)
        # specials created earlier keep their rep as is (they are single slots)
        self.idx = new_idx
        self.rep = new_rep
        self.null_layer = self.null_layer[owner]
        self.null_kind = self.null_kind[owner]
        self.rep_level -= 1

    def at_item(self, node: pa.Array) -> None:
        """Record an item layer (a struct on the path, or the leaf) and its null slots."""
        live = self.idx >= 0
        li = self.idx[live]
        valid = _validity(node)
        lv = np.flatnonzero(live)
        free = self.null_layer[lv] < 0
        hit = lv[~valid[li] & free] if valid is not None else lv[:0]
        # a layer under a null struct counts as nullable, as pylance pushes struct nulls down
        # (pylance 14 reads an ALL_VALID_ITEM struct as valid there, and then rejects its
        # masked-null children if their field is not nullable)
        nullable = len(hit) > 0 or not free.all()
        self.kinds.append(("item", nullable, False))
        self.declared.append(self.may_null)
        self._mark(hit, 0)

    def _mark(self, slots: np.ndarray, kind: int) -> None:
        self.null_layer[slots] = self.layer
        self.null_kind[slots] = kind


def _layer_kinds(kinds: list[tuple[str, bool, bool]], declared: list[bool]) -> list[int]:
    """The layer kinds, top down.

    A nullable struct layer above a list is NULLABLE_ITEM even on pages without null structs:
    pylance 14 cannot read a column whose pages disagree there (its RepDefUnraveler appends
    ``num_items`` -- the leaf item count -- valid structs for an ALL_VALID_ITEM layer above a
    list, so a batch mixing such pages gets a struct validity of the wrong length: "Incorrect
    number of nulls for StructArray").

    No ALL_VALID_LIST lies below a layer with definition levels: pylance 14 maps each null / empty
    level to the repetition level at which it is visible by counting only the lists *with*
    definition levels below it (``RepDefUnraveler::levels_to_rep``), so an all-valid list
    under it makes a null struct or an empty outer list show up as an extra struct / item.
    """
    top_down: list[int] = []
    above_def = False  # some layer above this one has definition levels
    for i, (kind, nullable, emptyable) in enumerate(kinds):
        if kind == "item" and declared[i] and any(k[0] == "list" for k in kinds[i + 1 :]):
            nullable = True
        if kind == "list" and above_def and not (nullable or emptyable):
            nullable = True
        above_def = above_def or nullable or emptyable
        if kind == "item":
            top_down.append(pb.REPDEF_NULLABLE_ITEM if nullable else pb.REPDEF_ALL_VALID_ITEM)
        elif nullable and emptyable:
            top_down.append(pb.REPDEF_NULL_AND_EMPTY_LIST)
        elif nullable:
            top_down.append(pb.REPDEF_NULLABLE_LIST)
        elif emptyable:
            top_down.append(pb.REPDEF_EMPTYABLE_LIST)
        else:
            top_down.append(pb.REPDEF_ALL_VALID_LIST)
    return top_down


def _def_levels(top_down: list[int], layers: list[int], w: "_Walk") -> np.ndarray | None:
    """Definition level per slot (None when no layer has any): each null or empty slot gets the
    level of the outermost layer where it became null or empty."""
    lo = np.cumsum([0, *def_counts(layers)])  # lo[i] = levels used by layers below i (bottom index)
    nl = len(layers)
    null_level = np.zeros(nl, dtype=np.int64)  # by top-down layer number
    empty_level = np.zeros(nl, dtype=np.int64)
    for top_i, x in enumerate(top_down):
        b = nl - 1 - top_i
        if x in (pb.REPDEF_NULLABLE_ITEM, pb.REPDEF_NULLABLE_LIST):
            null_level[top_i] = lo[b] + 1
        elif x == pb.REPDEF_EMPTYABLE_LIST:
            empty_level[top_i] = lo[b] + 1
        elif x == pb.REPDEF_NULL_AND_EMPTY_LIST:
            null_level[top_i] = lo[b] + 1
            empty_level[top_i] = lo[b] + 2
    if int(lo[-1]) == 0:
        return None
    defs = np.zeros(len(w.idx), dtype=np.uint16)
    has = w.null_layer >= 0
    nlay = w.null_layer[has].astype(np.int64)
    defs[has] = np.where(w.null_kind[has] == 1, empty_level[nlay], null_level[nlay])
    return defs


def unravel(
    layers: list[int],
    rep: np.ndarray | None,
    defs: np.ndarray | None,
    leaf: pa.Array,
    dtype: pa.DataType,
    num_rows: int,
) -> pa.Array:
    """Rebuild the array of type ``dtype`` (a chain of lists / single-child structs ending at the
    leaf) from levels and the decoded visible leaf values ``leaf`` (its own validity is ignored).

    Raises:
        LevelsError: the levels do not fit the layers, the type, the rows or the values.
    """
    nl = len(layers)
    counts = def_counts(layers)
    lo = np.cumsum([0, *counts])
    types = [dtype]
    for _ in range(nl - 1):
        t = types[-1]
        if _is_list_type(t):
            types.append(t.value_type)
        elif pa.types.is_struct(t) and t.num_fields == 1:
            types.append(t.field(0).type)
        else:
            raise LevelsError(f"{nl} rep/def layers for a column of type {dtype}")
    top_down_layers = layers[::-1]
    for t, x in zip(types, top_down_layers, strict=True):
        if is_list_layer(x) != _is_list_type(t):
            raise LevelsError(f"rep/def layers {layers} do not match the type {dtype}")
    max_rep = sum(1 for x in layers if is_list_layer(x))
    if rep is None and max_rep:
        raise LevelsError("list layers without repetition levels")
    if rep is not None and not max_rep:
        raise LevelsError("repetition levels without a list layer")
    size = len(rep) if rep is not None else len(defs) if defs is not None else len(leaf)
    if defs is not None and len(defs) != size:
        raise LevelsError(f"{len(defs)} definition levels for {size} repetition levels")
    d_all = defs.astype(np.int64) if defs is not None else np.zeros(size, dtype=np.int64)
    if size and int(d_all.max()) > int(lo[-1]):
        raise LevelsError(f"definition level {int(d_all.max())} above the maximum {int(lo[-1])}")
    r_all = rep.astype(np.int64) if rep is not None else None
    if r_all is not None and size and int(r_all.max()) > max_rep:
        raise LevelsError(f"repetition level {int(r_all.max())} above the maximum {max_rep}")
    if r_all is not None:
        elems = np.flatnonzero(r_all == max_rep)
        if size and (not len(elems) or elems[0] != 0):
            raise LevelsError("the first level does not start a row")
    else:
        elems = np.arange(size, dtype=np.int64)
    if len(elems) != num_rows:
        raise LevelsError(f"levels describe {len(elems)} rows, expected {num_rows}")
    per_layer: list[tuple[np.ndarray | None, np.ndarray | None, int]] = []  # (validity, offsets, length)
    rep_level = max_rep
    for top_i, x in enumerate(top_down_layers):
        b = nl - 1 - top_i
        d = d_all[elems]
        if is_list_layer(x):
            valid = d <= lo[b]
            if x in (pb.REPDEF_EMPTYABLE_LIST,):
                valid |= d == lo[b] + 1
            elif x == pb.REPDEF_NULL_AND_EMPTY_LIST:
                valid |= d == lo[b] + 2
            if r_all is not None and rep_level > 1:
                child = np.flatnonzero((r_all >= rep_level - 1) & (d_all <= lo[b]))
            else:
                child = np.flatnonzero(d_all <= lo[b])
            offsets = np.empty(len(elems) + 1, dtype=np.int64)
            offsets[:-1] = np.searchsorted(child, elems, side="left")
            offsets[-1] = len(child)
            per_layer.append((None if valid.all() else valid, offsets, len(elems)))
            elems = child
            rep_level -= 1
        else:
            valid = d <= lo[b]
            per_layer.append((None if valid.all() else valid, None, len(elems)))
    if len(elems) != len(leaf):
        raise LevelsError(f"levels have {len(elems)} visible items, {len(leaf)} values were decoded")
    # bottom-up construction
    arr = _set_validity(leaf, per_layer[-1][0])
    for top_i in range(nl - 2, -1, -1):
        valid, offsets, length = per_layer[top_i]
        t = types[top_i]
        vb = pa.py_buffer(np.packbits(valid, bitorder="little")) if valid is not None else None
        if offsets is not None:
            if pa.types.is_large_list(t):
                ob = pa.py_buffer(offsets)
            else:
                if offsets[-1] >= 2**31:
                    raise LevelsError(f"more than 2**31 list items for the 32-bit offsets of {t}")
                ob = pa.py_buffer(offsets.astype(np.int32))
            arr = pa.Array.from_buffers(t, length, [vb, ob], children=[arr])
        else:
            arr = pa.Array.from_buffers(t, length, [vb], children=[arr])
    return arr


def _set_validity(arr: pa.Array, valid: np.ndarray | None) -> pa.Array:
    """``arr`` with validity ``valid`` (None = all valid), replacing its own."""
    if arr.offset:
        arr = pa.concat_arrays([arr])
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little")) if valid is not None else None
    if pa.types.is_fixed_size_list(arr.type) or pa.types.is_struct(arr.type):
        kids = [arr.values] if pa.types.is_fixed_size_list(arr.type) else [arr.field(i) for i in range(arr.type.num_fields)]
        return pa.Array.from_buffers(arr.type, len(arr), [bitmap], children=kids)
    if pa.types.is_null(arr.type):
        return arr
    bufs = arr.buffers()
    return pa.Array.from_buffers(arr.type, len(arr), [bitmap, *bufs[1:]])
