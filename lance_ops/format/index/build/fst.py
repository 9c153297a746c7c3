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

import numpy as np

_VERSION = 3
_EMPTY = 0
_INDEX_THRESHOLD = 32
_CRC_POLY = 0x82F63B78
_MASK_DELTA = 0xA282EAD8


def _crc_table() -> np.ndarray:
    t = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        t = np.where(t & 1, (t >> 1) ^ np.uint32(_CRC_POLY), t >> 1).astype(np.uint32)
    return t


_CRC_TABLE = _crc_table()


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli) of ``data`` (one table step per byte: an FST is a few bytes per
    distinct token)."""
    crc = 0xFFFFFFFF
    table = _CRC_TABLE.tolist()
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


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
    """Builds the map from keys inserted in strictly ascending byte order."""

    def __init__(self) -> None:
        self.buf = bytearray(_VERSION.to_bytes(8, "little") + (0).to_bytes(8, "little"))
        self.stack: list[_Node] = [_Node()]
        self.inputs: list[int] = []  # the input byte leading to stack[i + 1]
        self.prev = b""
        self.count = 0

    def insert(self, key: bytes, value: int) -> None:
        if self.count and key <= self.prev:
            raise ValueError(f"fst keys must be inserted in ascending order: {key!r} after {self.prev!r}")
        common = 0
        for a, b in zip(self.prev, key, strict=False):
            if a != b:
                break
            common += 1
        self._finish_down_to(common)
        for byte in key[common:]:
            self.inputs.append(byte)
            self.stack.append(_Node())
        self.stack[-1].final = True
        self.stack[-1].out = int(value)
        self.prev = key
        self.count += 1

    def _finish_down_to(self, depth: int) -> None:
        while len(self.stack) > depth + 1:
            node = self.stack.pop()
            byte = self.inputs.pop()
            self.stack[-1].trans.append((byte, self._compile(node)))

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

    def finish(self) -> bytes:
        """The FST's bytes."""
        self._finish_down_to(0)
        root = self._compile(self.stack.pop())
        self.buf += self.count.to_bytes(8, "little") + root.to_bytes(8, "little")
        self.buf += _masked(crc32c(bytes(self.buf))).to_bytes(4, "little")
        return bytes(self.buf)


def build_fst(keys: list[bytes], values: list[int]) -> bytes:
    """An FST map of ``keys`` (ascending, distinct) to ``values``."""
    w = FstWriter()
    for k, v in zip(keys, values, strict=True):
        w.insert(k, v)
    return w.finish()
