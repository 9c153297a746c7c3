"""The read path: scans, projections, takes, blob payloads, data statistics."""
