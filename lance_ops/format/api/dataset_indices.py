"""A dataset handle's indices: describe, build (scalar and vector), optimize and drop, as pylance's."""

import uuid as uuidlib
from collections.abc import Sequence
from typing import Any, Self

from lance_ops.format.api.dataset_core import DatasetCore
from lance_ops.format.errors import IndexNotFoundError, UnsupportedFeatureError
from lance_ops.format.index import describe as _describe
from lance_ops.format.index.metadata import decode_index_section
from lance_ops.format.index.segment_stats import readable, segment_statistics
from lance_ops.format.ops.index_build import (
    build_indices,
    plan_create_index,
    plan_create_scalar_index,
    plan_optimize_indices,
)
from lance_ops.format.ops.index_staging import merge_staged, stage_fragments
from lance_ops.format.txn.operations import CreateIndex


class IndexMethods(DatasetCore):
    """The index methods of :class:`.lance_dataset.LanceDataset`."""

    def describe_indices(self) -> list[_describe.IndexDescription]:
        """The indices of this version (built by pylance), with their coverage, as pylance's
        ``describe_indices``; ``num_rows_unindexed`` and ``coverage`` say what they miss."""
        return _describe.describe_indices(self._manifest, f"{self.uri} version {self.version}")

    def list_indices(self) -> list[dict[str, Any]]:
        """One dict per index segment (name, type, uuid, fields, version, fragment_ids, base_id)."""
        return _describe.list_indices(self.describe_indices())

    def index_statistics(self, index_name: str) -> dict[str, Any]:
        """Statistics of one index (the keys of pylance's ``stats.index_stats``): coverage, and per
        segment (``indices`` / ``segments``) what its files say (:mod:`.index.segment_stats`).

        Raises:
            KeyError: no index of that name (pylance's message: ``Index "<name>" not found``).
        """
        for d in self.describe_indices():
            if d.name == index_name:
                stats = _describe.index_statistics(d)
                where = f"{self.uri} version {self.version}"
                segments = [i for i in decode_index_section(self._manifest.index_section, where) if i.name == index_name]
                if segments and all(readable(i) for i in segments):
                    stats["indices"] = [segment_statistics(self._store, i) for i in segments]
                    stats["segments"] = stats["indices"]
                return stats
        raise KeyError(f'Index "{index_name}" not found ({self.uri} version {self.version})')

    def create_scalar_index(
        self, column: str, index_type: str, name: str | None = None, *, replace: bool = True, train: bool = True,
        fragment_ids: Sequence[int] | None = None, index_uuid: str | None = None, **params: Any
    ) -> None:
        """Build a BTREE, BITMAP, LABEL_LIST, ZONEMAP, NGRAM or INVERTED (``FTS``) index of ``column``
        over every fragment (named ``<column>_idx`` by default) with files as pylance 14 writes
        them, and commit it; the handle moves to the new version (as pylance's).  ``params``:
        an INVERTED index's tokenizer keywords (pylance's ``base_tokenizer``, ``language``,
        ``with_position``, ``max_token_length``, ``lower_case``, ``stem``, ``remove_stop_words``,
        ``custom_stop_words``, ``ascii_folding``, ...; those lance_ops cannot tokenize exactly raise).

        Raises:
            UnsupportedFeatureError: another index type, or a column type the kind cannot hold.
            SchemaError: no such column.
            InvalidArgumentError: ``replace=False`` and an index of that name exists.
        """
        self._check_mutable()
        if fragment_ids is not None:  # pylance's distributed build: staged, merged and committed by the caller
            stage_fragments(self._store, self._manifest, uuid=index_uuid or str(uuidlib.uuid4()), column=column,
                            index_type=index_type, name=name, fragment_ids=fragment_ids, params=params)
            return
        plan = plan_create_scalar_index(self._manifest, column, index_type, name=name, replace=replace, params=params)
        self._advance(build_indices(self._store, self._manifest, plan, handler=self._handler))

    def merge_index_metadata(self, index_uuid: str, index_type: str, batch_readhead: int | None = None) -> None:
        """Write the segment of a distributed INVERTED build from its staged fragments (pylance's;
        nothing is committed: commit ``LanceOperation.CreateIndex`` with an ``Index`` of that uuid)."""
        merge_staged(self._store, self._manifest, index_uuid, index_type)

    def create_index(
        self,
        column: str,
        index_type: str,
        name: str | None = None,
        metric: str = "L2",
        replace: bool = False,
        num_partitions: int | None = None,
        ivf_centroids: Any = None,
        pq_codebook: Any = None,
        num_sub_vectors: int | None = None,
        *,
        target_partition_size: int | None = None,
        index_file_version: str | None = None,
        shuffle_partition_batches: int | None = None,
        shuffle_partition_concurrency: int | None = None,
    ) -> Self:
        """Train an IVF_FLAT or IVF_PQ index of vector ``column`` (l2 or cosine; NumPy k-means
        on a sample, as pylance 14 samples) over every fragment and commit it; the handle moves
        to the new version.  Arguments and return value (this dataset) as pylance's ``create_index``
        (``replace`` defaults to False).  ``ivf_centroids`` (``(num_partitions, dim)``) and
        ``pq_codebook`` (``(num_sub_vectors, 256, dim / num_sub_vectors)``, an array or a
        ``FixedShapeTensorArray``) are used as given instead of trained; ``target_partition_size``
        (rows per partition) sets ``num_partitions`` when that is not given; ``index_file_version``
        may be ``"V3"`` (what lance_ops writes).  pylance's shuffle tuning (``shuffle_partition_batches``,
        ``shuffle_partition_concurrency``) is accepted and not used: lance_ops assigns partitions in memory.

        Raises:
            UnsupportedFeatureError: another index type or metric, or not a vector column.
            SchemaError: no such column.
            InvalidArgumentError: ``replace=False`` and the name exists; too few vectors.
        """
        self._check_mutable()
        if index_file_version is not None and str(getattr(index_file_version, "value", index_file_version)) != "V3":
            raise UnsupportedFeatureError(f"create_index: lance_ops writes index files V3, not {index_file_version!r}")
        if isinstance(column, list | tuple) and len(column) == 1:  # pylance takes a one-column list
            column = column[0]
        model = {"ivf_centroids": ivf_centroids, "pq_codebook": pq_codebook, "target_partition_size": target_partition_size}
        plan = plan_create_index(self._manifest, column, index_type, name=name, metric=metric, replace=replace,
                                 num_partitions=num_partitions, num_sub_vectors=num_sub_vectors,
                                 model={k: v for k, v in model.items() if v is not None})
        self._advance(build_indices(self._store, self._manifest, plan, handler=self._handler))
        return self

    def optimize_indices(
        self, *, num_indices_to_merge: int = 1, index_names: Sequence[str] | None = None
    ) -> None:
        """Index the fragments no segment of an index covers (pylance's ``optimize_indices``:
        BTREE, BITMAP, LABEL_LIST, ZONEMAP, NGRAM, INVERTED, and IVF_FLAT / IVF_PQ over the index's centroids and
        codebook): ``num_indices_to_merge=0`` adds a segment, ``N`` rebuilds the newest ``N``
        segments with the new fragments as one.  Other kinds are left as they are.  The handle
        moves to the new version (it stays where it is when there was nothing to do)."""
        self._check_mutable()
        plan = plan_optimize_indices(self._manifest, num_indices_to_merge=num_indices_to_merge, index_names=index_names)
        self._advance(build_indices(self._store, self._manifest, plan, handler=self._handler))

    def drop_index(self, name: str) -> None:
        """Remove every segment of index ``name`` in a new version (a ``CreateIndex`` removing
        them, as pylance's ``drop_index``); the handle moves to it.  Index files stay until
        ``cleanup_old_versions``.

        Raises:
            IndexNotFoundError: no index of that name (a ``RuntimeError`` too, as pylance's).
        """
        self._check_mutable()
        section = self._manifest.index_section
        segments = [i for i in decode_index_section(section, f"{self.uri} version {self.version}")
                    if i.name == name] if section else []
        if not segments:
            raise IndexNotFoundError(f"Lance index not found: name={name} ({self.uri} version {self.version})")
        self._commit(CreateIndex((), segments))

    @property
    def has_index(self) -> bool:
        return bool(self._manifest.index_section) and bool(self.describe_indices())

