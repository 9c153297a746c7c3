"""Reading a dataset: scan options and the pieces a scan is built of."""
