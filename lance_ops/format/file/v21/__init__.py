"""Readers for Lance file format 2.1 / 2.2 structural page layouts (FORMAT_NOTES.md §5)."""

from .layouts import decode_page, parse_layout

__all__ = ["decode_page", "parse_layout"]
