"""Compaction planning: the options (named and defaulted as pylance's ``compact_files``), the
bins of fragments a run rewrites and the tasks they become.

Adjacent fragments (manifest order) that are small (fewer than ``target_rows_per_fragment``
physical rows) or carry enough deletions (``materialize_deletions_threshold``) are binned and
split into tasks as pylance plans (docs/FORMAT.md §16); a bin of one fragment without deletions
to materialise is dropped; a run's budget (``max_source_*``) selects among the bins
(:func:`select_bins`).  Executing and committing the tasks: :mod:`.rewrite`.
"""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lance_ops.format.errors import InvalidArgumentError, UnsupportedFeatureError
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.ops.compaction.clustering import check_cluster_columns, clustered_fragments
from lance_ops.format.ops.compaction.index_remap import index_constraints, summarize
from lance_ops.format.ops.write import DEFAULT_MAX_ROWS_PER_FILE, check_writable
from lance_ops.format.read.blob_payloads import has_blob_columns
from lance_ops.format.table.file_versions import normalize_storage_version, require_writable
from lance_ops.format.table.fragment import FragmentMetadata
from lance_ops.format.table.manifest import Manifest

__all__ = ["COMPACTION_DEFAULTS", "CONFIG_PREFIX", "CompactionOptions", "CompactionPlan", "CompactionTask",
           "bin_bytes", "bin_value", "output_file_rows", "plan_compaction", "select_bins", "target_file_version"]

CONFIG_PREFIX = "lance.compaction."


@dataclass(frozen=True)
class CompactionOptions:
    """Options named and defaulted as pylance's ``compact_files``."""

    target_rows_per_fragment: int = DEFAULT_MAX_ROWS_PER_FILE  # pylance: 1024 * 1024, as a file
    max_rows_per_group: int = 1024
    materialize_deletions: bool = True
    materialize_deletions_threshold: float = 0.1
    #: per-run budget (pylance's newer names): bins are taken in ``bin_order`` while they fit
    #: (:func:`select_bins`), the rest stay for the next run
    max_source_fragments: int | None = None
    max_source_rows: int | None = None
    max_source_bytes: int | None = None
    #: "manifest": pylance's order (oldest bins first, the run stops at the first bin that does not
    #: fit); "value" (lance_ops, the maintenance planner's budgets): the most valuable bins that fit
    bin_order: str = "manifest"
    only_deletions: bool = False  # deletion materialisation: rewrite each qualifying fragment alone
    #: rewrite fragments covered by an index lance_ops cannot carry and drop that coverage
    #: (pylance's ``IgnoreRemap``); by default such fragments stay out of the plan
    ignore_remap: bool = False
    #: file version of the rewritten fragments (pylance's option: "2.0", "2.1", "2.2", "stable");
    #: None = the dataset's default.  Other fragments and the default stay (docs/FORMAT.md §17)
    data_storage_version: str | None = None
    #: clustered compaction (lance_ops): rewrite the fragments not yet clustered by these columns
    #: with their rows ordered by them (docs/FORMAT.md §18); () = plain compaction
    cluster_by: tuple[str, ...] = ()
    #: "sort" (lexicographic by ``cluster_by``) or "zorder" (bit-interleaved keys)
    strategy: str = "sort"
    #: pylance's cut of the output files by bytes: a file closes after the read batch (of
    #: ``batch_size`` rows) that brings the bytes its writer flushed (whole 8 MiB pages) to
    #: the limit; None = files cut by rows only
    max_bytes_per_file: int | None = None
    batch_size: int | None = None

    @classmethod
    def resolve(cls, config: Mapping[str, str], **overrides: Any) -> "CompactionOptions":
        """Defaults, then ``lance.compaction.*`` table config, then explicit arguments."""
        values: dict[str, Any] = {}
        for f in cls.__dataclass_fields__.values():
            key = CONFIG_PREFIX + f.name
            if key in config:
                raw = config[key]
                try:
                    if f.name in ("materialize_deletions", "only_deletions", "ignore_remap"):
                        values[f.name] = raw.strip().lower() in ("1", "true", "yes")
                    elif f.name == "materialize_deletions_threshold":
                        values[f.name] = float(raw)
                    elif f.name in ("data_storage_version", "strategy", "bin_order"):
                        values[f.name] = raw
                    elif f.name == "cluster_by":
                        values[f.name] = tuple(c.strip() for c in raw.split(",") if c.strip())
                    else:
                        values[f.name] = int(raw)
                except ValueError:
                    raise InvalidArgumentError(
                        f"dataset config {key}={raw!r} is not a valid {f.name} (fix it with update_config)"
                    ) from None
        values.update({k: v for k, v in overrides.items() if v is not None})
        if isinstance(values.get("cluster_by"), str):
            values["cluster_by"] = (values["cluster_by"],)
        if "cluster_by" in values:
            values["cluster_by"] = tuple(values["cluster_by"])
        if values.get("data_storage_version") is not None:  # release names fixed to versions, as pylance's planner
            values["data_storage_version"] = normalize_storage_version(values["data_storage_version"])
        opts = cls(**values)
        if opts.strategy not in ("sort", "zorder"):
            raise InvalidArgumentError(f"strategy must be 'sort' or 'zorder', got {opts.strategy!r}")
        if opts.bin_order not in ("manifest", "value"):
            raise InvalidArgumentError(f"bin_order must be 'manifest' or 'value', got {opts.bin_order!r}")
        if opts.target_rows_per_fragment <= 0:
            raise InvalidArgumentError(f"target_rows_per_fragment must be positive, got {opts.target_rows_per_fragment}")
        if not 0 <= opts.materialize_deletions_threshold <= 1:
            raise InvalidArgumentError(
                f"materialize_deletions_threshold must be in [0, 1], got {opts.materialize_deletions_threshold}"
            )
        return opts


#: the defaults, for layers above that declare the same fields (Spark, Dagster config, argparse)
COMPACTION_DEFAULTS = CompactionOptions()


#: :func:`.rewrite.execute_task`, registered by :mod:`.rewrite` (which builds on this module)
TASK_EXECUTOR: list[Callable[["CompactionTask"], Any]] = []


@dataclass(frozen=True)
class CompactionTask:
    """One group of adjacent fragments rewritten together (picklable)."""

    uri: str
    read_version: int
    fragments: list[FragmentMetadata]  # a list, as pylance's
    storage_options: Mapping[str, Any] = field(default_factory=dict)
    target_rows_per_fragment: int = COMPACTION_DEFAULTS.target_rows_per_fragment
    #: file version the task writes (None: the dataset's default)
    file_version: str | None = None
    #: clustered rewrite: order the rows by these columns (``strategy``), see :mod:`.clustering`
    cluster_by: tuple[str, ...] = ()
    strategy: str = "sort"
    #: :attr:`CompactionOptions.max_bytes_per_file` and ``batch_size``
    max_bytes_per_file: int | None = None
    batch_size: int | None = None

    def execute(self, dataset: Any = None) -> Any:
        """pylance's ``task.execute(dataset)``: rewrite this task's fragments (commits nothing);
        the task names its dataset, so ``dataset`` is not needed."""
        return TASK_EXECUTOR[0](self)


@dataclass(frozen=True)
class CompactionPlan:
    uri: str
    read_version: int
    tasks: tuple[CompactionTask, ...]
    options: CompactionOptions
    manifest_store: Any = None  # picklable ManifestStore (or spec string) when commits go through one
    #: why fragments that qualified stay out of the plan (indices lance_ops cannot carry)
    skipped: tuple[str, ...] = ()
    #: index coverage the planned rewrites drop (zone maps, bloom filters, ``ignore_remap``)
    coverage_dropped: tuple[str, ...] = ()

    @property
    def source_fragments(self) -> int:
        return sum(len(t.fragments) for t in self.tasks)

    def num_tasks(self) -> int:
        """pylance's."""
        return len(self.tasks)

    def __repr__(self) -> str:  # pylance's
        return f"CompactionPlan(read_version={self.read_version}, tasks=<{len(self.tasks)} compaction tasks>)"


def _candidate(frag: FragmentMetadata, opts: CompactionOptions) -> tuple[bool, bool]:
    """(is a candidate, compacts even alone), as pylance: deletions above the threshold
    (strictly) make a fragment compact itself; fewer *physical* rows than the target make it a
    candidate to merge with candidate neighbours (docs/FORMAT.md §16)."""
    deleted_ratio = frag.num_deleted_rows / frag.physical_rows if frag.physical_rows else 0.0
    itself = opts.materialize_deletions and frag.num_deleted_rows > 0 and (
        deleted_ratio > opts.materialize_deletions_threshold
    )
    if opts.only_deletions:
        return itself, itself
    return itself or frag.physical_rows < opts.target_rows_per_fragment, itself


def _split_for_size(bin_: list[tuple[FragmentMetadata, bool]], target: int) -> list[list[FragmentMetadata]]:
    """pylance's ``split_for_size``: take fragments until their live rows reach ``target``; cut
    there only when what is left holds ``target`` rows too, else the rest joins the last bin."""
    frags = [f for f, _ in bin_]
    out: list[list[FragmentMetadata]] = []
    while True:
        taken = rows = 0
        while rows < target and taken < len(frags):
            rows += frags[taken].num_rows
            taken += 1
        if sum(f.num_rows for f in frags[taken:]) >= target:
            out.append(frags[:taken])
            frags = frags[taken:]
        else:
            out.append(frags)
            return out


def output_file_rows(rows: int, target: int) -> list[int]:
    """Row counts of a task's output files, as pylance 14 cuts them: ``max(1, rows // target)``
    files of balanced sizes, the larger first (75 rows, target 30: 38 and 37; docs/FORMAT.md §16)."""
    n = max(1, rows // target)
    q, r = divmod(rows, n)
    return [q + 1] * r + [q] * (n - r) if rows else [target]


def _candidate_bins(
    manifest: Manifest, opts: CompactionOptions, constraints: Any, skipped: list[int]
) -> list[list[FragmentMetadata]]:
    """Runs of adjacent candidates (manifest order) covered by the same indices, noop runs (one
    fragment that only wanted neighbours) dropped, each split for size, as pylance plans."""
    runs: list[list[tuple[FragmentMetadata, bool]]] = []
    current: list[tuple[FragmentMetadata, bool]] = []
    current_key: frozenset[str] = frozenset()

    def flush() -> None:
        nonlocal current
        if len(current) > 1 or (len(current) == 1 and current[0][1]):
            runs.append(current)
        current = []

    for frag in manifest.fragments:
        is_candidate, itself = _candidate(frag, opts)
        if not is_candidate or frag.id in constraints.blocked:
            if is_candidate:
                skipped.append(frag.id)
            flush()
            continue
        key = constraints.key.get(frag.id, frozenset())
        if opts.only_deletions or (current and key != current_key):
            flush()
        current_key = key
        current.append((frag, itself))
        if opts.only_deletions:
            flush()
    flush()
    if opts.only_deletions:
        return [[f for f, _ in run] for run in runs]
    return [b for run in runs for b in _split_for_size(run, opts.target_rows_per_fragment)]


def _cluster_bins(
    manifest: Manifest, opts: CompactionOptions, constraints: Any, skipped: list[int], uri: str
) -> list[list[FragmentMetadata]]:
    """The fragments not yet clustered by ``opts.cluster_by``, one bin per set of covering
    indices (manifest order); clustered fragments stay as they are (docs/FORMAT.md §18)."""
    check_cluster_columns(manifest.schema.to_arrow(), opts.cluster_by, uri)
    if has_blob_columns(manifest):
        raise UnsupportedFeatureError(f"{uri}: clustered compaction of a dataset with blob columns")
    done = clustered_fragments(manifest.config, opts.cluster_by, opts.strategy)
    bins: dict[frozenset[str], list[FragmentMetadata]] = {}
    for frag in manifest.fragments:
        if frag.id in done:
            continue
        if frag.id in constraints.blocked:
            skipped.append(frag.id)
            continue
        bins.setdefault(constraints.key.get(frag.id, frozenset()), []).append(frag)
    return list(bins.values())


def target_file_version(manifest: Manifest, options: CompactionOptions, uri: str) -> str:
    """The file version a compaction writes: ``options.data_storage_version`` or the dataset's.

    A version other than the dataset's makes the table mixed (flag 256, docs/FORMAT.md §17);
    blob columns are refused then (their layout differs between 2.0/2.1 and 2.2).
    """
    default = require_writable(manifest.data_storage_version, uri)
    target = options.data_storage_version or default
    if target != default and has_blob_columns(manifest):
        raise UnsupportedFeatureError(
            f"{uri}: compaction to file version {target} of a {default} dataset with blob columns "
            "(blob layouts differ between file versions); compact without data_storage_version"
        )
    return target


def bin_bytes(frags: Sequence[FragmentMetadata]) -> int:
    """Bytes a bin reads: its data files (as the manifest records their sizes)."""
    return sum(df.file_size_bytes or 0 for f in frags for df in f.files)


def bin_value(frags: Sequence[FragmentMetadata], target: int) -> float:
    """What rewriting a bin is worth: fragments it removes net of the files it writes, plus
    the deleted rows it drops in units of ``target`` rows (docs/ARCHITECTURE.md, the planner)."""
    live = sum(f.num_rows for f in frags)
    deleted = sum(f.num_deleted_rows for f in frags)
    return len(frags) - len(output_file_rows(live, target)) + deleted / target


def select_bins(bins: list[list[FragmentMetadata]], opts: CompactionOptions) -> list[list[FragmentMetadata]]:
    """The bins a run rewrites under ``max_source_fragments`` / ``_rows`` / ``_bytes``, kept in
    manifest order.  ``bin_order="manifest"`` (pylance): oldest first, stopping at the first bin
    that does not fit; ``"value"``: the most valuable first (:func:`bin_value`, then fewer bytes,
    then manifest order), each taken when it fits what is left.  No limit: every bin."""
    limits = (opts.max_source_fragments, opts.max_source_rows, opts.max_source_bytes)
    if all(v is None for v in limits):
        return bins
    by_value = opts.bin_order == "value"
    order = range(len(bins)) if not by_value else sorted(
        range(len(bins)), key=lambda i: (-bin_value(bins[i], opts.target_rows_per_fragment), bin_bytes(bins[i]), i))
    left = [float("inf") if v is None else v for v in limits]
    chosen = []
    for i in order:
        need = (len(bins[i]), sum(f.physical_rows for f in bins[i]), bin_bytes(bins[i]))
        if all(n <= room for n, room in zip(need, left, strict=True)):
            chosen.append(i)
            left = [room - n for n, room in zip(need, left, strict=True)]
        elif not by_value:
            break
    return [bins[i] for i in sorted(chosen)]


def plan_compaction(
    manifest: Manifest,
    uri: str,
    options: CompactionOptions,
    *,
    storage_options: Mapping[str, Any] | None = None,
    manifest_store: Any = None,
) -> CompactionPlan:
    """Bin adjacent candidate fragments into tasks of at least ``target_rows_per_fragment`` rows
    (pylance's plan: a last bin takes what is left when that is fewer).

    As pylance, a bin never mixes fragments covered by different sets of indices; fragments
    covered by an index lance_ops cannot carry stay out unless ``options.ignore_remap``
    (:mod:`.index_remap`).

    Raises:
        UnsupportedFeatureError: a column lance_ops cannot rewrite (before anything is written);
            ``max_bytes_per_file`` on stable row ids (their files are cut by rows).
    """
    check_writable(manifest.schema, target_file_version(manifest, options, uri))
    if options.max_bytes_per_file is not None and manifest.uses_stable_row_ids:
        raise UnsupportedFeatureError(f"{uri}: compaction's max_bytes_per_file on a dataset with stable row ids "
                                      "(lance_ops cuts their files by rows only)")
    opts = options
    so = dict(storage_options or {})
    constraints = index_constraints(ObjectStore(uri, so), manifest, ignore_remap=opts.ignore_remap)
    skipped: list[int] = []
    if opts.cluster_by:
        bins = _cluster_bins(manifest, opts, constraints, skipped, uri)
    else:
        bins = _candidate_bins(manifest, opts, constraints, skipped)
    bins = select_bins(bins, opts)
    version = opts.data_storage_version
    tasks = tuple(
        CompactionTask(uri, manifest.version, list(b), so, opts.target_rows_per_fragment,
                       None if version == manifest.data_storage_version else version, opts.cluster_by, opts.strategy,
                       opts.max_bytes_per_file, opts.batch_size)
        for b in bins
    )
    planned = [f.id for b in bins for f in b]
    return CompactionPlan(
        uri, manifest.version, tasks, opts, manifest_store,
        skipped=summarize(skipped, constraints.blocked) + (
            ("pass ignore_remap=True to compact them and drop that index coverage",) if skipped else ()
        ),
        coverage_dropped=summarize(planned, constraints.drops),
    )
