"""Readers for Lance file format 2.1 / 2.2 structural page layouts (docs/FORMAT.md §5)."""

from lance_ops.format.file.v21.layouts import decode_page, parse_layout
from lance_ops.format.file.v21.nested_fsl import is_nested_fsl

__all__ = ["decode_page", "is_nested_fsl", "parse_layout"]
