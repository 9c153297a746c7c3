"""Versions named in run config: by number or by tag name (pylance's ``version=``), on main or a branch.

Dagster's Config accepts no ``int | str`` union, so a run config names a version with two
fields, ``<x>_version`` (a number) and ``<x>_tag`` (a tag name), at most one of them set.
``branch`` picks the branch the numbers are versions of (``<uri>/tree/<branch>``); a tag
carries its own branch, as pylance resolves it, and must agree with ``branch`` when both are set.
Every bad reference is a ``DatasetConfigError`` naming the field and the value.
"""

from typing import NamedTuple

import lance_ops.format as lf
from lance_ops.assets.errors import DatasetConfigError
from lance_ops.assets.resources import LanceDatasetResource
from lance_ops.format.errors import DatasetNotFoundError, LanceOpsError


class VersionRange(NamedTuple):
    """A change feed range ``(begin, end]`` of the dataset or branch at ``uri``."""

    uri: str
    branch: str | None
    begin: int
    end: int


def pick(dataset: str, prefix: str, number: int | None, tag: str | None) -> int | str | None:
    """The version ``<prefix>_version`` or ``<prefix>_tag`` names (None when neither is set)."""
    if number is not None and tag is not None:
        raise DatasetConfigError(dataset, f"{prefix}_tag",
                                 f"both {prefix}_version={number} and {prefix}_tag={tag!r} are set",
                                 f"set only one: {prefix}_version (a number) or {prefix}_tag (a tag name)")
    if tag is not None and not tag.strip():
        raise DatasetConfigError(dataset, f"{prefix}_tag", "the tag name is empty",
                                 f"name a tag of the dataset, or set {prefix}_version instead")
    return tag if tag is not None else number


def _open(dataset: str, res: LanceDatasetResource, field: str, ref: int | str | None,
          branch: str | None) -> lf.LanceDataset:
    try:
        return lf.dataset(res.uri, version=ref, branch=branch, storage_options=res.resolved_storage_options(),
                          manifest_store=res.manifest_store)
    except (LanceOpsError, ValueError, FileNotFoundError) as e:
        what = f"{field}={ref!r}" if ref is not None else f"branch={branch!r}"
        if isinstance(e, DatasetNotFoundError) and ref is None and branch is None:
            raise DatasetConfigError(dataset, "dataset", f"no Lance dataset at {res.uri}",
                                     "append to it first, or fix its uri") from e
        known = _known_tags(res) if isinstance(ref, str) else ""
        raise DatasetConfigError(dataset, field, f"{what} does not name a version of {res.uri}: {e}",
                                 f"name an existing tag or version{known}") from e


def _known_tags(res: LanceDatasetResource) -> str:
    try:
        tags = sorted(res.open().tags.list())
    except Exception:  # the error being reported is what matters
        return ""
    return f" (tags: {tags})" if tags else " (the dataset has no tags)"


def resolve_range(dataset: str, res: LanceDatasetResource, begin: int | str | None, end: int | str | None,
                  branch: str | None = None) -> VersionRange:
    """Numbers of the range ``(begin, end]`` named by numbers or tags (``end`` None: the latest
    version of the branch), and the URI of the branch they are versions of.

    Raises:
        DatasetConfigError: no begin, an unknown tag or branch, tags of different branches, begin after end.
    """
    if begin is None:
        raise DatasetConfigError(dataset, "begin_version", "the range has no begin version",
                                 "set begin_version (a number, 0 = from the start) or begin_tag (a tag name)")
    if branch is not None and not branch.strip():
        branch = None
    tags = {f: _open(dataset, res, f, ref, branch)
            for f, ref in (("begin_tag", begin), ("end_tag", end)) if isinstance(ref, str)}
    if not tags and branch is None and end is not None:
        return VersionRange(res.uri, None, int(begin), int(end))  # numbers on main: nothing to read
    on = {f: ds.branch for f, ds in tags.items()}
    if len(set(on.values())) > 1:
        said = ", ".join(f"{f}={ref!r} is on branch {on[f] or 'main'}"
                         for f, ref in (("begin_tag", begin), ("end_tag", end)))
        raise DatasetConfigError(dataset, "end_tag", f"the range spans two branches ({said})",
                                 "name versions of one branch")
    # numbers are versions of ``branch``, else of the branch the tags point into, else of main
    target = branch if branch is not None else next(iter(on.values()), None)
    head = _open(dataset, res, "branch", None, target) if end is None or not tags else next(iter(tags.values()))
    b = tags["begin_tag"].version if "begin_tag" in tags else int(begin)
    e = tags["end_tag"].version if "end_tag" in tags else int(end) if end is not None else head.version
    if b > e:
        field = "begin_tag" if "begin_tag" in tags else "begin_version"
        end_named = repr(end) if end is not None else "the latest version"
        raise DatasetConfigError(dataset, field, f"the range ({b}, {e}] is empty: begin {begin!r} is version {b}, "
                                 f"after end {end_named} (version {e})", "swap begin and end, or pick an earlier begin")
    return VersionRange(head.uri, head.branch, b, e)
