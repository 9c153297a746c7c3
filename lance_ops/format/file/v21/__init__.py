"""Readers for Lance file format 2.1 / 2.2 structural page layouts (docs/FORMAT.md §5)."""

from .layouts import decode_page, parse_layout
from .nested_fsl import is_nested_fsl

__all__ = ["decode_page", "is_nested_fsl", "parse_layout"]
