"""Every interop test runs for each file format lance_ops writes: 2.0, 2.1 and 2.2.

``file_version`` becomes the default ``data_storage_version`` of new datasets in both libraries
(lance_ops' ``DEFAULT_STORAGE_VERSION`` and pylance's ``write_dataset``), so each test proves
both directions at that version; datasets keep it through appends and mutations.
"""

import functools

import lance
import pytest

import lance_ops.format.versions as lf_versions

FILE_VERSIONS = ("2.0", "2.1", "2.2")


@pytest.fixture(params=FILE_VERSIONS, autouse=True)
def file_version(request, monkeypatch):
    version = request.param
    monkeypatch.setattr(lf_versions, "DEFAULT_STORAGE_VERSION", version)
    original = lance.write_dataset

    @functools.wraps(original)
    def write_dataset(*args, **kwargs):
        if kwargs.get("mode", "create") != "append":  # appends keep the dataset's version
            kwargs.setdefault("data_storage_version", version)
        return original(*args, **kwargs)

    monkeypatch.setattr(lance, "write_dataset", write_dataset)
    return version
