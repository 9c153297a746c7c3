"""Benchmark cases on datasets pylance wrote at file format 2.2 with stable row ids (issue 17):
what users' datasets are, maintained by lance_ops.  Listed after ``cases.CASES`` by ``registry.py``."""

import os
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

import lance_ops.format as lf

from .cases import (
    TIME_RATIO_TARGET,
    Case,
    Skip,
    SparkEnv,
    Target,
    _fresh_dirs,
    _pylance,
    compaction_case,
    delete_case,
    spark_compact_case,
)
from .data import Fixtures


def case_delete_22(fx: Fixtures, p: Any) -> Case:
    """``delete_10pct`` on the pylance-written 2.2 dataset with stable row ids."""
    return delete_case(fx, p, "delete_22", fx.pylance_fragments_22(), _about_22("pylance"))


def _about_22(writer: str) -> dict[str, Any]:
    return {"data_storage_version": "2.2", "written_by": writer, "stable_row_ids": True}


def case_compact_22(fx: Fixtures, p: Any) -> Case:
    """``compact_inprocess`` on the pylance-written 2.2 dataset after pylance deleted 10%."""
    lance = _pylance()
    template = fx.pylance_deleted_22()
    target, live = fx.compaction_target(), lance.dataset(template).count_rows()
    out = _fresh_dirs(fx, "compact22", ["lance_ops", "pylance"])
    return compaction_case("compact_22", lance, template, out, target, work=live, reps=p.reps,
                           extra={"fragments": p.fragments, "live_rows": live, "target_rows_per_fragment": target,
                                  **_about_22("pylance")})


def case_compact_22_local2(fx: Fixtures, p: Any, spark: SparkEnv) -> Case:
    """``compact_local2`` on the pylance-written 2.2 dataset after pylance deleted 10%."""
    lance = _pylance()
    jobs = spark.jobs("compact")
    template = fx.pylance_deleted_22()
    target, live = fx.compaction_target(), lance.dataset(template).count_rows()
    return spark_compact_case("compact_22_local2", fx, p, spark, jobs, lance, template, "spark_compact22", target, live,
                              _about_22("pylance"))


#: materialize_22 threshold: pylance materialises a fragment when its deleted share is strictly
#: above the threshold (lance_ops from the threshold on), so 10% deleted needs one below 0.1
MATERIALIZE_THRESHOLD = 0.05


def case_materialize_22(fx: Fixtures, p: Any) -> Case:
    """Deletion materialisation: every fragment (10% deleted) rewritten alone, by both.

    lance_ops ``materialize_deletions``; pylance ``compact_files`` with the target at the
    fragments' live rows, so that no fragment is merged with another (checked)."""
    lance = _pylance()
    template = fx.pylance_deleted_22()
    live = lance.dataset(template).count_rows()
    per_frag = live // p.fragments
    thr = MATERIALIZE_THRESHOLD
    out = _fresh_dirs(fx, "materialize22", ["lance_ops", "pylance"])

    def after(case: Case) -> None:
        for v, d in out.items():
            if os.path.isdir(d):
                frags = lance.dataset(d).get_fragments()
                case.extra[f"{v}_fragments_after"] = len(frags)
                case.extra[f"{v}_deletion_files_after"] = sum(f.deletion_file() is not None for f in frags)

    return Case(
        "materialize_22",
        {
            "lance_ops": lambda: lf.dataset(out["lance_ops"]).materialize_deletions(threshold=thr),
            "pylance": lambda: lance.dataset(out["pylance"]).optimize.compact_files(
                target_rows_per_fragment=per_frag, materialize_deletions_threshold=thr
            ),
        },
        work=live,
        unit="rows/s",
        reps=p.reps,
        prepare=out.copier(template),
        target=TIME_RATIO_TARGET,
        extra={"fragments": p.fragments, "live_rows": live, "threshold": thr, **_about_22("pylance")},
        after=after,
        cleanup=out.cleanup,
    )


def _feed_until_preimages(path: str, begin: int, end: int) -> pa.Table:
    """lance_ops' change feed of the rows pylance's ``delta()`` gives: the inserts and update
    post-images (``change_types``: the begin version is neither planned nor read)."""
    return lf.dataset(path).change_feed(begin, end, change_types=("insert", "update_postimage"))


def _pylance_delta(path: str, begin: int, end: int) -> int:
    d = _pylance().dataset(path).delta(begin_version=begin, end_version=end)
    return d.get_inserted_rows().read_all().num_rows + d.get_updated_rows().read_all().num_rows


def case_change_feed_22(fx: Fixtures, p: Any) -> Case:
    """The change feed of the pylance-built 2.2 feed dataset, the rows pylance's ``delta()``
    gives (inserted + updated post-images, all columns)."""
    path, begin, end = fx.pylance_feed_22()
    n_py = _pylance_delta(path, begin, end)
    n_ours = _feed_until_preimages(path, begin, end).num_rows
    if n_ours != n_py:
        raise Skip(f"lance_ops' feed has {n_ours} inserted + updated rows, pylance's delta {n_py}")
    return Case(
        "change_feed_22",
        {
            "lance_ops": lambda: _feed_until_preimages(path, begin, end).num_rows,
            "pylance": lambda: _pylance_delta(path, begin, end),
        },
        work=n_py,
        unit="rows/s",
        reps=p.reps,
        target=TIME_RATIO_TARGET,
        extra={"base_rows": p.feed_rows, "versions": f"({begin}, {end}]", "feed_rows": n_py,
               **_about_22("pylance")},
    )


def case_change_feed_22_full(fx: Fixtures, p: Any) -> Case:
    """The whole lance_ops change feed (with update pre-images and deletes, which pylance's
    ``delta()`` does not produce) against the same pylance ``delta()``."""
    path, begin, end = fx.pylance_feed_22()
    n_feed = lf.dataset(path).change_feed(begin, end).num_rows
    return Case(
        "change_feed_22_full",
        {
            "lance_ops": lambda: lf.dataset(path).change_feed(begin, end).num_rows,
            "pylance": lambda: _pylance_delta(path, begin, end),
        },
        work=n_feed,
        unit="rows/s",
        reps=p.reps,
        extra={"base_rows": p.feed_rows, "versions": f"({begin}, {end}]", "feed_rows": n_feed,
               "note": "lance_ops: inserts, update pre- and post-images, deletes; pylance: inserted + updated",
               **_about_22("pylance")},
    )


def case_change_feed_22_local2(fx: Fixtures, p: Any, spark: SparkEnv) -> Case:
    """The whole change feed as a Spark job on ``local[2]`` (``jobs.change_feed`` written to
    Spark's ``noop`` sink) on the pylance-built 2.2 feed dataset, against pylance ``delta()``."""
    jobs = spark.jobs("change_feed")
    path, begin, end = fx.pylance_feed_22()
    session = spark.session("local[2]")
    n_feed = lf.dataset(path).change_feed(begin, end).num_rows

    def ours() -> int:
        jobs.change_feed(session, path, begin, end).write.format("noop").mode("overwrite").save()
        return n_feed

    return Case(
        "change_feed_22_local2",
        {"lance_ops": ours, "pylance": lambda: _pylance_delta(path, begin, end)},
        work=n_feed,
        unit="rows/s",
        reps=p.spark_reps,
        spark_variants=frozenset({"lance_ops"}),
        extra={"base_rows": p.feed_rows, "versions": f"({begin}, {end}]", "feed_rows": n_feed, "master": "local[2]",
               "note": "lance_ops: the whole feed (also pre-images, deletes) on Spark; pylance: inserted + updated",
               **_about_22("pylance")},
    )


def case_compact_small_fragments(fx: Fixtures, p: Any) -> Case:
    """``small_fragments`` x ``small_fragment_rows``-row fragments (pylance, 2.2) compacted
    in-process into 1M-row fragments."""
    lance = _pylance()
    template = fx.small_fragments_22()
    rows = p.small_fragments * p.small_fragment_rows
    target = 1_048_576
    out = _fresh_dirs(fx, "small22", ["lance_ops", "pylance"])
    return compaction_case("compact_small_fragments", lance, template, out, target, work=rows, reps=p.small_reps,
                           extra={"fragments": p.small_fragments, "rows_per_fragment": p.small_fragment_rows,
                                  "target_rows_per_fragment": target, **_about_22("pylance")})


def _forget_manifests() -> None:
    """Drop lance_ops' in-process caches of decoded manifests and file footers, so that every
    timed open decodes the manifest (pylance's ``dataset()`` starts a fresh session each time)."""
    from lance_ops.format.file import reader
    from lance_ops.format.table import manifest

    getattr(manifest, "_MANIFEST_CACHE", {}).clear()
    for name in ("_METADATA_CACHE", "_SCHEMA_CACHE"):
        cache = getattr(reader, name, None)
        if cache is not None and hasattr(cache, "_data"):
            cache._data.clear()


def case_open_many_fragments(fx: Fixtures, p: Any) -> Case:
    """``dataset(uri)`` of the ``compact_small_fragments`` dataset (its manifest lists every
    fragment with its row-id sequence); lance_ops' caches dropped before each open."""
    lance = _pylance()
    path = fx.small_fragments_22()

    def ours() -> int:
        return lf.dataset(path).version

    def theirs() -> int:
        return lance.dataset(path).version

    return Case(
        "open_many_fragments",
        {"lance_ops": ours, "pylance": theirs},
        work=1,
        unit="opens/s",
        reps=max(p.small_reps, 5),
        prepare=lambda v: _forget_manifests(),
        target=Target("ratio", 1.0, "open latency <= 1.0x pylance"),
        extra={"fragments": p.small_fragments, **_about_22("pylance")},
    )


def _sql_or_expression() -> Any:
    """``x * 2`` as SQL when lance_ops takes SQL strings in add_columns, else as an Expression."""
    try:
        import lance_ops.format.sql  # noqa: F401
    except ImportError:
        return pc.field("x") * 2
    return "x * 2"


def case_add_columns_sql(fx: Fixtures, p: Any) -> Case:
    """One computed column (``x * 2``) added to the pylance-written 10M-row 2.2 dataset: one new
    data file per fragment, a Merge commit; pylance with the SQL string."""
    lance = _pylance()
    template = fx.scan_dataset_22("pylance")
    rows = lance.dataset(template).count_rows()
    out = _fresh_dirs(fx, "add_columns22", ["lance_ops", "pylance"])
    ours = _sql_or_expression()

    return Case(
        "add_columns_sql",
        {
            "lance_ops": lambda: lf.dataset(out["lance_ops"]).add_columns({"y": ours}),
            "pylance": lambda: lance.dataset(out["pylance"]).add_columns({"y": "x * 2"}),
        },
        work=rows,
        unit="rows/s",
        reps=p.reps,
        prepare=out.copier(template),
        target=TIME_RATIO_TARGET,
        extra={"rows": rows, "expression": str(ours), "data_storage_version": "2.2", "written_by": "pylance"},
        cleanup=out.cleanup,
    )


#: in run order, after the cases of ``cases.CASES``
CASES_22 = {
    "delete_22": case_delete_22,
    "compact_22": case_compact_22,
    "compact_22_local2": case_compact_22_local2,
    "materialize_22": case_materialize_22,
    "change_feed_22": case_change_feed_22,
    "change_feed_22_full": case_change_feed_22_full,
    "change_feed_22_local2": case_change_feed_22_local2,
    "compact_small_fragments": case_compact_small_fragments,
    "open_many_fragments": case_open_many_fragments,
    "add_columns_sql": case_add_columns_sql,
}
SPARK_CASES_22 = frozenset({"compact_22_local2", "change_feed_22_local2"})
