"""OpenLineage of the Lance operators, for the Airflow OpenLineage provider.

``apache-airflow-providers-openlineage`` calls an operator's ``get_openlineage_facets_on_start``,
``..._on_complete`` and ``..._on_failure`` and emits the run events with its own transport
(``[openlineage] transport`` in airflow.cfg).  :class:`OpenLineageMixin` records every task the
operator runs (``run_task``: the task, the version it read, its result) and answers with the
datasets and facets :mod:`lance_ops.orchestration.lineage` builds, the same Dagster and the CLI emit.
"""

from typing import Any


class OpenLineageMixin:
    """``run_task`` records; the ``get_openlineage_facets_on_*`` methods report (the class using it
    implements ``run_lance_task``, and has ``uri``, ``dataset_settings()``, ``operation`` and ``outlets``)."""

    def run_task(self, context: Any, d: Any, hook: Any, task: Any) -> Any:
        """Run ``task`` (``run_lance_task``) and record it with the version it read and its result."""
        runs: list[Any] = self.__dict__.setdefault("_lineage_runs", [])
        entry = [task, task.table.latest_version(), None]
        runs.append(entry)
        entry[2] = self.run_lance_task(context, d, hook, task)  # type: ignore[attr-defined]
        return entry[2]

    def _planned(self) -> Any:
        """Before the task runs: the dataset read (every operation but append) and the outlets."""
        from airflow.providers.openlineage.extractors import OperatorLineage
        from openlineage.client.event_v2 import InputDataset, OutputDataset

        from lance_ops.orchestration.lineage import dataset_name

        try:
            d = self.dataset_settings()  # type: ignore[attr-defined]
        except Exception:  # a config error: the task fails, and says why
            return OperatorLineage()
        uri = str(getattr(self, "uri", None) or (d.uri if d is not None else ""))
        inputs = [InputDataset(*dataset_name(uri))] if uri and getattr(self, "operation", "") != "append" else []
        outputs = [OutputDataset(*dataset_name(o.uri)) for o in getattr(self, "outlets", []) if hasattr(o, "uri")]
        return OperatorLineage(inputs=inputs, outputs=outputs)

    def _recorded(self) -> Any:
        from airflow.providers.openlineage.extractors import OperatorLineage

        from lance_ops.orchestration.lineage import task_lineage

        runs = [tuple(r) for r in self.__dict__.get("_lineage_runs", [])]
        if not runs:
            return self._planned()
        inputs, outputs, facets = task_lineage(runs)  # type: ignore[arg-type]
        return OperatorLineage(inputs=inputs, outputs=outputs, run_facets=facets)

    def get_openlineage_facets_on_start(self) -> Any:
        return self._planned()

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        return self._recorded()

    def get_openlineage_facets_on_failure(self, task_instance: Any) -> Any:
        return self._recorded()
