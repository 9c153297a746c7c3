"""New IVF_FLAT / IVF_PQ segments over an existing index's model, as pylance 14's
``optimize_indices`` writes them (upstream ``rust/lance/src/index/vector/ivf/v2.rs``,
``rust/lance-index/src/vector/pq/storage.rs``).

A segment reuses the reference segment's model: its centroids (``index.idx``) and, for PQ, its
codebook (``auxiliary.idx``).  New vectors go to the nearest centroid (L2; cosine on normalised
vectors; dot: the largest dot product), PQ codes the nearest codebook entry of each sub-vector of
the residual ``vector - centroid`` (dot: of the vector, as pylance's PQ for dot).

- ``index.idx``: no rows (column ``__flat_marker``), metadata ``lance:index``, ``lance:ivf`` = "1",
  ``lance:flat``; global buffer 1 an ``IVF`` message: centroids tensor, zero offsets and lengths,
  ``loss`` = the sum of squared distances of the segment's vectors to their centroids.
- ``auxiliary.idx``: rows grouped by partition (row id order inside), ``_rowid`` (stable row ids,
  else addresses) and ``flat`` (the vectors) or ``__pq_code`` (``M`` bytes per row, each
  partition's ``L x M`` block stored transposed, ``M x L``); global buffer 1 an ``IVF`` message
  with the partitions' offsets and lengths, buffer 2 the PQ codebook (``M x 256 x D/M`` float32,
  copied); metadata copied from the reference segment.
"""

import json

import numpy as np
import pyarrow as pa

from lance_ops.format._proto import index_pb2
from lance_ops.format.errors import CorruptFileError, UnsupportedFeatureError
from lance_ops.format.file.reader import DataFileReader
from lance_ops.format.index.build.common import BuiltSegment, SegmentInput, SegmentWriter
from lance_ops.format.index.metadata import IndexMetadata
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.schema import LanceSchema

INDEX_FILE = "index.idx"
AUX_FILE = "auxiliary.idx"
_F32 = index_pb2.Tensor.FLOAT32
_BLOCK_FLOATS = 1 << 18  # rows x centroids x dim per product: OpenBLAS keeps one thread up to here


class IvfModel:
    """What a segment is built over: the IVF centroids, the PQ codebook, and the schemas and
    extra global buffers of its two files (taken from an existing segment, or made fresh by
    :mod:`.ivf_train`)."""

    def __init__(
        self,
        kind: str,
        distance: str,
        centroids: np.ndarray,
        codebook: np.ndarray | None,
        aux_schema: LanceSchema,
        index_schema: LanceSchema,
        aux_buffers: tuple[bytes, ...] = (),
    ) -> None:
        self.kind, self.distance = kind, distance
        self.centroids, self.codebook = centroids, codebook
        self.aux_schema, self.index_schema, self.aux_buffers = aux_schema, index_schema, aux_buffers

    @classmethod
    def from_segment(cls, store: ObjectStore, ref: IndexMetadata) -> "IvfModel":
        """The model of an existing segment (its files as pylance 14 writes them).

        Raises:
            UnsupportedFeatureError: another vector kind or distance than lance_ops extends.
            CorruptFileError: the files are not IVF index files.
        """
        sizes = {f.path: f.size_bytes for f in ref.files or ()}
        index = DataFileReader(store, f"{ref.directory}/{INDEX_FILE}", file_size=sizes.get(INDEX_FILE))
        aux = DataFileReader(store, f"{ref.directory}/{AUX_FILE}", file_size=sizes.get(AUX_FILE))
        where = f"{ref.directory}/{INDEX_FILE}"
        meta = {k: bytes(v).decode() for k, v in index.schema.metadata.items()}
        try:
            desc = json.loads(meta["lance:index"])
            ivf = index_pb2.IVF.FromString(index.global_buffer(int(meta["lance:ivf"])))
        except (KeyError, ValueError) as e:
            raise CorruptFileError(where, f"not an IVF index file: {e}") from e
        kind, distance = str(desc.get("type")), str(desc.get("distance_type", "l2"))
        if kind not in ("IVF_FLAT", "IVF_PQ") or distance not in ("l2", "cosine", "dot"):
            raise UnsupportedFeatureError(
                f"index {ref.name!r}: lance_ops adds segments to IVF_FLAT / IVF_PQ indices with l2, cosine or dot "
                f"distance, not {kind} / {distance}")
        t = ivf.centroids_tensor
        if t.data_type != _F32 or len(t.shape) != 2:
            raise UnsupportedFeatureError(f"{where}: centroids of type {t.data_type} and shape {list(t.shape)}")
        centroids = np.frombuffer(t.data, np.float32).reshape(tuple(t.shape))
        codebook = _codebook(aux, f"{ref.directory}/{AUX_FILE}") if kind == "IVF_PQ" else None
        extra = tuple(aux.global_buffer(i) for i in range(2, aux._gbo.shape[0]))
        return cls(kind, distance, centroids, codebook, aux.schema, index.schema, extra)


def _codebook(aux: DataFileReader, where: str) -> np.ndarray:
    meta = {k: bytes(v).decode() for k, v in aux.schema.metadata.items()}
    try:
        pq = json.loads(json.loads(meta["storage_metadata"])[0])
        cb = index_pb2.Tensor.FromString(aux.global_buffer(int(pq["codebook_position"])))
    except (KeyError, ValueError, IndexError) as e:
        raise CorruptFileError(where, f"no PQ codebook: {e}") from e
    m, nbits, dim = int(pq["num_sub_vectors"]), int(pq["nbits"]), int(pq["dimension"])
    if nbits != 8 or not pq.get("transposed", False) or cb.data_type != _F32 or dim % m:
        raise UnsupportedFeatureError(f"{where}: PQ with nbits={nbits}, transposed={pq.get('transposed')}")
    return np.frombuffer(cb.data, np.float32).reshape(m, 1 << nbits, dim // m)


def _nearest(x: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Index of the nearest row of ``c`` (squared L2) for each row of ``x``.

    ``|c|^2 - 2 x.c`` per block of rows, the blocks small enough (rows x centroids x dim <=
    2^18) that OpenBLAS runs each product on one thread: its threads thrash on shared cores
    (100k x 4 against 256 codes: 61 ms in blocks of 256 rows, 2.2 s in blocks of 1,024 under
    load here; ``einsum`` 99 ms).
    """
    x = np.ascontiguousarray(x, dtype=np.float32)
    cc = (c * c).sum(1, dtype=np.float32)
    ct2 = np.ascontiguousarray(np.float32(-2.0) * c.T, dtype=np.float32)
    idx = np.empty(len(x), np.int64)
    rows = max(64, _BLOCK_FLOATS // max(1, c.shape[0] * c.shape[1]))
    for s in range(0, len(x), rows):
        d = x[s : s + rows] @ ct2
        d += cc
        idx[s : s + rows] = d.argmin(1)
    return idx


def nearest_partition(x: np.ndarray, c: np.ndarray, distance: str) -> np.ndarray:
    """The partition of each row: the nearest centroid in L2 (l2, and cosine on normalised
    rows), the largest dot product for ``dot`` (pylance's dot distance ``1 - x.c``)."""
    if distance != "dot":
        return _nearest(x, c)
    x = np.ascontiguousarray(x, dtype=np.float32)
    ct = np.ascontiguousarray(c.T, dtype=np.float32)
    idx = np.empty(len(x), np.int64)
    rows = max(64, _BLOCK_FLOATS // max(1, c.shape[0] * c.shape[1]))
    for s in range(0, len(x), rows):
        idx[s : s + rows] = (x[s : s + rows] @ ct).argmax(1)
    return idx


def row_sq_sums(x: np.ndarray) -> np.ndarray:
    """Each row's sum of squares in ``x``'s float type, added in column order
    (``((x0^2 + x1^2) + x2^2) + ...``, as pylance sums): one whole-column add per dimension,
    bit-identical to ``np.add.accumulate(x * x, axis=1)[:, -1]`` and ~4x quicker."""
    out = np.zeros(len(x), x.dtype if x.dtype.kind == "f" else np.float32)
    for j in range(x.shape[1]):
        col = x[:, j]
        out += col * col
    return out


def normalise(vecs: np.ndarray) -> np.ndarray:
    """Unit vectors (cosine), float32 with a sequential sum of squares: bit-identical to
    pylance's at small dimensions; zero vectors stay zero."""
    norms = np.sqrt(row_sq_sums(vecs))[:, None] if vecs.size else np.ones((len(vecs), 1))
    return vecs / np.where(norms == 0, np.float32(1), norms).astype(np.float32)


def vectors(values: pa.Array, dim: int, where: str) -> tuple[np.ndarray, np.ndarray]:
    """The non-null vectors of ``values`` as a float32 matrix, and which rows they are."""
    if not pa.types.is_fixed_size_list(values.type) or values.type.list_size != dim:
        raise UnsupportedFeatureError(f"{where}: column of type {values.type}, the index holds {dim}-dim vectors")
    if values.null_count == 0:  # no copy of the column: the child values as they are
        valid = np.ones(len(values), dtype=bool)
        flat = values.values.slice(values.offset * dim, len(values) * dim).to_numpy(zero_copy_only=False)
    else:
        valid = values.is_valid().to_numpy(zero_copy_only=False)
        flat = values.filter(pa.array(valid)).flatten().to_numpy(zero_copy_only=False)
    return np.asarray(flat, dtype=np.float32).reshape(-1, dim), valid


def _pq_codes(model: IvfModel, residual: np.ndarray) -> np.ndarray:
    cb = model.codebook
    assert cb is not None
    m, _, sub = cb.shape
    return np.stack([_nearest(residual[:, j * sub : (j + 1) * sub], cb[j]) for j in range(m)], 1).astype(np.uint8)


def _transpose_blocks(codes: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Each partition's ``L x M`` block stored as ``M x L`` (pylance's transposed PQ storage)."""
    out = np.empty_like(codes)
    start = 0
    for n in lengths.tolist():  # one step per partition (an empty one has no block)
        if n:
            out[start : start + n] = codes[start : start + n].T.reshape(n, -1)
        start += n
    return out


def _partition_order(part: np.ndarray, ids: np.ndarray, k: int) -> np.ndarray:
    """Rows ordered by partition, by row id inside one (``np.lexsort((ids, part))``): when the
    ids already ascend (addresses, and row ids in fragment order) a stable radix sort of the
    partition numbers (as 16-bit) gives the same order ~10x quicker."""
    if k <= 1 << 16 and (len(ids) < 2 or bool((ids[1:] >= ids[:-1]).all())):
        return np.argsort(part.astype(np.uint16), kind="stable")
    return np.lexsort((ids, part))


def write_ivf(w: SegmentWriter, data: SegmentInput, model: IvfModel) -> BuiltSegment:
    """A new segment of the model's index over ``data`` (null vectors are not indexed)."""
    dim = model.centroids.shape[1]
    vecs, valid = vectors(data.values, dim, w.directory)
    ids = data.row_ids[valid]
    if model.distance == "cosine":  # assigned, quantised and stored normalised (as pylance)
        vecs = normalise(vecs)
    part = nearest_partition(vecs, model.centroids, model.distance)
    diff = vecs - np.take(model.centroids, part, axis=0)  # (np.take: ~5x quicker than [part] on rows)
    # loss: float32 squared distances (summed in order per row, as pylance), added up in float64,
    # of the newly assigned rows only (a merge copies the merged segments' rows as they are)
    dist = row_sq_sums(diff)
    if data.new_fragments is not None:
        frags = (data.row_addrs[valid] >> np.uint64(32)).astype(np.int64)
        dist = dist[np.isin(frags, np.fromiter(data.new_fragments, np.int64))]
    loss = float(dist.astype(np.float64).sum())
    k = model.centroids.shape[0]
    order = _partition_order(part, ids, k)
    ids = ids[order]
    lengths = np.bincount(part, minlength=k)
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    aux_arrow = model.aux_schema.to_arrow()
    if model.kind == "IVF_PQ":
        # codes of the rows as they came (a row's code does not depend on the order), then sorted
        # (dot: PQ codes of the vectors themselves, pylance's PQ uses no residual for dot)
        codes = _transpose_blocks(np.take(_pq_codes(model, vecs if model.distance == "dot" else diff), order, axis=0),
                                  lengths)
        name = "__pq_code"
        col = pa.FixedSizeListArray.from_arrays(pa.array(codes.reshape(-1), pa.uint8()), codes.shape[1])
    else:
        name = "flat"
        flat = np.take(vecs, order, axis=0)
        col = pa.FixedSizeListArray.from_arrays(pa.array(flat.reshape(-1), pa.float32()), dim)
    table = pa.table({"_rowid": pa.array(ids, pa.uint64()), name: col.cast(aux_arrow.field(name).type)})
    aux_ivf = index_pb2.IVF(offsets=offsets.tolist(), lengths=lengths.tolist())
    buffers = (aux_ivf.SerializeToString(), *model.aux_buffers)
    w.write_as(AUX_FILE, table.select(aux_arrow.names), model.aux_schema, buffers)
    index_ivf = index_pb2.IVF(
        offsets=[0] * k, lengths=[0] * k, loss=loss,
        centroids_tensor=index_pb2.Tensor(data_type=_F32, shape=list(model.centroids.shape),
                                          data=model.centroids.tobytes()),
    )
    marker = pa.table({"__flat_marker": pa.array([], pa.uint64())}, schema=model.index_schema.to_arrow())
    w.write_as(INDEX_FILE, marker, model.index_schema, (index_ivf.SerializeToString(),))
    return BuiltSegment(tuple(sorted(w.files, key=lambda f: f.path)), "", b"", 1)
