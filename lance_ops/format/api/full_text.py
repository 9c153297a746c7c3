"""pylance's ``full_text_query=`` scan keyword, answered flat: the searched columns are read and
tokenized with their INVERTED index's params (pylance's defaults without an index), and rows are
scored with BM25 as pylance's search scores them (docs/FORMAT.md "INVERTED segments"): rows an
index covers with its corpus statistics (its documents, those of rows deleted since included),
unindexed rows with those and the unindexed rows' together, and without an index over the live
rows (a document: a row with at least one token).

Query objects (:mod:`.fts_queries`): match (OR / AND, fuzzy expansions scored as terms of their
own), phrase (token positions, ``slop``), boost, multi-match and boolean.  Rows come best first
(ties by row id); output: the projection, ``_score`` (float32), then ``_rowid`` / ``_rowaddr``
asked for.  ``filter`` with ``prefilter=True`` restricts the candidates before ``limit``;
otherwise it is applied to the rows found (pylance's post-filter).
"""

import dataclasses
import functools
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from functools import singledispatch
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_ops.format.api.fts_queries import (
    BooleanQuery,
    BoostQuery,
    FullTextOperator,
    FullTextQuery,
    MatchQuery,
    MultiMatchQuery,
    Occur,
    PhraseQuery,
    parse_full_text_query,
)
from lance_ops.format.api.full_text_index import IndexedTerms, deleted_stable_rows, indexed_terms
from lance_ops.format.errors import ColumnNotFoundError, InvalidArgumentError
from lance_ops.format.file.reader import DataFileReader
from lance_ops.format.index.build.inverted import indexed_row_ids, reference_layout
from lance_ops.format.index.build.postings import bm25
from lance_ops.format.index.build.text_tokens import (
    DEFAULT_PARAMS,
    SIMPLE_SPLIT,
    TokenizerParams,
    tokenize,
    tokenize_documents,
)
from lance_ops.format.index.metadata import decode_index_section
from lance_ops.format.ops.index_build import field_path
from lance_ops.format.read.filters import resolve_filter
from lance_ops.format.read.metadata_columns import ROW_ADDR, ROW_ID, filter_table
from lance_ops.format.read.scan import plan_scan, scan_fragment_rows
from lance_ops.format.read.take import take_row_ids

__all__ = ["SCORE", "full_text_table"]

SCORE = "_score"
#: a hit list: row ids (ascending, unique) and their scores
Hits = tuple[np.ndarray, np.ndarray]
_EMPTY: Hits = (np.zeros(0, np.uint64), np.zeros(0, np.float32))


@dataclasses.dataclass(frozen=True)
class ColumnDocs:
    """A column's documents: each token occurrence's row (index into ``row_ids``), term code
    and position; ``doc_len`` per row; the vocabulary; BM25's corpus counts."""

    row_ids: np.ndarray
    row_addrs: np.ndarray
    occ_row: np.ndarray
    occ_code: np.ndarray
    occ_pos: np.ndarray
    doc_len: np.ndarray
    vocab: dict[str, int]
    params: TokenizerParams
    #: rows an index covers, and its corpus (documents, tokens: deleted rows' included), or None
    indexed: np.ndarray | None = None
    index_corpus: tuple[int, int] = (0, 0)
    #: per term, the index's documents of rows deleted since it was built that hold it
    deleted_df: Mapping[str, int] = dataclasses.field(default_factory=dict)

    @property
    def num_docs(self) -> int:
        return int(np.count_nonzero(self.doc_len))

    @property
    def total_tokens(self) -> int:
        return int(self.doc_len.sum())

    def query_terms(self, text: str) -> tuple[list[str], list[int]]:
        """The query's tokens (as the column's are made) and their positions."""
        toks = tokenize(pa.array([text], pa.string()), self.params)
        pos = toks.position if toks.position is not None else np.arange(len(toks.token))
        return toks.token.to_pylist(), pos.tolist()

    def term_hits(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        """Rows (indices, ascending) holding ``term`` and its frequency in each."""
        code = self.vocab.get(term)
        if code is None:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        return np.unique(self.occ_row[self.occ_code == code], return_counts=True)

    def score(self, rows: np.ndarray, freq: np.ndarray, term: str) -> np.ndarray:
        """BM25 of a term's rows: rows an index covers with the index's corpus statistics (its
        documents -- deleted rows' included -- and tokens), the others with those and the
        unindexed rows' together (pylance's index search and its flat search of new rows)."""
        out = bm25(freq, self.doc_len[rows], np.full(len(rows), len(rows)), self.num_docs, self.total_tokens)
        if self.indexed is None or not len(rows):
            return out.astype(np.float32)
        cov = self.indexed[rows]
        docs, tokens = self.index_corpus
        df = int(cov.sum()) + self.deleted_df.get(term, 0)
        out[cov] = bm25(freq[cov], self.doc_len[rows][cov], np.full(int(cov.sum()), df), docs, tokens)
        new = ~self.indexed  # the unindexed rows: the index's corpus and theirs together
        n_new, df_new = int(np.count_nonzero(self.doc_len[new])), int((~cov).sum())
        out[~cov] = bm25(freq[~cov], self.doc_len[rows][~cov], np.full(df_new, df + df_new), docs + n_new,
                         tokens + int(self.doc_len[new].sum()))
        return out.astype(np.float32)


class Corpus:
    """The searched dataset's columns, read and tokenized once per query."""

    def __init__(self, ds: Any, params: Mapping[str, TokenizerParams],
                 coverage: Mapping[str, tuple[frozenset[int], int, int, Callable[[], np.ndarray]]] | None = None,
                 segments: Mapping[str, Sequence[Any]] | None = None):
        self._ds, self._params, self._docs, self._coverage = ds, params, {}, dict(coverage or {})
        self._segments = dict(segments or {})

    def index_terms(self, name: str) -> IndexedTerms | None:
        """The column's index as posting lists (None: no index, or one lance_ops does not read)."""
        if not USE_POSTINGS or name not in self._segments or name not in self._coverage:
            return None
        m, ds, params = self._ds.manifest, self._ds, self._params[name]
        key = (ds.uri, m.version, m.timestamp_ns, name, *sorted(s.uuid for s in self._segments[name]))
        hit = _INDEX_CACHE.get(key)
        if hit is None:
            hit = (indexed_terms(ds, self._segments[name], params, self._coverage[name],
                                 lambda frags: _column_docs(ds, name, params, frags)),)
            _INDEX_CACHE.put(key, hit)
        return hit[0]

    def indexed(self, name: str) -> bool:
        return name in self._params

    def column(self, name: str) -> ColumnDocs:
        if name not in self._docs:
            params = self._params.get(name)
            m = self._ds.manifest
            key = (self._ds.uri, m.version, m.timestamp_ns, name, params.to_json() if params else None)
            docs = _CACHE.get(key) or _column_docs(self._ds, name, params)
            _CACHE.put(key, docs)
            if name in self._coverage:
                frags, n_docs, n_tokens, indexed_ids = self._coverage[name]
                covered = np.isin((docs.row_addrs >> np.uint64(32)).astype(np.int64), list(frags))
                gone = np.setdiff1d(indexed_ids(), docs.row_ids)
                if self._ds.has_stable_row_ids:  # the deleted rows' addresses, off the row id sequences
                    addrs, ids = deleted_stable_rows(self._ds, docs.row_ids)
                    gone = addrs[np.isin(ids, gone)]
                docs = dataclasses.replace(docs, indexed=covered, index_corpus=(n_docs, n_tokens),
                                           deleted_df=_deleted_df(self._ds, name, docs.params, gone))
            self._docs[name] = docs
        return self._docs[name]


class _DocsCache:
    """The last few values of something a version or a segment fixes (a tokenized column, an
    index's statistics): a repeated search skips reading and tokenizing (pylance keeps its index
    in a cache alike)."""

    def __init__(self, size: int = 2) -> None:
        self._size, self._items = size, {}
        self._lock = threading.Lock()

    def get(self, key: tuple) -> Any:
        with self._lock:
            hit = self._items.pop(key, None)
            if hit is not None:
                self._items[key] = hit
            return hit

    def put(self, key: tuple, docs: Any) -> None:
        with self._lock:
            self._items.pop(key, None)
            self._items[key] = docs
            while len(self._items) > self._size:
                self._items.pop(next(iter(self._items)))


_CACHE = _DocsCache()
_CORPUS_CACHE = _DocsCache(8)
_INDEX_CACHE = _DocsCache(8)
#: answer exact terms from the posting lists of the indices lance_ops reads (False: flat only)
USE_POSTINGS = True


def _column_docs(ds: Any, name: str, params: TokenizerParams | None,
                 fragments: Sequence[int] | None = None) -> ColumnDocs:
    """The column's documents (of the fragments ``fragments`` only, when given)."""
    top, *nested = name.split(".") if name not in ds.schema.names else [name]
    if top not in ds.schema.names:
        raise ColumnNotFoundError(f"full_text_query: column {name!r} is not in the dataset schema {ds.schema.names}")
    only = {} if fragments is None else {"fragments": [f for f in ds.manifest.fragments if f.id in set(fragments)]}
    table = ds.to_table(columns=[top], with_row_id=True, with_row_address=True, **only)
    values = table[top].combine_chunks()
    for child in nested:  # a struct's child (``data.text``)
        values = values.field(child)
    toks = tokenize_documents(values, params or TokenizerParams(dict(DEFAULT_PARAMS)))
    rows = lengths = toks.row
    if params is None:  # no index: pylance's flat search counts stop words in a document's length
        lengths = tokenize_documents(values, TokenizerParams({**DEFAULT_PARAMS, "remove_stop_words": False})).row
    params = params or TokenizerParams(dict(DEFAULT_PARAMS))
    enc = pc.dictionary_encode(toks.token)
    codes = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64) if len(toks.token) else np.zeros(0, np.int64)
    vocab = {t: i for i, t in enumerate(enc.dictionary.to_pylist())} if len(toks.token) else {}
    pos = toks.position if toks.position is not None else np.zeros(len(rows), np.int64)
    return ColumnDocs(table[ROW_ID].to_numpy().astype(np.uint64), table[ROW_ADDR].to_numpy().astype(np.uint64),
                      rows, codes, pos,
                      np.bincount(lengths, minlength=table.num_rows).astype(np.int64), vocab, params)


# ------------------------------------------------------------------ evaluation
def _merge(hits: Sequence[Hits], combine: str) -> Hits:
    """Rows of all (``and``) or any (``or``, ``max``) hit lists, scores added (``max``: the best)."""
    if not hits:
        return _EMPTY
    ids = np.concatenate([h[0] for h in hits])
    scores = np.concatenate([h[1] for h in hits]).astype(np.float32)
    uniq, inv, counts = np.unique(ids, return_inverse=True, return_counts=True)
    total = np.zeros(len(uniq), np.float32) if combine != "max" else np.full(len(uniq), -np.inf, np.float32)
    (np.maximum if combine == "max" else np.add).at(total, inv, scores)
    keep = counts == len(hits) if combine == "and" else np.ones(len(uniq), bool)
    return uniq[keep], total[keep]


def _levenshtein(a: str, b: str) -> int:
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def _expansions(q: MatchQuery, docs: ColumnDocs, term: str) -> list[str]:
    """The vocabulary terms a (fuzzy) query term stands for."""
    fuzz = q.fuzziness if q.fuzziness is not None else (0 if len(term) <= 2 else 1 if len(term) <= 5 else 2)
    if fuzz == 0:
        return [term]
    prefix = term[: q.prefix_length]
    near = sorted((d, t) for t in docs.vocab if t.startswith(prefix) and abs(len(t) - len(term)) <= fuzz
                  and (d := _levenshtein(term, t)) <= fuzz)
    return [t for _, t in near[: q.max_expansions]]


def _raw_terms(text: str) -> list[str]:
    """A fuzzy query's terms: split as the base tokenizer splits, neither lower-cased nor stemmed
    (pylance's: ``Puppy`` is two edits from the indexed ``puppi``)."""
    return [t for t in re.split(SIMPLE_SPLIT, text) if t]


def _term_score(docs: ColumnDocs, term: str) -> Hits:
    rows, freq = docs.term_hits(term)
    return docs.row_ids[rows], docs.score(rows, freq, term)


@singledispatch
def evaluate(query: FullTextQuery, corpus: Corpus) -> Hits:
    """The rows a query finds and their scores."""
    raise InvalidArgumentError(f"full_text_query: query type {type(query).__name__} is not supported")


@evaluate.register
def _(query: MatchQuery, corpus: Corpus) -> Hits:
    index = corpus.index_terms(query.column) if query.fuzziness == 0 else None
    if index is not None:  # exact terms: the index's posting lists, the unindexed rows flat
        per_term = [_merge([index.term_score(t)], "or") for t in index.query_terms(query.query)]
    else:
        docs = corpus.column(query.column)
        terms = docs.query_terms(query.query)[0] if query.fuzziness == 0 else _raw_terms(query.query)
        per_term = [_merge([_term_score(docs, t) for t in _expansions(query, docs, term)], "or")
                    for term in terms]  # a repeated term counts again (pylance)
    ids, scores = _merge(per_term, "and" if query.operator is FullTextOperator.AND else "or")
    return ids, (scores * np.float32(query.boost)).astype(np.float32)


@evaluate.register
def _(query: PhraseQuery, corpus: Corpus) -> Hits:
    docs = corpus.column(query.column)
    if corpus.indexed(query.column) and not docs.params.raw.get("with_position"):
        raise InvalidArgumentError("Invalid user input: position is not found but required for phrase queries, "
                                   f"try recreating the index with position (column {query.column!r})")
    terms, qpos = docs.query_terms(query.query)
    if not terms:
        return _EMPTY
    codes = [docs.vocab.get(t) for t in terms]
    if any(c is None for c in codes):
        return _EMPTY
    found = _merge([_term_score(docs, t) for t in terms], "and")  # a repeated term counts again (pylance)
    order = np.argsort(docs.row_ids, kind="stable")
    rows = order[np.searchsorted(docs.row_ids[order], found[0])]
    keep = np.isin(rows, _phrase_rows(docs, [int(c) for c in codes if c is not None], qpos, query.slop))
    return found[0][keep], found[1][keep]


def _phrase_rows(docs: ColumnDocs, codes: list[int], qpos: list[int], slop: int) -> np.ndarray:
    """The rows holding the terms in order, each gap at most ``slop`` positions wider than the
    query's: on the occurrences of the phrase's terms only, whole arrays for ``slop`` 0."""
    sel = np.isin(docs.occ_code, codes)
    row, code, pos = docs.occ_row[sel], docs.occ_code[sel], docs.occ_pos[sel]
    span = np.int64(int(pos.max()) + len(codes) + slop + 2) if len(pos) else np.int64(1)
    key = row * span + pos
    by_code = {c: np.unique(key[code == c]) for c in set(codes)}
    starts = by_code[codes[0]]
    if slop == 0:
        for c, q in zip(codes[1:], qpos[1:], strict=True):
            starts = starts[np.isin(starts + (q - qpos[0]), by_code[c])]
        return np.unique(starts // span)
    out = []
    for start in starts.tolist():  # sloppy phrases: greedy, per start of the phrase's first term
        prev = start
        for c, (qa, qb) in zip(codes[1:], zip(qpos, qpos[1:], strict=False), strict=True):
            cand = by_code[c]
            lo = np.searchsorted(cand, prev + (qb - qa))
            if lo >= len(cand) or cand[lo] > prev + (qb - qa) + slop or cand[lo] // span != start // span:
                break
            prev = int(cand[lo])
        else:
            out.append(start // span)
    return np.unique(np.array(out, np.int64))


@evaluate.register
def _(query: BoostQuery, corpus: Corpus) -> Hits:
    ids, scores = evaluate(query.positive, corpus)
    neg_ids, neg = evaluate(query.negative, corpus)
    at = np.searchsorted(neg_ids, ids)
    hit = np.isin(ids, neg_ids)
    minus = np.where(hit, neg[np.minimum(at, max(len(neg) - 1, 0))] if len(neg) else 0, 0)
    return ids, (scores - np.float32(query.negative_boost) * minus).astype(np.float32)


@evaluate.register
def _(query: MultiMatchQuery, corpus: Corpus) -> Hits:
    boosts = query.boosts or [1.0] * len(query.columns)
    return _merge([evaluate(MatchQuery(query.query, c, boost=b, operator=query.operator), corpus)
                   for c, b in zip(query.columns, boosts, strict=True)], "max")  # pylance's best field


@evaluate.register
def _(query: BooleanQuery, corpus: Corpus) -> Hits:
    clauses = [(Occur(getattr(o, "value", o)), evaluate(q, corpus)) for o, q in query.queries]
    must = [h for o, h in clauses if o is Occur.MUST]
    should = [h for o, h in clauses if o is Occur.SHOULD]
    if must:
        ids, scores = _merge(must, "and")
        if should:
            extra_ids, extra = _merge(should, "or")
            at = np.searchsorted(extra_ids, ids)
            ok = (at < len(extra_ids)) & (extra_ids[np.minimum(at, max(len(extra_ids) - 1, 0))] == ids) \
                if len(extra_ids) else np.zeros(len(ids), bool)
            scores = scores + np.where(ok, extra[np.minimum(at, max(len(extra_ids) - 1, 0))], 0).astype(np.float32)
    else:
        ids, scores = _merge(should, "or")
    for o, (nids, _) in clauses:
        if o is Occur.MUST_NOT:
            keep = ~np.isin(ids, nids)
            ids, scores = ids[keep], scores[keep]
    return ids, scores


# ------------------------------------------------------------------ the scan
def _fts_indices(ds: Any) -> dict[str, Any]:
    """The segments of the (first) INVERTED index of each indexed column name."""
    section = ds.manifest.index_section
    if not section:
        return {}
    out: dict[str, Any] = {}
    chosen: dict[str, str] = {}
    for seg in decode_index_section(section, f"{ds.uri} version {ds.version}"):
        if seg.fields and (seg.kind == "INVERTED" or (seg.kind == "UNKNOWN" and _inverted_files(ds, seg))):
            column = field_path(ds.lance_schema, seg.fields[0])
            if chosen.setdefault(column, seg.name) == seg.name:
                out.setdefault(column, []).append(seg)
    return out


def _inverted_files(ds: Any, seg: Any) -> bool:
    """A segment committed without details (pylance's distributed build) holding full-text files."""
    names = [f.path for f in seg.files] if seg.files else ds._store.list_dir(seg.directory)
    return "metadata.lance" in names and any(n.endswith("docs.lance") for n in names)


def _deleted_df(ds: Any, name: str, params: TokenizerParams, addrs: np.ndarray) -> dict[str, int]:
    """Per term, how many of the deleted rows ``addrs`` (row addresses an index still holds as
    documents) hold it: their values are read past the deletion vectors."""
    if not len(addrs):
        return {}
    top, *nested = name.split(".") if name not in ds.schema.names else [name]
    plan = plan_scan(ds.lance_schema, [top], None, False, False)
    values = []
    for frag in ds.manifest.fragments:
        mine = addrs[(addrs >> np.uint64(32)) == np.uint64(frag.id)] & np.uint64(0xFFFFFFFF)
        if len(mine):
            t = pa.Table.from_batches(list(scan_fragment_rows(ds._store, ds.manifest, frag, plan, mine.astype(np.int64))))
            col = t[top].combine_chunks()
            for child in nested:
                col = col.field(child)
            values.append(col)
    if not values:
        return {}
    toks = tokenize_documents(pa.concat_arrays(values), params)
    pairs = set(zip(toks.row.tolist(), toks.token.to_pylist(), strict=True))
    out: dict[str, int] = {}
    for _, term in pairs:
        out[term] = out.get(term, 0) + 1
    return out


def _index_corpus(store: Any, segments: Sequence[Any]) -> tuple[frozenset[int], int, int, Callable[[], np.ndarray]]:
    """The fragments the segments cover, their documents and tokens (every partition's docs
    file: its rows and ``total_tokens``) and the documents' row ids (read when first asked)."""
    frags: set[int] = set()
    docs = tokens = 0
    for seg in segments:
        frags |= set(seg.fragment_ids or ())
        names = [f.path for f in seg.files] if seg.files else store.list_dir(seg.directory)
        for name in names:
            if name.endswith("_docs.lance") or name == "docs.lance":
                r = DataFileReader(store, f"{seg.directory}/{name}")
                docs += r.num_rows
                meta = r.schema.metadata or {}
                raw = meta.get("total_tokens", meta.get(b"total_tokens", b"0"))
                tokens += int(raw.decode() if isinstance(raw, bytes) else raw)
    ids = functools.cache(lambda: np.unique(np.concatenate([indexed_row_ids(store, seg) for seg in segments])))
    return frozenset(frags), docs, tokens, ids


def _take(ds: Any, ids: np.ndarray, names: list[str]) -> pa.Table:
    """The found rows, in ``ids`` order: by row address, plain top-level columns are read at
    their offsets (only the pages holding them); otherwise :func:`take_row_ids`."""
    plain = [n for n in names if n not in (ROW_ID, ROW_ADDR)]
    fields = {f.name: f for f in ds.schema}
    if ds.has_stable_row_ids or not len(ids) or any(
            n not in fields or any(b"blob" in k for k in (fields[n].metadata or {})) for n in plain):
        return take_row_ids(ds, ids, names)
    plan = plan_scan(ds.lance_schema, plain, None, True, ROW_ADDR in names)
    frag_of, offsets = ids >> np.uint64(32), (ids & np.uint64(0xFFFFFFFF)).astype(np.int64)
    by_id = {f.id: f for f in ds.manifest.fragments}
    batches = []
    for fid in np.unique(frag_of).tolist():
        rows = np.unique(offsets[frag_of == np.uint64(fid)])
        batches.extend(scan_fragment_rows(ds._store, ds.manifest, by_id[fid], plan, rows))
    found = pa.Table.from_batches(batches, schema=plan.out_schema)
    at = pc.index_in(pa.array(ids, pa.uint64()), value_set=found[ROW_ID].combine_chunks())
    return found.take(at).select(names)


def full_text_table(ds: Any, columns: Sequence[str] | None, filter: Any, opts: Any,
                    search: Callable[[Any, Corpus], Hits] = evaluate) -> pa.Table:
    """The rows a scan with ``opts.full_text_query`` finds (see the module's docstring)."""
    if opts.include_deleted_rows:
        raise InvalidArgumentError("Invalid user input: Cannot include deleted rows in a full text search")
    segments = _fts_indices(ds)
    params = {c: reference_layout(ds._store, s[0]).params for c, s in segments.items()}
    query = parse_full_text_query(opts.full_text_query, list(segments))
    coverage = {}
    for c, segs in segments.items():  # segments never change: their statistics are kept by uuid
        key = (ds.uri, *sorted(seg.uuid for seg in segs))
        coverage[c] = _CORPUS_CACHE.get(key) or _index_corpus(ds._store, segs)
        _CORPUS_CACHE.put(key, coverage[c])
    ids, scores = search(query, Corpus(ds, params, coverage, segments))
    if filter is not None and opts.prefilter:
        allowed = ds.to_table(columns=[], filter=filter, with_row_id=True)[ROW_ID].to_numpy()
        keep = np.isin(ids, allowed)
        ids, scores = ids[keep], scores[keep]
    order = np.lexsort((ids, -scores.astype(np.float64)))
    ids, scores = ids[order], scores[order]
    post = None if opts.prefilter or filter is None else resolve_filter(ds.lance_schema, filter)
    if opts.limit is not None and post is None:
        ids, scores = ids[: (opts.offset or 0) + opts.limit], scores[: (opts.offset or 0) + opts.limit]
    names = list(ds.schema.names) if columns is None else list(columns)
    out_names = [*names, *([SCORE] if SCORE not in names else [])]
    out_names += [n for n, on in ((ROW_ID, opts.with_row_id), (ROW_ADDR, opts.with_row_address)) if on and n not in out_names]
    wanted = [n for n in out_names if n not in (SCORE, ROW_ID)]
    if post is not None:
        wanted = list(dict.fromkeys([*wanted, *ds.schema.names]))
    rows = _take(ds, ids, [*wanted, ROW_ID])
    got = rows[ROW_ID].to_numpy()
    pos = {int(r): i for i, r in enumerate(ids.tolist())}
    rows = rows.append_column(SCORE, pa.array(scores[[pos[int(r)] for r in got]], pa.float32()))
    if post is not None:
        rows = filter_table(rows, post)
    start = opts.offset or 0
    out = rows.select(out_names)
    return out.slice(start, opts.limit) if opts.limit is not None else out.slice(start)
