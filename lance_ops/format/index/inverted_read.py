"""Reading INVERTED (full-text) segments: a partition's token set (an ``fst`` crate map or the
``arrow`` token table), its posting lists and its documents (docs/FORMAT.md "INVERTED
segments"), for answering term queries without tokenizing the indexed rows.

Only the partitioned layout (``part_<p>_{tokens,invert,docs}.lance``, posting blocks of 128) is
read; anything else raises :class:`~lance_ops.format.errors.UnsupportedFeatureError` and the
caller searches flat.
"""

import threading
from dataclasses import dataclass, field

import numpy as np

from lance_ops.format.errors import CorruptFileError, UnsupportedFeatureError
from lance_ops.format.file.reader import DataFileReader
from lance_ops.format.index.build.postings import BLOCK
from lance_ops.format.index.metadata import IndexMetadata
from lance_ops.format.io.object_store import ObjectStore

__all__ = ["InvertedPartition", "decode_postings", "fst_get", "segment_partitions"]

#: the ``fst`` crate's 63 frequent input bytes a one-transition state names by number (1-based)
_COMMON = b"te/oasripcnw.hlm-du012g=:bf3y5&_4v9678k%?xCDASFIBEjPTzRNM+LOqHGW"
_INDEX_THRESHOLD = 32


def _uint(data: bytes, at: int, size: int) -> int:
    return int.from_bytes(data[at:at + size], "little")


def _node(data: bytes, addr: int) -> tuple[list[tuple[int, int, int]], bool, int]:
    """A node's transitions (input byte, output, target), whether final, its final output."""
    if addr == 0:
        return [], True, 0
    state = data[addr]
    kind = state >> 6
    if kind >= 2:  # one transition: 0b11 to the node just before ("next"), 0b10 with address
        common = state & 0x3F
        inp_len = 0 if common else 1
        inp = _COMMON[common - 1] if common else data[addr - 1]
        if kind == 3:
            return [(inp, 0, addr - inp_len - 1)], False, 0
        sizes = data[addr - inp_len - 1]
        tsize, osize = sizes >> 4, sizes & 0x0F
        t_at = addr - inp_len - 1 - tsize
        end = t_at - osize
        delta = _uint(data, t_at, tsize)
        return [(inp, _uint(data, end, osize) if osize else 0, end - delta if delta else 0)], False, 0
    ntrans_len = 0 if state & 0x3F else 1
    ntrans = state & 0x3F or (256 if data[addr - 1] == 1 else data[addr - 1])
    sizes = data[addr - ntrans_len - 1]
    tsize, osize = sizes >> 4, sizes & 0x0F
    index_size = 256 if ntrans > _INDEX_THRESHOLD else 0
    final = bool(state & 0x40)
    inputs_end = addr - ntrans_len - 1 - index_size  # inputs: [inputs_end - ntrans, inputs_end), last first
    trans_end = inputs_end - ntrans
    outs_end = trans_end - ntrans * tsize
    end = outs_end - ntrans * osize - (osize if final else 0)
    trans = []
    for i in range(ntrans):
        delta = _uint(data, trans_end - (i + 1) * tsize, tsize)
        out = _uint(data, outs_end - (i + 1) * osize, osize) if osize else 0
        trans.append((data[inputs_end - i - 1], out, end - delta if delta else 0))
    final_out = _uint(data, outs_end - ntrans * osize - osize, osize) if final and osize else 0
    return trans, final, final_out


def fst_get(data: bytes, key: bytes) -> int | None:
    """The value of ``key`` in an ``fst`` crate map (format version 2 or 3), or None."""
    if len(data) < 32:
        raise CorruptFileError("fst", f"token set of {len(data)} bytes")
    version = _uint(data, 0, 8)
    root = _uint(data, len(data) - 12, 8) if version >= 3 else _uint(data, len(data) - 8, 8)
    if version < 2:
        raise UnsupportedFeatureError(f"fst map format version {version}")
    addr, out = root, 0
    for b in key:
        trans, _, _ = _node(data, addr)
        hit = next((t for t in trans if t[0] == b), None)
        if hit is None:
            return None
        out += hit[1]
        addr = hit[2]
    _, final, final_out = _node(data, addr)
    return out + final_out if final else None


# ------------------------------------------------------------------ postings
def _unpack4x(raw: np.ndarray, bits: int) -> np.ndarray:
    """Blocks (``(m, 16 * bits)`` bytes, ``BitPacker4x`` layout) back to ``(m, 128)`` values."""
    m = len(raw)
    if bits == 0:
        return np.zeros((m, BLOCK), np.uint32)
    words = raw.view("<u4").reshape(m, bits, 4).transpose(0, 2, 1).copy()  # (m, lane, word)
    lanes = np.unpackbits(words.view(np.uint8).reshape(m, 4, 4 * bits), axis=2, bitorder="little")
    weights = (np.uint64(1) << np.arange(bits, dtype=np.uint64))
    vals = (lanes.reshape(m, 4, 32, bits).astype(np.uint64) * weights).sum(axis=3)  # (m, lane, j)
    return vals.transpose(0, 2, 1).reshape(m, BLOCK).astype(np.uint32)


def _varints(buf: np.ndarray, count: int) -> np.ndarray:
    """The first ``count`` LEB128 values of ``buf``."""
    ends = np.flatnonzero(buf < 0x80)[:count]
    if len(ends) < count:
        raise CorruptFileError("postings", "a posting tail ends inside a varint")
    used = buf[: ends[-1] + 1] if count else buf[:0]
    group = np.concatenate([[0], np.cumsum(used < 0x80)[:-1]]) if len(used) else used.astype(np.int64)
    start = np.concatenate([[0], ends[:-1] + 1]) if count else ends
    shift = (np.arange(len(used)) - start[group]) * 7
    return np.bincount(group, weights=(used & 0x7F).astype(np.uint64) << shift.astype(np.uint64),
                       minlength=count).astype(np.uint64)[:count]


def decode_postings(blocks: list[bytes], length: int, codec: str) -> tuple[np.ndarray, np.ndarray]:
    """A posting list's doc ids and frequencies (``length`` postings; :mod:`.build.postings`)."""
    nfull, tail = divmod(length, BLOCK)
    docs, freqs = [], []
    for raw in blocks[:nfull]:
        first = _uint(raw, 4, 4)
        dbits = raw[8]
        dend = 9 + 16 * dbits
        fbits = raw[dend]
        deltas = _unpack4x(np.frombuffer(raw, np.uint8, 16 * dbits, 9).reshape(1, -1), dbits)[0]
        deltas[0] = 0
        docs.append(first + np.cumsum(deltas, dtype=np.uint64))
        freqs.append(_unpack4x(np.frombuffer(raw, np.uint8, 16 * fbits, dend + 1).reshape(1, -1), fbits)[0])
    if tail:
        if len(blocks) <= nfull:
            raise CorruptFileError("postings", f"{length} postings but {len(blocks)} blocks")
        body = np.frombuffer(blocks[nfull], np.uint8, offset=4)
        if codec == "varint_delta_v1":
            vals = _varints(body, 2 * tail)
            docs.append(np.cumsum(vals[:tail], dtype=np.uint64))
            freqs.append(vals[tail:])
        elif codec == "fixed32_v1":
            vals = body[: 8 * tail].view("<u4")
            docs.append(vals[:tail].astype(np.uint64))
            freqs.append(vals[tail:])
        else:
            raise UnsupportedFeatureError(f"full-text posting tail codec {codec!r}")
    if not docs:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(docs).astype(np.int64), np.concatenate(freqs).astype(np.int64)


# ------------------------------------------------------------------ partitions
def _meta(r: DataFileReader) -> dict[str, str]:
    return {(k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else str(v))
            for k, v in (r.schema.metadata or {}).items()}


def _column(r: DataFileReader, name: str, where: str) -> int:
    fid = next((f.id for f in r.schema.top_level() if f.name == name), None)
    if fid is None:
        raise UnsupportedFeatureError(f"{where}: no column {name!r}")
    return fid


@dataclass
class InvertedPartition:
    """One partition of a segment: its documents (row ids, token counts), token lookup and
    posting lists (read on first use, then kept)."""

    store: ObjectStore
    prefix: str  # "<segment dir>/part_<p>"
    row_ids: np.ndarray
    num_tokens: np.ndarray
    _tokens: dict[str, int] | bytes | None = None
    _postings: list | None = None
    _lengths: np.ndarray | None = None
    _codec: str = "varint_delta_v1"
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def open(cls, store: ObjectStore, prefix: str) -> "InvertedPartition":
        r = DataFileReader(store, f"{prefix}_docs.lance")
        t = r.read_table([_column(r, "_rowid", prefix), _column(r, "_num_tokens", prefix)])
        return cls(store, prefix, t["_rowid"].to_numpy().astype(np.uint64), t["_num_tokens"].to_numpy().astype(np.int64))

    def token_id(self, token: str) -> int | None:
        with self._lock:
            if self._tokens is None:
                self._tokens = self._read_tokens()
        if isinstance(self._tokens, dict):
            return self._tokens.get(token)
        return fst_get(self._tokens, token.encode())

    def _read_tokens(self) -> dict[str, int] | bytes:
        r = DataFileReader(self.store, f"{self.prefix}_tokens.lance")
        names = [f.name for f in r.schema.top_level()]
        if "_token_fst_bytes" in names:
            raw = r.read_table([_column(r, "_token_fst_bytes", self.prefix)])["_token_fst_bytes"]
            return raw[0].as_py() if len(raw) else b""
        t = r.read_table([_column(r, "_token", self.prefix), _column(r, "_token_id", self.prefix)])
        return dict(zip(t["_token"].to_pylist(), t["_token_id"].to_pylist(), strict=True))

    def postings(self, token_id: int) -> tuple[np.ndarray, np.ndarray]:
        """The documents (indices into :attr:`row_ids`) holding a token and its frequencies."""
        with self._lock:
            if self._postings is None:
                r = DataFileReader(self.store, f"{self.prefix}_invert.lance")
                meta = _meta(r)
                if meta.get("posting_block_size", str(BLOCK)) != str(BLOCK):
                    raise UnsupportedFeatureError(f"{self.prefix}: posting block size {meta['posting_block_size']}")
                self._codec = meta.get("posting_tail_codec", "varint_delta_v1")
                t = r.read_table([_column(r, "_posting", self.prefix), _column(r, "_length", self.prefix)])
                self._postings = t["_posting"].combine_chunks()
                self._lengths = t["_length"].to_numpy().astype(np.int64)
        assert self._lengths is not None
        blocks = [b.as_py() for b in self._postings[token_id].values] if self._postings[token_id].is_valid else []
        return decode_postings(blocks, int(self._lengths[token_id]), self._codec)


def segment_partitions(store: ObjectStore, segment: IndexMetadata) -> list[InvertedPartition]:
    """The partitions of a full-text segment.

    Raises:
        UnsupportedFeatureError: the pre-partition layout (``docs.lance``) or no partition.
    """
    names = [f.path for f in segment.files or ()] or sorted(store.list_dir(segment.directory))
    if "docs.lance" in names or "invert.lance" in names:
        raise UnsupportedFeatureError(f"{segment.directory}: the pre-partition full-text layout")
    prefixes = sorted(n[: -len("_docs.lance")] for n in names if n.startswith("part_") and n.endswith("_docs.lance"))
    if not prefixes:
        raise UnsupportedFeatureError(f"{segment.directory}: no full-text partition")
    return [InvertedPartition.open(store, f"{segment.directory}/{p}") for p in prefixes]
