"""Row-address sets as index files store them, and the old -> new address map of a compaction.

Without stable row ids an index stores row *addresses* (``fragment_id << 32 | offset``).
Two serialisations occur in pylance 14's index files (upstream
``rust/lance-core/src/utils/mask.rs``, the ``roaring`` crate's ``RoaringTreemap``):

- ``RoaringTreemap`` (NGRAM posting lists): ``u64 count``, then per high word ``u32 key`` and a
  portable 32-bit roaring bitmap of the low words.
- ``RowAddrTreeMap`` (BITMAP / LABEL_LIST bitmaps, LABEL_LIST null rows): ``u32 count``, then
  per fragment ``u32 fragment_id``, ``u32 size`` and ``size`` bytes of portable roaring offsets;
  size 0 means "every row of the fragment".

Everything is decoded to sorted ``uint64`` NumPy arrays and mapped with ``searchsorted``.
"""

import struct
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from pyroaring import BitMap

from lance_ops.format.errors import CorruptFileError
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.table.deletion import deleted_offsets
from lance_ops.format.table.fragment import FragmentMetadata

_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_NO_OFFSET_THRESHOLD = 4
_SERIAL_COOKIE_NO_RUN = 12346
_SERIAL_COOKIE = 12347
LOW_MASK = np.uint64(0xFFFFFFFF)


def portable_size(data: bytes | memoryview, pos: int = 0) -> int:
    """Byte length of the portable roaring bitmap starting at ``pos`` (the format has no length
    prefix, and the containers after it must be located)."""
    (cookie,) = _U32.unpack_from(data, pos)
    p = pos + 4
    if cookie & 0xFFFF == _SERIAL_COOKIE:
        n = (cookie >> 16) + 1
        runs = bytes(data[p : p + (n + 7) // 8])
        p += (n + 7) // 8
        has_offsets = n >= _NO_OFFSET_THRESHOLD
    elif cookie == _SERIAL_COOKIE_NO_RUN:
        (n,) = _U32.unpack_from(data, p)
        p += 4
        runs = b""
        has_offsets = True
    else:
        raise ValueError(f"not a portable roaring bitmap (cookie {cookie:#x})")
    header = np.frombuffer(bytes(data[p : p + 4 * n]), dtype="<u2").reshape(n, 2)
    p += 4 * n
    if has_offsets:
        p += 4 * n
    for i in range(n):
        if runs and runs[i // 8] >> (i % 8) & 1:
            (nruns,) = struct.unpack_from("<H", data, p)
            p += 2 + 4 * nruns
        else:
            card = int(header[i, 1]) + 1
            p += 2 * card if card <= 4096 else 8192
    return p - pos


def _bitmap_values(data: bytes | memoryview) -> np.ndarray:
    return np.asarray(BitMap.deserialize(bytes(data)).to_array(), dtype=np.uint32)


def _portable(values: np.ndarray) -> bytes:
    bm = BitMap(values.astype(np.uint32, copy=False))
    bm.run_optimize()
    return bytes(bm.serialize())


def decode_treemap(data: bytes, where: str = "") -> np.ndarray:
    """A ``RoaringTreemap`` as a sorted ``uint64`` array."""
    try:
        (count,) = _U64.unpack_from(data, 0)
        pos, parts = 8, []
        for _ in range(count):
            (key,) = _U32.unpack_from(data, pos)
            size = portable_size(data, pos + 4)
            low = _bitmap_values(memoryview(data)[pos + 4 : pos + 4 + size])
            parts.append((np.uint64(key) << np.uint64(32)) | low.astype(np.uint64))
            pos += 4 + size
    except (struct.error, ValueError, IndexError) as e:
        raise CorruptFileError(where, f"row address treemap does not decode: {e}") from e
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.uint64)


def encode_treemap(addrs: np.ndarray) -> bytes:
    """A sorted ``uint64`` array as a ``RoaringTreemap``."""
    addrs = np.unique(addrs.astype(np.uint64, copy=False))
    highs = (addrs >> np.uint64(32)).astype(np.uint32)
    keys, starts = np.unique(highs, return_index=True)
    out = [_U64.pack(len(keys))]
    bounds = [*starts.tolist(), len(addrs)]
    for k, key in enumerate(keys.tolist()):
        out.append(_U32.pack(key))
        out.append(_portable(addrs[bounds[k] : bounds[k + 1]] & LOW_MASK))
    return b"".join(out)


@dataclass(frozen=True)
class RowAddrSet:
    """A decoded ``RowAddrTreeMap``: explicit addresses plus fragments selected in full."""

    addrs: np.ndarray  # sorted uint64
    full_fragments: tuple[int, ...] = ()


def decode_row_addr_treemap(data: bytes, where: str = "") -> RowAddrSet:
    try:
        (count,) = _U32.unpack_from(data, 0)
        pos, parts, full = 4, [], []
        for _ in range(count):
            frag, size = struct.unpack_from("<II", data, pos)
            pos += 8
            if size == 0:
                full.append(frag)
                continue
            low = _bitmap_values(memoryview(data)[pos : pos + size])
            parts.append((np.uint64(frag) << np.uint64(32)) | low.astype(np.uint64))
            pos += size
    except (struct.error, ValueError, IndexError) as e:
        raise CorruptFileError(where, f"row address set does not decode: {e}") from e
    addrs = np.concatenate(parts) if parts else np.empty(0, dtype=np.uint64)
    return RowAddrSet(addrs, tuple(full))


def encode_row_addr_treemap(s: RowAddrSet) -> bytes:
    addrs = np.unique(s.addrs.astype(np.uint64, copy=False))
    frags = (addrs >> np.uint64(32)).astype(np.uint32)
    keys, starts = np.unique(frags, return_index=True)
    bounds = [*starts.tolist(), len(addrs)]
    entries: dict[int, bytes] = {}
    for k, key in enumerate(keys.tolist()):
        entries[key] = _portable(addrs[bounds[k] : bounds[k + 1]] & LOW_MASK)
    for f in s.full_fragments:
        entries[int(f)] = b""
    out = [_U32.pack(len(entries))]
    for key in sorted(entries):
        body = entries[key]
        out.append(struct.pack("<II", key, len(body)))
        out.append(body)
    return b"".join(out)


# --------------------------------------------------------------------------- the address map


@dataclass(frozen=True)
class AddressMap:
    """Where a compaction moved each live row: ``old[i] -> new[i]`` (``old`` sorted).

    Addresses outside the rewritten fragments, and addresses of rows that were already deleted
    in them, are not in the map: :meth:`apply` leaves them unchanged.  A deleted row's old
    address names a fragment that no longer exists, which pylance treats as deleted as long as
    the index's fragment bitmap still lists that fragment (as after a delete that removes a
    whole fragment) -- see :mod:`.coverage`.
    """

    old: np.ndarray
    new: np.ndarray
    old_fragments: frozenset[int]
    #: old fragments that had deleted rows (their ids stay in a remapped index's bitmap)
    tombstone_fragments: frozenset[int]
    #: physical rows of every old fragment (to expand "whole fragment" selections)
    physical_rows: tuple[tuple[int, int], ...] = ()
    #: deferred rewrites pylance recorded in its fragment reuse index, applied first (oldest
    #: first): an index may still hold the addresses they moved (:mod:`.reuse`)
    reuse: tuple[tuple[np.ndarray, np.ndarray], ...] = ()
    reuse_fragments: frozenset[int] = frozenset()

    @staticmethod
    def _through(old: np.ndarray, new: np.ndarray, a: np.ndarray) -> np.ndarray:
        if old.size == 0 or a.size == 0:
            return a
        pos = np.minimum(np.searchsorted(old, a), old.size - 1)
        return np.where(old[pos] == a, new[pos], a)

    def apply(self, addrs: np.ndarray) -> np.ndarray:
        """``addrs`` with every moved row's address replaced by its new one (same order)."""
        a = addrs.astype(np.uint64, copy=True)
        for old, new in self.reuse:
            a = self._through(old, new, a)
        return self._through(self.old, self.new, a)

    @property
    def gone_fragments(self) -> frozenset[int]:
        """Fragments no live row is in any more (rewritten here or by a deferred rewrite)."""
        return self.old_fragments | self.reuse_fragments

    def apply_dropping(self, addrs: np.ndarray) -> np.ndarray:
        """Like :meth:`apply`, without the rows that were deleted in the rewritten fragments."""
        mapped = self.apply(addrs)
        gone = self.gone_fragments
        if not gone:
            return mapped
        frag = (mapped >> np.uint64(32)).astype(np.int64)
        return mapped[~np.isin(frag, np.fromiter(gone, dtype=np.int64))]

    def apply_set(self, s: RowAddrSet) -> RowAddrSet:
        """A row-address set after the move, without rows deleted in the rewritten fragments
        (whole-fragment selections of old fragments are expanded)."""
        sizes = dict(self.physical_rows)
        addrs, full = [s.addrs], []
        for f in s.full_fragments:
            if f in self.old_fragments:
                addrs.append((np.uint64(f) << np.uint64(32)) | np.arange(sizes[f], dtype=np.uint64))
            else:
                full.append(f)
        merged = np.concatenate(addrs) if len(addrs) > 1 else s.addrs
        return RowAddrSet(np.sort(self.apply_dropping(merged)), tuple(full))


def live_offsets(store: ObjectStore, frag: FragmentMetadata) -> np.ndarray:
    """Offsets of the rows of ``frag`` that are not deleted (metadata and deletion file only)."""
    n = frag.physical_rows
    if frag.deletion_file is None:
        return np.arange(n, dtype=np.uint64)
    keep = np.ones(n, dtype=bool)
    keep[deleted_offsets(store, frag).astype(np.intp)] = False
    return np.flatnonzero(keep).astype(np.uint64)


def address_map(
    store: ObjectStore,
    groups: Sequence[tuple[Sequence[FragmentMetadata], Sequence[FragmentMetadata]]],
    *,
    reuse: Sequence[tuple[np.ndarray, np.ndarray]] = (),
    reuse_fragments: frozenset[int] = frozenset(),
    orders: Sequence[np.ndarray | None] = (),
) -> AddressMap:
    """The map of a compaction: each group's live rows, in fragment order, land in its new
    fragments in order (how :func:`~lance_ops.format.ops.compaction.rewrite.execute_task`
    writes them, and how pylance's ``transpose_row_addrs`` numbers them) -- or, for a group
    with an order (a clustered rewrite), row ``orders[g][j]`` of that fragment order lands at
    new position ``j``.

    Raises:
        CorruptFileError: a group's new fragments do not hold exactly its live rows.
    """
    olds, news, frags, tomb, sizes = [], [], set(), set(), []
    for g, (old_frags, new_frags) in enumerate(groups):
        parts = []
        for f in old_frags:
            off = live_offsets(store, f)
            parts.append((np.uint64(f.id) << np.uint64(32)) | off)
            frags.add(f.id)
            sizes.append((f.id, f.physical_rows))
            if off.size < f.physical_rows:
                tomb.add(f.id)
        old = np.concatenate(parts) if parts else np.empty(0, dtype=np.uint64)
        new = np.concatenate(
            [(np.uint64(f.id) << np.uint64(32)) | np.arange(f.physical_rows, dtype=np.uint64) for f in new_frags]
        ) if new_frags else np.empty(0, dtype=np.uint64)
        if old.size != new.size:
            raise CorruptFileError(
                store.uri,
                f"compaction of fragments {[f.id for f in old_frags]} wrote {new.size} rows "
                f"but they hold {old.size} live rows",
            )
        order = orders[g] if g < len(orders) else None
        if order is not None:  # clustered: old row order[j] is now at new position j
            moved = np.empty_like(new)
            moved[order] = new
            new = moved
        olds.append(old)
        news.append(new)
    old_all = np.concatenate(olds) if olds else np.empty(0, dtype=np.uint64)
    new_all = np.concatenate(news) if news else np.empty(0, dtype=np.uint64)
    order = np.argsort(old_all, kind="stable")
    return AddressMap(
        old_all[order], new_all[order], frozenset(frags), frozenset(tomb), tuple(sizes), tuple(reuse), reuse_fragments
    )
