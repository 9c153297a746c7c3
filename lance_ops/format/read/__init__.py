"""Reading a dataset version: scans, projections, takes."""
