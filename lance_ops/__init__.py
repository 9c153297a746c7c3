"""lance_ops: maintain Lance datasets in a lakehouse (format library, Spark jobs, Dagster assets)."""

__version__ = "0.1.0"
