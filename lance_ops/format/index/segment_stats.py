"""Per-segment index statistics, as pylance's ``stats.index_stats(name)["indices"]`` lists them:
read from each segment's files (IVF partitions and centroids, BTREE value range and pages,
bitmap counts, zones).  For other kinds ``index_stats`` has no ``indices`` key."""

import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow.compute as pc

from lance_ops.format._proto import index_pb2
from lance_ops.format.file.reader import DataFileReader
from lance_ops.format.index.metadata import IndexMetadata
from lance_ops.format.io.object_store import ObjectStore

_Reader = Callable[[ObjectStore, IndexMetadata], dict[str, Any]]
_READERS: dict[str, _Reader] = {}


def _reads(*kinds: str) -> Callable[[_Reader], _Reader]:
    def register(fn: _Reader) -> _Reader:
        for k in kinds:
            _READERS[k] = fn
        return fn
    return register


def readable(segment: IndexMetadata) -> bool:
    """Whether lance_ops reads the statistics of this segment's kind."""
    return segment.kind in _READERS


def segment_statistics(store: ObjectStore, segment: IndexMetadata) -> dict[str, Any]:
    """The statistics pylance lists for one segment of an index (of a kind :func:`readable`).

    Raises:
        CorruptFileError: a segment file that cannot be decoded.
        KeyError: a kind lance_ops does not read.
    """
    return _READERS[segment.kind](store, segment)


def _open(store: ObjectStore, segment: IndexMetadata, name: str) -> DataFileReader:
    sizes = {f.path: f.size_bytes for f in segment.files or ()}
    return DataFileReader(store, f"{segment.directory}/{name}", file_size=sizes.get(name))


def _meta(reader: DataFileReader) -> dict[str, str]:
    return {k: bytes(v).decode() for k, v in reader.schema.metadata.items()}


@_reads("IVF_FLAT", "IVF_PQ")
def _ivf(store: ObjectStore, segment: IndexMetadata) -> dict[str, Any]:
    index, aux = _open(store, segment, "index.idx"), _open(store, segment, "auxiliary.idx")
    meta, aux_meta = _meta(index), _meta(aux)
    desc = json.loads(meta["lance:index"])
    kind, metric = str(desc.get("type")), str(desc.get("distance_type", "l2"))
    model = index_pb2.IVF.FromString(index.global_buffer(int(meta["lance:ivf"])))
    parts = index_pb2.IVF.FromString(aux.global_buffer(int(aux_meta["lance:ivf"])))
    t = model.centroids_tensor
    centroids = np.frombuffer(t.data, np.float32).reshape(tuple(t.shape))
    storage = json.loads(json.loads(aux_meta["storage_metadata"])[0])
    if kind == "IVF_PQ":
        # PQ codes of a cosine index are l2 codes of the normalised vectors (what pylance reports)
        pq_metric = str(storage.get("distance_type", "l2" if metric == "cosine" else metric))
        sub = {"metric_type": pq_metric, "nbits": int(storage["nbits"]), "num_sub_vectors": int(storage["num_sub_vectors"]),
               "dimension": int(storage["dimension"]), "index_type": "PQ", "transposed": bool(storage["transposed"])}
    else:
        sub = {"dim": int(centroids.shape[1]), "index_type": "FLAT", "metric_type": metric}
    return {"index_type": kind, "uuid": segment.uuid, "uri": store.full_path(f"{segment.directory}/index.idx"),
            "metric_type": metric, "num_partitions": int(centroids.shape[0]), "sub_index": sub,
            "partitions": [{"size": int(n)} for n in parts.lengths], "centroids": centroids.tolist(),
            "loss": float(model.loss), "index_file_version": "V3"}


@_reads("BTREE")
def _btree(store: ObjectStore, segment: IndexMetadata) -> dict[str, Any]:
    pages = _open(store, segment, "page_lookup.lance").read_table()
    lo, hi = pc.min(pages.column("min")).as_py(), pc.max(pages.column("max")).as_py()
    return {"min": str(lo), "max": str(hi), "num_pages": pages.num_rows}


@_reads("BITMAP", "LABEL_LIST")
def _bitmaps(store: ObjectStore, segment: IndexMetadata) -> dict[str, Any]:
    return {"num_bitmaps": _open(store, segment, "bitmap_page_lookup.lance").num_rows}


@_reads("ZONEMAP")
def _zones(store: ObjectStore, segment: IndexMetadata) -> dict[str, Any]:
    zones = _open(store, segment, "zonemap.lance")
    return {"num_zones": zones.num_rows, "rows_per_zone": int(_meta(zones).get("rows_per_zone", 8192))}


@_reads("NGRAM")
def _ngrams(store: ObjectStore, segment: IndexMetadata) -> dict[str, Any]:
    return {"num_ngrams": _open(store, segment, "ngram_postings.lance").num_rows}


@_reads("INVERTED")
def _inverted(store: ObjectStore, segment: IndexMetadata) -> dict[str, Any]:
    """The params, and the tokens and documents of every partition (``metadata.lance``'s list)."""
    meta = _meta(_open(store, segment, "metadata.lance"))
    tokens = docs = 0
    for p in json.loads(meta.get("partitions", "[0]")):
        tok = _open(store, segment, f"part_{p}_tokens.lance")
        ids = {f.name: f.id for f in tok.schema.top_level()}
        if "_token_next_id" in ids:
            tokens += int(tok.read_table([ids["_token_next_id"]]).column(0)[0].as_py())
        else:
            tokens += tok.num_rows
        docs += _open(store, segment, f"part_{p}_docs.lance").num_rows
    return {"params": json.loads(meta["params"]), "num_tokens": tokens, "num_docs": docs}
