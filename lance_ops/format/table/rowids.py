"""Stable row id sequences and row version sequences (docs/FORMAT.md §8).

A fragment of a dataset with stable row ids carries, per physical row, its row id
(``RowIdSequence``) and the dataset versions at which the row was created and last updated
(``RowDatasetVersionSequence``), each inline in the manifest as protobuf bytes.

Row id sequences are a list of ``U64Segment`` whose values are concatenated: ``range``,
``range_with_holes`` (absolute hole values), ``range_with_bitmap`` (LSB-first, 1 = present),
``sorted_array`` and ``array``; arrays are ``EncodedU64Array`` (u16/u32 offsets from a base, or
raw u64).  Version sequences are runs whose *length* (``len(span)``) is all that matters: after
compaction pylance leaves stale span contents behind, so a reader must never interpret them.

Decoding never materialises more ids than the caller says the fragment has (``expected_len``),
so a hostile ``range{0 .. 2**60}`` is rejected before any allocation.
"""

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

import numpy as np
from google.protobuf.message import DecodeError

from lance_ops.format._proto import rowids_pb2
from lance_ops.format.errors import ArgumentTypeError, CorruptFileError, InvalidArgumentError

if TYPE_CHECKING:
    from lance_ops.format.table.fragment import FragmentMetadata

__all__ = [
    "MAX_FRAGMENT_ROWS",
    "constant_versions",
    "decode_row_ids",
    "decode_version_runs",
    "decode_versions",
    "encode_row_id_segments",
    "encode_row_ids",
    "encode_segment",
    "encode_segments",
    "encode_version_runs",
    "encode_versions",
    "encode_versions_like",
    "fragment_row_ids",
    "fragment_versions",
    "inline_field",
    "range_segment",
    "segment_len",
]

#: Row addresses are ``fragment_id << 32 | offset``: no fragment can hold more rows than this.
MAX_FRAGMENT_ROWS = 1 << 32

_U64_MAX = (1 << 64) - 1
_U16_MAX = (1 << 16) - 1
_U32_MAX = (1 << 32) - 1
_EMPTY_U64 = np.zeros(0, dtype=np.uint64)


# --------------------------------------------------------------------------- helpers


def _as_u64(values: object, what: str) -> np.ndarray:
    """``values`` as a 1-D uint64 array; ValueError/TypeError for negatives or non-integers."""
    a = np.asarray(values)
    if a.ndim != 1:
        raise InvalidArgumentError(f"{what} must be one-dimensional, got shape {a.shape}")
    if a.size == 0:
        return _EMPTY_U64
    if a.dtype.kind == "u":
        return a.astype(np.uint64, copy=False)
    if a.dtype.kind == "i":
        if int(a.min()) < 0:
            raise InvalidArgumentError(f"{what} must be non-negative, got minimum {int(a.min())}")
        return a.astype(np.uint64)
    raise ArgumentTypeError(f"{what} must be an array of unsigned integers, got dtype {a.dtype}")


def _parse(message: object, data: bytes, path: str, what: str) -> None:
    try:
        message.ParseFromString(bytes(data))  # type: ignore[attr-defined]
    except (DecodeError, ValueError, TypeError) as e:
        raise CorruptFileError(path, f"cannot decode {what} protobuf ({len(data)} bytes): {e}") from e


_ARRAY_WIDTH = {"u16_array": 2, "u32_array": 4, "u64_array": 8}
_ARRAY_DTYPE = {"u16_array": "<u2", "u32_array": "<u4", "u64_array": "<u8"}


def _array_kind(arr: rowids_pb2.EncodedU64Array, path: str, what: str) -> tuple[str, bytes, int]:
    """``(kind, raw bytes, base)`` of an EncodedU64Array, checking the byte length."""
    kind = arr.WhichOneof("array")
    if kind is None:
        raise CorruptFileError(path, f"{what}: EncodedU64Array has no array type set")
    if kind == "u64_array":
        raw, base = arr.u64_array.values, 0
    else:
        sub = getattr(arr, kind)
        raw, base = sub.offsets, sub.base
    width = _ARRAY_WIDTH[kind]
    if len(raw) % width:
        raise CorruptFileError(
            path, f"{what}: {kind} holds {len(raw)} bytes, not a multiple of its {width}-byte width"
        )
    return kind, raw, base


def _array_len(arr: rowids_pb2.EncodedU64Array, path: str, what: str) -> int:
    kind, raw, _ = _array_kind(arr, path, what)
    return len(raw) // _ARRAY_WIDTH[kind]


def _array_values(arr: rowids_pb2.EncodedU64Array, path: str, what: str) -> np.ndarray:
    """The uint64 values of an EncodedU64Array (bounded by its byte size)."""
    kind, raw, base = _array_kind(arr, path, what)
    values = np.frombuffer(raw, dtype=_ARRAY_DTYPE[kind])
    if kind == "u64_array":
        return values.astype(np.uint64)
    if values.size == 0:
        return _EMPTY_U64
    if base + int(values.max()) > _U64_MAX:
        raise CorruptFileError(path, f"{what}: base {base} + offset {int(values.max())} overflows u64")
    return _offsets_plus(values, base)


def _encode_array(values: np.ndarray) -> rowids_pb2.EncodedU64Array:
    """EncodedU64Array as pylance picks it: u16/u32 offsets from ``base=min`` by ``max-min``."""
    out = rowids_pb2.EncodedU64Array()
    if values.size == 0:
        out.u64_array.SetInParent()
        return out
    lo, hi = int(values.min()), int(values.max())
    if hi - lo <= _U16_MAX:
        out.u16_array.base = lo
        out.u16_array.offsets = (values - np.uint64(lo)).astype("<u2").tobytes()
    elif hi - lo <= _U32_MAX:
        out.u32_array.base = lo
        out.u32_array.offsets = (values - np.uint64(lo)).astype("<u4").tobytes()
    else:
        out.u64_array.values = values.astype("<u8").tobytes()
    return out


def _range_bounds(r: object, path: str, what: str) -> tuple[int, int]:
    start, end = int(r.start), int(r.end)  # type: ignore[attr-defined]
    if end < start:
        raise CorruptFileError(path, f"{what}: range end {end} is below start {start}")
    return start, end


def _bitmap_ones(data: bytes, nbits: int, path: str, what: str) -> int:
    """Count of set bits of a LSB-first bitmap of ``nbits`` bits, checking its byte length."""
    if len(data) != (nbits + 7) // 8:
        raise CorruptFileError(
            path,
            f"{what}: bitmap of {len(data)} bytes for a range of {nbits} values "
            f"(expected {(nbits + 7) // 8} bytes)",
        )
    if not data:
        return 0
    raw = np.frombuffer(data, dtype=np.uint8)
    if nbits % 8 and int(raw[-1]) >> (nbits % 8):
        # pylance counts every bit of the buffer for len() but iterates only nbits: a set
        # padding bit would make the two disagree, and pylance never writes one.
        raise CorruptFileError(path, f"{what}: bitmap has bits set past the end of its range")
    return int(np.bitwise_count(raw).sum(dtype=np.int64))


# --------------------------------------------------------------------------- segments


def segment_len(seg: rowids_pb2.U64Segment, *, path: str = "<inline>") -> int:
    """Number of values of a segment, computed without materialising it.

    Args:
        seg: the segment.
        path: file or field named in errors.

    Returns:
        The segment length as pylance's ``U64Segment::len`` computes it.

    Raises:
        CorruptFileError: no segment type, ``end < start``, more holes than the range, a
            bitmap of the wrong size, or an array whose byte length does not fit its width.
    """
    kind = seg.WhichOneof("segment")
    if kind is None:
        raise CorruptFileError(path, "U64Segment has no segment type set")
    if kind == "range":
        start, end = _range_bounds(seg.range, path, "range segment")
        return end - start
    if kind == "range_with_holes":
        rwh = seg.range_with_holes
        start, end = _range_bounds(rwh, path, "range_with_holes segment")
        if not rwh.HasField("holes"):
            raise CorruptFileError(path, "range_with_holes segment has no holes array")
        n_holes = _array_len(rwh.holes, path, "range_with_holes holes")
        if n_holes > end - start:
            raise CorruptFileError(path, f"range_with_holes segment [{start}, {end}) lists {n_holes} holes")
        return end - start - n_holes
    if kind == "range_with_bitmap":
        rwb = seg.range_with_bitmap
        start, end = _range_bounds(rwb, path, "range_with_bitmap segment")
        return _bitmap_ones(rwb.bitmap, end - start, path, "range_with_bitmap segment")
    return _array_len(getattr(seg, kind), path, f"{kind} segment")


def _offsets_plus(offsets: np.ndarray, start: int) -> np.ndarray:
    """``offsets + start`` as uint64, in place on the converted copy (one temporary, not two)."""
    out = offsets.astype(np.uint64)
    if start:
        out += np.uint64(start)
    return out


def _segment_values(seg: rowids_pb2.U64Segment, path: str) -> np.ndarray:
    """Materialise one segment; the caller has bounded ``segment_len(seg)`` beforehand."""
    kind = seg.WhichOneof("segment")
    if kind == "range":
        start, end = int(seg.range.start), int(seg.range.end)
        return np.arange(start, end, dtype=np.uint64)
    if kind == "range_with_holes":
        rwh = seg.range_with_holes
        start, end = int(rwh.start), int(rwh.end)
        holes = _array_values(rwh.holes, path, "range_with_holes holes")
        if holes.size:
            if int(holes[0]) < start or int(holes[-1]) >= end or np.any(holes[1:] <= holes[:-1]):
                raise CorruptFileError(
                    path,
                    f"range_with_holes segment [{start}, {end}): holes are not strictly "
                    "increasing values inside the range",
                )
        keep = np.ones(end - start, dtype=bool)
        keep[(holes - np.uint64(start)).astype(np.intp)] = False
        return _offsets_plus(np.flatnonzero(keep), start)
    if kind == "range_with_bitmap":
        rwb = seg.range_with_bitmap
        start, end = int(rwb.start), int(rwb.end)
        bits = np.unpackbits(np.frombuffer(rwb.bitmap, dtype=np.uint8), count=end - start, bitorder="little")
        # (as bool: NumPy's nonzero over uint8 is ~3.5x slower than over bool)
        return _offsets_plus(np.flatnonzero(bits.view(np.bool_)), start)
    values = _array_values(getattr(seg, kind), path, f"{kind} segment")
    if kind == "sorted_array" and values.size > 1 and np.any(values[1:] < values[:-1]):
        raise CorruptFileError(path, "sorted_array segment is not sorted")
    return values


def encode_segment(ids: np.ndarray) -> rowids_pb2.U64Segment:
    """One segment for ``ids``, chosen as pylance's ``U64Segment::from_slice`` does (§8.1).

    Empty → ``range{0..0}``; strictly increasing and contiguous → ``range``; strictly
    increasing with gaps → the smallest of ``range_with_holes`` (24 + 4·holes),
    ``range_with_bitmap`` (24 + ⌈span/8⌉) and ``sorted_array`` (24 + 2·count), ties favouring
    holes then bitmap; anything else → ``array``.  (pylance treats a non-decreasing sequence with
    duplicates as sorted and then miscounts its holes; row ids are unique, so duplicates only
    arise from bad input and are encoded as a plain ``array`` here.)

    Args:
        ids: unsigned (or non-negative signed) integers.

    Returns:
        The ``U64Segment`` message.

    Raises:
        ValueError, TypeError: ``ids`` is not a 1-D array of non-negative integers.
    """
    a = _as_u64(ids, "ids")
    seg = rowids_pb2.U64Segment()
    n = int(a.size)
    if n == 0:
        seg.range.SetInParent()
        return seg
    if n > 1 and not bool(np.all(a[1:] > a[:-1])):
        seg.array.CopyFrom(_encode_array(a))
        return seg
    lo, hi = int(a[0]), int(a[-1])
    if hi == _U64_MAX:
        # an exclusive range end cannot be represented: only an array can hold u64::MAX
        seg.sorted_array.CopyFrom(_encode_array(a))
        return seg
    total = hi - lo + 1
    n_holes = total - n
    if n_holes == 0:
        seg.range.start, seg.range.end = lo, hi + 1
        return seg
    sizes = (24 + 4 * n_holes, 24 + (total + 7) // 8, 24 + 2 * n)
    best = min(sizes)
    if best == sizes[2] and best < sizes[0] and best < sizes[1]:
        seg.sorted_array.CopyFrom(_encode_array(a))
        return seg
    # either choice bounds ``total``: holes ≤ n/2, or span ≤ 16·n
    present = np.zeros(total, dtype=bool)
    present[(a - np.uint64(lo)).astype(np.intp)] = True
    if best == sizes[0]:
        rwh = seg.range_with_holes
        rwh.start, rwh.end = lo, hi + 1
        rwh.holes.CopyFrom(_encode_array(np.flatnonzero(~present).astype(np.uint64) + np.uint64(lo)))
    else:
        rwb = seg.range_with_bitmap
        rwb.start, rwb.end = lo, hi + 1
        rwb.bitmap = np.packbits(present, bitorder="little").tobytes()
    return seg


# --------------------------------------------------------------------------- row id sequences


@contextmanager
def inline_field(source: str, fragment_id: int, field: str) -> Iterator[None]:
    """Name the manifest, fragment and field in CorruptFileErrors of an inline sequence."""
    try:
        yield
    except CorruptFileError as e:
        if e.path not in ("<inline>", source):
            raise
        raise CorruptFileError(source or "<unwritten manifest>", f"fragment {fragment_id} {field}: {e.problem}") from None


def fragment_row_ids(frag: "FragmentMetadata", source: str) -> np.ndarray:
    """:func:`decode_row_ids` of a fragment's inline row ids (``physical_rows`` of them)."""
    assert frag.row_ids is not None
    with inline_field(source, frag.id, "inline_row_ids"):
        return decode_row_ids(frag.row_ids, expected_len=frag.physical_rows, path=source or "<inline>")


def fragment_versions(frag: "FragmentMetadata", source: str, *, created: bool) -> np.ndarray:
    """:func:`decode_versions` of a fragment's inline created-at / last-updated-at versions."""
    data = frag.created_at_versions if created else frag.last_updated_at_versions
    assert data is not None
    name = "inline_created_at_versions" if created else "inline_last_updated_at_versions"
    with inline_field(source, frag.id, name):
        return decode_versions(data, expected_len=frag.physical_rows, path=source or "<inline>")


def decode_row_ids(data: bytes, *, expected_len: int | None = None, path: str = "<inline>") -> np.ndarray:
    """Row ids of a fragment's physical rows, in order, from ``RowIdSequence`` bytes.

    Args:
        data: the serialized ``lance.table.RowIdSequence``.
        expected_len: the fragment's ``physical_rows``; the sequence must have exactly this many
            ids.  Checked before anything is materialised.  Without it the limit is
            ``MAX_FRAGMENT_ROWS`` — pass it whenever it is known.
        path: file or field named in errors.

    Returns:
        uint64 array, one id per physical row (deleted rows included).

    Raises:
        CorruptFileError: undecodable protobuf, malformed segments, or a length other than
            ``expected_len``.
    """
    seq = rowids_pb2.RowIdSequence()
    _parse(seq, data, path, "RowIdSequence")
    lens = [segment_len(s, path=path) for s in seq.segments]
    total = sum(lens)
    if expected_len is not None and total != expected_len:
        raise CorruptFileError(
            path, f"row id sequence holds {total} ids, the fragment has {expected_len} physical rows"
        )
    if total > MAX_FRAGMENT_ROWS:
        raise CorruptFileError(path, f"row id sequence holds {total} ids, more than a fragment can hold")
    parts = [_segment_values(s, path) for s, n in zip(seq.segments, lens, strict=True) if n]
    if not parts:
        return _EMPTY_U64.copy()
    if len(parts) == 1:
        # a fresh array unless the segment is a raw u64 array viewing the message bytes
        return parts[0] if parts[0].flags.owndata and parts[0].flags.writeable else parts[0].copy()
    return np.concatenate(parts)


def row_id_range(data: bytes, *, expected_len: int, path: str = "<inline>") -> tuple[int, int] | None:
    """``(start, end)`` when ``RowIdSequence`` bytes hold exactly one ``range`` segment of
    ``expected_len`` ids (what a fragment that never lost rows carries), else None; nothing is
    materialised per row.  Same checks as :func:`decode_row_ids` for that one segment."""
    seq = rowids_pb2.RowIdSequence()
    _parse(seq, data, path, "RowIdSequence")
    if len(seq.segments) != 1 or seq.segments[0].WhichOneof("segment") != "range":
        return None
    start, end = _range_bounds(seq.segments[0].range, path, "range segment")
    if end - start != expected_len:
        raise CorruptFileError(
            path, f"row id sequence holds {end - start} ids, the fragment has {expected_len} physical rows"
        )
    return start, end


def fragment_row_id_range(frag: "FragmentMetadata", source: str) -> tuple[int, int] | None:
    """:func:`row_id_range` of a fragment's inline row ids."""
    assert frag.row_ids is not None
    with inline_field(source, frag.id, "inline_row_ids"):
        return row_id_range(frag.row_ids, expected_len=frag.physical_rows, path=source or "<inline>")


def fragment_version_runs(frag: "FragmentMetadata", source: str, *, created: bool) -> tuple[np.ndarray, np.ndarray]:
    """:func:`decode_version_runs` of a fragment's inline versions; one run of version 1 over
    every physical row when it carries none (as pylance reports such rows)."""
    data = frag.created_at_versions if created else frag.last_updated_at_versions
    if data is None:
        return np.ones(1, dtype=np.uint64), np.array([frag.physical_rows], dtype=np.int64)
    name = "inline_created_at_versions" if created else "inline_last_updated_at_versions"
    with inline_field(source, frag.id, name):
        return decode_version_runs(data, expected_len=frag.physical_rows, path=source or "<inline>")


def encode_row_ids(ids: np.ndarray) -> bytes:
    """``RowIdSequence`` bytes holding ``ids`` as one segment (see :func:`encode_segment`).

    An empty ``ids`` gives one ``range{0..0}`` segment, as pylance's ``RowIdSequence::from(&[])``.
    """
    seq = rowids_pb2.RowIdSequence()
    seq.segments.append(encode_segment(ids))
    return seq.SerializeToString()


def range_segment(start: int, end: int) -> rowids_pb2.U64Segment:
    """The segment ``range{start..end}`` (ids ``start, ..., end - 1``), built without materialising them."""
    if not 0 <= start <= end:
        raise ValueError(f"need 0 <= start <= end, got [{start}, {end})")
    seg = rowids_pb2.U64Segment()
    seg.range.start, seg.range.end = int(start), int(end)
    return seg


def encode_segments(segments: Sequence[rowids_pb2.U64Segment]) -> bytes:
    """``RowIdSequence`` bytes of already encoded segments, in order."""
    seq = rowids_pb2.RowIdSequence()
    seq.segments.extend(segments)
    return seq.SerializeToString()


def encode_row_id_segments(parts: Sequence[np.ndarray]) -> bytes:
    """``RowIdSequence`` bytes with one segment per non-empty part, in order.

    Compaction writes one segment per old fragment (its ids masked by its deletions).  pylance
    additionally merges a ``range`` that ends where the next ``range`` starts and keeps an old
    fragment's segments as they were when it had no deletions; readers accept either.
    """
    seq = rowids_pb2.RowIdSequence()
    for part in parts:
        a = _as_u64(part, "ids")
        if a.size:
            seq.segments.append(encode_segment(a))
    return seq.SerializeToString()


# --------------------------------------------------------------------------- version sequences


def decode_version_runs(
    data: bytes, *, expected_len: int | None = None, path: str = "<inline>"
) -> tuple[np.ndarray, np.ndarray]:
    """``(versions, lengths)`` of the runs of ``RowDatasetVersionSequence`` bytes (uint64, int64).

    The run-length form of :func:`decode_versions` (same checks), for evaluating predicates
    once per run instead of once per row.
    """
    seq = rowids_pb2.RowDatasetVersionSequence()
    _parse(seq, data, path, "RowDatasetVersionSequence")
    lens: list[int] = []
    for i, run in enumerate(seq.runs):
        if not run.HasField("span"):
            raise CorruptFileError(path, f"version run {i} has no span")
        lens.append(segment_len(run.span, path=path))
    total = sum(lens)
    if expected_len is not None and total != expected_len:
        raise CorruptFileError(
            path, f"version sequence covers {total} rows, the fragment has {expected_len} physical rows"
        )
    if total > MAX_FRAGMENT_ROWS:
        raise CorruptFileError(path, f"version sequence covers {total} rows, more than a fragment can hold")
    versions = np.fromiter((run.version for run in seq.runs), dtype=np.uint64, count=len(lens))
    return versions, np.asarray(lens, dtype=np.int64)


def decode_versions(data: bytes, *, expected_len: int | None = None, path: str = "<inline>") -> np.ndarray:
    """Version of each physical row from ``RowDatasetVersionSequence`` bytes.

    Only each run's length (``len(span)``) is used; span contents are never interpreted, since
    compaction leaves stale ones behind (§8.2).

    Args:
        data: the serialized ``lance.table.RowDatasetVersionSequence``.
        expected_len: the fragment's ``physical_rows``; the runs must cover exactly this many rows.
        path: file or field named in errors.

    Returns:
        uint64 array, one version per physical row.

    Raises:
        CorruptFileError: undecodable protobuf, a run without span, a malformed span, or a length
            other than ``expected_len``.
    """
    versions, lens = decode_version_runs(data, expected_len=expected_len, path=path)
    if not lens.size:
        return _EMPTY_U64.copy()
    return np.repeat(versions, lens)


def _runs_to_bytes(versions: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> bytes:
    seq = rowids_pb2.RowDatasetVersionSequence()
    for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
        run = seq.runs.add()
        run.span.range.start, run.span.range.end = s, e
        run.version = int(versions[s])
    return seq.SerializeToString()


def encode_versions(versions: np.ndarray) -> bytes:
    """Run-length ``RowDatasetVersionSequence`` bytes: equal neighbours share a run.

    Each run's span is ``range{pos .. pos+len}`` over row positions.  Empty input gives b""
    (no runs), as pylance's ``from_uniform_row_count(0, v)``.
    """
    return encode_versions_like(versions, [])


def encode_version_runs(values: np.ndarray, lengths: np.ndarray) -> bytes:
    """``RowDatasetVersionSequence`` bytes from runs ``(values[i], lengths[i])``, equal neighbours
    merged; the spans are ``range{pos .. pos+len}`` over row positions (as :func:`encode_versions`)."""
    v = _as_u64(values, "values")
    n = np.asarray(lengths, dtype=np.int64)
    if v.size != n.size or (n < 0).any():
        raise ValueError(f"{v.size} run values and {n.size} run lengths (all >= 0) expected")
    keep = n > 0
    v, n = v[keep], n[keep]
    if not v.size:
        return b""
    first = np.concatenate(([True], v[1:] != v[:-1]))
    group = np.cumsum(first) - 1
    merged = np.bincount(group, weights=n).astype(np.int64)
    ends = np.cumsum(merged)
    return _runs_to_bytes_values(v[first], ends - merged, ends)


def _runs_to_bytes_values(values: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> bytes:
    seq = rowids_pb2.RowDatasetVersionSequence()
    for value, s, e in zip(values.tolist(), starts.tolist(), ends.tolist(), strict=True):
        run = seq.runs.add()
        run.span.range.start, run.span.range.end = s, e
        run.version = int(value)
    return seq.SerializeToString()


def constant_versions(n: int, version: int) -> bytes:
    """One run ``range{0..n}`` at ``version``: what pylance writes for a new fragment."""
    if n < 0 or version < 0:
        raise InvalidArgumentError(f"row count and version must be non-negative, got n={n}, version={version}")
    seq = rowids_pb2.RowDatasetVersionSequence()
    if n:
        run = seq.runs.add()
        run.span.range.start, run.span.range.end = 0, n
        run.version = version
    return seq.SerializeToString()


def encode_versions_like(versions: np.ndarray, parts_lengths: Sequence[int]) -> bytes:
    """Like :func:`encode_versions`, but runs also break at part boundaries.

    Compaction concatenates each old fragment's runs without merging across fragments; this
    reproduces that run structure.  An empty ``parts_lengths`` means one part.

    Raises:
        ValueError: ``parts_lengths`` does not sum to ``len(versions)``.
    """
    v = _as_u64(versions, "versions")
    n = int(v.size)
    cuts = np.flatnonzero(v[1:] != v[:-1]) + 1 if n > 1 else np.zeros(0, dtype=np.intp)
    if len(parts_lengths):
        lengths = np.asarray(parts_lengths, dtype=np.int64)
        if lengths.ndim != 1 or (lengths < 0).any() or int(lengths.sum()) != n:
            raise InvalidArgumentError(f"parts_lengths {list(parts_lengths)!r} must be non-negative and sum to {n}")
        bounds = np.cumsum(lengths)[:-1]
        cuts = np.union1d(cuts, bounds[(bounds > 0) & (bounds < n)])
    if n == 0:
        return b""
    starts = np.concatenate(([0], cuts)).astype(np.int64)
    ends = np.concatenate((cuts, [n])).astype(np.int64)
    return _runs_to_bytes(v, starts, ends)
