"""Detached commits (pylance's ``commit(..., detached=True)``).

A detached version is a manifest outside the lineage: ``_versions/d{version}.manifest`` with
the high bit of ``version`` set and the other 63 bits random.  It is never the latest version
and never listed; it can be checked out by number and committed on (detached again).  As
pylance, only datasets with V2 manifest paths take them.
"""

import secrets

from lance_ops.format.errors import DetachedCommitError
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.table.manifest import (
    DETACHED_VERSION_MASK,
    Manifest,
    NamingScheme,
    write_manifest_if_absent,
)
from lance_ops.format.txn.apply import build_manifest
from lance_ops.format.txn.handlers import CommitHandler, checkout_manifest
from lance_ops.format.txn.transaction import Transaction, write_transaction_file

__all__ = ["commit_detached"]

_ATTEMPTS = 5


def commit_detached(store: ObjectStore, handler: CommitHandler, txn: Transaction) -> Manifest:
    """Apply ``txn`` to its read version (attached or detached) and write the result as a new
    detached version; return its manifest.

    Raises:
        DetachedCommitError: the dataset names its manifests with V1 paths (as pylance).
    """
    scheme = handler.list_versions()[0]
    if scheme is not NamingScheme.V2:
        raise DetachedCommitError(f"{store.uri}: Not supported: detached commits cannot be used with v1 manifest paths")
    prev, _ = checkout_manifest(store, txn.read_version, handler)
    write_transaction_file(store, txn)
    for _ in range(_ATTEMPTS):  # a random 63-bit number: a clash is all but impossible
        version = DETACHED_VERSION_MASK | secrets.randbits(63)
        new = build_manifest(prev, txn, version, load_version=lambda v: checkout_manifest(store, v, handler)[0])
        if write_manifest_if_absent(store, new, txn.to_proto(), NamingScheme.V2):
            return new
    raise DetachedCommitError(f"{store.uri}: could not pick a free detached version in {_ATTEMPTS} attempts")
