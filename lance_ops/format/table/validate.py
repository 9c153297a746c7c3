"""Integrity checks of one manifest (pylance's ``LanceDataset.validate``)."""

from collections import Counter

from lance_ops.format.errors import CorruptFileError
from lance_ops.format.table.manifest import Manifest


def validate_manifest(manifest: Manifest) -> None:
    """Check that fragment ids are unique, that no field id is stored in two data files of a
    fragment and that no fragment deletes more rows than it holds.

    Raises:
        CorruptFileError: the first problem found (names the manifest, fragment and field).
    """
    where = manifest.source or f"manifest of version {manifest.version}"
    repeated = [i for i, n in Counter(f.id for f in manifest.fragments).items() if n > 1]
    if repeated:
        raise CorruptFileError(where, f"fragment id {repeated[0]} is used by more than one fragment")
    for frag in manifest.fragments:
        fields = Counter(fid for df in frag.files for fid in df.fields if fid >= 0)
        twice = [fid for fid, n in fields.items() if n > 1]
        if twice:
            raise CorruptFileError(where, f"fragment {frag.id}: field id {twice[0]} is stored in more than one "
                                          "data file")
        if frag.num_deleted_rows > frag.physical_rows:
            raise CorruptFileError(where, f"fragment {frag.id}: {frag.num_deleted_rows} deleted rows of "
                                          f"{frag.physical_rows}")
