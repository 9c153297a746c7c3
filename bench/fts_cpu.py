"""CPU time of a full-text MatchQuery on 100k rows (+1k appended after the index) with an
INVERTED index (built by pylance): the first query of a fresh process, a second query, and the
first query on a newly opened dataset in a warm process (the search caches emptied: lance_ops'
one-time imports and JIT loads left out), lance_ops (posting lists, or flat with ``--flat``)
against pylance on the same dataset.  One process per measurement:

    python -m bench.fts_cpu /tmp/fts_bench [--flat|--pylance]
"""

import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

WORDS = np.array(("frodo was a happy puppy with the tail lance search text database quick brown fox jumped "
                  "running runs cafe naive strasse lake the and is of").split()
                 + [f"w{i}" for i in range(5000)])


def make(uri: str) -> None:
    import lance  # test/bench dependency only

    rng = np.random.default_rng(1)
    text = [" ".join(WORDS[rng.integers(0, len(WORDS), 12)]) for _ in range(100_000)]
    ds = lance.write_dataset(pa.table({"id": np.arange(100_000), "text": text}), uri, max_rows_per_file=25_000)
    ds.create_scalar_index("text", "INVERTED")
    lance.write_dataset(pa.table({"id": np.arange(1000) + 100_000, "text": text[:1000]}), uri, mode="append")


def main() -> None:
    uri, mode = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else "")
    if not Path(uri).exists():
        make(uri)
    if mode == "--pylance":
        import lance as lib
    else:
        import lance_ops.format as lib
        from lance_ops.format.api import full_text
        full_text.USE_POSTINGS = mode != "--flat"
    ds = lib.dataset(uri)
    times = []
    for q in ("happy puppy", "frodo w17 fox", "lance w42"):
        if len(times) == 2:  # a newly opened dataset, nothing of the search cached
            if mode != "--pylance":
                for cache in (full_text._CACHE, full_text._CORPUS_CACHE, full_text._INDEX_CACHE):
                    cache._items.clear()
            ds = lib.dataset(uri)
        t0 = time.process_time()
        n = ds.to_table(full_text_query=q, columns=["id"], limit=10).num_rows
        times.append(time.process_time() - t0)
    print(f"{mode or '--postings'}: first {times[0] * 1e3:.1f} ms, second query {times[1] * 1e3:.1f} ms, "
          f"first on a new handle in a warm process {times[2] * 1e3:.1f} ms CPU ({n} rows)")


if __name__ == "__main__":
    main()
