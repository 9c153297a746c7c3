"""Fixtures for tests against an in-process, patched GCS emulator (see tests/_gcs_emulator.py).

* ``gcs_emulator`` (session): the running emulator on 127.0.0.1 and a free port.  Attributes:
  ``endpoint`` ("http://127.0.0.1:PORT"), ``storage_options`` (``{"endpoint_url": ..., "token":
  "anon"}`` for gcsfs / ``ObjectStore``), ``make_bucket(name) -> "gs://name"``, ``request(...)``
  for raw HTTP, ``requests`` (log), ``drop_responses(...)`` (fault injection).  While it runs,
  ``STORAGE_EMULATOR_HOST`` points at it.
* ``gcs_bucket`` (function): a fresh ``gs://bucket-<uuid8>`` that exists and is empty.

Every test here may connect only to loopback addresses (enforced), and a test that makes the
emulator answer 501 (a path gcsfs would retry for ~35 s) fails.
"""

import os
import socket
import sys
import uuid
from collections.abc import Iterator

os.environ["GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"] = "false"  # before anything imports gcsfs

_TESTS_DIR = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
if _TESTS_DIR not in sys.path:
    sys.path.insert(0, _TESTS_DIR)

import pytest  # noqa: E402
from _gcs_emulator import EmulatorHandle, running_emulator  # noqa: E402

_LOOPBACK = {"127.0.0.1", "::1", "localhost"}


class ForeignConnectionError(OSError):
    """A gcs test tried to open a connection to something other than loopback."""


def _check_address(address) -> None:
    if isinstance(address, tuple) and address and isinstance(address[0], str):
        host = address[0]
        if host not in _LOOPBACK and not host.startswith("127."):
            raise ForeignConnectionError(f"gcs tests may only connect to 127.0.0.1, not {address!r}")


@pytest.fixture(scope="session", autouse=True)
def _loopback_only():
    """Refuse TCP connections to anything but loopback for the duration of the gcs tests."""
    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex

    def connect(self, address):
        _check_address(address)
        return real_connect(self, address)

    def connect_ex(self, address):
        _check_address(address)
        return real_connect_ex(self, address)

    socket.socket.connect, socket.socket.connect_ex = connect, connect_ex
    try:
        yield
    finally:
        socket.socket.connect, socket.socket.connect_ex = real_connect, real_connect_ex


@pytest.fixture(scope="session")
def gcs_emulator(_loopback_only) -> Iterator[EmulatorHandle]:
    gcsfs_mod = sys.modules.get("gcsfs")
    if gcsfs_mod is not None and gcsfs_mod.GCSFileSystem.__name__ == "ExtendedGcsFileSystem":
        pytest.fail(
            "gcsfs was imported before GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT=false was set; every bucket "
            "call would wait ~60 s for a gRPC probe. Set the variable before importing gcsfs."
        )
    with running_emulator() as emu:
        yield emu


@pytest.fixture
def gcs_bucket(gcs_emulator) -> str:
    return gcs_emulator.make_bucket(f"bucket-{uuid.uuid4().hex[:8]}")


@pytest.fixture(autouse=True)
def _emulator_hygiene(request):
    """Fail a test that made the emulator answer 501; drop fault injections it left behind."""
    if "gcs_emulator" not in request.fixturenames:
        yield
        return
    emu = request.getfixturevalue("gcs_emulator")
    before = len(emu.not_implemented)
    yield
    emu.clear_faults()
    new = emu.not_implemented[before:]
    assert not new, f"the emulator answered 501 (gcsfs retries those for ~35 s): {new}"
