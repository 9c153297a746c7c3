"""INVERTED (full-text) segments for ``optimize_indices``, laid out as pylance 14 writes them
(upstream ``rust/lance-index/src/scalar/inverted/``; docs/FORMAT.md "INVERTED segments").

One partition (0), four Lance files of the dataset's file version:

- ``metadata.lance``: one row, ``deleted_fragments`` (``binary``: an empty portable roaring
  bitmap); schema metadata ``partitions`` = ``[0]``, ``params`` (the tokenizer params JSON),
  ``token_set_format``, ``format_version``, ``posting_block_size``, ``posting_tail_codec`` (all
  but ``partitions`` copied from the reference segment: pylance merges only segments that agree);
- ``part_0_tokens.lance``: one row, ``_token_fst_bytes`` (``large_binary``: an FST map token ->
  token id, :mod:`.fst`), ``_token_next_id`` (``uint32``: the number of tokens),
  ``_token_total_length`` (``uint64``: their bytes);
- ``part_0_invert.lance``: one row per token id: ``_posting`` (``list<large_binary>``: the
  compressed blocks, :mod:`.postings`), ``_max_score`` (``float``: the best BM25 of the token in
  the partition), ``_length`` (``uint32``: its number of documents); schema metadata
  ``posting_tail_codec``, ``format_version``, ``posting_block_size``.  (pylance also writes
  ``_impacts``, block-max impact lists its WAND uses when present; lance_ops leaves the column
  out, which the reader allows: the answers and scores are the same); with ``with_position``,
  ``_position`` (``list<list<large_binary>>``: per document of the posting list its positions,
  :func:`.postings.encode_positions`; pylance's older layout, which pylance 14 still reads);
- ``part_0_docs.lance``: one row per document with at least one token, in row order (its
  position is the doc id postings use): ``_rowid`` (``uint64``: stable row id on datasets that
  have them, else the address), ``_num_tokens`` (``uint32``); schema metadata ``total_tokens``.

``IndexMetadata.index_version`` 2 and details copied from the reference segment.
"""

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap

from lance_ops.format.errors import CorruptFileError, UnsupportedFeatureError
from lance_ops.format.file.reader import DataFileReader
from lance_ops.format.index.build.common import BuiltSegment, SegmentInput, SegmentWriter
from lance_ops.format.index.build.fst import build_fst
from lance_ops.format.index.build.postings import BLOCK, bm25, encode_positions, encode_postings
from lance_ops.format.index.build.text_tokens import TokenizerParams, tokenize_documents
from lance_ops.format.index.metadata import IndexMetadata
from lance_ops.format.io.object_store import ObjectStore

TYPE_URL = "/lance.table.InvertedIndexDetails"
METADATA_FILE = "metadata.lance"
TOKENS_FILE = "part_0_tokens.lance"
INVERT_FILE = "part_0_invert.lance"
DOCS_FILE = "part_0_docs.lance"
INDEX_VERSION = 2
#: what pylance 14.0.2 writes by default (and lance_ops when the reference says nothing)
DEFAULT_LAYOUT = {"token_set_format": "fst", "format_version": "2", "posting_block_size": str(BLOCK),
                  "posting_tail_codec": "varint_delta_v1"}


@dataclass(frozen=True)
class InvertedLayout:
    """The tokenizer params and file-format settings a new segment copies from its reference."""

    params: TokenizerParams
    settings: dict[str, str]


def _details_fields(details: bytes) -> dict[int, bytes | int]:
    """The top-level fields of an ``InvertedIndexDetails`` message (wire format: varints and
    length-delimited values; the last occurrence wins)."""
    out: dict[int, bytes | int] = {}
    pos = 0

    def varint() -> int:
        nonlocal pos
        shift = value = 0
        while True:
            b = details[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return value

    try:
        while pos < len(details):
            tag = varint()
            if tag & 7 == 0:
                out[tag >> 3] = varint()
            elif tag & 7 == 2:
                n = varint()
                out[tag >> 3] = details[pos : pos + n]
                pos += n
            else:
                break
    except IndexError:
        pass
    return out


def unsupported_setting(details: bytes) -> str | None:
    """The first tokenizer setting of an INVERTED index's details that lance_ops does not
    reproduce (``base_tokenizer``, ``language``, ``with_position``), or None.

    ``InvertedIndexDetails`` (pylance 14.0.2, read off indices built with each setting changed):
    1 ``base_tokenizer``, 2 ``language`` (JSON-quoted), 3 ``with_position``, 4
    ``max_token_length``, 5 ``lower_case``, 6 ``stem``, 7 ``remove_stop_words``, 8
    ``ascii_folding``.
    """
    f = _details_fields(details)
    base = f.get(1, b"simple")
    if base not in (b"simple", b"ngram"):
        return f"base_tokenizer={base.decode(errors='replace') if isinstance(base, bytes) else base!r}"
    lang = f.get(2, b'"English"')
    if lang != b'"English"' and (f.get(6) or f.get(7)):
        return f"language={lang.decode(errors='replace') if isinstance(lang, bytes) else lang}"
    return None


def reference_layout(store: ObjectStore, ref: IndexMetadata) -> InvertedLayout:
    """The params and settings of an existing segment's ``metadata.lance``.

    Raises:
        CorruptFileError: no ``metadata.lance`` or no ``params`` in it.
        UnsupportedFeatureError: params, a token set format, block size or tail codec lance_ops
            does not write (named).
    """
    rel = f"{ref.directory}/{METADATA_FILE}"
    try:
        raw = DataFileReader(store, rel).schema.metadata or {}
    except FileNotFoundError as e:
        raise CorruptFileError(rel, f"inverted index {ref.name!r} has no {METADATA_FILE} (an older layout)") from e
    meta = {k: v.decode() if isinstance(v, bytes) else str(v) for k, v in raw.items()}
    if "params" not in meta:
        raise CorruptFileError(rel, f"inverted index {ref.name!r} has no 'params' metadata")
    where = f"index {ref.name!r} ({rel})"
    settings = {k: meta.get(k, v) for k, v in DEFAULT_LAYOUT.items()}
    if settings["token_set_format"] not in ("fst", "arrow") or settings["posting_block_size"] != str(BLOCK) \
            or settings["posting_tail_codec"] not in ("varint_delta_v1", "fixed32_v1"):
        raise UnsupportedFeatureError(f"{where}: lance_ops does not write full-text segments with {settings}")
    return InvertedLayout(TokenizerParams.from_json(meta["params"], where), settings)


def write_inverted(w: SegmentWriter, data: SegmentInput, layout: InvertedLayout, details: bytes) -> BuiltSegment:
    """Tokenize ``data`` and write the four files of a one-partition segment."""
    toks = tokenize_documents(data.values, layout.params)
    per_row = np.bincount(toks.row, minlength=len(data.values)).astype(np.int64)
    docs = np.flatnonzero(per_row)  # rows with tokens, in row order: doc id = position
    doc_of_row = np.full(len(per_row), -1, dtype=np.int64)
    doc_of_row[docs] = np.arange(len(docs))
    vocab, codes = _codes(toks.token)
    ndocs = max(len(docs), 1)
    pair, freq = np.unique(codes * ndocs + doc_of_row[toks.row], return_counts=True)  # by token, then doc
    tok, doc = pair // ndocs, pair % ndocs
    df = np.bincount(tok, minlength=len(vocab))
    doc_len = per_row[docs]
    total = int(doc_len.sum())
    scores = bm25(freq, doc_len[doc], df[tok], len(docs), total)
    bounds = np.concatenate([[0], np.cumsum(df)])
    codec = layout.settings["posting_tail_codec"]
    postings = encode_postings(doc, freq, scores, bounds, codec)
    positions = None
    if layout.params.raw.get("with_position"):
        occ = codes * ndocs + doc_of_row[toks.row]
        positions = encode_positions(toks.position[np.lexsort((toks.position, occ))], freq, bounds)
    max_score = np.maximum.reduceat(scores, bounds[:-1]) if len(scores) else np.zeros(0, np.float32)
    settings = layout.settings
    file_meta = {k: settings[k] for k in ("posting_tail_codec", "format_version", "posting_block_size")}
    w.write(METADATA_FILE, pa.table({"deleted_fragments": pa.array([bytes(BitMap().serialize())], pa.binary())},
                                    schema=pa.schema([pa.field("deleted_fragments", pa.binary(), False)])),
            metadata={"partitions": "[0]", "params": layout.params.to_json(), **settings})
    w.write(TOKENS_FILE, _token_table(vocab, settings["token_set_format"]))
    invert = {"_posting": pa.array(postings, pa.list_(pa.large_binary())), "_max_score": pa.array(max_score, pa.float32()),
              "_length": pa.array(df, pa.uint32())}
    fields = [pa.field("_posting", pa.list_(pa.large_binary()), False),
              pa.field("_max_score", pa.float32(), False), pa.field("_length", pa.uint32(), False)]
    if positions is not None:
        invert["_position"] = positions
        fields.append(pa.field("_position", positions.type, False))
    w.write(INVERT_FILE, pa.table(invert, schema=pa.schema(fields)), metadata=file_meta)
    w.write(DOCS_FILE, pa.table(
        {"_rowid": pa.array(data.row_ids[docs], pa.uint64()), "_num_tokens": pa.array(doc_len, pa.uint32())},
        schema=pa.schema([pa.field("_rowid", pa.uint64(), False), pa.field("_num_tokens", pa.uint32(), False)])),
        metadata={"total_tokens": str(total)})
    return BuiltSegment(tuple(w.files), TYPE_URL, details, INDEX_VERSION)


def indexed_row_ids(store: ObjectStore, segment: IndexMetadata) -> np.ndarray:
    """The row ids of every document of a full-text segment (``_rowid`` of its docs files,
    every partition; the pre-partition layout's ``docs.lance`` too)."""
    names = [f.path for f in segment.files or ()] or sorted(store.list_dir(segment.directory))
    docs = [n for n in names if n.endswith("_docs.lance") or n == "docs.lance"]
    out = [np.zeros(0, np.uint64)]
    for name in docs:
        r = DataFileReader(store, f"{segment.directory}/{name}")
        field = next((f for f in r.schema.top_level() if f.name == "_rowid"), None)
        if field is None:
            raise CorruptFileError(f"{segment.directory}/{name}", "full-text docs file without '_rowid'")
        out.append(r.read_table([field.id])["_rowid"].to_numpy().astype(np.uint64))
    return np.concatenate(out)


def _token_table(vocab: pa.Array, token_set_format: str) -> pa.Table:
    """The token set: an FST (``fst``) or the sorted tokens and their ids (``arrow``)."""
    ids = pa.array(np.arange(len(vocab)), pa.uint32())
    if token_set_format == "arrow":
        return pa.table({"_token": vocab, "_token_id": ids}, schema=pa.schema(
            [pa.field("_token", pa.string(), False), pa.field("_token_id", pa.uint32(), False)]))
    keys = [t.encode() for t in vocab.to_pylist()]
    fst = build_fst(keys, list(range(len(keys))))
    return pa.table(
        {"_token_fst_bytes": pa.array([fst], pa.large_binary()), "_token_next_id": pa.array([len(keys)], pa.uint32()),
         "_token_total_length": pa.array([sum(len(k) for k in keys)], pa.uint64())},
        schema=pa.schema([pa.field("_token_fst_bytes", pa.large_binary(), False),
                          pa.field("_token_next_id", pa.uint32(), False),
                          pa.field("_token_total_length", pa.uint64(), False)]))


def _codes(tokens: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """The distinct tokens in byte order and each occurrence's rank among them."""
    enc = pc.dictionary_encode(tokens)
    order = pc.array_sort_indices(enc.dictionary.cast(pa.binary())).to_numpy()
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return enc.dictionary.take(pa.array(order)), rank[enc.indices.to_numpy(zero_copy_only=False)]
