"""pylance's write progress callbacks (``lance.progress``): ``begin(fragment)`` when a data file
of a fragment is opened, ``complete(fragment)`` when it is finished, from ``write_dataset``,
``write_fragments`` and ``LanceFragment.create`` (``progress=``).

:class:`FileSystemFragmentWriteProgress` keeps, as pylance's, ``fragment_<id>.in_progress``
(the fragment id and the tracker's metadata) and ``fragment_<id>.json`` (the fragment) under its
folder; the first is deleted on completion, so a crashed writer leaves it behind to find the
fragment's file and remove it.
"""

import dataclasses
import json
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any

from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.table.fragment import FragmentMetadata

__all__ = ["FileSystemFragmentWriteProgress", "FragmentWriteProgress", "NoopFragmentWriteProgress", "with_fragment_id"]


class FragmentWriteProgress(ABC):
    """Progress of a write, one fragment at a time (pylance's abstract class)."""

    @abstractmethod
    def begin(self, fragment: FragmentMetadata, **kwargs: Any) -> None:
        """Called when a fragment's data file is opened (``physical_rows`` still 0)."""

    @abstractmethod
    def complete(self, fragment: FragmentMetadata, **kwargs: Any) -> None:
        """Called when the fragment's data file is finished."""


class NoopFragmentWriteProgress(FragmentWriteProgress):
    """Does nothing (pylance's default)."""

    def begin(self, fragment: FragmentMetadata, **kwargs: Any) -> None:
        pass

    def complete(self, fragment: FragmentMetadata, **kwargs: Any) -> None:
        pass


class FileSystemFragmentWriteProgress(FragmentWriteProgress):
    """Progress files under ``base_uri`` (any URI lance_ops' object store opens), as pylance's."""

    PROGRESS_EXT: str = ".in_progress"

    def __init__(self, base_uri: Any, metadata: Mapping[str, str] | None = None) -> None:
        self._store = ObjectStore(str(base_uri))
        self._metadata = dict(metadata or {})

    def begin(self, fragment: FragmentMetadata, **kwargs: Any) -> None:
        progress = {"fragment_id": fragment.id, "metadata": self._metadata}
        self._store.put(f"fragment_{fragment.id}{self.PROGRESS_EXT}", json.dumps(progress).encode())
        self._store.put(f"fragment_{fragment.id}.json", json.dumps(fragment.to_json()).encode())

    def complete(self, fragment: FragmentMetadata, **kwargs: Any) -> None:
        self._store.delete(f"fragment_{fragment.id}{self.PROGRESS_EXT}")


@dataclasses.dataclass(frozen=True)
class _Renumbered:
    """Forwards to ``progress`` with the fragments numbered from ``first_id`` (the writer numbers
    its fragments from 0; ``LanceFragment.create(fragment_id=...)`` names the id)."""

    progress: Any
    first_id: int
    seen: list[str] = dataclasses.field(default_factory=list)

    def _renumbered(self, fragment: FragmentMetadata) -> FragmentMetadata:
        path = str(fragment.files[0].path) if fragment.files else ""
        if path not in self.seen:
            self.seen.append(path)
        return fragment.with_changes(id=self.first_id + self.seen.index(path))

    def begin(self, fragment: FragmentMetadata) -> None:
        self.progress.begin(self._renumbered(fragment))

    def complete(self, fragment: FragmentMetadata) -> None:
        self.progress.complete(self._renumbered(fragment))


def with_fragment_id(progress: Any, first_id: int) -> Any:
    """``progress`` seeing the written fragments numbered from ``first_id`` (None stays None)."""
    return None if progress is None else _Renumbered(progress, first_id)
