"""Debian's headless Chromium for the UI tests, installed by the first test that needs it.

``make test`` does not install it: only the tests that screenshot a page call :func:`ensure_chromium`,
which runs ``apt-get install chromium`` when ``/usr/bin/chromium`` is missing and skips the test,
naming the reason, when the package cannot be installed on this machine.
"""

import os
import subprocess

import pytest

CHROMIUM = "/usr/bin/chromium"


def ensure_chromium() -> str:
    """The path of Chromium, installing Debian's package first if needed (skips if it cannot)."""
    if not os.path.exists(CHROMIUM):
        try:
            subprocess.run("apt-get update -qq && apt-get install -y -qq chromium", shell=True, check=True,
                           timeout=900, capture_output=True, env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as e:
            err = getattr(e, "stderr", b"") or b""
            pytest.skip(f"Debian's chromium could not be installed ({e}; {err.decode(errors='replace')[-300:]})")
    assert os.path.exists(CHROMIUM), f"apt-get installed chromium but {CHROMIUM} is missing"
    return CHROMIUM


def headless(args: list[str], *, timeout: float = 120, attempts: int = 2) -> subprocess.CompletedProcess:
    """Run headless Chromium (``--dump-dom`` or ``--screenshot``); a run that hangs is killed and
    started again once.  Headless Chromium with ``--virtual-time-budget`` now and then never exits on
    a page that keeps polling (Airflow's and Dagster's UIs do); that is the browser's hang, not the
    page's answer, which the caller still asserts on."""
    for attempt in range(attempts):
        try:
            return subprocess.run(args, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")
