"""Datasets built once and copied per test, so that each test may change its copy freely.

- ``copy_of(template, dst)``: one private copy.
- ``uri = template_copy("uri")`` in a module next to a module-scoped ``template`` fixture: a
  fixture ``uri`` giving each test its own copy (``tmp_path/ds``) of that template.
- ``Templates``: templates built on first use, one per key (client, row-id mode, file version).
"""

import shutil
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any

import pytest


def copy_of(template: str | Path, dst: str | Path) -> str:
    """A private copy of the dataset folder ``template`` at ``dst`` (which must not exist)."""
    shutil.copytree(template, dst)
    return str(dst)


def template_copy(name: str) -> Any:
    """A fixture named ``name``: a copy (``tmp_path/ds``) of the requesting module's ``template``."""

    @pytest.fixture(name=name)
    def copy(template: str, tmp_path: Path) -> str:
        return copy_of(template, tmp_path / "ds")

    return copy


class Templates:
    """Templates built once per key (per test session), handed out as copies."""

    def __init__(self) -> None:
        self._built: dict[Hashable, str] = {}

    def copy(self, key: Hashable, build: Callable[[], str], dst: str | Path) -> str:
        """A copy at ``dst`` of the template for ``key``; ``build()`` makes it (and returns its
        folder) the first time the key is asked for."""
        if key not in self._built:
            self._built[key] = build()
        return copy_of(self._built[key], dst)
