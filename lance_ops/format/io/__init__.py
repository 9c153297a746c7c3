"""Object storage: the fsspec-backed store with conditional puts."""
