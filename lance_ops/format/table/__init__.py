"""The table's metadata on disk: manifests, fragments, deletion files, row ids, base paths, refs, lineage, file versions, reader leases."""
