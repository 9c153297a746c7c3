"""``Scanner.explain_plan`` / ``analyze_plan`` text in the shape of pylance's (DataFusion's
indented physical plan), naming only the steps lance_ops performs.

A plain scan is one ``LanceRead`` (the columns it decodes, the filter it evaluates, the
limit/offset it applies) under a ``ProjectionExec`` when the columns returned differ from those
read (a filter-only column is dropped after filtering).  A ``ScalarIndexQuery`` under the
``LanceRead`` names the ZONEMAP indices a filter prunes fragments by (the rows read are still
filtered exactly, hence ``refine_filter`` is the whole filter); lance_ops does not answer filters
from BTREE/BITMAP indices, so those are never shown.  ``analyze_plan`` runs the scan and
prints what was measured (:mod:`lance_ops.format.io.io_stats`): rows returned, fragments opened
and their live rows (``rows_scanned``), storage bytes, ranges (``iops``) and requests.
Searches (``nearest`` / ``full_text_query``) keep lance_ops' own step list.
"""

import time
from typing import Any

from lance_ops.format.io.io_stats import ScanStats, counting
from lance_ops.format.read.btree_pruning import btree_query
from lance_ops.format.read.zone_pruning import zone_map_query

ROW_ID, ROW_ADDR = "_rowid", "_rowaddr"


def _flag(v: Any) -> str:
    return "true" if v else "false"


def _read_line(scanner: Any, columns_read: list[str]) -> str:
    opts, ds = scanner._options, scanner._ds
    frags = opts.fragments if opts.fragments is not None else ds.manifest.fragments
    after = "None"
    if opts.limit is not None or opts.offset:
        start = opts.offset or 0
        after = f"Some({start}..{start + opts.limit})" if opts.limit is not None else f"Some({start}..)"
    filt = "--" if scanner._filter is None else str(scanner._filter)
    return (f"LanceRead: uri={ds.uri.rstrip('/')}/data, projection=[{', '.join(columns_read)}], "
            f"num_fragments={len(list(frags))}, range_before=None, range_after={after}, "
            f"row_id={_flag(opts.with_row_id)}, row_addr={_flag(opts.with_row_address)}, "
            f"full_filter={filt}, refine_filter={filt}")


def _lines(scanner: Any) -> list[tuple[str, str]]:
    """(operator, its text) from the root down."""
    read = scanner._columns_read()
    produced = read + [c for c, on in ((ROW_ID, scanner._options.with_row_id),
                                       (ROW_ADDR, scanner._options.with_row_address)) if on]
    out = list(scanner.projected_schema.names)
    lines = [("LanceRead", _read_line(scanner, read))]
    if isinstance(scanner._filter, str) and scanner._options.use_scalar_index is not False:
        store, manifest = scanner._ds._store, scanner._ds.manifest
        # the indices the scan prunes fragments by, before it reads them
        for kind, query in (("BTree", btree_query), ("ZoneMap", zone_map_query)):
            found = query(store, manifest, scanner._filter)
            if found is not None:
                lines.append(("ScalarIndexQuery", f"ScalarIndexQuery: query=[{found[0]}]@{found[1]}({kind})"))
    if out != produced:
        exprs = ", ".join(f"{n}@{produced.index(n)} as {n}" if n in produced else n for n in out)
        lines.insert(0, ("ProjectionExec", f"ProjectionExec: expr=[{exprs}]"))
    return lines


def is_search(scanner: Any) -> bool:
    return scanner._options.nearest is not None or scanner._options.full_text_query is not None


def explain_text(scanner: Any) -> str:
    """The plan of a plain scan, indented by nesting as DataFusion prints it."""
    return "\n".join("  " * i + text for i, (_, text) in enumerate(_lines(scanner)))


def _with_metrics(text: str, op: str, metrics: str, elapsed: float) -> str:
    head, rest = text.split(": ", 1)
    if op == "ScalarIndexQuery":  # judged inside the scan: no time of its own is measured
        return f"{head}: {rest}, metrics=[{metrics}]"
    return f"{head}: elapsed={elapsed * 1e3:.6f}ms, {rest}, metrics=[{metrics}]"


def analyze_text(scanner: Any) -> str:
    """Run the scan and print its plan with the counts measured while it ran."""
    t0 = time.perf_counter()
    with counting() as stats:
        rows = sum(b.num_rows for b in scanner.to_batches())
    elapsed = time.perf_counter() - t0
    out = [f"AnalyzeExec verbose=true, elapsed={elapsed * 1e3:.6f}ms, metrics=[]"]
    for depth, (op, text) in enumerate(_lines(scanner), start=1):
        out.append("  " * depth + _with_metrics(text, op, _metrics(op, rows, stats), elapsed))
    return "\n".join(out)


def _metrics(op: str, rows: int, s: ScanStats) -> str:
    if op == "ScalarIndexQuery":
        return f"fragments_pruned={s.fragments_pruned}"
    if op != "LanceRead":
        return f"output_rows={rows}"
    return (f"output_rows={rows}, fragments_scanned={s.fragments_scanned}, rows_scanned={s.rows_scanned}, "
            f"bytes_read={s.bytes_read}, iops={s.iops}, requests={s.requests}")
