"""pylance's ``lance.debug.format_fragment``: a readable description of a fragment's files.

The layout follows pylance's (``PrettyPrintableFragment { id, files: [PrettyPrintableDataFile {
path, fields, column_indices, schema, major_version, minor_version }], deletion_file,
physical_rows }``), with each file's schema given as its fields' names, logical types and ids
(pylance prints Rust's ``Debug`` of the whole field) and lists on one line.
"""

from typing import Any

from lance_ops.format.index.metadata import decode_index_section
from lance_ops.format.schema import LanceSchema
from lance_ops.format.table.fragment import FragmentMetadata

__all__ = ["format_fragment", "manifest_needs_migration"]


def _file(df: Any, schema: LanceSchema) -> list[str]:
    by_id = {f.id: f for f in schema.fields}
    fields = ", ".join(f"{by_id[i].name}: {by_id[i].logical_type} (id {i})" for i in df.fields if i in by_id)
    return [
        "        PrettyPrintableDataFile {",
        f'            path: "{df.path}",',
        f"            fields: {list(df.fields)},",
        f"            column_indices: {list(df.column_indices)},",
        f"            schema: [{fields}],",
        f"            major_version: {df.file_major_version},",
        f"            minor_version: {df.file_minor_version},",
        "        },",
    ]


def format_fragment(fragment: Any, dataset: Any) -> str:
    """``fragment`` (a FragmentMetadata or LanceFragment) of ``dataset`` described as pylance's
    ``format_fragment`` lays it out (field names from the dataset's schema)."""
    meta: FragmentMetadata = getattr(fragment, "metadata", fragment)
    deletion = "None" if meta.deletion_file is None else f"Some({meta.deletion_file})"
    lines = ["PrettyPrintableFragment {", f"    id: {meta.id},", "    files: ["]
    for df in meta.files:
        lines += _file(df, dataset.lance_schema)
    lines += ["    ],", f"    deletion_file: {deletion},", f"    physical_rows: Some({meta.physical_rows}),", "}"]
    return "\n".join(lines)


def manifest_needs_migration(dataset: Any) -> bool:
    """pylance's ``lance.lance.manifest_needs_migration``: whether the checked-out manifest lacks
    fields newer writers fill in (a writer version, a fragment's ``physical_rows``, a deletion
    file's row count, an index's fragment bitmap), which the next commit adds."""
    manifest = dataset.manifest
    if not manifest.writer_version and not manifest.writer_library:
        return True
    for frag in manifest.fragments:
        if frag.files and not frag.physical_rows:
            return True
        if frag.deletion_file is not None and not frag.deletion_file.num_deleted_rows:
            return True
    if not manifest.index_section:
        return False
    indices = decode_index_section(manifest.index_section, f"index section of version {manifest.version}")
    return any(i.fragment_ids is None for i in indices)
