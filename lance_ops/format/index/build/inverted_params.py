"""``create_scalar_index(..., "INVERTED", **params)``: pylance's tokenizer keywords checked and
turned into the index's ``params`` JSON and its ``InvertedIndexDetails`` message, as pylance 14
writes them (docs/FORMAT.md "INVERTED segments")."""

from collections.abc import Mapping
from typing import Any

from lance_ops.format.errors import ArgumentTypeError
from lance_ops.format.index.build.text_tokens import DEFAULT_PARAMS, TokenizerParams

#: ``InvertedIndexDetails`` field numbers of the params that are written (read off pylance 14.0.2
#: indices built with each changed; proto3: a false / zero / absent value is left out)
_DETAIL_FIELDS = (
    (1, "base_tokenizer", "str"), (2, "language", "json"), (3, "with_position", "bool"),
    (4, "max_token_length", "int"), (5, "lower_case", "bool"), (6, "stem", "bool"),
    (7, "remove_stop_words", "bool"), (8, "ascii_folding", "bool"), (9, "min_ngram_length", "int"),
    (10, "max_ngram_length", "int"), (11, "prefix_only", "bool"), (12, "block_size", "int"),
)
#: field 15: the inverted list format version pylance 14 writes
_FORMAT_FIELD, _FORMAT_VERSION = 15, 2


def inverted_params(kwargs: Mapping[str, Any], where: str = "create_scalar_index") -> TokenizerParams:
    """pylance's keywords over its defaults, checked (a setting lance_ops cannot tokenize exactly
    raises :class:`~lance_ops.format.errors.UnsupportedFeatureError`).

    Raises:
        ArgumentTypeError: a keyword pylance does not take for an INVERTED index.
    """
    unknown = sorted(set(kwargs) - set(DEFAULT_PARAMS) - {"document_granularity"})
    if unknown:
        raise ArgumentTypeError(f"{where}: unexpected keyword argument {unknown[0]!r} for an INVERTED index")
    raw = {**DEFAULT_PARAMS, **{k: v for k, v in kwargs.items() if k != "document_granularity"}}
    if raw.get("base_tokenizer") == "ngram":  # pylance's ngram defaults: no stemming, no stop words
        raw.update({k: bool(kwargs.get(k, False)) for k in ("stem", "remove_stop_words")})
    if raw.get("custom_stop_words") is not None:
        raw["custom_stop_words"] = list(raw["custom_stop_words"])
    gran = kwargs.get("document_granularity")
    if gran is not None and str(getattr(gran, "value", gran)) != "row":
        raw["document_granularity"] = str(getattr(gran, "value", gran))
    params = TokenizerParams(raw)
    params.check(where)
    return params


def _varint(v: int) -> bytes:
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def encode_details(params: TokenizerParams) -> bytes:
    """The ``InvertedIndexDetails`` message pylance 14 writes for these params."""
    out = bytearray()
    for num, key, kind in _DETAIL_FIELDS:
        v = params.raw.get(key)
        if v is None or v is False or v == 0:
            continue
        if kind in ("str", "json"):
            data = (f'"{v}"' if kind == "json" else str(v)).encode()
            out += _varint(num << 3 | 2) + _varint(len(data)) + data
        else:
            out += _varint(num << 3) + _varint(int(v))
    return bytes(out + _varint(_FORMAT_FIELD << 3) + _varint(_FORMAT_VERSION))
