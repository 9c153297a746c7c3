"""The conformance suite of ``lance_ops.format``, importable by third parties (as fsspec's
``fsspec/tests/abstract``): the commit loop, conflicts, cleanup and failed-commit cleanup written
once against a :class:`Backend`, so a guarantee that holds on one store holds on all.

A backend author runs it against their own store with a small subclass (needs ``pytest``:
``pip install 'lance_ops[testing]'``)::

    import pytest
    from lance_ops.format.testing import Backend, CommitConformance

    class TestMyStore(CommitConformance):
        @pytest.fixture
        def backend(self, tmp_path):
            return Backend("mystore", "mystore://bucket/ds", {"token": "..."})

lance_ops' own run (``tests/conformance``) parametrises ``backend`` over local disk,
``memory://``, the GCS emulator over HTTP and local disk with an external manifest store.
"""

from lance_ops.format.testing.backends import Backend
from lance_ops.format.testing.commit_suite import CommitConformance
from lance_ops.format.testing.files import listing, unreferenced_files

__all__ = ["Backend", "CommitConformance", "listing", "unreferenced_files"]
