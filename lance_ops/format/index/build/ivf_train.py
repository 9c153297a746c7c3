"""Training a new IVF_FLAT / IVF_PQ index as pylance 14's ``create_index`` does: k-means on a
sample (``sample_rate`` 256 rows per partition, at most 50 iterations), PQ codebooks (8 bits,
256 entries per sub-vector) by k-means on a sample of 65,536 residuals; the model's files and
``VectorIndexDetails`` as pylance writes them (docs/FORMAT.md section 14).

The centroids are not pylance's (random initialisation differs); the index answers as any
IVF index does: exactly with every partition probed and refined on the raw vectors.
"""

import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from lance_ops.format._proto import index_pb2
from lance_ops.format.errors import InvalidArgumentError, UnsupportedFeatureError
from lance_ops.format.index.build.ivf import IvfModel, _nearest, normalise
from lance_ops.format.schema import LanceSchema

IVF_SAMPLE_RATE = 256
PQ_SAMPLE_ROWS = 256 * 256
MAX_ITERS = 50
TARGET_PARTITION_SIZE = 8192
_METRICS = {"l2": 0, "cosine": 1, "dot": 2}
#: the build parameters pylance 14 records in ``VectorIndexDetails`` (field 9)
_PARAMS_FLAT = (
    ("lance.skip_transpose", "false"),
    ("lance.ivf.sample_rate", str(IVF_SAMPLE_RATE)),
    ("lance.ivf.shuffle_partition_batches", "10240"),
    ("lance.ivf.shuffle_partition_concurrency", "2"),
    ("lance.ivf.max_iters", str(MAX_ITERS)),
)
_PARAMS_PQ = (*_PARAMS_FLAT, ("lance.pq.sample_rate", "256"), ("lance.pq.max_iters", str(MAX_ITERS)),
              ("lance.pq.kmeans_redos", "1"))


def kmeans(x: np.ndarray, k: int, rng: np.random.Generator, iters: int = MAX_ITERS) -> np.ndarray:
    """Lloyd's k-means (random distinct rows as the start; an emptied cluster takes a random
    row), until no assignment changes or ``iters`` rounds; float32 centroids ``k x dim``."""
    if len(x) < k:
        raise InvalidArgumentError(f"k-means of {k} clusters needs at least {k} vectors, got {len(x)}")
    c = x[rng.choice(len(x), k, replace=False)].astype(np.float32)
    assign = np.full(len(x), -1, np.int64)
    for _ in range(iters):
        new = _nearest(x, c)
        if np.array_equal(new, assign):
            break
        assign = new
        counts = np.bincount(assign, minlength=k)
        sums = np.zeros_like(c, dtype=np.float64)
        np.add.at(sums, assign, x)  # rows x dim adds, in C
        empty = counts == 0
        c = (sums / np.maximum(counts, 1)[:, None]).astype(np.float32)
        if empty.any():
            c[empty] = x[rng.choice(len(x), int(empty.sum()), replace=False)]
    return c


def _details(kind: str, metric: str, num_sub_vectors: int) -> bytes:
    """``VectorIndexDetails``: 1 metric (absent for l2), 4 PQ {1 bits, 2 sub-vectors}, 8 flat {},
    9 build parameters (map entries)."""

    def varint(v: int) -> bytes:
        out = bytearray()
        while True:
            b, v = v & 0x7F, v >> 7
            out.append(b | (0x80 if v else 0))
            if not v:
                return bytes(out)

    def ld(field: int, payload: bytes) -> bytes:
        return varint(field << 3 | 2) + varint(len(payload)) + payload

    out = b"" if _METRICS[metric] == 0 else varint(1 << 3) + varint(_METRICS[metric])
    if kind == "IVF_PQ":
        out += ld(4, varint(1 << 3) + varint(8) + varint(2 << 3) + varint(num_sub_vectors))
        params = _PARAMS_PQ
    else:
        out += ld(8, b"")
        params = _PARAMS_FLAT
    for k, v in params:
        out += ld(9, ld(1, k.encode()) + ld(2, v.encode()))
    return out


def default_partitions(rows: int) -> int:
    """pylance 14's default: one partition per 8,192 rows."""
    return max(1, math.ceil(rows / TARGET_PARTITION_SIZE))


def partition_count(kind: str, rows: int, num_partitions: int | None, target_partition_size: int | None) -> int:
    """The partitions pylance 14 trains: ``num_partitions`` when given (IVF_PQ: at most one per
    256 rows), else one per ``target_partition_size`` rows (rounded down, at least one), else
    :func:`default_partitions`."""
    if num_partitions:
        return min(int(num_partitions), max(1, rows // 256)) if kind == "IVF_PQ" else int(num_partitions)
    if target_partition_size:
        return max(1, rows // int(target_partition_size))
    return default_partitions(rows)


def given_model(model: Mapping[str, Any]) -> dict[str, Any]:
    """pylance's ``ivf_centroids`` / ``pq_codebook`` as float32 arrays (a codebook may be a
    ``FixedShapeTensorArray``), ``target_partition_size`` as an int; what is not given is left out.

    Raises:
        InvalidArgumentError: centroids that are not a matrix, a codebook that is not
            ``(num_sub_vectors, 256, sub_dim)``.
    """
    out: dict[str, Any] = {}
    if model.get("target_partition_size") is not None:
        out["target_partition_size"] = int(model["target_partition_size"])
    if model.get("ivf_centroids") is not None:
        c = np.asarray(model["ivf_centroids"], dtype=np.float32)
        if c.ndim != 2:
            raise InvalidArgumentError(f"create_index: ivf_centroids must be (num_partitions, dim), got shape {c.shape}")
        out["ivf_centroids"] = c
    if model.get("pq_codebook") is not None:
        book = model["pq_codebook"]
        book = book.to_numpy_ndarray() if hasattr(book, "to_numpy_ndarray") else book
        b = np.asarray(book, dtype=np.float32)
        if b.ndim != 3 or b.shape[1] != 256:
            raise InvalidArgumentError(f"create_index: pq_codebook must be (num_sub_vectors, 256, sub_dim), got {b.shape}")
        out["pq_codebook"] = b
    return out


def default_sub_vectors(dim: int) -> int:
    return next((dim // s for s in (16, 8, 4, 2) if dim % s == 0 and dim // s >= 1), 1)


def train_model(
    vecs: np.ndarray, kind: str, metric: str, num_partitions: int, num_sub_vectors: int | None, seed: int = 42,
    *, centroids: np.ndarray | None = None, codebook: np.ndarray | None = None,
) -> tuple[IvfModel, bytes]:
    """A fresh model over ``vecs`` (float32 rows; normalised first for cosine) and the details
    bytes of its ``IndexMetadata``; ``centroids`` / ``codebook`` given are used, not trained.

    Raises:
        UnsupportedFeatureError: another kind or metric than IVF_FLAT / IVF_PQ with l2, cosine or dot.
        InvalidArgumentError: fewer vectors than partitions, or sub-vectors not dividing the dimension.
    """
    metric = metric.lower()
    if kind not in ("IVF_FLAT", "IVF_PQ") or metric not in _METRICS:
        raise UnsupportedFeatureError(f"create_index: lance_ops trains IVF_FLAT / IVF_PQ with l2, cosine or dot, not "
                                      f"{kind} / {metric}")
    dim = vecs.shape[1]
    if metric == "cosine":
        vecs = normalise(vecs)
    rng = np.random.default_rng(seed)
    if centroids is None:
        sample = vecs[rng.choice(len(vecs), min(len(vecs), IVF_SAMPLE_RATE * num_partitions), replace=False)]
        centroids = kmeans(sample, num_partitions, rng)
    elif centroids.shape[1] != dim:
        raise InvalidArgumentError(f"create_index: ivf_centroids of dimension {centroids.shape[1]}, the column's is {dim}")
    m = 0
    if kind == "IVF_PQ" and codebook is not None:
        m = codebook.shape[0]
        if m * codebook.shape[2] != dim:
            raise InvalidArgumentError(f"create_index: pq_codebook {codebook.shape} does not cover the dimension {dim}")
    elif kind == "IVF_PQ":
        m = num_sub_vectors or default_sub_vectors(dim)
        if dim % m:
            raise InvalidArgumentError(f"create_index: num_sub_vectors={m} does not divide the dimension {dim} "
                                       f"(dimension {dim} must be divisible by num_sub_vectors {m})")
        pq_rows = vecs[rng.choice(len(vecs), min(len(vecs), PQ_SAMPLE_ROWS), replace=False)]
        # dot: codebooks of the vectors themselves (pylance's PQ uses residuals for l2 and cosine only)
        resid = pq_rows if metric == "dot" else pq_rows - centroids[_nearest(pq_rows, centroids)]
        sub = dim // m
        codebook = np.stack([kmeans(np.ascontiguousarray(resid[:, j * sub : (j + 1) * sub]), min(256, len(resid)), rng)
                             for j in range(m)])
        if codebook.shape[1] < 256:  # fewer rows than codes: pad with copies (never the nearest twice)
            codebook = np.concatenate([codebook, np.repeat(codebook[:, :1], 256 - codebook.shape[1], 1)], 1)
    return _fresh(kind, metric, centroids, codebook if kind == "IVF_PQ" else None, dim, m), _details(kind, metric, m)


def _fresh(kind: str, metric: str, centroids: np.ndarray, codebook: np.ndarray | None, dim: int, m: int) -> IvfModel:
    k = len(centroids)
    index_schema = LanceSchema.from_arrow(pa.schema([pa.field("__flat_marker", pa.uint64(), nullable=False)]))
    index_schema = index_schema.__class__(index_schema.fields, {
        "lance:index": json.dumps({"type": kind, "distance_type": metric}, separators=(",", ":")).encode(),
        "lance:ivf": b"1",
        "lance:flat": json.dumps([""] * k).replace(", ", ",").encode(),
    })
    if kind == "IVF_PQ":
        assert codebook is not None
        column = pa.field("__pq_code", pa.list_(pa.uint8(), m))
        storage = {"codebook_position": 2, "nbits": 8, "num_sub_vectors": m, "dimension": dim, "codebook_tensor": [],
                   "transposed": True}
        tensor = index_pb2.Tensor(data_type=index_pb2.Tensor.FLOAT32, shape=[256, dim],
                                  data=np.ascontiguousarray(codebook, np.float32).tobytes())
        buffers: tuple[bytes, ...] = (tensor.SerializeToString(),)
    else:
        column = pa.field("flat", pa.list_(pa.float32(), dim), nullable=False)
        storage, buffers = {"dim": dim}, ()
    aux_schema = LanceSchema.from_arrow(pa.schema([pa.field("_rowid", pa.uint64()), column]))
    aux_schema = aux_schema.__class__(aux_schema.fields, {
        "distance_type": metric.encode(),
        "lance:ivf": b"1",
        "storage_metadata": json.dumps([json.dumps(storage, separators=(",", ":"))]).encode(),
    })
    return IvfModel(kind, metric, centroids, codebook, aux_schema, index_schema, buffers)
