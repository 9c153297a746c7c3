"""lance_ops.assets: the Dagster code location (``lance_ops.assets.definitions.defs``).

A thin layer: resources open datasets and Spark sessions, ops call ``lance_ops.jobs``, and
everything Dagster records about a version is read from ``lance_ops.format`` manifests.
"""
