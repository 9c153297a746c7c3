"""pylance's ``ShardedBatchIterator`` (``lance._dataset.sharded_batch_iterator``): the record
batches of shard ``rank`` of ``world_size``, by fragment (every ``world_size``-th fragment from
``rank``) or by batch (every ``world_size``-th run of ``batch_size`` rows from ``rank``)."""

import os
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa

from lance_ops.format.api.lance_dataset import LanceDataset
from lance_ops.format.errors import InvalidArgumentError, UnsupportedFeatureError


class ShardedBatchIterator:
    """Iterate one shard of a dataset (deprecated in pylance in favour of its samplers, with the
    same warning)."""

    def __init__(self, data: Any, rank: int, world_size: int, *,
                 columns: Sequence[str] | Mapping[str, str] | None = None, batch_size: int = 1024 * 10,
                 granularity: str = "fragment", batch_readahead: int = 8, with_row_id: bool = False) -> None:
        warnings.warn("ShardedBatchIterator is deprecated, use :class:`Sampler` instead", stacklevel=2)
        if granularity not in ("fragment", "batch"):
            raise InvalidArgumentError(f"Unrecognized granularity: {granularity}")
        if not 0 <= rank < world_size:
            raise InvalidArgumentError(f"rank must be in [0, world_size={world_size}), got {rank}")
        self._ds = data if isinstance(data, LanceDataset) else LanceDataset(os.fspath(data))
        self._rank, self._world_size, self._batch_size = rank, world_size, batch_size
        self._columns, self._granularity, self._with_row_id = columns, granularity, with_row_id

    def _over_fragments(self) -> Iterator[pa.RecordBatch]:
        fragments = self._ds.get_fragments()
        for frag in fragments[self._rank::self._world_size]:
            yield from frag.to_batches(columns=self._columns, batch_size=self._batch_size,
                                       with_row_id=self._with_row_id)

    def _over_batches(self) -> Iterator[pa.RecordBatch]:
        if self._with_row_id:
            raise UnsupportedFeatureError("with_row_id is not supported for batch sharding yet")
        total = self._ds.count_rows()
        step = self._world_size * self._batch_size
        for start in range(self._rank * self._batch_size, total, step):
            table = self._ds.to_table(columns=self._columns, offset=start,
                                      limit=min(self._batch_size, total - start))
            yield from table.combine_chunks().to_batches()

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        return self._over_fragments() if self._granularity == "fragment" else self._over_batches()
