"""pylance's scan keywords, defined once: ``to_table``, ``to_batches`` and ``scanner`` (and a
fragment's scans) take the same ones and hand them on as one :class:`ScanOptions`."""

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from lance_ops.format.api.arguments import check_readahead, check_scan_args


@dataclasses.dataclass(frozen=True, kw_only=True)
class ScanOptions:
    """The keywords of a scan (pylance's names); an unknown one is a ``TypeError``, as pylance's.

    ``late_materialization`` (pylance's): with a filter, which projected columns are decoded
    only for the rows that pass it -- ``True`` all, ``False`` none, a list those columns,
    ``None`` pylance's heuristic.  Rows come in fragment order whatever ``scan_in_order`` says
    (pylance's ``True``); the read-ahead depths are accepted and ignored, and so is ``prefilter``
    (pylance's: filter before a vector search; a scan without ``nearest`` reads the same either way).
    ``nearest`` makes the scan an exact k-nearest-neighbour search (:mod:`.nearest`).
    """

    with_row_id: bool = False
    with_row_address: bool = False
    limit: int | None = None
    offset: int | None = None
    batch_size: int | None = None
    fragments: Sequence[Any] | None = None
    batch_readahead: int | None = None
    fragment_readahead: int | None = None
    late_materialization: bool | Sequence[str] | None = None
    scan_in_order: bool | None = None
    #: the rows deletion files hide, with null ``_rowid`` / ``_rowaddr`` (needs ``_rowid``)
    include_deleted_rows: bool | None = None
    prefilter: bool | None = None
    #: batches of exactly ``batch_size`` rows across fragments (the last one: what is left)
    strict_batch_size: bool = False
    #: pylance's vector search (``{"column", "q", "k", "metric", ...}``): :mod:`.nearest`
    nearest: Mapping[str, Any] | None = None
    #: with ``nearest``: search only the fragments a vector index covers (pylance's)
    fast_search: bool = False
    #: with ``nearest`` and a projection without ``_distance``: leave ``_distance`` out (pylance's)
    disable_scoring_autoprojection: bool = False
    #: pylance's full-text search (a string, ``{"query", "columns"}`` or a query object): :mod:`.full_text`
    full_text_query: Any = None
    #: pylance's switch for scalar indices in a filter (accepted: lance_ops' answer is the same)
    use_scalar_index: bool | None = None

    def __post_init__(self) -> None:
        check_scan_args(self.limit, self.offset, self.batch_size)
        check_readahead(self.batch_readahead, self.fragment_readahead)
