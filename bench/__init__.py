"""Benchmarks: lance_ops against pylance on the same data in the same run (``python -m bench.run``).

See ``bench/README.md`` for the cases, the CLI and how peak memory is measured.
"""
