"""Backends for the conformance suite: every test in this folder runs once per backend.

As fsspec's abstract test suite does, the test bodies are written once against a
:class:`Backend` and parametrised over local disk, ``memory://``, the GCS emulator over HTTP,
and local disk committing through an external (SQLite) manifest store.
"""

import os
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

os.environ["GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"] = "false"  # before anything imports gcsfs

import pyarrow as pa  # noqa: E402
import pytest  # noqa: E402

import lance_ops.format as lf  # noqa: E402

_TESTS_DIR = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
if _TESTS_DIR not in sys.path:
    sys.path.insert(0, _TESTS_DIR)

BACKENDS = ["local", "memory", "gcs", "manifest_store"]


@dataclass
class Backend:
    """Where a conformance test's dataset lives and how every call must reach it."""

    name: str
    uri: str
    storage_options: dict[str, Any] = field(default_factory=dict)
    manifest_store: str | None = None

    @property
    def kw(self) -> dict[str, Any]:
        """Keywords every lance_ops call on this dataset takes."""
        out: dict[str, Any] = {"storage_options": self.storage_options or None}
        if self.manifest_store is not None:
            out["manifest_store"] = self.manifest_store
        return out

    def write(self, data: pa.Table, **kw: Any) -> lf.LanceDataset:
        return lf.write_dataset(data, self.uri, **self.kw, **kw)

    def open(self, **kw: Any) -> lf.LanceDataset:
        return lf.dataset(self.uri, **self.kw, **kw)


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
