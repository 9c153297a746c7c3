"""Planners of operations that write data (the layout of issue 30)."""
