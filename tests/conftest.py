"""Shared fixtures (test data lives in datagen.py)."""

import os

os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")

import pytest


@pytest.fixture
def uri(tmp_path):
    return str(tmp_path / "ds")
