"""pylance's full-text query objects (``lance.query``): what ``full_text_query=`` takes besides a
string or a ``{"query", "columns"}`` dict.  Plain values: :mod:`.full_text` answers them."""

import abc
import dataclasses
from collections.abc import Sequence
from enum import Enum
from typing import Any

from lance_ops.format.errors import ArgumentTypeError, InvalidArgumentError

__all__ = [
    "BooleanQuery", "BoostQuery", "FullTextOperator", "FullTextQuery", "FullTextQueryType", "MatchQuery",
    "MultiMatchQuery", "Occur", "PhraseQuery", "parse_full_text_query",
]


class FullTextQueryType(Enum):
    MATCH = "match"
    MATCH_PHRASE = "match_phrase"
    BOOST = "boost"
    MULTI_MATCH = "multi_match"
    BOOLEAN = "boolean"


class FullTextOperator(Enum):
    AND = "AND"
    OR = "OR"


class Occur(Enum):
    SHOULD = "SHOULD"
    MUST = "MUST"
    MUST_NOT = "MUST_NOT"


class FullTextQuery(abc.ABC):
    """A query object; ``a & b`` is a MUST/MUST boolean query, ``a | b`` SHOULD/SHOULD (pylance's)."""

    @property
    def inner(self) -> "FullTextQuery":
        return self

    @abc.abstractmethod
    def query_type(self) -> FullTextQueryType: ...

    def __and__(self, other: "FullTextQuery") -> "BooleanQuery":
        return BooleanQuery([(Occur.MUST, self), (Occur.MUST, other)])

    def __or__(self, other: "FullTextQuery") -> "BooleanQuery":
        return BooleanQuery([(Occur.SHOULD, self), (Occur.SHOULD, other)])


def _operator(op: Any) -> FullTextOperator:
    try:
        return op if isinstance(op, FullTextOperator) else FullTextOperator(str(getattr(op, "value", op)).upper())
    except ValueError:
        raise InvalidArgumentError(f"full-text operator must be AND or OR, got {op!r}") from None


@dataclasses.dataclass(frozen=True, eq=False)
class MatchQuery(FullTextQuery):
    """Rows holding the query's terms in ``column`` (any with OR, all with AND), BM25-scored;
    ``fuzziness`` edits per term (None: 0 up to 2 bytes, 1 up to 5, else 2), the first
    ``prefix_length`` characters kept, at most ``max_expansions`` terms per query term."""

    query: str
    column: str
    boost: float = 1.0
    fuzziness: int | None = 0
    max_expansions: int = 50
    operator: Any = FullTextOperator.OR
    prefix_length: int = 0
    document_granularity: Any = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "operator", _operator(self.operator))

    def query_type(self) -> FullTextQueryType:
        return FullTextQueryType.MATCH


@dataclasses.dataclass(frozen=True, eq=False)
class PhraseQuery(FullTextQuery):
    """Rows holding the query's terms in order in ``column``, at most ``slop`` extra positions apart."""

    query: str
    column: str
    slop: int = 0
    document_granularity: Any = None

    def query_type(self) -> FullTextQueryType:
        return FullTextQueryType.MATCH_PHRASE


@dataclasses.dataclass(frozen=True, eq=False)
class BoostQuery(FullTextQuery):
    """The rows of ``positive``; one ``negative`` matches too loses ``negative_boost`` times its
    ``negative`` score (pylance's)."""

    positive: FullTextQuery
    negative: FullTextQuery
    negative_boost: float = 0.5

    def query_type(self) -> FullTextQueryType:
        return FullTextQueryType.BOOST


@dataclasses.dataclass(frozen=True, eq=False)
class MultiMatchQuery(FullTextQuery):
    """A match query per column (``boosts`` per column): the rows of any, each with its best
    column's score (pylance's)."""

    query: str
    columns: Sequence[str]
    boosts: Sequence[float] | None = None
    operator: Any = FullTextOperator.OR

    def __post_init__(self) -> None:
        object.__setattr__(self, "operator", _operator(self.operator))
        if self.boosts is not None and len(self.boosts) != len(self.columns):
            raise InvalidArgumentError(f"MultiMatchQuery: {len(self.boosts)} boosts for {len(self.columns)} columns")

    def query_type(self) -> FullTextQueryType:
        return FullTextQueryType.MULTI_MATCH


@dataclasses.dataclass(frozen=True, eq=False)
class BooleanQuery(FullTextQuery):
    """``(Occur, query)`` clauses: every MUST matches (scores added), SHOULD scores added to the
    rows found (the rows of any SHOULD when there is no MUST), MUST_NOT rows left out."""

    queries: Sequence[tuple[Occur, FullTextQuery]]

    def query_type(self) -> FullTextQueryType:
        return FullTextQueryType.BOOLEAN


def _string_query(text: str, columns: Sequence[str]) -> FullTextQuery:
    """pylance's string form: a ``"quoted"`` string is a phrase; several columns a multi-match."""
    stripped = text.strip()
    if len(stripped) >= 2 and stripped[0] == stripped[-1] == '"':
        phrases = [PhraseQuery(stripped[1:-1], c) for c in columns]
        return phrases[0] if len(phrases) == 1 else BooleanQuery([(Occur.SHOULD, p) for p in phrases])
    return MatchQuery(text, columns[0]) if len(columns) == 1 else MultiMatchQuery(text, list(columns))


def parse_full_text_query(spec: Any, indexed_columns: Sequence[str]) -> FullTextQuery:
    """``full_text_query=`` as a query object: a string (over ``indexed_columns``), a
    ``{"query", "columns"}`` dict, or a query object.

    Raises:
        ArgumentTypeError: another type.
        InvalidArgumentError: a string over no column (no full-text index and no ``columns``).
    """
    if isinstance(spec, FullTextQuery):
        return spec
    if isinstance(spec, dict):
        text, columns = spec.get("query"), spec.get("columns")
    elif isinstance(spec, str):
        text, columns = spec, None
    else:
        raise ArgumentTypeError(f"full_text_query must be a str, a dict or a query object, got {type(spec).__name__}")
    if isinstance(text, FullTextQuery):
        return text
    columns = list(columns) if columns else list(indexed_columns)
    if not columns:
        raise InvalidArgumentError("Invalid user input: Cannot perform full text search unless an INVERTED index "
                                   "has been created on at least one column")
    return _string_query(str(text), columns)
