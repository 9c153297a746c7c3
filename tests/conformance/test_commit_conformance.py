"""lance_ops' own run of the conformance suite shipped in ``lance_ops.format.testing``, once per
backend of ``conftest.py`` (local disk, ``memory://``, the GCS emulator, an external manifest store)."""

from lance_ops.format.testing import CommitConformance


class TestCommitConformance(CommitConformance):
    """Every test of the suite; ``backend`` comes from ``conftest.py``."""
