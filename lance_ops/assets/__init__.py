"""lance_ops.assets: the Dagster code location (``lance_ops.assets.definitions.defs``) and an IO manager.

A thin layer: resources open datasets and run Spark (in the run worker, or spark-submit through
Dagster Pipes), the dataset assets call ``lance_ops.jobs``, and everything Dagster records about
a version is read from ``lance_ops.format`` manifests.  ``io_manager.LanceIOManager`` stores
users' own assets as Lance datasets.

This package's ``__init__`` imports nothing, so ``spark_pipes_main`` (the spark-submit driver)
runs on a cluster that has ``dagster_pipes`` but not Dagster; without either, importing it raises a
``MissingDependencyError`` (an ``ImportError``) naming the ``dagster`` extra.
"""

from importlib.util import find_spec as _find_spec

if _find_spec("dagster") is None and _find_spec("dagster_pipes") is None:
    from lance_ops.format.errors import MissingDependencyError as _Missing

    raise _Missing("lance_ops.assets (the Dagster layer)", extra="dagster", missing="dagster")
