"""Generated benchmark data and the datasets the cases start from.

Every table has the same three columns, built with whole-array kernels (10M rows in ~1 s):

- ``id``  int64, consecutive from ``start``;
- ``x``   float64, ``((id * 7919) % 1000) / 1000``: exactly 10% of any 1,000 consecutive ids
  have ``x < 0.1`` (7919 is prime to 1000), so a delete of ``x < 0.1`` removes exactly 10% of
  every fragment whose size is a multiple of 1,000;
- ``s``   string, ``"row-<id>"`` (10-15 bytes).

Fixture datasets are written once per run by lance_ops (both libraries then read the same
bytes) and copied for every repetition of a case that modifies them.
"""

import os
import shutil
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import lance_ops.format as lf


def make_table(rows: int, start: int = 0) -> pa.Table:
    """``rows`` rows of (id int64, x float64, s string), ids from ``start``; one chunk."""
    ids = np.arange(start, start + rows, dtype=np.int64)
    x = ((ids * 7919) % 1000) / 1000.0
    id_arr = pa.array(ids)
    s = pc.binary_join_element_wise("row-", pc.cast(id_arr, pa.string()), "")
    return pa.table({"id": id_arr, "x": pa.array(x), "s": s})


DELETE_PREDICATE_SQL = "x < 0.1"


def delete_predicate() -> pc.Expression:
    return pc.field("x") < 0.1


def copy_dataset(src: str, dst: str) -> str:
    """A private copy of a dataset directory (hard links would share deletion state: copy)."""
    if os.path.exists(dst):
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    return dst


def remove(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)


class Workdirs(dict[str, str]):
    """A case's output directory per variant: ``copier(template)`` is its ``prepare`` (a fresh
    copy of the template before each timed run), ``cleanup`` removes them all."""

    def copier(self, template: str, copy: Callable[[str, str], object] = copy_dataset) -> Callable[[str], None]:
        def prepare(v: str) -> None:
            copy(template, self[v])
        return prepare

    def cleanup(self) -> None:
        for d in self.values():
            remove(d)


def dir_bytes(path: str) -> int:
    """On-disk size of a dataset: the sum of its files' sizes (data, manifests, transactions)."""
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


class Fixtures:
    """Lazily built datasets under ``workdir``, shared by the cases of one run."""

    def __init__(self, workdir: str, params: Any) -> None:
        self.workdir = workdir
        self.p = params
        self._table: pa.Table | None = None
        self._paths: dict[str, str] = {}

    def path(self, name: str) -> str:
        return os.path.join(self.workdir, name)

    # ----------------------------------------------------------------- write / scan
    def table(self) -> pa.Table:
        if self._table is None:
            self._table = make_table(self.p.rows)
        return self._table

    def scan_dataset(self) -> str:
        """The ``rows``-row table written by lance_ops (1M-row files), read by both libraries."""
        if "scan" not in self._paths:
            path = self.path("scan_ds")
            remove(path)
            lf.write_dataset(self.table(), path, data_storage_version="2.0")
            self._paths["scan"] = path
        return self._paths["scan"]

    def scan_dataset_22(self, writer: str = "lance_ops") -> str:
        """The ``rows``-row table at file format 2.2, written by ``writer`` (``lance_ops`` or
        ``pylance``; each library's default file size, 1,048,576 rows).

        lance_ops writes simple uncompressed 2.2 encodings; pylance compresses by default
        (bit-packed integers, FSST strings), which is what users' datasets hold."""
        key = f"scan22_{writer}"
        if key not in self._paths:
            path = self.path(f"scan22_{writer}_ds")
            remove(path)
            if writer == "lance_ops":
                lf.write_dataset(self.table(), path, data_storage_version="2.2")
            elif writer == "pylance":
                import lance

                lance.write_dataset(self.table(), path, data_storage_version="2.2")
            else:
                raise ValueError(f"unknown writer {writer!r}")
            self._paths[key] = path
        return self._paths[key]

    def ipc_file(self) -> str:
        path = self.path("limit.arrow")
        if not os.path.exists(path):
            write_ipc(self.table(), path)
        return path

    # ------------------------------------------------------------- delete / compact
    def fragments_dataset(self) -> str:
        """``delete_rows`` rows in ``fragments`` equal fragments (template for delete)."""
        if "frags" not in self._paths:
            path = self.path("frags_ds")
            remove(path)
            rows, n = self.p.delete_rows, self.p.fragments
            lf.write_dataset(make_table(rows), path, max_rows_per_file=rows // n, data_storage_version="2.0")
            self._paths["frags"] = path
        return self._paths["frags"]

    def deleted_dataset(self) -> str:
        """``fragments_dataset`` after deleting 10% of every fragment (template for compaction)."""
        if "deleted" not in self._paths:
            path = copy_dataset(self.fragments_dataset(), self.path("deleted_ds"))
            lf.dataset(path).delete(delete_predicate())
            self._paths["deleted"] = path
        return self._paths["deleted"]

    def compaction_target(self) -> int:
        """``target_rows_per_fragment`` that bins the fragments into ``compact_tasks`` equal tasks.

        With a target that is an exact multiple of the live rows per fragment, both planners
        (pylance's and lance_ops') cut the 200 fragments into equal groups, so Spark's two
        slots get the same work and local[1] vs local[2] measures scaling, not skew.
        """
        per_frag = (self.p.delete_rows // self.p.fragments) * 9 // 10
        frags_per_task = max(1, self.p.fragments // self.p.compact_tasks)
        return per_frag * frags_per_task

    def indexed_dataset(self) -> str:
        """``indexed_rows`` rows (plus a 16-dim float32 ``vec``) in ``indexed_fragments()``
        fragments, file format 2.2, with a pylance BTREE on ``id`` and IVF_PQ on ``vec`` (16
        partitions, 4 sub-vectors), then 10% of every fragment deleted (template for
        ``compact_indexed``)."""
        if "indexed" not in self._paths:
            import lance

            path = self.path("indexed_ds")
            remove(path)
            rows, n = self.p.indexed_rows, self.indexed_fragments()
            t = make_table(rows)
            rng = np.random.default_rng(0)
            vec = pa.FixedSizeListArray.from_arrays(pa.array(rng.standard_normal(rows * 16, dtype=np.float32)), 16)
            lf.write_dataset(t.append_column("vec", vec), path, max_rows_per_file=rows // n,
                             data_storage_version="2.2")
            ds = lance.dataset(path)
            ds.create_scalar_index("id", "BTREE")
            ds.create_index("vec", "IVF_PQ", num_partitions=16, num_sub_vectors=4)
            lf.dataset(path).delete(delete_predicate())
            self._paths["indexed"] = path
        return self._paths["indexed"]

    def btree_dataset(self, *, indexed: bool) -> str:
        """``indexed_rows`` rows in ``indexed_fragments()`` fragments at file format 2.2 (template
        for ``create_btree``); with ``indexed``, pylance's BTREE on ``x`` and then 10% more rows
        appended, which no index covers (template for ``optimize_indices_btree``)."""
        key = f"btree_{indexed}"
        if key not in self._paths:
            import lance

            path = self.path(key)
            remove(path)
            rows, n = self.p.indexed_rows, self.indexed_fragments()
            lf.write_dataset(make_table(rows), path, max_rows_per_file=rows // n, data_storage_version="2.2")
            if indexed:
                lance.dataset(path).create_scalar_index("x", "BTREE")
                lf.write_dataset(make_table(rows // 10, start=rows), path, mode="append", max_rows_per_file=rows // n)
            self._paths[key] = path
        return self._paths[key]

    def ivf_pq_dataset(self) -> str:
        """``indexed_rows`` rows plus a 16-dim float32 ``vec`` at file format 2.2 with pylance's
        IVF_PQ (16 partitions, 4 sub-vectors), then 10% more rows appended, which no index covers
        (template for ``optimize_indices_ivf_pq``)."""
        if "ivf_pq" not in self._paths:
            import lance

            path = self.path("ivf_pq_ds")
            remove(path)
            rows, n = self.p.indexed_rows, self.indexed_fragments()
            rng = np.random.default_rng(0)

            def with_vec(t: pa.Table) -> pa.Table:
                flat = pa.array(rng.standard_normal(t.num_rows * 16, dtype=np.float32))
                return t.append_column("vec", pa.FixedSizeListArray.from_arrays(flat, 16))

            lf.write_dataset(with_vec(make_table(rows)), path, max_rows_per_file=rows // n, data_storage_version="2.2")
            lance.dataset(path).create_index("vec", "IVF_PQ", num_partitions=16, num_sub_vectors=4)
            lf.write_dataset(with_vec(make_table(rows // 10, start=rows)), path, mode="append",
                             max_rows_per_file=rows // n)
            self._paths["ivf_pq"] = path
        return self._paths["ivf_pq"]

    def indexed_fragments(self) -> int:
        """A quarter of ``fragments``: indexed tables hold fewer, larger fragments."""
        return max(self.p.compact_tasks, self.p.fragments // 4)

    def scaling_dataset(self) -> str:
        """``scaling_rows`` rows in ``fragments`` equal fragments, 10% deleted (compact_scaling);
        the compaction template itself when ``scaling_rows == delete_rows``."""
        if self.p.scaling_rows == self.p.delete_rows:
            return self.deleted_dataset()
        if "scaling" not in self._paths:
            path = self.path("scaling_ds")
            remove(path)
            rows, n = self.p.scaling_rows, self.p.fragments
            lf.write_dataset(make_table(rows), path, max_rows_per_file=rows // n, data_storage_version="2.0")
            lf.dataset(path).delete(delete_predicate())
            self._paths["scaling"] = path
        return self._paths["scaling"]

    def scaling_target(self) -> int:
        """:meth:`compaction_target` for :meth:`scaling_dataset`."""
        per_frag = (self.p.scaling_rows // self.p.fragments) * 9 // 10
        return per_frag * max(1, self.p.fragments // self.p.compact_tasks)

    def memory_dataset(self) -> str:
        """``memory_rows`` rows in ``fragments`` fragments with stable row ids at file format 2.2
        (pylance's default), 10% of every fragment deleted: template for compact_memory."""
        if "memory" not in self._paths:
            path = self.path("memory_ds")
            remove(path)
            rows, n = self.p.memory_rows, self.p.fragments
            lf.write_dataset(make_table(rows), path, max_rows_per_file=rows // n, data_storage_version="2.2",
                             enable_stable_row_ids=True)
            lf.dataset(path).delete(delete_predicate())
            self._paths["memory"] = path
        return self._paths["memory"]

    # --------------------------------------------------------------------- versions
    def versions_dataset(self) -> str:
        """A dataset with ``versions`` versions: a create, then small appends."""
        if "versions" not in self._paths:
            path = self.path("versions_ds")
            remove(path)
            small = make_table(self.p.append_rows)
            lf.write_dataset(small, path, data_storage_version="2.0")
            for i in range(1, self.p.versions):
                lf.write_dataset(make_table(self.p.append_rows, start=i * self.p.append_rows), path, mode="append")
            self._paths["versions"] = path
        return self._paths["versions"]

    def adopt_versions_dataset(self, path: str, versions: int) -> None:
        """Reuse a dataset another case built, when it has the requested number of versions."""
        if "versions" not in self._paths and versions == self.p.versions:
            dst = self.path("versions_ds")
            remove(dst)
            os.replace(path, dst)
            self._paths["versions"] = dst

    # ------------------------------------------------------------------ change feed
    def feed_dataset(self) -> tuple[str, int, int]:
        """Stable-row-id dataset: v1 ``feed_rows`` rows, v2 +10% appended, v3 10% of v1 updated.

        Returns (path, begin_version, end_version) for a feed over v2 and v3.
        """
        if "feed" not in self._paths:
            path = self.path("feed_ds")
            remove(path)
            n = self.p.feed_rows
            lf.write_dataset(make_table(n), path, enable_stable_row_ids=True, data_storage_version="2.0")
            lf.write_dataset(make_table(n // 10, start=n), path, mode="append")
            lf.dataset(path).update({"s": "'updated'"}, where=(pc.field("x") < 0.1) & (pc.field("id") < n))
            self._paths["feed"] = path
        return self._paths["feed"], 1, 3


    def merge_dataset(self) -> tuple[str, pa.Table]:
        """``merge_rows`` rows written by pylance (2.2, stable row ids) and a merge source of
        10% of them (every 10th id, new values) plus 10% new ids, shuffled (template for
        ``merge_insert``)."""
        if "merge" not in self._paths:
            import lance

            path = self.path("merge_ds")
            remove(path)
            n = self.p.merge_rows
            lance.write_dataset(make_table(n), path, enable_stable_row_ids=True, data_storage_version="2.2")
            matched = make_table(n // 10).set_column(0, "id", pa.array(np.arange(0, n, 10, dtype=np.int64)))
            src = pa.concat_tables([matched, make_table(n // 10, start=n)])
            order = np.random.default_rng(7).permutation(src.num_rows)
            self._paths["merge"] = path
            self._merge_source = src.take(pa.array(order)).combine_chunks()
        return self._paths["merge"], self._merge_source

    # ------------------------------------------------- pylance-written 2.2 datasets
    # What users have: pylance 14 writes file format 2.2 by default; these datasets are
    # created (and deleted from, updated) by pylance, with stable row ids, and lance_ops then
    # maintains copies of them.
    def pylance_fragments_22(self) -> str:
        """``delete_rows`` rows in ``fragments`` equal fragments, written by pylance at 2.2 with
        stable row ids (template for ``delete_22``)."""
        if "py_frags22" not in self._paths:
            import lance

            path = self.path("py_frags22_ds")
            remove(path)
            rows, n = self.p.delete_rows, self.p.fragments
            lance.write_dataset(make_table(rows), path, max_rows_per_file=rows // n,
                                enable_stable_row_ids=True, data_storage_version="2.2")
            self._paths["py_frags22"] = path
        return self._paths["py_frags22"]

    def pylance_deleted_22(self) -> str:
        """``pylance_fragments_22`` after pylance deleted 10% of every fragment (template for
        ``compact_22``, ``compact_22_local2`` and ``materialize_22``)."""
        if "py_deleted22" not in self._paths:
            import lance

            path = copy_dataset(self.pylance_fragments_22(), self.path("py_deleted22_ds"))
            lance.dataset(path).delete(DELETE_PREDICATE_SQL)
            self._paths["py_deleted22"] = path
        return self._paths["py_deleted22"]

    def pylance_feed_22(self) -> tuple[str, int, int]:
        """``feed_dataset`` built by pylance at 2.2: v1 ``feed_rows`` rows (stable row ids),
        v2 +10% appended, v3 10% of the v1 rows updated.  Returns (path, 1, 3)."""
        if "py_feed22" not in self._paths:
            import lance

            path = self.path("py_feed22_ds")
            remove(path)
            n = self.p.feed_rows
            lance.write_dataset(make_table(n), path, enable_stable_row_ids=True, data_storage_version="2.2")
            lance.write_dataset(make_table(n // 10, start=n), path, mode="append")
            lance.dataset(path).update({"s": "'updated'"}, where=f"x < 0.1 and id < {n}")
            self._paths["py_feed22"] = path
        return self._paths["py_feed22"], 1, 3

    def small_fragments_22(self) -> str:
        """``small_fragments`` fragments of ``small_fragment_rows`` rows each, written by pylance
        at 2.2 with stable row ids: what streaming ingestion leaves behind."""
        if "small22" not in self._paths:
            import lance

            path = self.path("small22_ds")
            remove(path)
            rows = self.p.small_fragments * self.p.small_fragment_rows
            lance.write_dataset(make_table(rows), path, max_rows_per_file=self.p.small_fragment_rows,
                                enable_stable_row_ids=True, data_storage_version="2.2")
            self._paths["small22"] = path
        return self._paths["small22"]


def write_ipc(table: pa.Table, path: str, *, batch_rows: int = 65536) -> None:
    """The physical limit for writing: the same rows as an uncompressed Arrow IPC file."""
    with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, table.schema) as w:
        w.write_table(table, max_chunksize=batch_rows)


def read_ipc(path: str) -> int:
    """The physical limit for a streaming scan: read every batch of the IPC file (copying)."""
    rows = 0
    with pa.OSFile(path, "rb") as src:
        r = pa.ipc.open_file(src)
        for i in range(r.num_record_batches):
            rows += r.get_batch(i).num_rows
    return rows
