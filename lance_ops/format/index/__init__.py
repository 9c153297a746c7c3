"""Secondary indices of a dataset: metadata, coverage through maintenance, remapped index files.

lance_ops never builds or queries an index; it keeps the indices pylance built working while it
compacts, materialises deletions and updates rows, and removes index files nothing references.

- :mod:`.metadata`: the manifest's IndexSection as :class:`IndexMetadata` objects.
- :mod:`.coverage`: how each operation changes an index's fragment bitmap (pylance's rules).
- :mod:`.rowaddr`: row-address sets as index files store them; a compaction's address map.
- :mod:`.remap`: remapped copies of index files (datasets without stable row ids), with the
  design note on why lance_ops remaps instead of writing a fragment reuse index.
- :mod:`.reuse`: reading pylance's fragment reuse index (deferred remaps).
- :mod:`.describe`: ``list_indices`` / ``describe_indices`` / ``index_statistics`` shapes.
"""

from .metadata import (
    FRAG_REUSE_INDEX_NAME,
    INDICES_DIR,
    SCALAR_KINDS,
    VECTOR_KINDS,
    IndexFile,
    IndexMetadata,
    decode_index_section,
    encode_index_section,
    user_indices,
)

__all__ = [
    "FRAG_REUSE_INDEX_NAME",
    "INDICES_DIR",
    "SCALAR_KINDS",
    "VECTOR_KINDS",
    "IndexFile",
    "IndexMetadata",
    "decode_index_section",
    "encode_index_section",
    "user_indices",
]
