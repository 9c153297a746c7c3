"""A byte-keyed FST map in the format of the Rust ``fst`` crate (0.4, format version 3), which
pylance 14 stores as an INVERTED partition's token set (``_token_fst_bytes``; docs/FORMAT.md
"INVERTED segments").

Layout: a 16-byte header (``u64`` version 3, ``u64`` type 0), then the nodes, each written after
every node it points to and addressed by its *last* byte (the state byte; a reader decodes a
node backwards from it), then ``u64`` number of keys, ``u64`` root address and ``u32`` masked
CRC-32C of everything before.  Address 0 is the final node with no transitions and no output.

A node with one transition to the node written just before it, not final, is the crate's
"one transition, next" form: its input byte, then the state ``0b11000000``.  Every other node is
written in the general ("any transitions") form, which the reader decodes whatever the number of
transitions: outputs (if any is non-zero: the final output when final,
then each transition's, last transition first, all ``osize`` bytes little-endian), the
transitions' address deltas (``node start - target``, ``tsize`` bytes each, 0 for address 0),
their input bytes (last first), for more than 32 transitions a 256-byte index (input byte ->
transition number, 255 for none), the pack sizes byte (``tsize << 4 | osize``), the number of
transitions as a byte when it does not fit the state's 6 bits (or is 0), and the state byte
(``0b01000000`` when final, ``| n`` when ``1 <= n <= 63``).  The map is a trie (prefixes shared,
suffixes not minimised: a valid FST, larger than the crate's own builder's); each key's value
is the final output of its node.
"""

import google_crc32c  # type: ignore[import-untyped]
import numpy as np

_VERSION = 3
_EMPTY = 0
_INDEX_THRESHOLD = 32
_MASK_DELTA = 0xA282EAD8


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli) of ``data``."""
    return int(google_crc32c.value(data))


def _masked(crc: int) -> int:
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + _MASK_DELTA) & 0xFFFFFFFF


def _size(n: int) -> int:
    """Bytes needed for ``n`` (at least 1), as the crate packs integers."""
    return max(1, (int(n).bit_length() + 7) // 8)


class _Node:
    __slots__ = ("final", "out", "trans")

    def __init__(self) -> None:
        self.final = False
        self.out = 0
        self.trans: list[tuple[int, int]] = []  # (input byte, target address), inputs ascending


class FstWriter:
    """Builds the map from keys in strictly ascending byte order (:meth:`build`)."""

    def __init__(self) -> None:
        self.buf = bytearray(_VERSION.to_bytes(8, "little") + (0).to_bytes(8, "little"))
        self.stack: list[_Node] = [_Node()]  # the open nodes of the current key's path, depth 0..

    def build(self, keys: list[bytes], values: list[int]) -> bytes:
        """The FST's bytes.  Per key, the nodes shared with the next key stay open (they get
        more transitions); the rest of its path -- a chain of one-transition nodes ending in its
        final node -- is written at once, deepest first, then the open nodes deeper than the
        next key's shared prefix are closed."""
        lcp = _common_prefixes(keys)
        for i, (key, value) in enumerate(zip(keys, values, strict=True)):
            if i and lcp[i] == len(keys[i - 1]) == len(key):
                raise ValueError(f"fst keys must be distinct: {key!r}")
            shared, following = lcp[i], lcp[i + 1]
            for d in range(shared + 1, min(len(key), following) + 1):  # nodes the next key shares
                self.stack[-1].trans.append((key[d - 1], -1))  # target filled in when closed
                self.stack.append(_Node())
            if len(key) <= following:  # a prefix of the next key: its final node stays open
                self.stack[-1].final, self.stack[-1].out = True, int(value)
            else:
                addr = self._final_leaf(int(value))
                top = max(shared, following)
                k = len(key) - 1 - top
                if addr != _EMPTY and k > 0:  # the chain, deepest first, "next" form
                    chain = bytearray(2 * k)
                    chain[0::2] = key[top + 1 :][::-1]
                    chain[1::2] = b"\xc0" * k
                    self.buf += chain
                    addr = len(self.buf) - 1
                else:
                    for d in range(len(key) - 1, top, -1):
                        node = _Node()
                        node.trans.append((key[d], addr))
                        addr = self._compile(node)
                self.stack[-1].trans.append((key[top], addr))
            while len(self.stack) > following + 1:
                node = self.stack.pop()
                parent = self.stack[-1]
                parent.trans[-1] = (parent.trans[-1][0], self._compile(node))
        root = self._compile(self.stack.pop())
        self.buf += len(keys).to_bytes(8, "little") + root.to_bytes(8, "little")
        self.buf += _masked(crc32c(bytes(self.buf))).to_bytes(4, "little")
        return bytes(self.buf)

    def _final_leaf(self, out: int) -> int:
        """A final node without transitions (what ``_compile`` writes for it, inline)."""
        if out == 0:
            return _EMPTY
        size = _size(out)
        self.buf += out.to_bytes(size, "little") + bytes((size, 0, 0b0100_0000))
        return len(self.buf) - 1

    def _compile(self, node: _Node) -> int:
        if node.final and not node.trans and node.out == 0:
            return _EMPTY
        start = len(self.buf)
        if not node.final and len(node.trans) == 1 and node.trans[0][1] == start - 1 and start > 16:
            # "one transition, next": the target is the node written just before; no output
            self.buf += bytes((node.trans[0][0], 0b1100_0000))
            return start + 1
        n = len(node.trans)
        deltas = [0 if addr == _EMPTY else start - addr for _, addr in node.trans]
        tsize = max((_size(d) for d in deltas), default=0)
        any_out = node.out != 0
        osize = _size(node.out) if any_out else 0
        out = self.buf
        if any_out:
            out += node.out.to_bytes(osize, "little")  # transitions carry no output
            out += bytes(osize * n)
        for d in reversed(deltas):
            out += d.to_bytes(tsize, "little")
        out += bytes(b for b, _ in reversed(node.trans))
        if n > _INDEX_THRESHOLD:
            index = bytearray(b"\xff" * 256)
            for i, (b, _) in enumerate(node.trans):
                index[b] = i
            out += index
        out.append((tsize << 4) | osize)
        state = 0b0100_0000 if node.final else 0
        if 1 <= n <= 0b11_1111:
            state |= n
        else:
            out.append(1 if n == 256 else n)
        out.append(state)
        return len(self.buf) - 1


def _common_prefixes(keys: list[bytes]) -> list[int]:
    """``[0, lcp(k0, k1), lcp(k1, k2), ..., 0]``: the bytes each key shares with the one before
    (NumPy over the keys padded to a matrix), and a closing 0.

    Raises:
        ValueError: keys out of ascending order.
    """
    n = len(keys)
    if n < 2:
        return [0] * (n + 1)
    width = max(len(k) for k in keys) + 1
    m = np.full((n, width), -1, dtype=np.int16)
    flat = np.frombuffer(b"".join(keys), dtype=np.uint8)
    lens = np.fromiter((len(k) for k in keys), dtype=np.int64, count=n)
    rows = np.repeat(np.arange(n), lens)
    cols = np.arange(len(flat)) - np.repeat(np.cumsum(lens) - lens, lens)
    m[rows, cols] = flat
    diff = m[1:] != m[:-1]
    lcp = np.where(diff.any(axis=1), diff.argmax(axis=1), width)
    a, b = m[:-1][np.arange(n - 1), np.minimum(lcp, width - 1)], m[1:][np.arange(n - 1), np.minimum(lcp, width - 1)]
    if np.any((lcp >= width) | (a > b)):
        raise ValueError("fst keys must be distinct and in ascending byte order")
    return [0, *lcp.tolist(), 0]


def build_fst(keys: list[bytes], values: list[int]) -> bytes:
    """An FST map of ``keys`` (ascending, distinct) to ``values``."""
    return FstWriter().build(keys, values)
