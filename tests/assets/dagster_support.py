"""Helpers for the Dagster tests: settings for a dataset in a temp dir, running jobs, reading events."""

from pathlib import Path
from typing import Any

import yaml
from dagster import Definitions

from lance_ops.assets.definitions import build_definitions
from lance_ops.assets.runs import execute
from lance_ops.orchestration.settings import Settings, parse_settings

NAME = "events"


def settings_for(root: Path, *, rows: int = 4000, sink_format: str = "parquet", extra: dict | None = None,
                 **policy: Any) -> Settings:
    """One dataset ``events`` under ``root`` (Spark local[2]); ``policy`` overrides the defaults below.

    ``extra``: more datasets (name -> settings mapping), written next to ``events``.
    """
    pol = {"target_rows_per_fragment": 10_000, "min_small_fragments": 4, "deleted_ratio_threshold": 0.2,
           "max_versions_since_compaction": 50, **policy}
    doc = {
        "spark": {"master": "local[2]"},
        "datasets": {NAME: {
            "uri": "events",
            "source": {"format": "generate", "rows": rows},
            "change_feed": {"sink_uri": "events_changes", "format": sink_format},
            "policy": pol,
        }, **(extra or {})},
    }
    root.mkdir(parents=True, exist_ok=True)
    path = root / "lance_ops.yaml"
    path.write_text(yaml.safe_dump(doc))
    return parse_settings(path.read_text(), base_dir=root, source_path=str(path))


def defs_for(root: Path, **kw: Any) -> tuple[Settings, Definitions]:
    settings = settings_for(root, **kw)
    return settings, build_definitions(settings)


def run(defs: Definitions, instance: Any, job: str, config: Any = None, *, run_config: Any = None,
        tags: dict[str, str] | None = None, expect_success: bool = True, dataset: str = NAME) -> Any:
    """Run operation ``job`` (``append``, ``compact``, ..., ``checks``, ``change_feed``) on ``dataset``."""
    result = execute(defs, dataset, job, config, instance=instance, run_config=run_config, tags=tags)
    if expect_success and not result.success:
        raise AssertionError(f"run {job} on {dataset} failed:\n" + "\n".join(failures(result)))
    return result


def failures(result: Any) -> list[str]:
    return [e.event_specific_data.error.to_string() for e in result.all_events
            if e.event_type_value == "STEP_FAILURE" and e.event_specific_data.error]


def step_error(result: Any) -> Any:
    """The SerializableErrorInfo of the failed step (its cause chain holds the user error)."""
    (err,) = [e.event_specific_data.error for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    return err.cause or err


def materializations(result: Any, asset: str = NAME) -> list[Any]:
    return [e.event_specific_data.materialization for e in result.get_asset_materialization_events()
            if e.event_specific_data.materialization.asset_key.path == [asset]]


def observations(result: Any, asset: str = NAME) -> list[Any]:
    return [e.event_specific_data.asset_observation for e in result.all_events
            if e.event_type_value == "ASSET_OBSERVATION"
            and e.event_specific_data.asset_observation.asset_key.path == [asset]]


def md(event: Any) -> dict[str, Any]:
    """An event's metadata as plain values."""
    return {k: v.value for k, v in event.metadata.items()}


def job_md(event: Any) -> dict[str, Any]:
    """The job result recorded on an event (the ``lance_ops/job`` JSON entry)."""
    return event.metadata["lance_ops/job"].value


def data_version(event: Any) -> str | None:
    return (event.tags or {}).get("dagster/data_version")


def output_metadata(result: Any) -> dict[str, Any]:
    for ev in result.all_events:
        if ev.event_type_value == "STEP_OUTPUT":
            return {k: v.value for k, v in ev.event_specific_data.metadata.items()}
    return {}


def checks(result: Any) -> dict[str, Any]:
    """check name -> evaluation."""
    return {c.check_name: c for c in result.get_asset_check_evaluations()}
