"""Files of a dataset that no version references, found by reading every manifest."""

from lance_ops.format.index.unreferenced import index_uuids
from lance_ops.format.io.object_store import ObjectStore
from lance_ops.format.ops.cleanup import blob_sidecar_owner
from lance_ops.format.table.manifest import read_manifest
from lance_ops.format.txn.handlers import ConditionalPutCommitHandler
from lance_ops.format.txn.orphans import manifest_files


def referenced(uri: str, storage_options: dict | None = None) -> tuple[set[str], set[str], set[str]]:
    """(data and deletion files, index uuids, ``.txn`` files) some version of ``uri`` names."""
    store = ObjectStore(uri, storage_options)
    scheme, versions = ConditionalPutCommitHandler(store).list_versions()
    files: set[str] = set()
    indices: set[str] = set()
    txns: set[str] = set()
    for v in versions:
        m = read_manifest(store, v, scheme).manifest
        own = manifest_files(m)
        files |= own.data | own.deletions
        indices |= index_uuids(m)
        if m.transaction_file:
            txns.add(f"_transactions/{m.transaction_file}")
    return files, indices, txns


def unreferenced_files(uri: str, storage_options: dict | None = None) -> list[str]:
    """Every file in ``data/``, ``_deletions/``, ``_indices/`` and ``_transactions/`` that no
    version references (a blob sidecar counts as its data file)."""
    store = ObjectStore(uri, storage_options)
    files, indices, txns = referenced(uri, storage_options)
    out = []
    for prefix in ("data", "_deletions"):
        out += [rel for rel, _s, _m in store.list_files(prefix) if (blob_sidecar_owner(rel) or rel) not in files]
    out += [rel for rel, _s, _m in store.list_files("_indices") if rel.split("/")[1] not in indices]
    out += [rel for rel, _s, _m in store.list_files("_transactions") if rel not in txns]
    return sorted(out)


def listing(uri: str, prefix: str, storage_options: dict | None = None) -> set[str]:
    """The files under ``prefix`` of the dataset at ``uri``."""
    return {rel for rel, _s, _m in ObjectStore(uri, storage_options).list_files(prefix)}
