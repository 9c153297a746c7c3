"""What a dataset handle hands out: its fragments (``LanceFragment``), deferred scans
(``Scanner``), ``ds.stats`` and the ``ds.optimize`` namespace, as pylance's.

Each holds the handle it came from (pinned to its version for fragments and scanners) and
delegates to it; none commits on its own.
"""

import dataclasses
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from lance_ops.format.api.arguments import read_all, sql_translator
from lance_ops.format.api.plan_text import analyze_text, explain_text, is_search
from lance_ops.format.api.progress import with_fragment_id
from lance_ops.format.api.scan_options import ScanOptions
from lance_ops.format.api.system_columns import names_with_offset
from lance_ops.format.arrow_ext import with_extensions
from lance_ops.format.errors import InvalidArgumentError, SchemaError
from lance_ops.format.file.reader import DataFileReader
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.ops.auto_cleanup import INTERVAL_KEY, OLDER_THAN_KEY, AutoCleanupConfig
from lance_ops.format.ops.compaction.rewrite import CompactionMetrics
from lance_ops.format.ops.delete_update import plan_delete
from lance_ops.format.ops.schema_evolution import plan_add_columns, plan_merge
from lance_ops.format.ops.update_columns import plan_update_columns
from lance_ops.format.ops.write import write_fragments
from lance_ops.format.read.data_stats import DataStatistics, data_statistics
from lance_ops.format.read.projection import plan_projection
from lance_ops.format.read.scan import META_COLUMNS, plan_scan
from lance_ops.format.schema import LanceSchema
from lance_ops.format.table.fragment import DataFile, FragmentMetadata
from lance_ops.format.table.manifest import Manifest
from lance_ops.format.txn.manifest_store import ManifestStore


class DatasetHandle(Protocol):
    """What these views use of the :class:`.dataset.LanceDataset` that hands them out (the
    handle sits above this module: imports flow downward)."""

    _store: ObjectStore

    @property
    def manifest(self) -> Manifest: ...
    @property
    def lance_schema(self) -> LanceSchema: ...
    @property
    def schema(self) -> pa.Schema: ...
    def to_batches(self, columns: Any = None, filter: Any = None, **kwargs: Any) -> Iterator[pa.RecordBatch]: ...
    def to_table(self, columns: Any = None, filter: Any = None, **kwargs: Any) -> pa.Table: ...
    def index_statistics(self, index_name: str) -> dict[str, Any]: ...
    def compact_files(self, **options: Any) -> CompactionMetrics: ...
    def optimize_indices(self, **kwargs: Any) -> None: ...


#: ``LanceFragment.create`` writes one fragment (one data file), whatever its size
_ONE_FILE = 1 << 62


class LanceFragment:
    """One fragment of a dataset version (read-only view)."""

    def __init__(self, ds: DatasetHandle, meta: FragmentMetadata | int) -> None:
        """``meta``: the fragment's metadata, or its id (pylance's ``LanceFragment(ds, fragment_id)``)."""
        self._ds = ds
        if isinstance(meta, int):
            found = ds.manifest.fragment(meta)
            if found is None:
                raise InvalidArgumentError(f"{ds.uri}: fragment {meta} does not exist in version {ds.version}")
            meta = found
        self.metadata = meta

    @property
    def fragment_id(self) -> int:
        return self.metadata.id

    @property
    def physical_rows(self) -> int:
        return self.metadata.physical_rows

    @property
    def deletion_file(self) -> Any:
        return self.metadata.deletion_file

    def count_rows(self, filter: pc.Expression | str | None = None) -> int:
        if filter is None:
            return self.metadata.num_rows
        return sum(b.num_rows for b in self.to_batches(columns=[], filter=filter))

    def scanner(self, columns: Sequence[str] | None = None, filter: Any = None, **kwargs: Any) -> "Scanner":
        """A deferred scan of this fragment only (pylance's ``LanceFragment.scanner``)."""
        return Scanner(self._ds, columns, filter, {**kwargs, "fragments": [self.metadata]})

    def to_batches(self, columns: Sequence[str] | None = None, **kwargs: Any) -> Iterator[pa.RecordBatch]:
        return self._ds.to_batches(columns=columns, fragments=[self.metadata], **kwargs)

    def to_table(self, columns: Sequence[str] | None = None, **kwargs: Any) -> pa.Table:
        return self._ds.to_table(columns=columns, fragments=[self.metadata], **kwargs)

    def head(self, num_rows: int) -> pa.Table:
        """The fragment's first ``num_rows`` live rows, as pylance's ``LanceFragment.head``."""
        return self.to_table(limit=num_rows)

    def take(self, indices: Sequence[int], columns: Any = None) -> pa.Table:
        """Rows at positions ``indices`` among the fragment's live rows, in the order asked
        (pylance's ``LanceFragment.take``)."""
        return self.to_table(columns=columns).take(pa.array(list(indices), pa.int64()))

    def open_session(self, columns: Sequence[str] | None = None, with_row_address: bool = False) -> "FragmentSession":
        """pylance's ``LanceFragment.open_session``: repeated ``take``s of ``columns`` (and
        ``_rowaddr``) from this fragment."""
        return FragmentSession(self, columns, with_row_address)

    # ------------------------------------------------ pylance surface (issue 24)
    @property
    def num_deletions(self) -> int:
        """Rows of this fragment marked deleted, as pylance's ``num_deletions``."""
        return self.metadata.num_deleted_rows

    def data_files(self) -> list[Any]:
        """The fragment's data files (``DataFile``s), as pylance's ``data_files()``."""
        return list(self.metadata.files)

    def files(self) -> list[Any]:
        """Alias of :meth:`data_files` (pylance's older name)."""
        return self.data_files()

    def delete(self, predicate: pc.Expression) -> FragmentMetadata | None:
        """Write a deletion file for the rows matching ``predicate``; commits nothing.

        Returns:
            the fragment's new metadata (commit it with ``Delete``/``Update``), the unchanged
            metadata when no row matched, or None when every row is now deleted (as pylance).
        """
        manifest = dataclasses.replace(self._ds.manifest, fragments=(self.metadata,))
        updated, removed, _total = plan_delete(self._ds._store, manifest, predicate)
        if removed:
            return None
        return updated[0] if updated else self.metadata

    def merge_columns(
        self,
        value_func: Any,
        columns: Sequence[str] | None = None,
        batch_size: int | None = None,
        reader_schema: pa.Schema | None = None,
    ) -> tuple[FragmentMetadata, LanceSchema]:
        """Add columns to this fragment only, as pylance's ``LanceFragment.merge_columns``:
        ``value_func`` as ``add_columns``' transforms (SQL strings, a batch UDF over
        ``columns``, a reader or Table of the new values); commits nothing.

        Returns:
            the fragment with its new data file and the new schema (commit them with
            ``LanceOperation.Merge(fragments, schema)``).

        Raises:
            InvalidArgumentError: a UDF with a checkpoint file (pylance's message).
        """
        if getattr(value_func, "cache", None) is not None:
            raise InvalidArgumentError("A checkpoint file cannot be used when applying a UDF with "
                                       "LanceFragment.merge_columns.")
        op = plan_add_columns(self._ds._store, self._ds.manifest, value_func, columns, batch_size=batch_size,
                              sql=sql_translator(), reader_schema=reader_schema, fragments=[self.metadata])
        return op.fragments[0], op.schema

    def merge(
        self, data_obj: Any, left_on: str, right_on: str | None = None, schema: pa.Schema | None = None
    ) -> tuple[FragmentMetadata, LanceSchema]:
        """:meth:`LanceDataset.merge` of this fragment only (commits nothing), as pylance's
        ``LanceFragment.merge``.

        Returns:
            the fragment with its new data file and the new schema.
        """
        right = read_all(data_obj, schema)
        op = plan_merge(self._ds._store, self._ds.manifest, right, left_on, right_on or left_on,
                        fragments=[self.metadata])
        return op.fragments[0], op.schema

    def update_columns(
        self, data_obj: Any, left_on: str = "_rowid", right_on: str | None = None, schema: pa.Schema | None = None
    ) -> tuple[FragmentMetadata, list[int]]:
        """New values of existing columns of this fragment, as pylance's ``update_columns``: the
        columns of ``data_obj`` (but ``right_on``, default ``left_on``) where its ``right_on``
        equals the row's ``left_on`` (``_rowid`` by default), unchanged elsewhere.  Commits nothing.

        Returns:
            the new fragment metadata and the modified field ids (commit them with
            ``LanceOperation.Update(updated_fragments=[...], fields_modified=...)``).
        """
        right = read_all(data_obj, schema)
        return plan_update_columns(self._ds._store, self._ds.manifest, self.metadata, right, left_on,
                                   right_on or left_on)

    @staticmethod
    def create_from_file(filename: str, dataset: Any, fragment_id: int) -> FragmentMetadata:
        """A fragment of the data file ``data/<filename>`` already written in ``dataset``'s
        directory (e.g. by ``LanceFileWriter``), its columns matched to the dataset's fields by
        name, as pylance's (an internal API there); commit it with an ``Append``."""
        reader = DataFileReader(dataset._store, f"data/{filename}")
        top = reader.schema.top_level()
        try:
            fields = tuple(dataset.lance_schema.field(f.name).id for f in top)
        except (KeyError, SchemaError) as e:
            raise InvalidArgumentError(f"{filename}: a column is not in the dataset's schema: {e}") from None
        if len(top) != len(reader.schema.fields):
            raise InvalidArgumentError(f"{filename}: only files of top-level columns become fragments this way")
        major, minor = reader.version
        size = dataset._store.size(f"data/{filename}")
        data_file = DataFile(filename, fields, tuple(range(len(fields))), major, minor, size)
        return FragmentMetadata(id=fragment_id, files=(data_file,), physical_rows=reader.num_rows)

    @staticmethod
    def create(
        dataset_uri: str,
        data: Any,
        fragment_id: int | None = None,
        schema: pa.Schema | None = None,
        max_rows_per_group: int = 1024,
        progress: Any = None,
        mode: str = "append",
        *,
        data_storage_version: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
        manifest_store: "ManifestStore | str | None" = None,
    ) -> FragmentMetadata:
        """Write ``data`` (any input :func:`write_dataset` takes) as one uncommitted fragment of the
        dataset at ``dataset_uri``, as pylance's ``LanceFragment.create``; commit it with
        ``commit(uri, Append([fragment]), read_version=...)``.  ``fragment_id`` (default 0) is
        replaced at commit as pylance does; ``max_rows_per_group`` is accepted and ignored
        (lance_ops sizes pages itself); ``progress`` (:mod:`.progress`) sees the fragment numbered
        ``fragment_id``.
        """
        if mode not in ("append", "overwrite", "create"):
            raise InvalidArgumentError(f"mode must be 'append', 'overwrite' or 'create', got {mode!r}")
        frags = write_fragments(data, dataset_uri, schema=schema, max_rows_per_file=_ONE_FILE,
                                storage_options=storage_options, data_storage_version=data_storage_version,
                                manifest_store=manifest_store, progress=with_fragment_id(progress, fragment_id or 0))
        if not frags:
            raise InvalidArgumentError(f"{dataset_uri}: LanceFragment.create got no rows to write")
        return dataclasses.replace(frags[0], id=fragment_id or 0)

    def __repr__(self) -> str:
        return f"LanceFragment(id={self.fragment_id}, physical_rows={self.physical_rows})"


class FragmentSession:
    """pylance's ``FragmentSession``: ``take(indices)`` of the columns it was opened for."""

    def __init__(self, fragment: LanceFragment, columns: Sequence[str] | None, with_row_address: bool) -> None:
        self._fragment, self._columns, self._with_addr = fragment, columns, with_row_address

    def take(self, indices: Sequence[int]) -> pa.Table:
        """Rows at positions ``indices`` among the fragment's live rows, in the order asked."""
        rows = self._fragment.to_table(columns=self._columns, with_row_address=self._with_addr)
        return rows.take(pa.array(list(indices), pa.int64()))


class Scanner:
    """A deferred scan (``ds.scanner(...).to_table()``), as in pylance."""

    def __init__(self, ds: DatasetHandle, columns: Sequence[str] | None, filter: Any, kw: dict[str, Any]) -> None:
        self._ds, self._columns, self._filter, self._kw = ds, columns, filter, kw
        self._options = ScanOptions(**kw)  # pylance's scanner refuses a bad keyword when it is made

    @property
    def dataset_schema(self) -> pa.Schema:
        """The schema of the dataset the scan reads (pylance's)."""
        return self._ds.schema

    @property
    def projected_schema(self) -> pa.Schema:
        if self._options.nearest is not None or self._options.full_text_query is not None:  # searches add columns
            return self.to_table().schema
        if names_with_offset(self._columns):  # ``_rowoffset`` is added after the scan: an empty one says
            return self._ds.to_table(self._columns, self._filter, **{**self._kw, "limit": 0}).schema
        opts = self._options
        columns, finish = plan_projection(self._ds.schema, self._columns, META_COLUMNS)
        out = plan_scan(self._ds.lance_schema, columns, self._filter, opts.with_row_id, opts.with_row_address).out_schema
        return with_extensions(out if finish is None else finish(pa.RecordBatch.from_pylist([], schema=out)).schema)

    def to_table(self) -> pa.Table:
        return self._ds.to_table(self._columns, self._filter, **self._kw)

    def explain_plan(self, verbose: bool = False) -> str:
        """The scan's plan as pylance prints it (DataFusion's indented operators), naming the
        steps lance_ops performs (:mod:`.plan_text`); a search lists lance_ops' own steps."""
        if not is_search(self):
            return explain_text(self)
        opts, steps = self._options, []
        if opts.nearest is not None:
            n = opts.nearest
            steps.append(f"ExactKNN: column={n.get('column')}, k={n.get('k', opts.limit or 10)} (no index read)")
        if self._filter is not None:
            steps.append(f"Filter: {self._filter}" + (" (prefilter)" if opts.prefilter else ""))
        if opts.limit is not None or opts.offset:
            steps.append(f"Limit: limit={opts.limit}, offset={opts.offset or 0}")
        cols = list(self.projected_schema.names)
        read = ", ".join(self._columns_read())
        head = (f"LanceScan: uri={self._ds.uri}, output={cols}, projection=[{read}], "
                f"num_fragments={len(self._ds.manifest.fragments)}")
        return "\n".join("  " * i + s for i, s in enumerate([head, *steps]))

    def _columns_read(self) -> list[str]:
        """The dataset's columns the scan decodes: those projected, those the filter names and
        the vector column of a search (as pylance's ``LanceRead: projection=[...]``)."""
        names = [f.name for f in self._ds.lance_schema.top_level()]
        wanted = set(self._columns if self._columns is not None and not isinstance(self._columns, dict) else names)
        if isinstance(self._columns, dict):
            wanted = set(names)
        if self._filter is not None:
            text = str(self._filter)
            wanted |= {n for n in names if re.search(rf"(?<![\w.]){re.escape(n)}(?![\w])", text)}
        if self._options.nearest is not None:
            wanted.add(str(self._options.nearest.get("column")))
        return [n for n in names if n in wanted]

    def analyze_plan(self) -> str:
        """Run the scan; its plan with the counts measured (rows, fragments, bytes, requests)."""
        if not is_search(self):
            return analyze_text(self)
        rows = self.count_rows()
        return f"{self.explain_plan()}\n  output_rows={rows}"

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        return self._ds.to_batches(self._columns, self._filter, **self._kw)

    def to_reader(self) -> pa.RecordBatchReader:
        return pa.RecordBatchReader.from_batches(self.projected_schema, self.to_batches())

    def count_rows(self) -> int:
        """Rows the scan yields (its filter, limit and offset applied); no column is decoded
        beyond what the filter reads."""
        kw = {k: v for k, v in self._kw.items() if k not in ("with_row_id", "with_row_address")}
        return sum(b.num_rows for b in self._ds.to_batches([], self._filter, **kw))



class LanceStats:
    """``LanceDataset.stats``, as pylance's ``LanceStats``."""

    def __init__(self, ds: DatasetHandle) -> None:
        self._ds = ds

    def dataset_stats(self, max_rows_per_group: int = 1024) -> dict[str, int]:
        """``{"num_deleted_rows", "num_fragments", "num_small_files"}``; a small file is a
        fragment of fewer than ``max_rows_per_group`` physical rows (as pylance counts)."""
        frags = self._ds.manifest.fragments
        return {
            "num_deleted_rows": sum(f.num_deleted_rows for f in frags),
            "num_fragments": len(frags),
            "num_small_files": sum(1 for f in frags if f.physical_rows < max_rows_per_group),
        }

    def index_stats(self, index_name: str) -> dict[str, Any]:
        """Statistics of one index (:meth:`LanceDataset.index_statistics`)."""
        return self._ds.index_statistics(index_name)

    def data_stats(self) -> DataStatistics:
        """Bytes on disk per field (:func:`.data_stats.data_statistics`), as pylance's."""
        return data_statistics(self._ds._store, self._ds.manifest)


class _Optimize:
    """``LanceDataset.optimize`` (as in pylance)."""

    def __init__(self, ds: DatasetHandle) -> None:
        self._ds = ds

    def compact_files(self, **options: Any) -> CompactionMetrics:
        """In-process compaction (options as pylance ``compact_files``); moves the handle to the
        new version; returns CompactionMetrics."""
        return self._ds.compact_files(**options)

    def optimize_indices(self, **kwargs: Any) -> None:
        """``ds.optimize.optimize_indices(num_indices_to_merge=..., index_names=...)`` (pylance);
        moves the handle to the new version."""
        self._ds.optimize_indices(**kwargs)

    def enable_auto_cleanup(self, auto_cleanup_config: AutoCleanupConfig, **kwargs: Any) -> None:
        """Set pylance's auto cleanup keys in the table config (a new version): every
        ``interval`` versions, a commit cleans up the versions older than ``older_than_seconds``."""
        self._ds.update_config({INTERVAL_KEY: str(int(auto_cleanup_config["interval"])),
                                OLDER_THAN_KEY: f"{int(auto_cleanup_config['older_than_seconds'])}s"})

    def disable_auto_cleanup(self, **kwargs: Any) -> None:
        """Remove the auto cleanup keys from the table config (a new version)."""
        self._ds.delete_config_keys([INTERVAL_KEY, OLDER_THAN_KEY])


