"""A dataset handle's schema evolution: add, alter and drop columns, as pylance's."""

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from lance_ops.format.api.arguments import read_all, sql_translator
from lance_ops.format.api.dataset_core import DatasetCore
from lance_ops.format.ops.schema_evolution import (
    NewColumns,
    plan_add_columns,
    plan_alter_columns,
    plan_drop_columns,
    plan_merge,
)


class SchemaEvolutionMethods(DatasetCore):
    """The schema evolution methods of :class:`.lance_dataset.LanceDataset`."""

    def add_columns(
        self,
        transforms: NewColumns,
        read_columns: Sequence[str] | None = None,
        reader_schema: pa.Schema | None = None,
        batch_size: int | None = None,
    ) -> None:
        """Add columns, as pylance's ``add_columns``; the handle moves to the new version.

        ``transforms``: ``{name: SQL string or pc.Expression}`` (one new data file per
        fragment; all-null ones such as ``CAST(NULL AS INT)`` metadata only), a ``pa.Field`` /
        list of fields / ``pa.Schema`` of all-null columns (metadata only), a
        ``RecordBatchReader`` (or batches with ``reader_schema``) of the new values, or a batch UDF taking a RecordBatch of ``read_columns`` (live rows)
        and returning a RecordBatch of the new columns.  Committed as a ``Merge``.
        """
        self._handler.check_writable()
        self._commit(plan_add_columns(self._store, self._manifest, transforms, read_columns, batch_size=batch_size,
                                      sql=sql_translator(), reader_schema=reader_schema))

    def alter_columns(self, *alterations: Mapping[str, Any]) -> None:
        """Rename, change nullability or cast columns, as pylance's ``alter_columns``: each
        alteration a dict with ``path`` and any of ``name``, ``nullable``, ``data_type``.
        Renames and nullability are a ``Project`` (metadata only); casts rewrite the column
        under a new field id (a ``Merge``)."""
        self._handler.check_writable()
        self._commit(plan_alter_columns(self._store, self._manifest, alterations))

    def drop_columns(self, columns: Sequence[str]) -> None:
        """Drop columns (dotted paths for struct children), as pylance's ``drop_columns``: a
        ``Project``, metadata only; ``compact_files`` then rewrites the data without them."""
        self._handler.check_writable()
        self._commit(plan_drop_columns(self._manifest, columns))


    def merge(self, data_obj: Any, left_on: str, right_on: str | None = None, schema: pa.Schema | None = None) -> None:
        """Add the columns of ``data_obj`` by a left join on ``left_on`` = ``right_on`` (default
        ``left_on``), as pylance's ``merge``: a row without a match gets nulls, a key matched by
        several rows takes the last.  One more data file per fragment, a ``Merge``; the handle
        moves to the new version."""
        self._handler.check_writable()
        right = read_all(data_obj, schema)
        self._commit(plan_merge(self._store, self._manifest, right, left_on, right_on or left_on))
