"""OpenLineage for every operation a :class:`~.tasks.Task` runs: what it read, what it wrote.

One module builds the events (:func:`run_event`) and the Airflow facets (:func:`task_lineage`)
from the typed task and its :class:`~.results.OperationResult`:

- datasets named by OpenLineage's naming rules: a local path is namespace ``file``, name the
  absolute path; ``gs://bucket/key`` is namespace ``gs://bucket``, name ``key`` (``s3://``, ``az://``
  ... likewise);
- every Lance dataset with the ``schema`` facet (its columns at that version), the ``version``
  facet (the Lance version: read for inputs, committed for outputs) and the ``storage`` facet
  (``lance``); an output with ``outputStatistics`` (rows, bytes and files the commit added);
- the run with ``lance_ops`` (:class:`LanceOpsRunFacet`: operation, dataset, version, the job's
  metrics and the policy's reasons) and ``processing_engine``; a failed run with ``errorMessage``.

Dagster and the CLI emit through the ``openlineage-python`` client with the transport of
``lance_ops.yaml``'s ``openlineage:`` section (:func:`run_with_lineage`: START, then COMPLETE or
FAIL); Airflow operators hand :func:`task_lineage` to the Airflow OpenLineage provider
(``lance_ops.airflow.lineage``).  Emitting never fails an operation: a transport error is logged.
"""

import json
import logging
import os
import traceback
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import attr
import pyarrow as pa
from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import (
    RunFacet,
    dataset_version_dataset,
    error_message_run,
    job_type_job,
    output_statistics_output_dataset,
    processing_engine_run,
    schema_dataset,
    storage_dataset,
)
from openlineage.client.uuid import generate_new_uuid

from lance_ops import __version__
from lance_ops.orchestration.results import OperationResult
from lance_ops.orchestration.table import TableRef
from lance_ops.orchestration.tasks import Task

log = logging.getLogger(__name__)

PRODUCER = f"https://github.com/lance-ops/lance_ops/tree/v{__version__}"
FACET_SCHEMA = f"{PRODUCER}/docs/openlineage/LanceOpsRunFacet.json#/$defs/LanceOpsRunFacet"
#: operations whose task reads rows from outside the dataset (the source path)
SOURCE_OPERATIONS = ("append", "upsert")


@attr.define
class LanceOpsRunFacet(RunFacet):
    """The operation a run performed (custom facet ``lance_ops``): its name, the dataset (name in
    lance_ops.yaml or URI), the version it committed, the job's metrics and why it ran."""

    operation: str
    dataset: str
    version: int | None = attr.field(default=None)
    metrics: dict[str, Any] = attr.field(factory=dict)
    reasons: list[str] = attr.field(factory=list)

    @staticmethod
    def _get_schema() -> str:
        return FACET_SCHEMA


def dataset_name(uri: str) -> tuple[str, str]:
    """OpenLineage's ``(namespace, name)`` of a location: ``("file", "/abs/path")`` for local paths
    and ``file://`` URIs, ``("gs://bucket", "key")`` for object stores."""
    if uri.startswith("file://"):
        uri = uri[len("file://"):]
    if "://" not in uri:
        return "file", os.path.abspath(uri).rstrip("/") or "/"
    scheme, rest = uri.split("://", 1)
    bucket, _, key = rest.partition("/")
    return f"{scheme}://{bucket}", key.strip("/") or "/"


def _field(f: pa.Field) -> schema_dataset.SchemaDatasetFacetFields:
    t = f.type
    children: list[pa.Field] = []
    if pa.types.is_struct(t):
        children = [t.field(i) for i in range(t.num_fields)]
    elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        children = [t.value_field]
    return schema_dataset.SchemaDatasetFacetFields(name=f.name, type=str(t), fields=[_field(c) for c in children])


def _lance_facets(table: TableRef, version: int | None) -> tuple[dict[str, Any], Any]:
    """The dataset facets of ``table`` at ``version`` (schema, version, storage) and its manifest."""
    if version is None:
        return {}, None
    ds = table.open(version)
    arrow = ds.schema
    return {"schema": schema_dataset.SchemaDatasetFacet(fields=[_field(f) for f in arrow]),
            "version": dataset_version_dataset.DatasetVersionDatasetFacet(datasetVersion=str(ds.version)),
            "storage": storage_dataset.StorageDatasetFacet(storageLayer="lance", fileFormat="lance")}, ds.manifest


def output_statistics(before: Any, after: Any) -> output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet:
    """What the commit of manifest ``after`` added over manifest ``before`` (None: a new dataset):
    rows of the fragments with new data files, their bytes, and the new data and deletion files."""
    old_files = {df.path for f in (before.fragments if before is not None else ()) for df in f.files}
    old_deletions = {(f.id, f.deletion_file.id) for f in (before.fragments if before is not None else ())
                     if f.deletion_file is not None}
    new = [(f, [df for df in f.files if df.path not in old_files]) for f in after.fragments]
    rows = sum(f.physical_rows for f, files in new if files)
    size = sum(df.file_size_bytes for _, files in new for df in files)
    deletions = sum(1 for f in after.fragments
                    if f.deletion_file is not None and (f.id, f.deletion_file.id) not in old_deletions)
    return output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
        rowCount=rows, size=size, fileCount=sum(len(files) for _, files in new) + deletions)


def task_datasets(task: Task, before: int | None,
                  result: OperationResult | None) -> tuple[list[InputDataset], list[OutputDataset]]:
    """The inputs and outputs of ``task``: the source path (append, upsert), the dataset at the
    version read (every operation but a creating append), the dataset at the version committed
    (or the change feed's sink)."""
    inputs: list[InputDataset] = []
    params = task.params
    if task.operation in SOURCE_OPERATIONS and getattr(params, "format", None) not in (None, "generate") \
            and getattr(params, "path", None):
        inputs.append(InputDataset(*dataset_name(str(params.path))))
    read_facets, read_manifest = _lance_facets(task.table, before)
    if before is not None and task.operation != "append":
        inputs.append(InputDataset(*dataset_name(task.table.uri), facets=read_facets))
    metrics = dict(result.metrics) if result is not None else {}
    if task.operation == "write_change_feed":
        sink = str(metrics.get("location") or getattr(params, "sink_uri", "") or "")
        stats = output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(rowCount=metrics.get("rows_written"))
        return inputs, ([OutputDataset(*dataset_name(sink), outputFacets={"outputStatistics": stats})] if sink else [])
    version = result.version if result is not None else None
    facets, manifest = _lance_facets(task.table, version)
    out_facets = {"outputStatistics": output_statistics(read_manifest, manifest)} if manifest is not None else {}
    return inputs, [OutputDataset(*dataset_name(task.table.uri), facets=facets, outputFacets=out_facets)]


def run_facets(task: Task, result: OperationResult | None, error: BaseException | None = None) -> dict[str, Any]:
    """The run's facets: ``lance_ops`` (the operation and its metrics), the engine, the error."""
    metrics = json.loads(json.dumps(dict(result.metrics), default=str)) if result is not None else {}
    facets: dict[str, Any] = {
        "lance_ops": LanceOpsRunFacet(task.operation, task.dataset, result.version if result is not None else None,
                                      metrics, list(result.reasons) if result is not None else []),
        "processing_engine": processing_engine_run.ProcessingEngineRunFacet(version=__version__, name="lance_ops"),
    }
    if error is not None:
        facets["errorMessage"] = error_message_run.ErrorMessageRunFacet(
            message=f"{type(error).__name__}: {error}", programmingLanguage="python",
            stackTrace="".join(traceback.format_exception(error)))
    return facets


def run_event(state: RunState, run_id: str, job_namespace: str, job_name: str, task: Task, before: int | None,
              result: OperationResult | None = None, error: BaseException | None = None) -> RunEvent:
    """One OpenLineage run event of ``task`` (``before``: the version it read)."""
    inputs, outputs = task_datasets(task, before, result)
    job_facets = {"jobType": job_type_job.JobTypeJobFacet(processingType="BATCH", integration="LANCE_OPS",
                                                          jobType=task.operation.upper())}
    return RunEvent(eventType=state, eventTime=datetime.now(UTC).isoformat(),
                    run=Run(runId=run_id, facets=run_facets(task, result, error)),
                    job=Job(namespace=job_namespace, name=job_name, facets=job_facets),
                    inputs=inputs, outputs=outputs, producer=PRODUCER)


def client_for(settings: Any) -> OpenLineageClient:
    """The client of ``lance_ops.yaml``'s ``openlineage.transport`` (console, file or http)."""
    t = settings.transport
    config: dict[str, Any] = {"type": t.type}
    if t.type == "file":
        config.update(log_file_path=t.log_file_path, append=True)
    elif t.type == "http":
        config.update(url=t.url, endpoint=t.endpoint, timeout=t.timeout)
        if t.api_key_env:
            config["auth"] = {"type": "api_key", "apiKey": os.environ.get(t.api_key_env, "")}
    return OpenLineageClient(config={"transport": config})


def _emit(client: OpenLineageClient, *args: Any, **kwargs: Any) -> None:
    """Emit ``run_event(*args, **kwargs)``; a failure to build or send it is logged."""
    try:
        client.emit(run_event(*args, **kwargs))
    except Exception:  # lineage never fails the operation
        log.warning("OpenLineage: could not emit an event", exc_info=True)


def run_with_lineage(settings: Any, task: Task, job_name: str, run: Callable[[], OperationResult]) -> OperationResult:
    """``run()`` (the task), with START and COMPLETE or FAIL events when ``settings`` (the
    ``openlineage`` section of lance_ops.yaml) is enabled."""
    if settings is None or not settings.enabled:
        return run()
    client, run_id = client_for(settings), str(generate_new_uuid())
    before = task.table.latest_version()
    job = (run_id, settings.namespace, job_name, task, before)
    _emit(client, RunState.START, *job)
    try:
        result = run()
    except BaseException as e:
        _emit(client, RunState.FAIL, *job, error=e)
        raise
    _emit(client, RunState.COMPLETE, *job, result)
    return result


def events_in(path: str) -> Iterator[dict[str, Any]]:
    """The events a ``file`` transport wrote to ``path`` (one JSON object per line)."""
    with open(path) as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def task_lineage(runs: list[tuple[Task, int | None, OperationResult | None]],
                 ) -> tuple[list[InputDataset], list[OutputDataset], dict[str, Any]]:
    """Inputs, outputs and run facets of the tasks one orchestrator task ran (``(task, version
    read, result or None)`` each; a maintain runs several): the first's inputs, the last's
    outputs and ``lance_ops`` facet."""
    if not runs:
        return [], [], {}
    first, last = runs[0], runs[-1]
    inputs, _ = task_datasets(first[0], first[1], None)
    _, outputs = task_datasets(*last)
    return inputs, outputs, run_facets(last[0], last[2])
