"""Secondary indices of a dataset: metadata, coverage through maintenance, remapped index files.

lance_ops keeps the indices pylance built working while it compacts, materialises deletions and
updates rows, removes index files nothing references, and builds index segments (BTREE,
BITMAP, LABEL_LIST, ZONEMAP, NGRAM, INVERTED, IVF) with files as pylance 14 writes them; its
full-text search reads an INVERTED index's params and statistics, not its postings.

- :mod:`.metadata`: the manifest's IndexSection as :class:`IndexMetadata` objects.
- :mod:`.coverage`: how each operation changes an index's fragment bitmap (pylance's rules).
- :mod:`.rowaddr`: row-address sets as index files store them; a compaction's address map.
- :mod:`.remap`: remapped copies of index files (datasets without stable row ids), with the
  design note on why lance_ops remaps instead of writing a fragment reuse index.
- :mod:`.reuse`: reading pylance's fragment reuse index (deferred remaps).
- :mod:`.build`: the files of a new scalar index segment (planned and committed by
  :mod:`lance_ops.format.ops.index_build`).
- :mod:`.describe`: ``list_indices`` / ``describe_indices`` / ``index_statistics`` shapes.
"""

from lance_ops.format.index.metadata import (
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
