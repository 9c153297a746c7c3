"""Lance file format versions: which lance_ops reads and writes, and pylance's names for them.

A dataset keeps one file version (``Manifest.data_storage_version``): new data files must have
it, because pylance refuses datasets that mix versions.
"""

from lance_ops.format.errors import UnsupportedFeatureError

_VERSION_ALIASES = {"legacy": "0.1", "0.1": "0.1", "0.3": "2.0", "stable": "2.2", "next": "2.3"}
#: file format versions lance_ops reads
READABLE_FILE_VERSIONS = ("2.0", "2.1", "2.2")
#: file format versions lance_ops writes
WRITABLE_FILE_VERSIONS = ("2.0", "2.1", "2.2")
#: ``data_storage_version`` of a new dataset when none is given ("stable", as pylance 14)
DEFAULT_STORAGE_VERSION = "2.2"


def normalize_storage_version(version: str | None) -> str:
    """``data_storage_version`` as pylance names it (``"2.0"``, ``"2.1"``, ``"2.2"``, ``"stable"``,
    ``"legacy"``, ...) to the file format version; raise for versions lance_ops does not write."""
    v = _VERSION_ALIASES.get(version or DEFAULT_STORAGE_VERSION, version or DEFAULT_STORAGE_VERSION)
    if v not in WRITABLE_FILE_VERSIONS:
        raise UnsupportedFeatureError(
            f"data_storage_version {version!r} (file format {v}) is not supported by lance_ops; "
            f"use one of {', '.join(WRITABLE_FILE_VERSIONS)} or 'stable'"
        )
    return v


def require_writable(manifest_version: str, where: str) -> str:
    """The file version new data files of a dataset must have (its own: pylance rejects a mix);
    raise for datasets whose version lance_ops cannot write (legacy 0.1, 2.3+)."""
    if manifest_version not in WRITABLE_FILE_VERSIONS:
        raise UnsupportedFeatureError(
            f"{where}: the dataset uses Lance file format {manifest_version or 'legacy (0.1)'}; lance_ops writes "
            f"data files of {', '.join(WRITABLE_FILE_VERSIONS)} only and pylance refuses mixed file versions "
            "(deletes still work)"
        )
    return manifest_version


def require_readable(manifest_version: str, where: str) -> None:
    """Raise for datasets whose file version lance_ops cannot read (legacy 0.1, 2.3+)."""
    if manifest_version not in READABLE_FILE_VERSIONS:
        raise UnsupportedFeatureError(
            f"{where} uses Lance file format {manifest_version or 'legacy (0.1)'}; "
            f"lance_ops reads file formats {', '.join(READABLE_FILE_VERSIONS)}"
        )


def stable_version() -> str:
    """The file format version "stable" names (pylance's ``lance.file.stable_version()``)."""
    return _VERSION_ALIASES["stable"]
