"""Corrupt ``general`` (LZ4 / zstd) buffers of 2.1/2.2 pages raise CorruptFileError naming the file
and column, never the codec's bare OSError (tests/reliability/test_hostile.py met one at random)."""

import numpy as np
import pyarrow as pa
import pytest

from lance_ops.format._proto import encodings_v2_1_pb2 as pb
from lance_ops.format.errors import CorruptFileError
from lance_ops.format.file.v21.compression import Where, general_decompress

PLAIN = b"lance_ops " * 5000
W = Where("data/x.lance", 3)


def _lz4(payload: bytes) -> np.ndarray:
    raw = len(PLAIN).to_bytes(4, "little") + payload
    return np.frombuffer(raw, np.uint8)


def _zstd(payload: bytes) -> np.ndarray:
    return np.frombuffer(len(PLAIN).to_bytes(8, "little") + payload, np.uint8)


def _comp(scheme: int) -> pb.BufferCompression:
    c = pb.BufferCompression()
    c.scheme = scheme
    return c


@pytest.mark.parametrize(("scheme", "codec", "frame"), [(pb.COMPRESSION_ALGORITHM_LZ4, "lz4_raw", _lz4),
                                                         (pb.COMPRESSION_ALGORITHM_ZSTD, "zstd", _zstd)])
def test_corrupt_general_buffers_raise_named_errors(scheme, codec, frame):
    packed = pa.Codec(codec).compress(PLAIN, asbytes=True)
    assert general_decompress(W, _comp(scheme), frame(packed)).tobytes() == PLAIN
    with pytest.raises(CorruptFileError, match=r"data/x\.lance.*column 3.*does not decompress"):
        general_decompress(W, _comp(scheme), frame(packed[: len(packed) // 2]))  # truncated

