"""pylance's SQL dialect (DataFusion's as Lance configures it) and its parser: one SQL
expression to a sqlglot tree, with the position of what went wrong (see ``sql.py``)."""

import functools
import re

import sqlglot
from sqlglot import exp, tokens
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ParseError, TokenError

from lance_ops.format.errors import SQLParseError

__all__ = ["LanceSQL", "node_position", "parse_sql"]


class LanceSQL(Dialect):
    """The dialect pylance parses: DataFusion's generic SQL with Lance's quoting rules."""

    class Tokenizer(tokens.Tokenizer):
        QUOTES = ["'", '"']
        IDENTIFIERS = ["`"]
        STRING_ESCAPES = ["'"]
        HEX_STRINGS = [("X'", "'"), ("x'", "'")]


@functools.lru_cache(maxsize=256)
def parse_sql(text: str) -> exp.Expr:
    """The sqlglot tree of one SQL expression (cached: the same filter is parsed once).

    Raises:
        SQLParseError: not one complete expression; names the text and the position.
    """
    if not text.strip():
        raise SQLParseError("empty SQL expression", text, 0)
    try:
        trees = sqlglot.parse(text, read=LanceSQL)
    except ParseError as e:
        err = (e.errors or [{}])[0]
        pos = _offset(text, err.get("line"), err.get("col"))
        reason = err.get("description") or str(e)
        if reason.startswith("Required keyword"):
            reason = f"incomplete expression: {err.get('highlight') or 'an operator'!s} lacks an operand"
        raise SQLParseError(reason, text, pos) from None
    except TokenError as e:
        pos = _token_error_position(text)
        reason = f"unterminated {text[pos]}-quoted text" if pos < len(text) else f"cannot tokenize: {e}"
        raise SQLParseError(reason, text, pos) from None
    if len(trees) != 1 or trees[0] is None:
        cut = text.find(";")
        raise SQLParseError("expected one expression, found several statements", text, cut if cut >= 0 else 0)
    tree = trees[0]
    if isinstance(tree, exp.Alias):  # ``a > 1 b``: trailing text read as an alias
        raise SQLParseError(f"unexpected text after the expression: {tree.alias!r}", text, node_position(tree.args["alias"], text))
    if isinstance(tree, exp.Query | exp.Command | exp.DDL | exp.DML):
        raise SQLParseError(f"expected an expression, found a {tree.key.upper()} statement", text, 0)
    return tree


def _offset(text: str, line: int | None, col: int | None) -> int:
    """0-based character offset of sqlglot's 1-based (line, col) (col is the token's last char)."""
    if not line or not col:
        return 0
    lines = text.split("\n")
    base = sum(len(x) + 1 for x in lines[: line - 1])
    return max(0, min(len(text), base + col - 1))


def _token_error_position(text: str) -> int:
    """Where tokenizing failed: the opening quote of an unterminated string, else the end."""
    for m in re.finditer(r"'(?:[^']|'')*$|\"[^\"]*$|`[^`]*$", text):
        return m.start()
    return len(text)


def node_position(node: exp.Expr | None, text: str) -> int:
    """Where a node starts in ``text``: a name or literal by its token's offset, anything else
    by its SQL text (case-insensitively), else by its first token; 0 if unknown."""
    if node is None:
        return 0
    if not isinstance(node, exp.Column | exp.Identifier | exp.Literal | exp.Dot):
        at = text.lower().find(node.sql(dialect=LanceSQL).lower())
        if at >= 0:
            return at
    for n in node.walk():
        meta = getattr(n, "meta", None) or {}
        if "start" in meta:
            return int(meta["start"])
    return 0

