"""``ds.stats.data_stats()``: bytes on disk per field, as pylance 14 counts them.

pylance sums, over every data file of the version, the sizes of the buffers of each column's
pages and of the column itself, attributed to the field the column stores; every field of the
schema is listed (pre-order, as ``field_ids``), 0 for fields with no column of their own
(structs, blob v2 children).  Verified against pylance 14 on 2.0, 2.1 and 2.2 files.
"""

from dataclasses import dataclass

from lance_ops.format.file.reader import DataFileReader
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.table.bases import data_file_location
from lance_ops.format.table.manifest import Manifest


@dataclass(frozen=True)
class FieldStatistics:
    """Statistics of one field (pylance's ``FieldStatistics``)."""

    id: int  #: the field id
    bytes_on_disk: int  #: (possibly compressed) bytes of its columns' pages and buffers


@dataclass(frozen=True)
class DataStatistics:
    """Statistics about the data of a version (pylance's ``DataStatistics``)."""

    fields: list[FieldStatistics]


def data_statistics(store: ObjectStore, manifest: Manifest) -> DataStatistics:
    """Bytes on disk of every field of ``manifest``'s schema, summed over its data files (reads
    each file's column metadata, no page)."""
    sizes = {f.id: 0 for f in manifest.schema.fields}
    for frag in manifest.fragments:
        for df in frag.files:
            file_store, rel = data_file_location(store, manifest.bases, df)
            reader = DataFileReader(file_store, rel, file_size=df.file_size_bytes or None)
            for field_id, column in zip(df.fields, df.column_indices, strict=False):
                if column < 0 or field_id not in sizes:
                    continue
                meta = reader.column_metadata(column)
                sizes[field_id] += sum(sum(p.buffer_sizes) for p in meta.pages) + sum(meta.buffer_sizes)
    return DataStatistics([FieldStatistics(fid, n) for fid, n in sizes.items()])
