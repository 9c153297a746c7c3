"""Compaction: rewrites of fragments."""
