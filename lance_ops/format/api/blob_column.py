"""pylance's ``BlobColumn``: a binary column's values as file-like objects, one per row."""

import io
from collections.abc import Iterator

import pyarrow as pa

from lance_ops.format.errors import InvalidArgumentError


class BlobColumn:
    """Iterate a ``binary`` / ``large_binary`` array (or chunked array) as ``io.BytesIO``
    objects (None for a null), as pylance's ``lance.BlobColumn``; for large blobs stored in a
    dataset use ``take_blobs``.

    Raises:
        InvalidArgumentError: not an Arrow array, or not of a binary type (a ``ValueError``).
    """

    def __init__(self, blob_column: pa.Array | pa.ChunkedArray) -> None:
        if not isinstance(blob_column, (pa.Array, pa.ChunkedArray)):
            raise InvalidArgumentError(f"Expected a pyarrow.Array or pyarrow.ChunkedArray, got {type(blob_column)}")
        if not (pa.types.is_binary(blob_column.type) or pa.types.is_large_binary(blob_column.type)):
            raise InvalidArgumentError(f"Expected a binary array, got {blob_column.type}")
        self.blob_column = blob_column

    def __iter__(self) -> Iterator[io.BytesIO | None]:
        for value in self.blob_column:
            yield None if not value.is_valid else io.BytesIO(value.as_py())
