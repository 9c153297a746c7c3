"""Full-text tokenization as pylance 14's INVERTED index does it (upstream
``rust/lance-index/src/scalar/inverted/tokenizer.rs``; docs/FORMAT.md "INVERTED segments").

The analyser is built from the index's params, in this order: base tokenizer ``simple`` (split on
every character that is not alphanumeric), ``max_token_length`` (drop tokens of that many UTF-8
bytes or more), ``lower_case``, ``stem`` (Snowball, ``language``), ``remove_stop_words`` (after
stemming), ``ascii_folding`` (last).  Whole Arrow arrays are processed with pyarrow kernels;
stemming and folding run once per distinct token (the vocabulary), never per row.
"""

import json
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import snowballstemmer  # type: ignore[import-untyped]

from lance_ops.format.errors import UnsupportedFeatureError

#: pylance 14's defaults (``InvertedIndexParams::default()``), as its ``params`` JSON spells them
DEFAULT_PARAMS: dict[str, Any] = {
    "lance_tokenizer": "text",
    "base_tokenizer": "simple",
    "language": "English",
    "with_position": False,
    "max_token_length": 40,
    "lower_case": True,
    "stem": True,
    "remove_stop_words": True,
    "custom_stop_words": None,
    "ascii_folding": True,
    "min_ngram_length": 3,
    "max_ngram_length": 3,
    "prefix_only": False,
    "block_size": 128,
    "split_identifiers": False,
    "split_on_numerics": False,
    "preserve_original": False,
    "index_operators": False,
}

#: the (stemmed) tokens the English stop-word filter drops, as pylance 14.0.2 drops them: each
#: Snowball/NLTK English stop word and its stem was indexed in a row of its own and queried; these
#: found nothing, while e.g. "no", "not", "nor", "could", "would", "ought" and the stems "ani",
#: "veri", "onli", "becaus" are kept (docs/FORMAT.md "INVERTED segments")
ENGLISH_STOP_WORDS = frozenset(
    """a about after again against all am an and are as at be been below between both but by can did do
    down each few for from further had has have he her here herself him himself his how i if in into is
    it itself just me more most my myself now of off on or other our out over own re same she should so
    some such than that the their them then there these they this those through to too under until up was
    we were what when where which while who whom will with you your yourself""".split()
)

# letters Unicode does not decompose to ASCII that the folding still maps (pylance 14's folding,
# checked letter by letter against its index: e.g. "ĸ" -> "k", "ŋ" -> "n"; "ƒ" stays)
_FOLD_EXTRA = str.maketrans(
    {"ß": "ss", "æ": "ae", "Æ": "AE", "œ": "oe", "Œ": "OE", "ø": "o", "Ø": "O", "đ": "d", "Đ": "D",
     "ł": "l", "Ł": "L", "ð": "d", "Ð": "D", "þ": "th", "Þ": "TH", "ı": "i", "ĸ": "k", "ŀ": "l", "Ŀ": "L",
     "ŉ": "n", "Ŋ": "N", "ŋ": "n", "ſ": "s", "ħ": "h", "Ħ": "H", "ŧ": "t", "Ŧ": "T"}
)
_SIMPLE_SPLIT = r"[^\p{L}\p{N}]+"
#: the same split for Python's ``re`` (``\W`` and ``_``: any character not a letter or digit)
SIMPLE_SPLIT = r"[\W_]+"


@dataclass(frozen=True)
class TokenizerParams:
    """The analyser settings an INVERTED index was built with (its ``params`` JSON)."""

    raw: Mapping[str, Any]

    @classmethod
    def from_json(cls, text: str, where: str) -> "TokenizerParams":
        """Parse and check a ``params`` JSON; unknown settings lance_ops cannot reproduce raise.

        Raises:
            UnsupportedFeatureError: a setting lance_ops does not tokenize exactly (named).
        """
        raw = {**DEFAULT_PARAMS, **json.loads(text)}
        p = cls(raw)
        p.check(where)
        return p

    def check(self, where: str) -> None:
        r = self.raw
        unsupported = {
            "lance_tokenizer": (r.get("lance_tokenizer") or "text") != "text",
            "base_tokenizer": r.get("base_tokenizer") not in ("simple", "ngram"),
            "language": (r.get("stem") or (r.get("remove_stop_words") and r.get("custom_stop_words") is None))
            and r.get("language") != "English",
            "split_identifiers": bool(r.get("split_identifiers")),
            "preserve_original": bool(r.get("preserve_original")),
            "index_operators": bool(r.get("index_operators")),
            "document_granularity": r.get("document_granularity", "row") != "row",
        }
        bad = [k for k, v in unsupported.items() if v]
        if bad:
            raise UnsupportedFeatureError(
                f"{where}: lance_ops does not tokenize full-text indices with {bad[0]}={r.get(bad[0])!r}"
                " (it builds base_tokenizer 'simple', language English, with_position false)"
            )

    def to_json(self) -> str:
        return json.dumps(dict(self.raw), separators=(",", ":"))


@dataclass(frozen=True)
class DocTokens:
    """The tokens of a batch of documents: ``row`` (index into the input), ``token`` and
    ``position`` (its ordinal among the row's base tokens: stop words and long tokens dropped
    keep their places, as tantivy's filters) per occurrence, in document order."""

    row: np.ndarray
    token: pa.Array
    position: np.ndarray | None = None


def tokenize(values: pa.Array, params: TokenizerParams) -> DocTokens:
    """Every token occurrence of ``values`` (a string column; nulls have none)."""
    if pa.types.is_large_string(values.type) or pa.types.is_string_view(values.type):
        values = values.cast(pa.string())
    if not pa.types.is_string(values.type):
        raise UnsupportedFeatureError(f"full-text index over a column of type {values.type}: needs a string column")
    r = params.raw
    parts = pc.split_pattern_regex(values, _SIMPLE_SPLIT) if r.get("base_tokenizer") != "ngram" else _ngrams(values, r)
    flat = pc.list_flatten(parts)
    rows = pc.list_parent_indices(parts)
    keep = pc.greater(pc.binary_length(flat), 0)
    flat, rows = flat.filter(keep), rows.filter(keep)
    row_np = rows.to_numpy(zero_copy_only=False).astype(np.int64)
    starts = np.searchsorted(row_np, row_np, side="left")  # rows ascend: each row's first token
    pos = np.arange(len(row_np), dtype=np.int64) - starts
    if r.get("max_token_length") is not None:
        keep = pc.less(pc.binary_length(flat), int(r["max_token_length"]))
        flat, rows, pos = flat.filter(keep), rows.filter(keep), pos[keep.to_numpy(zero_copy_only=False)]
    if r.get("lower_case"):
        flat = pc.utf8_lower(flat)
    enc = pc.dictionary_encode(flat)
    vocab: list[str | None] = enc.dictionary.to_pylist()
    if r.get("stem"):
        vocab = _stem(vocab)
    stops: frozenset[str] = frozenset()
    if r.get("remove_stop_words"):
        stops = frozenset(r["custom_stop_words"]) if r.get("custom_stop_words") is not None else ENGLISH_STOP_WORDS
    if r.get("ascii_folding"):
        vocab = [None if v in stops else fold_ascii(v) for v in vocab]
    else:
        vocab = [None if v in stops else v for v in vocab]
    tokens = pa.DictionaryArray.from_arrays(enc.indices, pa.array(vocab, pa.string())).cast(pa.string())
    valid = tokens.is_valid()
    return DocTokens(rows.filter(valid).to_numpy(zero_copy_only=False).astype(np.int64), tokens.filter(valid),
                     pos[valid.to_numpy(zero_copy_only=False)])


def _ngrams(values: pa.Array, r: Mapping[str, Any]) -> pa.Array:
    """The ``ngram`` base tokenizer: every window of ``min_ngram_length`` to ``max_ngram_length``
    characters of the whole text (spaces included; ``prefix_only``: the windows at its start), per
    distinct value, as a list per row."""
    lo, hi = int(r.get("min_ngram_length") or 3), int(r.get("max_ngram_length") or 3)
    prefix = bool(r.get("prefix_only"))
    enc = pc.dictionary_encode(values)
    grams = []
    for text in enc.dictionary.to_pylist():
        starts = range(1) if prefix else range(len(text))
        grams.append([text[i:i + n] for i in starts for n in range(lo, hi + 1) if i + n <= len(text)])
    table = pa.array(grams, pa.list_(pa.string()))
    out = table.take(enc.indices)
    return pc.if_else(values.is_valid(), out, pa.scalar(None, out.type)) if values.null_count else out


def _stem(vocab: list[str | None]) -> list[str | None]:
    """Snowball English (Porter2, as tantivy's stemmer) of each distinct token."""
    return list(snowballstemmer.stemmer("english").stemWords(vocab))


def fold_ascii(token: str) -> str:
    """ASCII folding of one distinct token: letters with diacritics to their base letters,
    ligatures and a few others spelled out (:data:`_FOLD_EXTRA`); other scripts are left as
    they are."""
    if token.isascii():
        return token
    out = []
    for ch in token:
        if ch.isascii():
            out.append(ch)
            continue
        mapped = ch.translate(_FOLD_EXTRA)
        if mapped != ch:
            out.append(mapped)
            continue
        base = "".join(c for c in unicodedata.normalize("NFKD", ch) if not unicodedata.combining(c))
        base = base.translate(_FOLD_EXTRA)
        if base and not base.isascii() and base[0].isascii():  # "ẚ": "a" + a modifier letter; "½": 1⁄2
            base = "".join(c for c in base if c.isascii() or (unicodedata.category(c) != "Lm" and c != "\u2044"))
        out.append(base if base and base.isascii() else ch)
    return "".join(out)


def tokenize_documents(values: pa.Array, params: TokenizerParams) -> DocTokens:
    """:func:`tokenize` of a string column, or of a list-of-strings column as one document per
    row (pylance's): the elements' tokens in order, positions running on across elements."""
    if not (pa.types.is_list(values.type) or pa.types.is_large_list(values.type)):
        return tokenize(values, params)
    parent = pc.list_parent_indices(values).to_numpy(zero_copy_only=False).astype(np.int64)
    flat = pc.list_flatten(values)
    toks = tokenize(flat, params)
    if pa.types.is_large_string(flat.type) or pa.types.is_string_view(flat.type):
        flat = flat.cast(pa.string())
    parts = pc.split_pattern_regex(flat, _SIMPLE_SPLIT)
    pieces = pc.list_flatten(parts)
    nonempty = pc.greater(pc.binary_length(pieces), 0).to_numpy(zero_copy_only=False)
    owner = pc.list_parent_indices(parts).to_numpy(zero_copy_only=False).astype(np.int64)
    counts = np.bincount(owner[nonempty], minlength=len(flat)).astype(np.int64)
    before = np.cumsum(counts) - counts  # base tokens of the earlier elements ...
    first = np.searchsorted(parent, parent)  # ... of the same row
    offset = before - before[first] if len(before) else before
    pos = toks.position if toks.position is not None else np.zeros(len(toks.row), np.int64)
    return DocTokens(parent[toks.row], toks.token, pos + offset[toks.row])
