"""Imported first by :mod:`lance_ops.jobs`: without pyspark, say which extra to install.

A plain ``ModuleNotFoundError: No module named 'pyspark'`` from deep inside the package does not
tell a user of ``pip install lance_ops`` what is missing; :class:`MissingDependencyError` (an
``ImportError``) names the ``spark`` extra.
"""

from lance_ops.format.errors import MissingDependencyError

try:
    import pyspark  # noqa: F401
    import pyspark.sql  # noqa: F401
except ImportError as e:
    raise MissingDependencyError("lance_ops.jobs (the Spark jobs)", extra="spark",
                                 missing=(e.name or "pyspark").split(".")[0]) from e
