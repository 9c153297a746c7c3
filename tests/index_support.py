"""Datasets with every index kind pylance 14 builds, and the checks the index tests share.

One table holds a column per index: ``id`` BTREE, ``cat`` BITMAP, ``tags`` LABEL_LIST, ``text``
NGRAM, ``val`` ZONEMAP, ``bid`` BLOOMFILTER, ``doc`` INVERTED, and one 8-dim vector column per
vector kind (``v_ivf_pq`` IVF_PQ, ...), so every index answers its own queries.  IVF training is
kept tiny (2 partitions, 2 sub-vectors).  pylance builds the indices (tests only).
"""

import re
import shutil
import warnings
from collections.abc import Iterable
from typing import Any

import lance
import numpy as np
import pyarrow as pa

warnings.filterwarnings("ignore", category=DeprecationWarning)

WORDS = np.array(["alpha", "beta", "gamma", "delta", "omega", "kappa"])
DIM = 8
SCALAR = {
    "BTREE": "id",
    "BITMAP": "cat",
    "LABEL_LIST": "tags",
    "NGRAM": "text",
    "ZONEMAP": "val",
    "BLOOMFILTER": "bid",
    "INVERTED": "doc",
}
VECTOR = ("IVF_PQ", "IVF_FLAT", "IVF_SQ", "IVF_HNSW_PQ", "IVF_HNSW_SQ", "IVF_HNSW_FLAT")
ALL_KINDS = (*SCALAR, *VECTOR)
QUERIES = {
    "BTREE": ["id = 123", "id < 50", "id >= 2390 AND id < 2500"],
    "BITMAP": ["cat = 'red'"],
    "LABEL_LIST": ["array_has_any(tags, ['alpha'])"],
    "NGRAM": ["contains(text, 'w17')"],
    "ZONEMAP": ["val = 300", "val < 10"],
    "BLOOMFILTER": ["bid = 777", "bid = 1"],
}
QUERY_VECTOR = np.full(DIM, 0.1, dtype=np.float32)


def index_name(kind: str) -> str:
    return f"{kind.lower()}_idx"


def vector_column(kind: str) -> str:
    return f"v_{kind.lower()}"


def table(n: int = 2400, start: int = 0) -> pa.Table:
    """``n`` rows with ids ``start..``; deterministic."""
    ids = np.arange(start, start + n)
    rng = np.random.default_rng(start + 7)
    cols: dict[str, Any] = {
        "id": pa.array(ids, pa.int64()),
        "cat": np.array(["red", "green", "blue", "cyan"])[ids % 4],
        "tags": pa.array([[str(WORDS[i % 6]), str(WORDS[(i // 6) % 6])] for i in ids], pa.list_(pa.string())),
        "text": [" ".join(WORDS[(i * 7 + j) % 6] for j in range(i % 3 + 1)) + f" w{i % 50}" for i in ids],
        "val": pa.array(ids * 3 % 1000, pa.int64()),
        "bid": pa.array(ids, pa.int64()),
        "note": pa.array(["n"] * n),
    }
    cols["doc"] = cols["text"]
    for kind in VECTOR:
        flat = pa.array(rng.standard_normal(n * DIM).astype(np.float32))
        cols[vector_column(kind)] = pa.FixedSizeListArray.from_arrays(flat, DIM)
    return pa.table(cols)


def create_index(ds: lance.LanceDataset, kind: str) -> None:
    if kind in SCALAR:
        ds.create_scalar_index(SCALAR[kind], kind, name=index_name(kind))
    else:
        kw: dict[str, Any] = {"num_partitions": 2}
        if "PQ" in kind:
            kw["num_sub_vectors"] = 2
        ds.create_index(vector_column(kind), kind, name=index_name(kind), **kw)


def build(uri: str, *, stable: bool = False, file_version: str = "2.2", kinds: Iterable[str] = ALL_KINDS,
          rows: int = 2400, rows_per_file: int = 600) -> lance.LanceDataset:
    """pylance writes ``rows`` rows in fragments of ``rows_per_file`` and builds the indices."""
    shutil.rmtree(uri, ignore_errors=True)
    ds = lance.write_dataset(table(rows), uri, max_rows_per_file=rows_per_file,
                             enable_stable_row_ids=stable, data_storage_version=file_version)
    for k in kinds:
        create_index(ds, k)
    return lance.dataset(uri)


def copy(src: str, dst: str) -> str:
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    return dst


def _ids(t: pa.Table) -> list[int]:
    return sorted(t["id"].to_pylist())


def wrong_answers(ds: lance.LanceDataset, kinds: Iterable[str] = ALL_KINDS) -> list[tuple[Any, ...]]:
    """Queries whose indexed answer differs from brute force (empty when all are right)."""
    bad = []
    for k in kinds:
        if k in QUERIES:
            for q in QUERIES[k]:
                a = _ids(ds.to_table(columns=["id"], filter=q))
                b = _ids(ds.to_table(columns=["id"], filter=q, use_scalar_index=False))
                if a != b:
                    bad.append((k, q, len(a), len(b)))
        elif k == "INVERTED":
            a = _ids(ds.to_table(columns=["id"], full_text_query="gamma", disable_scoring_autoprojection=True))
            b = _ids(ds.to_table(columns=["id"], filter="contains(doc, 'gamma')"))
            if a != b:
                bad.append((k, "full_text_query gamma", len(a), len(b)))
        else:
            col = vector_column(k)
            # every partition probed, every candidate (k * refine_factor >= rows; ef as large) refined
            # on the raw vectors: exact, whatever the quantisation
            a = _ids(ds.to_table(columns=["id"], nearest={"column": col, "q": QUERY_VECTOR, "k": 10, "nprobes": 2,
                                                          "refine_factor": 400, "ef": 4000},
                                 disable_scoring_autoprojection=True))
            b = _ids(ds.to_table(columns=["id"], nearest={"column": col, "q": QUERY_VECTOR, "k": 10, "use_index": False},
                                 disable_scoring_autoprojection=True))
            if a != b:
                bad.append((k, "nearest", a, b))
    return bad


def indices_used(ds: lance.LanceDataset, kinds: Iterable[str] = ALL_KINDS) -> dict[str, bool]:
    """For each kind: does pylance's plan for its first query use the index?"""
    out = {}
    for k in kinds:
        if k in QUERIES:
            plan = ds.scanner(columns=["id"], filter=QUERIES[k][0]).explain_plan()
            out[k] = f"@{index_name(k)}(" in plan
        elif k == "INVERTED":
            plan = ds.scanner(columns=["id"], full_text_query="gamma", disable_scoring_autoprojection=True).explain_plan()
            out[k] = re.search(r"(?<!Flat)MatchQuery", plan) is not None
        else:
            plan = ds.scanner(columns=["id"], nearest={"column": vector_column(k), "q": QUERY_VECTOR, "k": 10,
                                                       "nprobes": 2, "refine_factor": 5},
                              disable_scoring_autoprojection=True).explain_plan()
            out[k] = f"ANNSubIndex: name={index_name(k)}" in plan
    return out


def indexed_rows(ds: lance.LanceDataset) -> dict[str, int]:
    """pylance's ``num_rows_indexed`` of every index."""
    return {d.name: d.num_rows_indexed for d in ds.describe_indices()}


def follow_ups(uri: str, kinds: Iterable[str] = ALL_KINDS) -> list[tuple[str, list[Any]]]:
    """pylance keeps maintaining the dataset: append, delete, compact_files, cleanup, then
    optimize_indices; the wrong answers after each step (all empty when the indices are right)."""
    from datetime import timedelta

    out = []
    lance.write_dataset(table(600, start=5000), uri, mode="append")
    out.append(("append", wrong_answers(lance.dataset(uri), kinds)))
    lance.dataset(uri).delete("id % 7 = 0")
    out.append(("delete", wrong_answers(lance.dataset(uri), kinds)))
    lance.dataset(uri).optimize.compact_files(target_rows_per_fragment=1000)
    out.append(("compact_files", wrong_answers(lance.dataset(uri), kinds)))
    lance.dataset(uri).cleanup_old_versions(older_than=timedelta(0))
    out.append(("cleanup_old_versions", wrong_answers(lance.dataset(uri), kinds)))
    lance.dataset(uri).optimize.optimize_indices()
    out.append(("optimize_indices", wrong_answers(lance.dataset(uri), kinds)))
    return out
