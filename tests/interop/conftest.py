"""Every interop test runs for each file format lance_ops writes: 2.0, 2.1 and 2.2.

``file_version`` becomes the default ``data_storage_version`` of new datasets in both libraries
(lance_ops' ``DEFAULT_STORAGE_VERSION`` and pylance's ``write_dataset``), so each test proves
both directions at that version; datasets keep it through appends and mutations.
"""

import pytest
from file_versions import pin_file_version

FILE_VERSIONS = ("2.0", "2.1", "2.2")


@pytest.fixture(params=FILE_VERSIONS, autouse=True)
def file_version(request, monkeypatch):
    return pin_file_version(monkeypatch, request.param)
