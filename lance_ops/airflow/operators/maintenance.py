"""The guarded restore and the orphan sweep as operators: adapters of the registry's ``restore``
and ``remove_orphan_files`` (:mod:`lance_ops.orchestration.operations`), run in the worker (no
Spark), the same tasks Dagster's ``lance_restore`` / ``lance_remove_orphan_files`` jobs and
``lance-ops run restore`` / ``remove_orphan_files`` run.

Both take ``dataset`` (a name in ``lance_ops.yaml``) or ``uri`` and the connection, as every Lance
operator (:class:`~lance_ops.airflow.operators.lance.LanceBaseOperator`).  A restore target that
cleanup removed fails the task without retries (``VersionRemovedError`` as the cause).
"""

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from lance_ops.airflow.operators.lance import LanceBaseOperator


class LanceRestoreOperator(LanceBaseOperator):
    """Roll the dataset back to ``version``, ``timestamp`` (the version current then; a datetime or
    ISO 8601 text, UTC when naive) or ``tag`` -- exactly one.  The current version is tagged
    ``restore-before-<version>-<time>`` first (``tag_current``), so the restore can be undone by
    restoring that tag; the commit carries the task's stamp.  The XCom has ``version`` (the new
    one), ``restored_version``, ``previous_version`` and ``undo_tag``."""

    operation = "restore"
    template_fields: Sequence[str] = ("dataset", "uri", "version", "timestamp", "tag")

    def __init__(self, *, version: int | str | None = None, timestamp: datetime | str | None = None,
                 tag: str | None = None, tag_current: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.version, self.timestamp, self.tag, self.tag_current = version, timestamp, tag, tag_current

    def params_from_arguments(self) -> dict[str, Any]:
        version = self.version
        if isinstance(version, str):
            if not version.strip().isdigit():
                raise self.config_error("version", f"{version!r} is not a version number",
                                        "pass an integer (or a template rendering to one), or use tag=")
            version = int(version)
        when = self.timestamp.isoformat() if isinstance(self.timestamp, datetime) else self.timestamp
        return {"version": version, "timestamp": when or None, "tag": self.tag or None,
                "tag_current": self.tag_current}


class LanceRemoveOrphanFilesOperator(LanceBaseOperator):
    """The orphan sweep: remove files no version, branch or tag references (files of failed or
    killed writers) older than ``older_than`` (default: the dataset's ``policy.orphan_min_age_hours``);
    ``dry_run`` reports the files and bytes and removes nothing.  Commits no version."""

    operation = "remove_orphan_files"

    def __init__(self, *, older_than: timedelta | None = None, dry_run: bool = False,
                 retention_duration_check: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.older_than, self.dry_run, self.retention_duration_check = older_than, dry_run, retention_duration_check

    def params_from_arguments(self) -> dict[str, Any]:
        hours = self.older_than / timedelta(hours=1) if self.older_than is not None else None
        return {"older_than_hours": hours, "dry_run": self.dry_run,
                "retention_duration_check": self.retention_duration_check}


__all__ = ["LanceRemoveOrphanFilesOperator", "LanceRestoreOperator"]
