"""The lance_ops release, stamped into every manifest it writes (``writer_version``)."""

__version__ = "0.1.0"
