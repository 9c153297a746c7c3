"""The read path: scans, projections, blob payloads, data statistics."""
