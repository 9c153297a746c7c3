"""Pinning the file format new datasets get, in both libraries, for one test."""

import functools

import lance
import pytest

import lance_ops.format.table.file_versions as lf_versions


def pin_file_version(monkeypatch: pytest.MonkeyPatch, version: str) -> str:
    """Make ``version`` the default ``data_storage_version`` of datasets created by lance_ops
    (``DEFAULT_STORAGE_VERSION``) and by pylance's ``write_dataset`` (appends keep the dataset's)."""
    monkeypatch.setattr(lf_versions, "DEFAULT_STORAGE_VERSION", version)
    original = lance.write_dataset

    @functools.wraps(original)
    def write_dataset(*args, **kwargs):
        if kwargs.get("mode", "create") != "append":  # appends keep the dataset's version
            kwargs.setdefault("data_storage_version", version)
        return original(*args, **kwargs)

    monkeypatch.setattr(lance, "write_dataset", write_dataset)
    return version
