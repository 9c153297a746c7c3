"""Schedules: append (off by default), compaction and cleanup, one schedule per distinct cron.

Datasets whose policies share a cron (and timezone and on/off default) share a schedule, which
requests one run per dataset (asset selection = that dataset; config = its policy defaults).
With the default policy every dataset shares ``lance_append_schedule``,
``lance_nightly_compaction`` and ``lance_nightly_cleanup``; a dataset with its own cron adds a
schedule named after that cron (``lance_nightly_compaction__0_4_x_x_x``).
"""

import re
from collections import defaultdict
from collections.abc import Callable

from dagster import (
    AssetKey,
    DefaultScheduleStatus,
    RunRequest,
    ScheduleDefinition,
    ScheduleEvaluationContext,
    schedule,
)

from lance_ops.assets.configs import Operation
from lance_ops.assets.operations import DATASET_TAG, job_name
from lance_ops.assets.settings import DatasetSettings, PolicySettings, Settings

# (schedule name, operation, the policy's cron, its "enabled" flag)
KINDS: list[tuple[str, Operation, Callable[[PolicySettings], str], Callable[[PolicySettings], bool]]] = [
    ("lance_append_schedule", Operation.append, lambda p: p.append_cron, lambda p: p.append_schedule_enabled),
    ("lance_nightly_compaction", Operation.compact, lambda p: p.compaction_cron,
     lambda p: p.maintenance_schedules_enabled),
    ("lance_nightly_cleanup", Operation.cleanup_old_versions, lambda p: p.cleanup_cron,
     lambda p: p.maintenance_schedules_enabled),
]


def _slug(cron: str, tz: str, enabled: bool) -> str:
    text = re.sub(r"[^0-9A-Za-z]+", "_", cron.replace("*", "x")).strip("_")
    return text + ("" if tz == "UTC" else "__" + re.sub(r"[^0-9A-Za-z]+", "_", tz)) + ("" if enabled else "__off")


def build_schedules(settings: Settings, jobs: dict[str, object]) -> list[ScheduleDefinition]:
    out: list[ScheduleDefinition] = []
    for base, operation, cron_of, enabled_of in KINDS:
        groups: dict[tuple[str, str, bool], list[DatasetSettings]] = defaultdict(list)
        for d in settings.datasets:
            groups[(cron_of(d.policy), d.policy.timezone, enabled_of(d.policy))].append(d)
        # the largest group keeps the plain name
        ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        for i, ((cron, tz, enabled), members) in enumerate(ordered):
            name = base if i == 0 else f"{base}__{_slug(cron, tz, enabled)}"
            out.append(_schedule(name, operation, cron, tz, enabled, [d.name for d in members], jobs))
    return out


def _schedule(name: str, operation: Operation, cron: str, tz: str, enabled: bool, names: list[str],
              jobs: dict[str, object]) -> ScheduleDefinition:
    @schedule(
        name=name,
        job=jobs[job_name(operation)],  # type: ignore[arg-type]
        cron_schedule=cron,
        execution_timezone=tz,
        default_status=DefaultScheduleStatus.RUNNING if enabled else DefaultScheduleStatus.STOPPED,
        description=f"{operation.value} of {', '.join(names)} (one run per dataset, with its policy).",
    )
    def _fn(context: ScheduleEvaluationContext) -> list[RunRequest]:
        stamp = context.scheduled_execution_time.isoformat() if context.scheduled_execution_time else ""
        return [RunRequest(run_key=f"{n}:{operation.value}:{stamp}", asset_selection=[AssetKey([n])],
                           tags={DATASET_TAG: n}) for n in names]

    return _fn
