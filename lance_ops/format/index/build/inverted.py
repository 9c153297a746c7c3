"""INVERTED (full-text) segments for ``optimize_indices`` (docs/FORMAT.md "INVERTED segments").

pylance 14 writes its own segments in the partitioned layout (``metadata.lance``,
``part_<p>_{tokens,invert,docs}.lance``) whose token set is an ``fst`` map and whose posting
lists are block-compressed with block-max impacts.  lance_ops writes the single-partition
*legacy* layout that pylance 14 and lancedb 0.40 still read and search with the index (plan
``MatchQuery``): three Lance files of the dataset's file version,

- ``tokens.lance``: ``_token`` (utf8, sorted) and ``_token_id`` (uint32, its rank); schema
  metadata ``tokenizer`` = the index's ``params`` JSON (the reader builds its analyser from it);
- ``invert.lance``: one row per (token, document), grouped by token id, row ids ascending:
  ``_rowid`` (uint64) and ``_frequency`` (float32); schema metadata ``offsets`` = JSON list of
  each token's first row;
- ``docs.lance``: one row per document with at least one token: ``_rowid`` (uint64) and
  ``_num_tokens`` (uint32); schema metadata ``total_tokens``.

Row ids are stable row ids on datasets that have them, else row addresses (as pylance's).
``IndexMetadata.index_version`` 0 (arrow token set, legacy postings); details copied from the
reference segment (the same tokenizer params).
"""

import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import CorruptFileError
from ...file.reader import DataFileReader
from ...store import ObjectStore
from ..metadata import IndexMetadata
from .common import BuiltSegment, SegmentInput, SegmentWriter
from .text_tokens import TokenizerParams, tokenize

TYPE_URL = "/lance.table.InvertedIndexDetails"
TOKENS_FILE = "tokens.lance"
INVERT_FILE = "invert.lance"
DOCS_FILE = "docs.lance"
#: ``index_version`` of a legacy-layout segment (pylance: arrow token set -> 0)
LEGACY_INDEX_VERSION = 0


def reference_params(store: ObjectStore, ref: IndexMetadata) -> TokenizerParams:
    """The tokenizer params of an existing segment: ``metadata.lance`` ``params`` (pylance's
    layout) or ``tokens.lance`` ``tokenizer`` (the legacy layout lance_ops writes).

    Raises:
        CorruptFileError: neither file, or no params in it.
        UnsupportedFeatureError: params lance_ops does not tokenize exactly.
    """
    names = {f.path for f in ref.files or ()}
    for name, key in (("metadata.lance", "params"), (TOKENS_FILE, "tokenizer")):
        if names and name not in names:
            continue
        rel = f"{ref.directory}/{name}"
        try:
            meta = DataFileReader(store, rel).schema.metadata or {}
        except FileNotFoundError:
            continue
        raw = meta.get(key)
        if raw is not None:
            text = raw.decode() if isinstance(raw, bytes) else str(raw)
            return TokenizerParams.from_json(text, f"index {ref.name!r} ({rel})")
    raise CorruptFileError(ref.directory, f"inverted index {ref.name!r} has no tokenizer params")


def write_inverted(w: SegmentWriter, data: SegmentInput, params: TokenizerParams, details: bytes) -> BuiltSegment:
    """Tokenize ``data`` and write the three files of a legacy-layout segment."""
    toks = tokenize(data.values, params)
    ids = data.row_ids.astype(np.uint64, copy=False)
    # one (token, row) pair per occurrence -> counts per pair
    vocab, codes = _codes(toks.token)
    pair = codes.astype(np.int64) * max(len(ids), 1) + toks.row
    uniq, freq = np.unique(pair, return_counts=True)  # sorted by token code, then row (= row id order)
    tok_of, row_of = uniq // max(len(ids), 1), uniq % max(len(ids), 1)
    offsets = np.searchsorted(tok_of, np.arange(len(vocab)))
    w.write(
        TOKENS_FILE,
        pa.table({"_token": vocab, "_token_id": pa.array(np.arange(len(vocab)), pa.uint32())},
                 schema=pa.schema([pa.field("_token", pa.string(), False), pa.field("_token_id", pa.uint32(), False)])),
        metadata={"tokenizer": params.to_json()},
    )
    w.write(
        INVERT_FILE,
        pa.table({"_rowid": pa.array(ids[row_of], pa.uint64()), "_frequency": pa.array(freq, pa.float32())},
                 schema=pa.schema([pa.field("_rowid", pa.uint64(), False), pa.field("_frequency", pa.float32(), False)])),
        metadata={"offsets": json.dumps(offsets.tolist(), separators=(",", ":"))},
    )
    per_doc = np.bincount(toks.row, minlength=len(ids))
    docs = np.flatnonzero(per_doc)
    w.write(
        DOCS_FILE,
        pa.table({"_rowid": pa.array(ids[docs], pa.uint64()), "_num_tokens": pa.array(per_doc[docs], pa.uint32())},
                 schema=pa.schema([pa.field("_rowid", pa.uint64(), False), pa.field("_num_tokens", pa.uint32(), False)])),
        metadata={"total_tokens": str(int(per_doc.sum()))},
    )
    return BuiltSegment(tuple(w.files), TYPE_URL, details, LEGACY_INDEX_VERSION)


def _codes(tokens: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """The distinct tokens in byte order and each occurrence's rank among them."""
    enc = pc.dictionary_encode(tokens)
    order = pc.array_sort_indices(enc.dictionary).to_numpy()
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return enc.dictionary.take(pa.array(order)), rank[enc.indices.to_numpy(zero_copy_only=False)]
