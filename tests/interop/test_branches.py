"""Branches, tags on branches, tag names and detached versions, with pylance 14 as the oracle.

pylance builds the histories (``create_branch``, appends on the branch, tags pointing into
branches, detached commits); lance_ops maintains them (on main and on the branch) and cleans
up; pylance must then read every branch and tag exactly as before and keep maintaining them.
"""

import io
import os
from datetime import timedelta

import lance
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from datagen import META, simple_table

import lance_ops.format as lf
from lance_ops import cli

# 2.0 and 2.2 (the default) are enough here: these do not depend on 2.1 page encodings
pytestmark = [pytest.mark.interop, pytest.mark.parametrize("file_version", ("2.0", "2.2"), indirect=True)]

COLS = ["id", "val", "score"]



def files(root: str) -> set[str]:
    return {os.path.relpath(os.path.join(d, n), root) for d, _, names in os.walk(root) for n in names}


def shape(names: set[str]) -> dict[str, object]:
    """Files per directory, manifests by name, transaction files left out (pylance keeps the
    manifest a branch was created from but drops its .txn; lance_ops keeps both)."""
    out: dict[str, object] = {}
    for n in names:
        d = os.path.dirname(n)
        if d.endswith("_transactions"):
            continue
        if d.endswith("_versions"):
            out[n] = 1
        else:
            out[d] = out.get(d, 0) + 1  # type: ignore[operator]
    return out


def table(ds) -> pa.Table:
    return ds.to_table(columns=COLS + META)


def build(uri: str, stable: bool = True) -> dict[str, pa.Table]:
    """main v1 (60 rows), v2 (+20); branch dev from v1, +5 rows (dev v2); tag release -> (dev, 2),
    tag gold -> main 2.  Returns what each ref reads now."""
    ds = lance.write_dataset(simple_table(0, 60), uri, enable_stable_row_ids=stable, max_rows_per_file=30)
    ds = lance.write_dataset(simple_table(60, 20), uri, mode="append")
    dev = ds.create_branch("dev", 1)
    dev = lance.write_dataset(simple_table(200, 5), dev, mode="append")
    ds.tags.create("release", ("dev", 2))
    ds.tags.create("gold", 2)
    return {
        "main": table(lance.dataset(uri)),
        "dev": table(lance.dataset(uri, version="release")),
        "gold": table(lance.dataset(uri, version="gold")),
    }


@pytest.mark.parametrize("stable", [True, False], ids=["stable_ids", "address_ids"])
def test_cleanup_on_main_never_deletes_what_a_branch_uses(tmp_path, stable):
    """The data-loss report of issue 12: lance_ops deletes, compacts and cleans up main while
    branch ``dev`` (created at v1) still uses v1's data file."""
    uri = str(tmp_path / "ds")
    before = build(uri, stable)
    twin = str(tmp_path / "twin")  # built alike (a copy would keep base paths into ``uri``)
    build(twin, stable)

    ds = lf.dataset(uri)
    ds.delete(pc.field("id") < 40)
    ds.compact_files()
    stats = lf.dataset(uri).cleanup_old_versions(older_than=timedelta(0), retention_duration_check=False)
    assert stats.old_versions > 0
    assert "dev" in stats.protected_by_branches and "gold" in stats.protected_by_tags

    # pylance doing the same main-side steps on the twin: the same data and deletion files stay
    p = lance.dataset(twin)
    p.delete("id < 40")
    p.optimize.compact_files()
    lance.dataset(twin).cleanup_old_versions(older_than=timedelta(0), error_if_tagged_old_versions=False)
    ours, theirs = files(uri), files(twin)
    # the same files stay as when pylance cleans up (data files have random names: compare the
    # number per directory; manifests by name)
    assert shape(ours) == shape(theirs)
    assert "_versions/18446744073709551614.manifest" in ours  # v1: the version dev was created from

    for lib in (lance, lf):
        assert table(lib.dataset(uri, version="release")).equals(before["dev"])
        assert table(lib.dataset(uri, version="gold")).equals(before["gold"])
    assert table(lance.dataset(os.path.join(uri, "tree", "dev"))).equals(before["dev"])
    # ... and pylance keeps maintaining the branch
    dev = lance.dataset(uri, version="release").checkout_version(("dev", None))
    dev.delete("id = 201")
    assert lance.dataset(os.path.join(uri, "tree", "dev")).count_rows() == 64


def test_maintenance_on_a_branch_matches_pylance(tmp_path):
    """Append, delete, update, compaction and deletion materialisation on branch ``dev`` (format
    API), against pylance doing the same on a copy; then pylance keeps maintaining it."""
    uri = str(tmp_path / "ds")
    build(uri)
    twin = str(tmp_path / "twin")
    build(twin)
    main_files = {f for f in files(uri) if not f.startswith("tree")}

    d = lf.dataset(uri, branch="dev")
    assert d.branch == "dev" and d.version == 2 and d.uri.endswith(os.path.join("tree", "dev"))
    d = lf.write_dataset(simple_table(300, 4), d, mode="append")
    d.delete(pc.field("id") < 10)
    d.update({"val": "'U'"}, where=pc.field("id") == 20)
    d.compact_files()
    d = lf.dataset(uri, branch="dev")
    d.delete(pc.field("id") < 15)
    d.materialize_deletions(threshold=0.01)

    p = lance.dataset(twin, version="release").checkout_version(("dev", None))
    lance.write_dataset(simple_table(300, 4), p, mode="append")
    p = p.checkout_version(("dev", None))
    p.delete("id < 10")
    p.update({"val": "'U'"}, where="id = 20")
    p.optimize.compact_files()
    p = p.checkout_version(("dev", None))
    p.delete("id < 15")
    p.optimize.compact_files(materialize_deletions_threshold=0.01)

    ours = lf.dataset(uri, branch="dev")
    theirs_view = lance.dataset(os.path.join(uri, "tree", "dev"))
    twin_view = lance.dataset(os.path.join(twin, "tree", "dev"))
    assert ours.version == theirs_view.version == twin_view.version
    by_id = lambda t: t.sort_by("id")  # noqa: E731
    assert table(theirs_view).equals(table(ours))
    assert by_id(table(theirs_view)).equals(by_id(table(twin_view)))
    # main did not move
    assert lance.dataset(uri).version == 2 and table(lance.dataset(uri)).equals(table(lance.dataset(twin)))
    # every file lance_ops wrote for the branch is under tree/dev/
    assert {f for f in files(uri) if not f.startswith("tree")} == main_files
    # pylance keeps maintaining the branch lance_ops wrote
    theirs_view.delete("id = 300")
    lance.write_dataset(simple_table(400, 2), theirs_view, mode="append")
    assert lf.dataset(uri, branch="dev").count_rows() == lance.dataset(os.path.join(uri, "tree", "dev")).count_rows()


def test_tags_with_branches_both_ways(tmp_path):
    uri = str(tmp_path / "ds")
    build(uri)
    ds = lf.dataset(uri)
    tags = ds.tags.list()
    assert (tags["release"]["branch"], tags["release"]["version"]) == ("dev", 2)
    assert (tags["gold"]["branch"], tags["gold"]["version"]) == (None, 2)
    assert ds.tags.get("release") == ("dev", 2) and ds.tags.get_version("release") == 2
    # wrong-version report of issue 12: the tag reads dev's version 2 (65 rows), not main's (80)
    assert lf.dataset(uri, version="release").count_rows() == 65 == lance.dataset(uri, version="release").count_rows()
    assert lf.dataset(uri, version="gold").count_rows() == 80
    assert lf.resolve_version(uri, "release") == (os.path.join(uri, "tree", "dev"), 2)
    assert lf.resolve_version(uri, ("main", 1)) == (uri, 1)
    assert lf.resolve_version(uri, branch="dev") == (os.path.join(uri, "tree", "dev"), 2)
    assert lf.dataset(uri, version=("dev", 1)).count_rows() == 60

    # lance_ops writes tags pylance reads: int on a branch handle, tuple, tag name, update
    dev = lf.dataset(uri, branch="dev")
    dev.tags.create("dev1", 1)
    ds.tags.create("dev_latest", ("dev", None))
    ds.tags.create("again", "release")
    ds.tags.update("gold", ("dev", 1))
    theirs = lance.dataset(uri).tags.list()
    assert {k: (v["branch"], v["version"]) for k, v in theirs.items()} == {
        "release": ("dev", 2), "gold": ("dev", 1), "dev1": ("dev", 1), "dev_latest": ("dev", 2), "again": ("dev", 2)
    }
    assert lance.dataset(uri, version="dev1").count_rows() == 60
    assert [n for n, _ in ds.tags.list_ordered()][:3] == [n for n, _ in lance.dataset(uri).tags.list_ordered()][:3]
    with pytest.raises(lf.TagError, match="already exists"):
        ds.tags.create("dev1", 2)
    with pytest.raises(lf.TagError, match="does not exist"):
        ds.tags.create("nope", ("dev", 9))
    with pytest.raises(lf.TagError):
        lf.dataset(uri, version="missing")
    with pytest.raises(ValueError):
        ds.tags.create("a/b", 1)
    # a tag on a branch cannot be opened as a version of another branch
    with pytest.raises(ValueError, match="branch dev"):
        ds.change_feed(0, "release")
    # the CLI takes tags and branches too
    out = io.StringIO()
    assert cli.main(["inspect", uri, "--version", "release"], out=out) == 0
    assert "tree/dev" in out.getvalue() and "version   2 " in out.getvalue()
    # branches: list as pylance, refuse deleting a tagged branch
    assert set(ds.branches.list()) == {"dev"} and ds.branches.list()["dev"]["parent_version"] == 1
    with pytest.raises(lf.BranchError, match="referenced by tags"):
        ds.branches.delete("dev")


def test_branches_lance_ops_creates_open_in_pylance(tmp_path):
    uri = str(tmp_path / "ds")
    build(uri)
    ds = lf.dataset(uri)
    feat = ds.create_branch("feature/x", ("dev", 2))  # a branch of a branch, with a '/' in its name
    assert feat.branch == "feature/x" and feat.version == 2 and feat.count_rows() == 65
    exp = lf.dataset(uri, branch="feature/x")
    assert exp.manifest.reader_feature_flags & 16
    theirs = lance.dataset(uri).checkout_version(("feature/x", 2))
    assert table(theirs).equals(table(feat))
    assert set(lance.dataset(uri).branches.list()) == {"dev", "feature/x"}
    assert lance.dataset(uri).branches.list()["feature/x"]["parent_branch"] == "dev"
    # both libraries append to it; pylance branches it again
    lf.write_dataset(simple_table(500, 3), feat, mode="append")
    p = lance.dataset(os.path.join(uri, "tree", "feature", "x"))
    lance.write_dataset(simple_table(600, 3), p, mode="append")
    grand = lance.dataset(os.path.join(uri, "tree", "feature", "x")).create_branch("grand", ("feature/x", 4))
    assert table(lf.dataset(uri, branch="grand")).equals(table(grand))
    assert lf.dataset(uri, branch="feature/x").count_rows() == 71
    # cleaning dev keeps what feature/x and grand still use; main stays whole
    dev = lf.dataset(uri, branch="dev")
    dev.delete(pc.field("id") < 70)
    lf.dataset(uri, branch="dev").compact_files()
    stats = lf.dataset(uri, branch="dev").cleanup_old_versions(older_than=timedelta(0), retention_duration_check=False)
    assert "feature/x" in stats.protected_by_branches and "release" in stats.protected_by_tags
    assert table(lance.dataset(uri, version="release")).num_rows == 65
    assert lance.dataset(os.path.join(uri, "tree", "grand")).to_table().num_rows == 71
    assert lf.dataset(uri, branch="feature/x").to_table().num_rows == 71
    # a branch without tags or children is deleted with its directory; main does not notice
    lf.dataset(uri).branches.delete("grand")
    assert "grand" not in lance.dataset(uri).branches.list()
    assert not any(f.startswith(os.path.join("tree", "grand")) for f in files(uri))


def test_detached_versions_open_and_survive_cleanup(tmp_path):
    uri = str(tmp_path / "ds")
    lance.write_dataset(simple_table(0, 10), uri, enable_stable_row_ids=True)
    frags = lance.fragment.write_fragments(simple_table(100, 2), uri)
    det = lance.LanceDataset.commit(uri, lance.LanceOperation.Append(frags), read_version=1, detached=True)
    assert det.version >= 1 << 63
    ours = lf.dataset(uri, version=det.version)
    assert ours.version == det.version and table(ours).equals(table(lance.dataset(uri, version=det.version)))
    assert lf.dataset(uri).version == 1 and [v["version"] for v in lf.dataset(uri).versions()] == [1]
    with pytest.raises(lf.UnsupportedFeatureError, match="detached"):
        ours.delete(pc.field("id") == 1)
    lf.write_dataset(simple_table(50, 1), uri, mode="append")
    lf.dataset(uri).delete(pc.field("id") < 3)
    stats = lf.dataset(uri).cleanup_old_versions(older_than=timedelta(0), retention_duration_check=False, delete_unverified=True)
    assert stats.old_versions == 2
    name = f"_versions/d{det.version}.manifest"
    assert name in files(uri)
    for lib in (lf, lance):
        assert lib.dataset(uri, version=det.version).to_table(columns=["id"])["id"].to_pylist() == [
            *range(10), 100, 101]
