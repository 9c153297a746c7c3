"""Where a conformance test's dataset lives and how every call must reach it."""

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from lance_ops.format.api.functions import dataset, write_dataset
from lance_ops.format.api.lance_dataset import LanceDataset


@dataclass
class Backend:
    """A dataset location: ``uri``, the ``storage_options`` every call takes, and the external
    ``manifest_store`` when the store commits through one."""

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

    def write(self, data: pa.Table, **kw: Any) -> LanceDataset:
        """``write_dataset`` at this backend's uri."""
        return write_dataset(data, self.uri, **self.kw, **kw)

    def open(self, **kw: Any) -> LanceDataset:
        """``dataset`` at this backend's uri."""
        return dataset(self.uri, **self.kw, **kw)


def simple_table(start: int, n: int) -> pa.Table:
    """``id`` (int64 from ``start``), ``val`` (``v<id>``) and ``score`` (``id * 0.5``)."""
    import numpy as np

    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table({"id": ids, "val": pa.array([f"v{i}" for i in ids]), "score": (ids * 0.5).astype(np.float64)})
