"""FSST symbol tables reused across the files of one rewrite (issue 36: the 2.2 upgrade).

A compaction writes one column's strings into many files; training a symbol table is about
half of FSST's cost per page (five counting rounds and their candidate selection).  Inside
:func:`reuse_tables` a data file's writer starts from the tables the earlier files of the
scope trained (a snapshot taken when the writer is created) and, when it finishes, adds the
table of each column's *first* page to the scope, so the files' bytes depend only on the rows
and their order, never on thread timing.  A page that a reused table compresses worse than
the page it was trained on (by more than :data:`SLACK`) is trained afresh.  Outside a scope
every page trains its own table, as before.  The codes are ordinary FSST: any table is valid,
and pylance reads each page with the table stored in it.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

import numpy as np

#: a reused table may give codes up to this much larger (relative) than its own training page's
SLACK = 0.05


@dataclass(frozen=True)
class Trained:
    """A trained table (``words``, ``lens``, ``n`` as :func:`.fsst.train` returns them) and
    the compressed / plain size ratio of the page it was trained on."""

    words: np.ndarray
    lens: np.ndarray
    n: int
    ratio: float


@dataclass
class PageReuse:
    """What one page may reuse (``prior``) and whether its table is the column's to publish."""

    prior: Trained | None
    learned: dict[str, Trained] | None
    key: str

    def record(self, trained: Trained) -> None:
        if self.learned is not None:
            self.learned.setdefault(self.key, trained)


_SCOPE: ContextVar[dict[str, Trained] | None] = ContextVar("lance_ops_fsst_tables", default=None)


@contextmanager
def reuse_tables() -> Iterator[None]:
    """Files written inside reuse the symbol tables of the scope's earlier files."""
    token = _SCOPE.set({})
    try:
        yield
    finally:
        _SCOPE.reset(token)


class FileTables:
    """One data file's view of the scope (None outside one): :meth:`page` for each page in
    file order, :meth:`publish` when the file is finished."""

    def __init__(self) -> None:
        scope = _SCOPE.get()
        self._scope = scope
        self._known = dict(scope) if scope is not None else {}
        self._learned: dict[str, Trained] = {}
        self._first: set[str] = set()

    def page(self, key: str) -> PageReuse | None:
        if self._scope is None:
            return None
        first = key not in self._first
        self._first.add(key)
        return PageReuse(self._known.get(key), self._learned if first else None, key)

    def publish(self) -> None:
        if self._scope is not None:
            for key, trained in self._learned.items():
                self._scope.setdefault(key, trained)
