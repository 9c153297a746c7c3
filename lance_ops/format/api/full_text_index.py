"""Term scores of a full-text search read off an INVERTED index's posting lists (the rows its
segments cover) and found flat in the rows appended since, with the same statistics and so the
same scores, rows and ties as the flat search of :mod:`.full_text` (docs/FORMAT.md "INVERTED
segments"): a term's indexed documents are its postings (documents of rows deleted since the
build included in its document count, as the flat search counts them, dropped from the hits).
"""

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from lance_ops.format.errors import CorruptFileError, UnsupportedFeatureError
from lance_ops.format.index.build.postings import bm25
from lance_ops.format.index.build.text_tokens import TokenizerParams, tokenize
from lance_ops.format.index.inverted_read import InvertedPartition, segment_partitions
from lance_ops.format.read.metadata_columns import ROW_ADDR, ROW_ID
from lance_ops.format.table.rowids import fragment_row_ids

__all__ = ["IndexedTerms", "deleted_stable_rows", "indexed_terms"]

Hits = tuple[np.ndarray, np.ndarray]


@dataclasses.dataclass(frozen=True)
class IndexedTerms:
    """A column's index (its partitions and corpus), the live rows it covers, and the flat
    documents (:class:`.full_text.ColumnDocs`) of the rows it does not."""

    #: with their segment's fragment ids and which documents are current (stable row ids: a row
    #: a later partition holds again -- an update merged in -- is that partition's)
    partitions: Sequence[tuple[InvertedPartition, np.ndarray, np.ndarray]]
    params: TokenizerParams
    index_corpus: tuple[int, int]
    live_ids: np.ndarray  # row ids, sorted
    live_frag: np.ndarray  # the fragment each of them lives in
    manifest_fragments: np.ndarray | None  # address mode: fragments whose deleted rows still count
    deleted_ids: np.ndarray | None  # stable row ids: the ids of deleted rows still in the dataset, sorted
    new: Any  # ColumnDocs of the unindexed rows

    def query_terms(self, text: str) -> list[str]:
        """The query's tokens, made as the index made the column's."""
        return tokenize(pa.array([text], pa.string()), self.params).token.to_pylist()

    def _postings(self, term: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The live rows whose current version a segment holding ``term`` covers (row ids,
        frequencies, lengths) and the addresses of deleted rows' documents holding it."""
        ids, freqs, lens, gone = [np.zeros(0, np.uint64)], [np.zeros(0, np.int64)], [np.zeros(0, np.int64)], []
        for part, frags, current in self.partitions:
            tid = part.token_id(term)
            if tid is None:
                continue
            doc, freq = part.postings(tid)
            rid = part.row_ids[doc]
            at = np.minimum(np.searchsorted(self.live_ids, rid), max(len(self.live_ids) - 1, 0))
            live = self.live_ids[at] == rid if len(self.live_ids) else np.zeros(len(rid), bool)
            here = live & np.isin(self.live_frag[at], frags) & current[doc] if len(self.live_ids) else live
            ids.append(rid[here])
            freqs.append(freq[here])
            lens.append(part.num_tokens[doc][here])
            gone.append(rid[~live])
        rid, first = np.unique(np.concatenate(ids), return_index=True)  # a document in two segments once
        return rid, np.concatenate(freqs)[first], np.concatenate(lens)[first], np.unique(np.concatenate(gone or [ids[0]]))

    def term_score(self, term: str) -> Hits:
        """The rows holding ``term`` and their BM25 (see :meth:`.full_text.ColumnDocs.score`)."""
        rid, freq, dl, gone = self._postings(term)
        df = len(rid)
        if self.manifest_fragments is not None:  # documents of rows deleted since, still in the dataset
            df += int(np.isin((gone >> np.uint64(32)).astype(np.int64), self.manifest_fragments).sum())
        if self.deleted_ids is not None:
            df += int(np.isin(gone, self.deleted_ids).sum())
        docs, tokens = self.index_corpus
        out_ids = [rid]
        out_scores = [bm25(freq, dl, np.full(len(rid), df), docs, tokens).astype(np.float32)]
        new = self.new
        rows, nfreq = new.term_hits(term)
        if len(rows):
            df_new = len(rows)
            out_ids.append(new.row_ids[rows])
            out_scores.append(bm25(nfreq, new.doc_len[rows], np.full(df_new, df + df_new), docs + new.num_docs,
                                   tokens + new.total_tokens).astype(np.float32))
        return np.concatenate(out_ids), np.concatenate(out_scores)


def indexed_terms(ds: Any, segments: Sequence[Any], params: TokenizerParams,
                  coverage: tuple[frozenset[int], int, int, Any],
                  new_docs: Callable[[list[int]], Any]) -> IndexedTerms | None:
    """The index view of a column, or None when lance_ops does not read its segments (the
    caller searches flat).  ``new_docs(fragment_ids)``: the flat documents of those fragments."""
    try:
        parts = [(p, np.array(sorted(seg.fragment_ids or ()), np.int64))
                 for seg in segments for p in segment_partitions(ds._store, seg)]
    except (UnsupportedFeatureError, CorruptFileError, FileNotFoundError):
        return None
    frags, n_docs, n_tokens, _ = coverage
    rows = ds.to_table(columns=[], with_row_id=True, with_row_address=True)
    ids = rows[ROW_ID].to_numpy().astype(np.uint64)
    frag_of = (rows[ROW_ADDR].to_numpy().astype(np.uint64) >> np.uint64(32)).astype(np.int64)
    order = np.argsort(ids, kind="stable")
    manifest = None if ds.has_stable_row_ids else np.array([f.id for f in ds.manifest.fragments], np.int64)
    new_frags = [f.id for f in ds.manifest.fragments if f.id not in frags]
    deleted = np.unique(deleted_stable_rows(ds, ids)[1]) if ds.has_stable_row_ids else None
    return IndexedTerms(_current(parts, ds.has_stable_row_ids), params, (n_docs, n_tokens), ids[order], frag_of[order], manifest, deleted,
                        new_docs(new_frags))


def _current(parts: list[tuple[InvertedPartition, np.ndarray]], stable: bool) -> list:
    """Each partition with the mask of its documents that no later document holds again (stable
    row ids: an updated row's old document, merged into the same index, is superseded)."""
    ids = np.concatenate([np.zeros(0, np.uint64), *(p.row_ids for p, _ in parts)])
    current = np.ones(len(ids), bool)
    if stable and len(ids):
        _, last_rev = np.unique(ids[::-1], return_index=True)
        current[:] = False
        current[len(ids) - 1 - last_rev] = True
    bounds = np.cumsum([0, *(len(p.row_ids) for p, _ in parts)])
    return [(p, frags, current[bounds[i]:bounds[i + 1]]) for i, (p, frags) in enumerate(parts)]


def deleted_stable_rows(ds: Any, live_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """With stable row ids: the addresses and ids of the rows of the dataset's fragments whose id
    is no longer live (deleted, not moved by an update), off each fragment's row id sequence."""
    addrs, ids = [np.zeros(0, np.uint64)], [np.zeros(0, np.uint64)]
    for frag in ds.manifest.fragments:
        if frag.row_ids is None:
            continue
        seq = fragment_row_ids(frag, ds.manifest.source).astype(np.uint64)
        off = np.flatnonzero(~np.isin(seq, live_ids))
        addrs.append((np.uint64(frag.id) << np.uint64(32)) | off.astype(np.uint64))
        ids.append(seq[off])
    return np.concatenate(addrs), np.concatenate(ids)
