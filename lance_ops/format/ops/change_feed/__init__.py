"""The change feed between two versions: plans, tasks, row diffs, schema history."""
