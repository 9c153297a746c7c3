"""Compaction: plans, rewrite tasks, small-file groups, what happens to indices."""
