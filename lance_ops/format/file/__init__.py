"""The Lance v2 data file (format 2.0): writer, reader and page encodings (docs/FORMAT.md §3-§4)."""

from lance_ops.format.file.reader import DataFileReader
from lance_ops.format.file.writer import DataFileWriter, data_file_field_info, write_data_file

__all__ = ["DataFileReader", "DataFileWriter", "data_file_field_info", "write_data_file"]
