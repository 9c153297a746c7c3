"""Backends for the conformance suite (``lance_ops.format.testing``): every test runs once per backend.

As fsspec's abstract test suite does, the test bodies are written once against a
:class:`Backend` and parametrised over local disk, ``memory://``, the GCS emulator over HTTP,
and local disk committing through an external (SQLite) manifest store.
"""

import os
import sys
import uuid
from collections.abc import Iterator
from typing import Any

os.environ["GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"] = "false"  # before anything imports gcsfs

import pytest  # noqa: E402

from lance_ops.format.testing import Backend  # noqa: E402

_TESTS_DIR = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
if _TESTS_DIR not in sys.path:
    sys.path.insert(0, _TESTS_DIR)

BACKENDS = ["local", "memory", "gcs", "manifest_store"]


@pytest.fixture(scope="session")
def _emulator() -> Iterator[Any]:
    from _gcs_emulator import running_emulator

    with running_emulator() as emu:
        yield emu


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Any) -> Backend:
    tag = uuid.uuid4().hex[:8]
    if request.param == "local":
        return Backend("local", str(tmp_path / "ds"))
    if request.param == "memory":
        return Backend("memory", f"memory://conformance-{tag}/ds")
    if request.param == "gcs":
        emu = request.getfixturevalue("_emulator")
        bucket = emu.make_bucket(f"conformance-{tag}")
        return Backend("gcs", f"{bucket}/ds", dict(emu.storage_options))
    return Backend("manifest_store", str(tmp_path / "ds"), manifest_store=str(tmp_path / "manifests.db"))
