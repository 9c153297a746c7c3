"""Schedules: append on a cron (off by default), nightly compaction and cleanup per dataset policy."""

from dagster import DefaultScheduleStatus, JobDefinition, RunConfig, ScheduleDefinition

from .configs import AppendConfig, CleanupConfig, CompactConfig
from .ops import op_name
from .settings import DatasetSettings


def build_schedules(d: DatasetSettings, jobs: dict[str, JobDefinition]) -> list[ScheduleDefinition]:
    p = d.policy

    def status(enabled: bool) -> DefaultScheduleStatus:
        return DefaultScheduleStatus.RUNNING if enabled else DefaultScheduleStatus.STOPPED

    append, compact, cleanup = (f"{d.name}_{op}" for op in ("append", "compact", "cleanup_old_versions"))
    append_op, compact_op, cleanup_op = (op_name(d.name, o) for o in ("append", "compact", "cleanup_old_versions"))
    return [
        ScheduleDefinition(
            name=f"{d.name}_append_schedule", job=jobs[append], cron_schedule=p.append_cron,
            execution_timezone=p.timezone, default_status=status(p.append_schedule_enabled),
            run_config=RunConfig(ops={append_op: AppendConfig()}),
            description=f"Append from the configured source to {d.name}.",
        ),
        ScheduleDefinition(
            name=f"{d.name}_nightly_compaction", job=jobs[compact], cron_schedule=p.compaction_cron,
            execution_timezone=p.timezone, default_status=status(p.maintenance_schedules_enabled),
            run_config=RunConfig(ops={compact_op: CompactConfig(
                target_rows_per_fragment=p.target_rows_per_fragment,
                max_rows_per_group=p.max_rows_per_group,
                materialize_deletions_threshold=p.deleted_ratio_threshold,
            )}),
            description=f"Compact {d.name} with its policy's target fragment size.",
        ),
        ScheduleDefinition(
            name=f"{d.name}_nightly_cleanup", job=jobs[cleanup], cron_schedule=p.cleanup_cron,
            execution_timezone=p.timezone, default_status=status(p.maintenance_schedules_enabled),
            run_config=RunConfig(ops={cleanup_op: CleanupConfig(
                older_than_days=p.cleanup_older_than_days, retain_versions=p.cleanup_retain_versions,
            )}),
            description=f"Remove versions of {d.name} older than the policy allows.",
        ),
    ]
