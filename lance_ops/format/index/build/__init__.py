"""Building index segments as pylance 14 writes them: BTREE, BITMAP, LABEL_LIST, ZONEMAP, NGRAM from
scratch, INVERTED with given tokenizer params, IVF_FLAT / IVF_PQ segments over an existing index's model, and INVERTED (full-text)
segments with an existing index's tokenizer params (``optimize_indices``; :mod:`.inverted`).

:func:`write_segment` turns the rows of some fragments (:class:`SegmentInput`) into the files of
``_indices/<uuid>/``; nothing is committed.  The planner that picks the fragments and commits
the ``CreateIndex`` is :mod:`lance_ops.format.ops.index_build`.
"""

from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from lance_ops.format.errors import UnsupportedFeatureError
from lance_ops.format.index.build.bitmap import write_bitmap
from lance_ops.format.index.build.btree import write_btree
from lance_ops.format.index.build.common import BuiltSegment, SegmentInput, SegmentWriter
from lance_ops.format.index.build.inverted import (
    DEFAULT_LAYOUT,
    InvertedLayout,
    indexed_row_ids,
    reference_layout,
    unsupported_setting,
    write_inverted,
)
from lance_ops.format.index.build.inverted_params import encode_details
from lance_ops.format.index.build.ivf import IvfModel, vectors, write_ivf
from lance_ops.format.index.build.ivf_train import given_model, partition_count, train_model
from lance_ops.format.index.build.label_list import write_label_list
from lance_ops.format.index.build.ngram import write_ngram
from lance_ops.format.index.build.text_tokens import TokenizerParams
from lance_ops.format.index.build.zonemap import write_zonemap
from lance_ops.format.index.metadata import IndexMetadata
from lance_ops.format.io.object_store import ObjectStore

#: the scalar kinds lance_ops builds (``create_scalar_index``, ``optimize_indices``)
BUILDABLE_KINDS = ("BTREE", "BITMAP", "LABEL_LIST", "ZONEMAP", "NGRAM")
#: the kinds lance_ops adds segments to (``optimize_indices``): vector kinds reuse the model,
#: INVERTED the tokenizer params of an existing segment
SEGMENT_KINDS = (*BUILDABLE_KINDS, "IVF_FLAT", "IVF_PQ", "INVERTED")
#: the kinds ``create_scalar_index`` builds from scratch (INVERTED: with the call's tokenizer params)
CREATABLE_KINDS = (*BUILDABLE_KINDS, "INVERTED")
#: the vector kinds lance_ops trains (``create_index``)
VECTOR_KINDS = ("IVF_FLAT", "IVF_PQ")
VECTOR_TYPE_URL = "/lance.index.pb.VectorIndexDetails"


def write_segment(
    store: ObjectStore,
    uuid: str,
    kind: str,
    data: SegmentInput,
    *,
    column: str,
    file_version: str,
    stable_row_ids: bool,
    reference: IndexMetadata | None = None,
    train: Mapping[str, Any] | None = None,
) -> BuiltSegment:
    """Write one segment of a ``kind`` index over ``data`` into ``_indices/<uuid>/``
    (vector kinds: over ``reference``'s model, with its details, or a model trained on ``data``
    with ``train`` = ``{"metric", "num_partitions", "num_sub_vectors"}``; INVERTED: with
    ``reference``'s tokenizer params).

    Raises:
        UnsupportedFeatureError: a kind lance_ops does not build, or a column type it cannot hold.
    """
    if kind not in SEGMENT_KINDS or (kind not in BUILDABLE_KINDS and reference is None and train is None):
        raise UnsupportedFeatureError(f"lance_ops builds {', '.join(BUILDABLE_KINDS)} indices, not {kind!r}")
    w = SegmentWriter(store, uuid, file_version)
    try:
        if train is not None and kind in VECTOR_KINDS:
            return _trained(w, data, kind, column, train)
        if train is not None and kind == "INVERTED":
            params = TokenizerParams.from_json(str(train["params"]), f"index {uuid}")
            return write_inverted(w, data, InvertedLayout(params, dict(DEFAULT_LAYOUT)), encode_details(params))
        if reference is not None and kind == "INVERTED":
            return write_inverted(w, data, reference_layout(store, reference), reference.details)
        if reference is not None and kind not in BUILDABLE_KINDS:
            built = write_ivf(w, data, IvfModel.from_segment(store, reference))
            return BuiltSegment(built.files, reference.type_url, reference.details, built.index_version)
        if kind == "BTREE":
            return write_btree(w, data, stable_row_ids=stable_row_ids)
        if kind == "BITMAP":
            return write_bitmap(w, data)
        if kind == "NGRAM":
            return write_ngram(w, data)
        if kind == "LABEL_LIST":
            return write_label_list(w, data, column=column)
        return write_zonemap(w, data)
    except BaseException:
        w.discard()
        raise


def _trained(w: SegmentWriter, data: SegmentInput, kind: str, column: str, train: Mapping[str, Any]) -> BuiltSegment:
    t = data.values.type
    if not pa.types.is_fixed_size_list(t) or not pa.types.is_floating(t.value_type):
        raise UnsupportedFeatureError(f"create_index: column {column!r} of type {t} is not a vector column")
    vecs, _ = vectors(data.values, t.list_size, f"column {column!r}")
    centroids = train.get("ivf_centroids")
    parts = len(centroids) if centroids is not None else partition_count(
        kind, len(vecs), train.get("num_partitions"), train.get("target_partition_size"))
    model, details = train_model(vecs, kind, str(train.get("metric", "l2")), parts, train.get("num_sub_vectors"),
                                 centroids=centroids, codebook=train.get("pq_codebook"))
    built = write_ivf(w, data, model)
    return BuiltSegment(built.files, VECTOR_TYPE_URL, details, 1)


__all__ = [
    "given_model",
    "BUILDABLE_KINDS",
    "CREATABLE_KINDS",
    "SEGMENT_KINDS",
    "VECTOR_KINDS",
    "BuiltSegment",
    "SegmentInput",
    "indexed_row_ids",
    "unsupported_setting",
    "write_segment",
]
